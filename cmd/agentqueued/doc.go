// Command agentqueued is the agentqueued daemon and its command-line client.
//
// Usage:
//
//	agentqueued [run] [--config FILE] [--data-dir DIR] [--listen ADDR] [--new-database] [--log-file FILE]
//	agentqueued init [--config FILE] [--data-dir DIR] [--listen ADDR] [--project ID] [--repo PATH] [--agent TYPE]...
//	                 [--test-command CMD]... [--no-test-command] [--force] [--yes]
//	agentqueued doctor [--config FILE] [--addr URL] [--token TOKEN] [--ca-file FILE]
//	agentqueued ctl [--addr URL] [--token TOKEN] [--config FILE] [--ca-file FILE] [--json] COMMAND ...
//	agentqueued land PROJECT [--addr URL] [--token TOKEN] [--config FILE] [--ca-file FILE] [--json]
//	agentqueued runner --server URL --token-file FILE [--ca-file FILE] [--name NAME] [--config FILE]
//	agentqueued version
//
// "version" prints the module version, the commit the binary was built from
// (when the go command recorded it) and the Go version.
//
// "run" (the default) loads the configuration (embedded defaults when no
// file is given; flags override the file), opens the SQLite database under
// the data directory, takes the database's lease so that no second daemon
// can use it (a lease left by a crashed daemon on the same host is taken
// over), serves the HTTP API, renews the lease every ttl/3, and on SIGINT
// or SIGTERM shuts down gracefully and releases the lease. A bad
// configuration exits with status 2 and a message naming the key. With
// api.tls_cert and api.tls_key the API is served over HTTPS, the pair read
// once at start (a renewed certificate is served after a restart); a
// listen address beyond loopback without them is refused.
// Unless GOGC is set in its environment, the daemon runs Go's garbage
// collector at GOGC=400 (DefaultGCPercent): its heap is small, and the
// default collected it every few tasks.
// Its log goes to standard error, or with --log-file to that file,
// appended to and kept open: created mode 0600 with its missing
// directories (0700), an existing file narrowed to 0600; a file that
// cannot be opened stops the start with status 2 naming --log-file.
// configs/ has a systemd user unit and a launchd agent that run it
// (docs/service.md).
//
// "init" writes a configuration for the git repository it runs in (or
// --repo): data_dir, the listen address (--listen, which must be free;
// else 127.0.0.1:7700 when free, else the first free port of the 20
// after it, with a line saying that 7700 is held and how ctl finds the
// daemon), a LINK project of the repository's top level (its id
// the directory's name, or --project; its default branch the remote's
// HEAD, else the branch checked out; its settings.test_commands, which
// verify every task that names none, the --test-command given, else the
// one its build files name — go.mod: go test ./..., package.json with a
// test script: npm test, pyproject.toml or setup.cfg: pytest, Cargo.toml:
// cargo test, a Makefile test target: make test — none with
// --no-test-command), and an agent for each of claude,
// codex, cursor-agent and aider found on PATH (or only the --agent types,
// which must be found), with its absolute path, its version as a comment
// (asked with `--version`, 10 s at most, in an environment of PATH, HOME,
// USER, LANG and TMPDIR only), the pass_env and permission mode of the
// example configuration. The file (default
// $XDG_CONFIG_HOME/agentqueued/config.yaml, else
// ~/.config/agentqueued/config.yaml) is written mode 0600 after a
// question that --yes answers; an existing file is kept unless --force.
// It prints the next commands: doctor, run, ctl task add.
//
// "doctor" checks a configuration and, when it answers at --addr or the
// configuration's listen address, the daemon: the configuration loads;
// the daemon is running and healthy and serves this configuration's
// database (its /healthz answer names the database by a hash of its
// path: a daemon of another data directory is an error, and nothing more
// of it is checked; its agents, projects and hooks are checked too); the data directory's mode, marker and database; free disk space
// (an error below 100 MiB, a warning below 1 GiB); each agent's program
// on PATH and its version, and its pass_env names set; each project's
// repository (a path must be a git repository's top level, a URL must
// answer `git ls-remote`, with the GitHub token where clones use it);
// the GitHub token (GET /user: a classic token needs the repo scope); the
// TLS certificate and key when api.tls_cert is set (as the daemon reads
// them: readable, a pair, valid now); the
// Discord token, control channel and guild (REST only, no gateway); the
// LLM endpoint (its models list names llm.model), and hooks with a prompt
// but no model. Each line is "ok", "warning" or "error", the subject and
// what was found, with the fix after "— fix:"; the exit status is 1 when
// any line is an error.
//
// "runner" holds the agents of its --config on this machine for the
// daemon at --server (docs/runners.md), with the runner's token read from
// --token-file (which others must not be able to read). Over https it
// trusts the system's certificate authorities and those of --ca-file, and
// stops, saying so, at a daemon certificate it does not trust.
//
// "ctl" is a thin client of the HTTP API:
//
//	ctl project create ID [--name N] [--credit-weight W] [--max-agents N] [--budget N]
//	                      [--repo-source clone|link|init] [--repo-url URL] [--repo-path DIR] [--branch B]
//	ctl project create --file project.json
//	ctl project list
//	ctl project show ID
//	ctl project edit ID [--name N] [--weight W] [--max-agents N] [--status S] [--budget N] [--discord-channel C]
//	                    [--repo PATH|URL] [--branch B] [--set KEY=VALUE]... [--unset KEY]...
//	ctl project archive ID
//	ctl project delete ID --yes
//	ctl project land ID
//	ctl task add --project P --title T [--description D] [--priority N] [--depends-on ID[,ID]]
//	             [--verification AUTO_TEST|QA_AGENT|HUMAN] [--requires-approval] [--test-command CMD]...
//	             [--kind K] [--meta KEY=VALUE]... [--created-by NAME] [--expected-count N]
//	             [--timeout D] [--agent-type TYPE] [--runner-label L]...
//	ctl task add --file batch.json [--project P]
//	ctl task list [--project P] [--status S[,S]] [--limit N] [--after ID] [--archived]
//	ctl task show ID
//	ctl task result ID
//	ctl task diff ID
//	ctl task logs ID [--attempt N] [-f]
//	ctl task edit ID [--title T] [--description D] [--priority N] [--criterion C]... [--clear-criteria]
//	             [--test-command CMD]... [--clear-test-commands] [--verification V] [--requires-approval[=false]]
//	             [--profile P] [--kind K] [--meta KEY=VALUE]... [--clear-meta] [--expected-count N]
//	             [--timeout D] [--agent-type TYPE] [--runner-label L]... [--clear-runner-labels]
//	ctl task deps ID [--add ID[:soft][,ID...]]... [--remove ID[,ID...]]...
//	ctl task delete ID
//	ctl task skip|stop|restart ID [--reason R]
//	ctl task cancel ID [--reason R] [--actor NAME]
//	ctl task approve ID [--feedback F] | ctl task reject ID --feedback F
//	ctl agent add ID --type TYPE [--name N] [--command EXE] [--arg ARG]... [--project IDS]...
//	              [--env NAME=value]... [--pass-env NAMES]... [--max-runtime D] [--idle-timeout D]
//	ctl agent list
//	ctl agent show ID
//	ctl agent pause|resume|remove ID
//	ctl runner add NAME [--label L]... [--capacity N]
//	ctl runner list
//	ctl runner show|drain|resume|remove NAME
//	ctl question list | ctl question answer ID ANSWER...
//	ctl hook list [--project P]
//	ctl hook show ID
//	ctl hook create --file hook.json [--project ID]
//	ctl hook edit ID --file changes.json
//	ctl hook enable|disable|delete ID
//	ctl hook fire ID [--event-file event.json] [--actor NAME]
//	ctl hook runs ID [--status running|completed|failed|skipped] [--limit N]
//	ctl hook run RUN_ID
//	ctl workflow list [--project P]
//	ctl workflow show NAME
//	ctl workflow add --file workflow.yaml [--project ID]
//	ctl workflow delete NAME
//	ctl workflow run NAME [--actor NAME] [--input NAME=VALUE]...
//	ctl workflow schedule NAME on|off
//	ctl run list [--workflow W] [--project P] [--status pending|running|success|failed|cancelled] [--limit N]
//	ctl run show ID
//	ctl run tasks ID
//	ctl run cancel|retry ID [--actor NAME]
//	ctl run logs ID NAME [--attempt N]
//	ctl rule list
//	ctl rule set --file rules.yaml [--actor NAME]
//	ctl budget
//	ctl health
//	ctl status
//	ctl desk [--project P]
//	ctl stats [--project P]
//	ctl watch [--project P] [--interval D]
//
// "project edit" --set changes one project setting (docs/semantics.md and
// models.ProjectSettings list them: default_profile, pr_mode, hook_commands,
// ...), typed by the setting: a boolean takes true or false, a list one
// entry per --set (the entries given replace the list; KEY= empties it);
// --unset returns a setting to its default; settings not named are kept.
// --repo takes a local path (linked) or a URL (cloned); the repository is
// checked before it is stored, as on create: a path must be a git
// repository's top level, a URL must answer `git ls-remote`. "project
// show" lists the settings that are set. "project archive" archives a
// project: it takes no new work. "project delete" deletes a project with
// its tasks, hooks, workflows and runs, once --yes confirms it; it is
// refused while the project's work is live or when the project has
// recorded token use (archive it instead). "project land" (also
// "agentqueued land PROJECT") lands at once the work of a linked project
// that waited because the repository's checked-out default branch had
// local changes, once they are committed or stashed (the daemon also
// lands it by itself within verification.land_poll_interval, 2s by
// default): it lists the tasks that landed, those still waiting with
// why, and those whose merge now
// conflicts (the default branch moved) with the files in conflict, and
// exits non-zero while one still waits or when one failed (such a task
// runs again with the conflict to resolve). "agent add" checks that the
// agent's program is on the daemon's PATH or an executable path.
// "runner add" registers a runner, an agentqueued runner on another
// machine (docs/runners.md), and prints its token once, with how to start
// the runner with it: the daemon keeps only the token's hash. "runner
// drain" gives the runner no new run (those it holds go on) until "runner
// resume"; "runner remove" deletes it with its agents, refused while one
// of them runs something, and its token stops working.
//
// "status" prints the daemon at a glance (GET /api/v1/status, what
// Discord's /status shows): projects with their tasks counted by status
// and by whether agents work on them (WORKING: an agent or a process of
// the daemon works for the task; TO_LAND: its work waits to be verified
// or to land), agents and the task each is doing, the desk ("Waiting on
// you", as "desk" prints it), the rules and the budget. "desk" (GET
// /api/v1/desk) prints everything that waits on a person, oldest first,
// one line per item — how long it has waited, its kind, whose it is
// (project/task), what it asks, with notes such as the tasks blocked
// behind it or when a question expires — and, on the next line, the
// command that ends the wait (and the pull request's address); --project
// keeps one project's items. "watch" prints the unfinished tasks with
// each project's counts again at every change the daemon reports (GET /api/v1/changes, a
// long poll) and at least every --interval (default 30s), until
// interrupted or --count views; on a terminal each view replaces the
// last. "task list" shows each task's agent, last update and reason (why
// a READY task waits, else the reason of its last change), line breaks as
// spaces. "task show" adds the branch, the verification phase, the
// result, the pending plan and each run's attempt, start and duration;
// "task result" prints the result alone; "task logs" prints the latest
// run's log (--attempt N another's), its output and "[progress]" lines,
// and with -f follows it until the run ends.
//
// "task edit" changes a task that is not being worked on; "task deps" adds
// and removes its dependencies (ID:soft adds an edge with requires_success
// false; a READY task given one that is not met returns to DEFINED and
// waits for it); "task delete" deletes a task nothing runs or depends on; "agent
// remove" deletes an agent that runs nothing (an agent of the configuration
// file is registered again when the daemon starts); "budget" shows token use
// in the scheduling window against the projects' and the global budgets;
// "rule set" replaces the whole set of scheduling rules with a YAML or JSON
// file's (a list, or rules: [...] as in the configuration file), kept
// across restarts. docs/semantics.md has the rules. "hook create" reads a hook as the API
// takes it (POST /api/v1/hooks), --project
// giving its project in place of the file's project_id, and "hook edit" a patch (PATCH
// /api/v1/hooks/{id}), both strictly: an unknown field is an error. "hook
// fire" runs a hook now, whatever its trigger and cooldown; --event-file
// gives an event hook the event to run with. docs/hooks.md describes hooks.
// "workflow add" sends a workflow document (YAML or JSON) as is (POST
// /api/v1/workflows), but for --project, which sets the document's project
// key and changes nothing else: a workflow of its name is replaced, and an invalid
// document's problems are printed one a line with the file's name, line and
// column. "workflow run" starts a run by hand, --input giving a value to one
// of the workflow's inputs (the defaults fill the rest; "run show" lists a
// run's inputs); "workflow schedule" turns a schedule on or off (kept across
// restarts, also for a workflow read from a file). "run tasks" lists a run's tasks by their names in the
// run ("build", "upgrade[2]"), which "run logs" takes: it prints each
// attempt's log under a "== attempt N ==" header. docs/workflows.md
// describes workflows and runs.
//
// The server address is --addr, else $AGENTQUEUED_ADDR, else the listen
// address of --config (https when it sets api.tls_cert), else
// http://127.0.0.1:7700; the token is --token, else $AGENTQUEUED_TOKEN,
// else api.token of --config. Over https ctl trusts the system's
// certificate authorities, those of --ca-file (else $AGENTQUEUED_CA_FILE),
// and the certificate of --config's api.tls_cert; an address without a
// scheme is https when either of the last two is given. Output is aligned
// tables, or the API's JSON with --json. Errors print "error: <message>"
// and exit with status 1. A usage error exits with status 2 after one more
// line naming the command that prints the usage ("Run \"agentqueued ctl
// task add -h\" for usage."). "agentqueued help", -h and --help list every
// command.
package main
