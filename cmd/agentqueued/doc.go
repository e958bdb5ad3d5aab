// Command agentqueued is the agentqueued daemon and its command-line client.
//
// Usage:
//
//	agentqueued [run] [--config FILE] [--data-dir DIR] [--listen ADDR]
//	agentqueued ctl [--addr URL] [--token TOKEN] [--config FILE] [--json] COMMAND ...
//
// "run" (the default) loads the configuration (embedded defaults when no
// file is given; flags override the file), opens the SQLite database under
// the data directory, takes the database's lease so that no second daemon
// can use it (a lease left by a crashed daemon on the same host is taken
// over), serves the HTTP API, renews the lease every ttl/3, and on SIGINT
// or SIGTERM shuts down gracefully and releases the lease. A bad
// configuration exits with status 2 and a message naming the key.
//
// "ctl" is a thin client of the HTTP API:
//
//	ctl project create ID [--name N] [--credit-weight W] [--max-agents N] [--budget N]
//	                      [--repo-source clone|link|init] [--repo-url URL] [--repo-path DIR] [--branch B]
//	ctl project create --file project.json
//	ctl project list
//	ctl project show ID
//	ctl project edit ID [--name N] [--credit-weight W] [--max-agents N] [--status S] [--budget N] [--discord-channel C]
//	ctl task add --project P --title T [--description D] [--priority N] [--depends-on ID[,ID]]
//	             [--verification AUTO_TEST|QA_AGENT|HUMAN] [--requires-approval] [--test-command CMD]...
//	             [--kind K] [--meta KEY=VALUE]... [--created-by NAME]
//	ctl task add --file batch.json [--project P]
//	ctl task list [--project P] [--status S[,S]] [--limit N] [--after ID]
//	ctl task show ID
//	ctl task skip|stop|restart ID [--reason R]
//	ctl agent add ID --type TYPE [--name N]
//	ctl agent list
//	ctl health
//
// The server address is --addr, else $AGENTQUEUED_ADDR, else the listen
// address of --config, else http://127.0.0.1:7700; the token is --token,
// else $AGENTQUEUED_TOKEN, else api.token of --config. Output is aligned
// tables, or the API's JSON with --json. Errors print "error: <message>"
// and exit with status 1 (2 for usage errors).
package main
