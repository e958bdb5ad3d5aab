// Package config loads the daemon's configuration: a YAML file whose values
// may refer to environment variables, laid over named defaults and validated
// so that every error names the offending key.
//
// A file looks like this (every key is optional):
//
//	data_dir: /var/lib/agentqueued
//	listen: 127.0.0.1:7700
//	api:
//	  token: ${AGENTQUEUED_TOKEN:-}
//	  allowed_hosts: [agentqueued.lan]   # Host names served besides loopback
//	  tls_cert: /etc/agentqueued/daemon.pem   # serve HTTPS with this certificate (PEM) ...
//	  tls_key: /etc/agentqueued/daemon.key    # ... and its key: both or neither
//	log:
//	  level: info     # debug, info, warn or error
//	  format: text    # text or json
//	database:
//	  path: /var/lib/agentqueued/agentqueued.db
//	lease:
//	  ttl: 30s
//
// Values (never keys) are expanded before they are decoded: ${NAME} is the
// value of the environment variable NAME and is an error when NAME is unset;
// ${NAME:-default} falls back to default when NAME is unset or empty; $$ is
// a literal dollar sign. Unknown keys are errors that name the key and its
// line. An empty value means the key's default. A file larger than
// MaxFileBytes (1 MiB) is refused before it is parsed.
//
// The variables the daemon's own secrets come from (those the values of
// api.token, discord.token, github.token, github.webhook_secret and
// llm.api_key refer to) are never given to an agent: an agent whose
// pass_env names one, or whose env value refers to one, is an error naming
// the agent's key and the secret's.
//
// A profile's permission_mode must suit every agent type it may be used
// with: an agent's own profile its agent's type, a named profile every
// configured agent's type (models.PermissionModeFor: the CLI's own values,
// or another CLI's name where it means the same). The error names the
// key, the agent and the accepted values.
//
// projects: lists projects created at the daemon's first start (id, name,
// credit_weight, max_concurrent_agents, repo: path or url, default_branch,
// in_place); a repo path is LINK, a url CLONE. Projects the database has
// are left as they are.
//
// Config.CheckServing refuses a listen address beyond loopback without
// api.token, and without TLS (api.tls_cert and api.tls_key), naming why
// and the fixes; the daemon calls it once --listen has been applied.
// APIConfig.LoadCertificate reads the pair at the daemon's start, once,
// with errors naming the key at fault; Validate only requires both or
// neither, so that ctl and doctor load a configuration whose key they
// may not read.
// Config.CheckPrivileges refuses, as root, a claude agent that would skip
// every permission check (Claude Code exits 1 on it as root); the daemon
// calls it at start with its effective user id.
package config
