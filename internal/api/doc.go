// Package api is agentqueued's HTTP interface: a JSON API under /api/v1 for
// projects, tasks, agents, runners, hooks and workflows, a health check,
// and a Client for it; and the agent RPC on a Unix socket, with an
// RPCClient for it.
//
// The Server translates requests into calls on a Service, a HookService, a
// WorkflowService and a LogService — compositions of the interfaces of
// package areas, which the daemon's *service.Service implements — and
// their answers into JSON. It owns no state: validation of domain values,
// the transition table and atomicity live behind the Service. The Server
// validates only the shape of requests: bodies must be a single JSON
// value (at most Config.MaxBodyBytes, no unknown fields, no trailing data,
// object keys spelled exactly as documented — encoding/json would match
// "ID" to id — and no key twice in one object, at any depth: both are a
// 400 naming the key) and query parameters must be known, given once and
// well formed. The one exception is a workflow document, posted as is in
// YAML or JSON. Every POST, PUT, PATCH and DELETE under /api/v1 must say
// Content-Type application/json (parameters such as charset allowed;
// types ending in +json too), with or without a body; a workflow document
// may instead be application/yaml, application/x-yaml or text/yaml.
// Anything else, or no Content-Type, is a 415. A body must arrive within
// Config.ReadTimeout (DefaultReadTimeout, headers included): a client that
// trickles it is answered 408 and disconnected.
//
// With Config.UI set, the web dashboard (package web) is served under
// /ui/ behind the same Host and cross-origin checks; it does its own login
// (a session cookie and a secret path, UISessionPrefix, which the logs
// never show), not the bearer token (docs/web.md).
//
// Endpoints (one line per route the server registers, method and pattern
// first; TestDocumentedRoutesAreServed holds the list to the router):
//
//	GET   /healthz                    {"status":"ok"} when the store answers and Config.Health (when set) returns
//	                                  nil; else 503 {"status":"unhealthy","reason":"...","error":{...}}, the reason
//	                                  "store unavailable: " and what the store's reads of the schema and the
//	                                  tasks met (a damaged database says "the database is damaged"), or Config.Health's error text; never needs a token.
//	                                  Both carry "database" (Config.DatabaseID, when set): the daemon's database
//	                                  as a hash of its path, never the path, which doctor compares with its own
//	GET   /metrics                    the Prometheus metrics (text format; docs/operations.md), served when
//	                                  Config.Metrics is set, behind the same Host check and token as /api/v1
//	POST  /webhooks/github            a GitHub webhook delivery, served when Config.GitHubWebhook is set;
//	                                  authenticated by its signature, not the token (below)
//	GET   /ui                         redirects to /ui/, served when Config.UI is set
//	ANY   /ui/                        the web dashboard and everything under it (any method), served when
//	                                  Config.UI is set; its own login (docs/web.md)
//	POST  /api/v1/projects            create a project (body: id, name, credit_weight, max_concurrent_agents,
//	                                  status, budget_limit, discord_channel_id, repo, settings — all but id
//	                                  optional) → 201 project; a repo is checked first: a LINK source_path must be
//	                                  a git repository's top level, a CLONE url must answer `git ls-remote` (20 s);
//	                                  else 400 naming the field, the path or URL and git's message
//	GET   /api/v1/projects            {"projects": [...]}
//	GET   /api/v1/projects/{id}       a project
//	PATCH /api/v1/projects/{id}       partial update (body: name, credit_weight, max_concurrent_agents, status,
//	                                  budget_limit, discord_channel_id, repo, settings — at least one) → the
//	                                  project; a negative "budget_limit" is a 400 as on create, "budget_limit":
//	                                  null removes the budget; "settings" is a JSON merge patch (RFC 7396): each key given is set,
//	                                  a null removes one (back to its default), keys not given are kept; an
//	                                  unknown key or a value of the wrong type is a 400 naming "settings.<key>";
//	                                  a new repo is checked as on create
//	DELETE /api/v1/projects/{id}      delete a project with its tasks, repo, hooks, workflows and runs → 204;
//	                                  409 naming them while tasks are worked on, runs or workflow runs are live,
//	                                  tasks of other projects depend on its tasks, or it has recorded token use
//	                                  (the token ledger keeps it: archive the project instead)
//	POST  /api/v1/projects/{id}/land  (body empty or {}) retry the project's landings that wait for its LINK
//	                                  repository's checked-out default branch to be clean (`agentqueued land`)
//	                                  → {"project_id", "landed": [...], "waiting": [...], "failed": [...]},
//	                                  each {"task_id", "status", "reason"}: a landed task's status and reason, a
//	                                  waiting one's waiting reason, and for one whose merge failed (the default
//	                                  branch moved and the merge conflicts: the task runs again with the conflict
//	                                  to resolve) why, with "files", the files in conflict; 404 for an unknown
//	                                  project (docs/semantics.md, "Landing in a linked repository")
//	POST  /api/v1/tasks               create tasks all-or-nothing (body: {"project_id", "created_by",
//	                                  "tasks": [...]} or a bare array of tasks; an entry may carry its own
//	                                  "rules", and a "timeout" ("10m", or seconds) capping each of its runs like the
//	                                  agent's max_runtime, the smaller governing; its title as "title" or the
//	                                  specification's "name", both only when equal; "agent_type" routes it to agents
//	                                  of that type) → 201 {"results": [...]}; a task a Capacity rule applies to needs
//	                                  an expected_count that fits it
//	GET   /api/v1/tasks               {"tasks": [...], "next"}, in submission order (submission_seq), paged; query: project, status
//	                                  (comma-separated statuses or groups), limit, after (a cursor; a task id works),
//	                                  archived (true: the archived tasks instead, in the order they were archived)
//	GET   /api/v1/tasks/{id}          an archived task too, as it was when archived, with "archived_at"
//	                                  (docs/semantics.md, "Retention and archive");
//	                                  the task with its dependencies, dependents and events; a READY task
//	                                  a round did not start has "waiting_code" and "waiting_reason" (why it
//	                                  waits; docs/semantics.md, "Scheduling"), in listings too, and so has a
//	                                  task whose verified work waits to land ("landing"); a FAILED or PAUSED
//	                                  task has, in listings too, what the daemon does next to it by itself:
//	                                  "next_event" (RETRY, MAX_RETRIES or RESUME_TIMER), "next_event_at" (RFC 3339,
//	                                  when it is due: the failure plus the retry backoff, the failure itself when
//	                                  no retry is left, or resume_after) and "next_event_reason", a sentence: "retry
//	                                  2 of 3 at 2026-03-01T12:01:00Z (backoff 1m0s after the failure)", "blocks at
//	                                  …: no retries left (3 of 3 used)", "resumes at …: <status_reason>"; computed
//	                                  from the orchestrator's retry_backoff and max_backoff when read, never stored
//	                                  (docs/semantics.md, "Timers")
//	                                  "runs": its latest runs (at most 20, oldest first), each with "cli",
//	                                  "cli_version", "cli_warning" (a version below the known-good one),
//	                                  "session_id", "usage" (input_tokens, output_tokens, cache_read_tokens,
//	                                  cache_write_tokens), "cost_usd" (when the CLI reported one),
//	                                  "denied_tools" and "mcp_not_ready"; "result" has "no_changes" when
//	                                  the agent completed without changes on purpose; "plan" is the pending
//	                                  plan (its subtasks, created once the work is accepted), "verification"
//	                                  the phase of a task being verified, and "branch_name" the task's branch
//	                                  once it has run in a project with a repository
//	PATCH /api/v1/tasks/{id}          edit a task not being worked on (body: title, description, priority,
//	                                  acceptance_criteria, test_commands, verification_type, requires_approval,
//	                                  profile, kind, metadata, expected_count, timeout, agent_type — all
//	                                  optional, at least one) → the task
//	DELETE /api/v1/tasks/{id}         delete a task nothing runs or depends on → 204
//	POST  /api/v1/tasks/{id}/dependencies  {"add": [{"id", "requires_success"}], "remove": [ids]}
//	                                  → {"task", "dependencies", "added", "removed", "promoted", "blocked", "reopened"}
//	POST  /api/v1/tasks/{id}/events   {"event": "ADMIN_SKIP|ADMIN_STOP|ADMIN_RESTART|ADMIN_CANCEL", "reason",
//	                                  "actor"} → the transition's result
//	POST  /api/v1/tasks/{id}/cancel   cancel a task in any unfinished status (optional body: {"reason", "actor"})
//	                                  → the transition's result: BLOCKED, "cancelled by <actor>: <reason>", its run
//	                                  ended, dependents requiring success blocked naming it; a repeat answers the same
//	                                  result with "duplicate": true; a COMPLETED or otherwise BLOCKED task is a 409
//	POST  /api/v1/tasks/{id}/approve  {"feedback", "by"} → the transition's result (HUMAN verification, work or a
//	                                  plan awaiting approval — the branch is merged —, a pull request with
//	                                  merge_from_chat)
//	POST  /api/v1/tasks/{id}/reject   {"feedback" (required), "by"} → the transition's result; work awaiting
//	                                  approval returns to its agent (READY) with the feedback
//	GET   /api/v1/tasks/{id}/diff     {"task_id", "diff"}: the change the task's branch makes against its
//	                                  project's default branch, in git's unified format (what an approval
//	                                  merges); for a landed (COMPLETED) task the change its landing brought to
//	                                  the default branch (its merge against the merge's first parent), though
//	                                  its branch is deleted; 409 before the task has run, 400 in a project
//	                                  without a repository
//	GET   /api/v1/tasks/{id}/logs     the log of the task's latest run (query: attempt N ≥ 1 for another), as text
//	                                  (text/plain, streamed): what the agent printed, and a "[progress] MESSAGE"
//	                                  line per progress report; with follow=true the answer goes on while the
//	                                  run does, writing what the log gains at each change of the daemon's state
//	                                  or output of this task's runs (not another task's output), and ends when the run
//	                                  ends (a task that has not started is waited for) or the daemon stops. Served with
//	                                  Config.Logs. An unknown task is a 404 (JSON, before any text)
//	GET   /api/v1/changes             {"changed": false, "seq": N}: the number of the daemon's changes so far
//	                                  (committed changes of its state, a task's claim and start among them;
//	                                  a run's output is none: follow a task's log for it); with ?after=N it answers once there
//	                                  was a change after the one numbered N ({"changed": true, "seq"}), or after
//	                                  ?wait (1s to 5m, default 30s) or at the daemon's stop with "changed": false
//	                                  — a long poll for views that refresh on change. Served with Config.Logs
//	POST  /api/v1/agents              register an agent (body: id, name, agent_type, command, args, env,
//	                                  pass_env, projects, max_runtime, idle_timeout, heartbeat_timeout, profile — all but id and
//	                                  agent_type optional; durations as "30m") → 201 agent, IDLE; its program (command, else the type's
//	                                  CLI: claude, codex, cursor-agent, aider) must be on the daemon's PATH or an
//	                                  executable absolute path (a relative path with a slash is the checkout's,
//	                                  taken as is), else 400 naming it
//	GET   /api/v1/agents              {"agents": [...]}; env values are answered as "********"; an agent
//	                                  resting after a rate limit is "state": "PAUSED" with "rest_until"
//	                                  (RFC 3339) and "rest_reason", both left out once the rest is over
//	                                  "cli_version" is the CLI version its latest run reported, with
//	                                  "cli_warning" when it is older than its type's known-good version
//	GET   /api/v1/agents/{id}         one agent, answered as the list answers each (env values "********");
//	                                  404 not_found naming the id
//	DELETE /api/v1/agents/{id}        remove an agent that runs nothing → 204
//	POST  /api/v1/agents/{id}/pause   the agent takes no new task → the agent
//	POST  /api/v1/agents/{id}/resume  undoes a pause, and also ends a rest after a rate limit → the agent
//	POST  /api/v1/runners             add a runner, an agentqueued runner on another machine (body: name, labels,
//	                                  capacity — labels and capacity optional; docs/runners.md) → 201 {"runner",
//	                                  "token"}, ACTIVE: the token ("aqr_" and 43 characters) is in this answer
//	                                  only (Cache-Control: no-store), the daemon keeps its SHA-256; a name
//	                                  taken is a 409, a bad name, label or capacity (0 to 1000) a 400 naming it
//	GET   /api/v1/runners             {"runners": [...]}, by name, each {"name", "labels", "capacity", "state"
//	                                  (ACTIVE|DRAINING), "created_at", "last_seen_at", "version", "address",
//	                                  "agents" (its agents' names)}; never a token or its hash
//	GET   /api/v1/runners/{name}      one runner, answered as the list answers each; 404 not_found naming it
//	DELETE /api/v1/runners/{name}     remove a runner and its agents → 204; its token stops working; 409 while
//	                                  one of its agents runs something (drain it first)
//	POST  /api/v1/runners/{name}/drain   the runner is given no new run; those it holds go on → the runner
//	POST  /api/v1/runners/{name}/resume  undoes a drain → the runner
//	GET   /api/v1/questions           {"questions": [...], "next"}: agents' questions waiting for an answer, oldest
//	                                  first, paged; query: limit, after
//	POST  /api/v1/questions/{id}/answer  {"answer", "answered_by"} → the question; the waiting agent gets the answer
//	GET   /api/v1/rules               the scheduling rules in force: {"rules": [...], "source": "config"|"api",
//	                                  "updated_at", "updated_by"} (docs/semantics.md, "Rules")
//	PUT   /api/v1/rules               replace the whole set, all or nothing (body: {"rules": [...], "actor"}; []
//	                                  removes every rule) → the new set; kept across restarts, whatever the
//	                                  configuration file says; an invalid rule is a 400 naming it, a Capacity rule
//	                                  that waiting tasks could never fit a 409 naming them
//	GET   /api/v1/budget              token use: {"window", "since", "global": {"budget", "tokens_in_window",
//	                                  "exhausted"}, "projects": [{"project_id", "tokens_in_window",
//	                                  "total_tokens_used", "budget_limit", "exhausted", ...}]}; null budgets are unlimited
//	GET   /api/v1/status              the daemon at a glance, what Discord's /status shows: {"projects",
//	                                  "agents" (env values masked), "task_counts" ({project: {status: n}}),
//	                                  "activity" ({"agents_working": tasks an agent or a process of the daemon
//	                                  works on, those holding a slot; "waiting_to_land": VERIFYING and
//	                                  AWAITING_APPROVAL tasks nobody works on}), "project_activity" ({project:
//	                                  activity}), "working" (ASSIGNED, IN_PROGRESS, WAITING_INPUT and VERIFYING
//	                                  tasks), "desk" (the items of GET /api/v1/desk), "desk_truncated", "rules",
//	                                  "budget" (as GET /api/v1/budget)}
//	GET   /api/v1/desk                everything that waits on a person, oldest first: {"items": [{"key", "kind"
//	                                  (question|human_verification|approval|pull_request|landing|blocked|budget|
//	                                  agent), "project_id", "task_id", "agent_id", "title", "what", "since",
//	                                  "asked_by", "expires_at", "escalates_at", "question_id", "run_ended",
//	                                  "behind", "action": {"command", "button", "url"}}], "truncated"}; query:
//	                                  project (its items only; an unknown project is a 404 naming it)
//	GET   /api/v1/stats               per project over the last 24 h: {"at", "projects": [{"project_id",
//	                                  "by_status" ({status: n}), "archived", "completions_per_hour" (24 × {"hour",
//	                                  "count"}, oldest first, the last the hour in progress), "completed",
//	                                  "mean_queue_wait_seconds", "mean_run_seconds", "runs_started",
//	                                  "runs_ended"}]}
//	GET   /api/v1/hooks               {"hooks": [...]}; query: project (an unknown project is a 404)
//	POST  /api/v1/hooks               create a hook (body: id, project_id, name, enabled, trigger, context_steps,
//	                                  prompt_template, llm_config, cooldown_seconds, max_tokens_per_run; id defaults
//	                                  to a slug of name, enabled to true, cooldown_seconds to 3600) → 201 hook
//	GET   /api/v1/hooks/{id}          a hook
//	PATCH /api/v1/hooks/{id}          change a hook (body: name, enabled, trigger, context_steps, prompt_template,
//	                                  llm_config, clear_llm_config, cooldown_seconds, max_tokens_per_run,
//	                                  clear_max_tokens_per_run — all optional, at least one) → the hook
//	DELETE /api/v1/hooks/{id}         delete a hook with its runs → 204
//	POST  /api/v1/hooks/{id}/fire     fire a hook by hand, whatever its trigger, cooldown and enabled (optional
//	                                  body: {"event": {...}, "actor"}) → 202 the run, running or skipped
//	GET   /api/v1/hooks/{id}/runs     {"runs": [...], "next"}, newest first, paged; query: status (running,
//	                                  completed, failed, skipped), limit, after
//	GET   /api/v1/hook-runs/{id}      a hook run: its trigger ("trigger_reason": periodic, cron, event:<type> or
//	                                  manual; "trigger_detail": the same in words), context, prompt, answer,
//	                                  actions and tokens
//	GET   /api/v1/workflows           {"workflows": [...]}, by name; query: project (an unknown project is a 404)
//	POST  /api/v1/workflows           save a workflow (body: the YAML or JSON document as is, Content-Type
//	                                  application/yaml, application/x-yaml, text/yaml, application/json or none)
//	                                  → 201 the workflow with Location /api/v1/workflows/{name}, or 200 the
//	                                  workflow when it replaced one of its name
//	GET   /api/v1/workflows/{name}    a workflow: its steps, schedule, next_run, origin and source document
//	PATCH /api/v1/workflows/{name}    {"schedule_enabled": true|false} turns its schedule on or off → the workflow
//	DELETE /api/v1/workflows/{name}   delete a workflow; its runs and their tasks stay → 204
//	POST  /api/v1/workflows/{name}/runs  start a run by hand (optional body: {"actor", "inputs": {"name":
//	                                  "value"}}; the workflow's defaults fill the inputs not given; an unknown
//	                                  or missing required input is a 400 naming it) → 201 the run, with its
//	                                  inputs, and Location /api/v1/runs/{id}
//	GET   /api/v1/runs                {"runs": [...], "next"}, newest first, without their definitions, each
//	                                  with its tasks counted by status ("tasks"), paged;
//	                                  query: workflow, project (an unknown project is a 404), status (pending,
//	                                  running, success, failed, cancelled), limit, after
//	GET   /api/v1/runs/{id}           a run with its definition and its tasks counted by status
//	POST  /api/v1/runs/{id}/cancel    cancel a run: running tasks stopped, the rest BLOCKED (optional body:
//	                                  {"actor"}) → the run
//	POST  /api/v1/runs/{id}/retry     start a failed or cancelled run's FAILED and BLOCKED tasks again (optional
//	                                  body: {"actor"}) → the run; 409 when there is nothing to retry
//	GET   /api/v1/runs/{id}/tasks     {"tasks": [...]}: the run's tasks, each with its "name" in the run (and a
//	                                  FAILED or PAUSED one with its "next_event", as in GET /api/v1/tasks)
//	GET   /api/v1/runs/{id}/tasks/{name}/logs  the logs of the task named name in the run ("build",
//	                                  "upgrade[2]", path-escaped: upgrade%5B2%5D) → {"task_id", "attempts":
//	                                  [{"attempt", "log", "truncated"}]}, oldest first; query: attempt (N ≥ 1,
//	                                  only that attempt); an unknown name is a 404 naming the run's tasks
//
// # Paging
//
// The lists that grow with use — tasks, open questions, hook runs and
// workflow runs — answer one page at a time: at most limit items
// (DefaultPageSize, 100, without one; 1 to MaxPageSize, 500: a larger
// limit is a 400 naming the maximum, not silently cut) and, when more
// follow, "next", an opaque cursor that ?after= takes to continue with the
// same filters. "next" is left out of the last page. A page of tasks is
// also bounded in bytes (Config.MaxListBytes, DefaultMaxListBytes: 4 MiB):
// it ends early, with "next", before the next task would take the answer
// past the budget (a page always holds at least one task), so a page may
// hold fewer tasks than limit while more follow. A cursor whose item
// has since been deleted is a 400: start again without after. The lists of
// projects, agents, hooks, workflows and a run's tasks are not paged: they
// hold what the owner configured or created by hand, and a run's tasks are
// bounded by its workflow (MaxFanOut per step). The Client's list methods
// follow the cursors: ListTasks, HookRuns and ListWorkflowRuns return up
// to the caller's limit (0: everything), OpenQuestions everything;
// ListTasksPage returns one page with its cursor.
//
// # TLS
//
// With Config.TLS (api.tls_cert and api.tls_key) Serve speaks HTTPS only:
// TLS 1.2 or later, HTTP/1.1 alone (ServerTLS), so that a long poll, a
// followed log and a git push behave as on the plain listener; a plain
// HTTP request on the port is answered 400, which the Client reports as
// the wrong scheme. Clients trust the system's authorities and those a
// PEM bundle adds (TrustedRoots, NewTransport: a daemon with a
// certificate of its own authority); a certificate they do not trust is a
// CertificateError, which the Client's error says how to mend.
//
// # Browsers, hosts and origins
//
// The API has no login, only an optional token, and listens on loopback by
// default; a web page open in the owner's browser can still send requests
// to 127.0.0.1. Three checks stand before every handler, whatever the token:
//
//   - The Host header must name a loopback host (localhost, 127.0.0.0/8,
//     ::1, any port), the host of Config.Addr (unless it is a wildcard such
//     as 0.0.0.0) or one of Config.AllowedHosts (api.allowed_hosts): a page
//     whose domain an attacker rebinds to 127.0.0.1 sends its own name and
//     is answered 403, so it can read nothing (DNS rebinding).
//   - A POST, PUT, PATCH or DELETE that a browser marks as coming from
//     another origin — Sec-Fetch-Site cross-site or same-site, or an Origin
//     that is not the Host's — is answered 403 (cross-site request
//     forgery; net/http.CrossOriginProtection). Programs send neither
//     header and are not affected.
//   - The Content-Type rule above: a page can send text/plain, form data
//     or no type without asking first, never application/json.
//
// POST WebhookPath (/webhooks/github, served when Config.GitHubWebhook is
// set) is exempt from the Host check: GitHub delivers it through the public
// name of a tunnel or proxy, and its signature authenticates it; it may be
// JSON or GitHub's form encoding. Only that exact path is exempt, so a
// proxy that forwards everything exposes the webhook and nothing else. A
// proxy that rewrites the Host to localhost defeats the Host check: set
// api.token then. Refusals are logged at info level with the host or
// origin, cut short.
//
// Error messages never repeat a long value from the request: a quoted id,
// name, parameter or key is cut to 64 bytes and "…".
//
// The hook endpoints are served when Config.Hooks is set. A hook's
// llm_config.api_key is never answered: it reads "[redacted]", and a patch
// that sends "[redacted]" back keeps the stored key. docs/hooks.md
// describes triggers, context steps and templates.
//
// The workflow endpoints are served when Config.Workflows is set. An
// invalid workflow document is a 400 whose message has one line per
// problem, "request:LINE:COL: PATH: MESSAGE" (a YAML syntax error:
// "request:LINE: not valid YAML: ..."). Saving, starting, cancelling and
// retrying are logged with the keys workflow, project_id and run_id; an
// actor defaults to DefaultActor. docs/workflows.md describes documents,
// runs and schedules.
//
// The rules of editing, dependency changes, deletion and agent removal are
// in docs/semantics.md.
//
// Every error is answered as
//
//	{"error": {"code": "invalid|not_found|conflict|unauthorized|unavailable|internal", "message": "..."}}
//
// with status 400, 404, 409, 401, 503 or 500 (413, 415, 405 and 408 for
// oversized bodies, wrong media types, wrong methods and bodies too slow to
// arrive, with code invalid; 403 with code unauthorized for a refused Host
// or origin; 503 from /healthz). Code unavailable is a write the daemon
// cannot make now but will by itself later: its disk is full ("disk full:
// …"); reads go on meanwhile. Messages
// come from *models.Error values and are safe to show; any other error is
// logged and answered with a generic message. An illegal transition is a 409
// whose message is "Invalid transition: (STATUS, EVENT)".
//
// When Config.Token is set, every /api/v1 request needs the header
// "Authorization: Bearer <token>"; the token is compared in constant time and
// never logged.
//
// # Agent RPC
//
// RPCServer serves the tools an agent run reports through, on a Unix socket
// (RPCConfig.SocketPath), over a RunService (the orchestrator). The daemon
// gives each run's process AQ_SOCKET (the socket's path), AQ_TASK_ID and
// AQ_RUN_TOKEN; RPCClient, the "agentqueued agent" subcommands and the
// "agentqueued mcp" server read them. The protocol is HTTP/1.1 over the
// socket:
//
//	POST /rpc/v1/{tool}
//	Authorization: Bearer <AQ_RUN_TOKEN>
//	X-AQ-Task-ID: <AQ_TASK_ID>
//	Content-Type: application/json
//
// Tools, their bodies and answers:
//
//	heartbeat      {} (or no body)                                          → {"ok": true}
//	progress       {"message", "succeeded", "failed"}: a message, counts of the task's
//	               items processed so far in this run (cumulative, 0 or more, their sum at
//	               most the task's expected_count; omitted: unchanged), or both → {"ok": true}
//	ask            {"question"}; waits until a human answers                → {"answer"}
//	complete       {"summary", "files_changed": [...], "outputs": {...}}    → {"ok": true}
//	fail           {"message"}                                              → {"ok": true}
//	usage          {"input_tokens", "output_tokens", "cache_read_tokens",
//	               "cache_write_tokens"}                                    → {"ok": true}
//	rate_limited   {"reset_at" (RFC 3339), "kind": "rate_limit|tokens",
//	               "message"}                                               → {"ok": true}
//	propose_plan   {"tasks": [batch entries, as in POST /api/v1/tasks]}     → {"results": [...]}
//
// An unknown tool is a 404. Every call is authenticated before its body is
// read: a missing token is a 401, the token goes to RunService.Authenticate
// (an unknown token, or the token of a run that has ended, is a 401), and
// the X-AQ-Task-ID header must name the run's own task (else 401 "this run
// token is for another task"): a run's token authorises only its task. The run then decides what the
// call applies to: usage has no project, task or agent fields (they are
// unknown fields), and plan entries may not set project_id, parent_task_id,
// plan_source or is_plan_subtask, which the service sets from the run.
//
// Bodies are as strict as the HTTP API's (one JSON value, no unknown
// fields, keys in their exact case and none twice, no trailing data, at
// most RPCConfig.MaxBodyBytes; a Content-Type, when given, must be JSON)
// and are checked with the models' validators (messages and questions are
// required and at most 16000 characters, token counts are from 0 to
// MaxUsageTokensPerReport, 100 million, per field and report — more is a
// broken or hostile agent, and is refused before anything is booked — a
// completion's outputs are a JSON object, a rate limit's kind is
// rate_limit or tokens). Errors
// have the HTTP API's shape, {"error": {"code", "message"}}, with status 400,
// 401, 404, 409 or 500 (405, 413 and 415 as in the HTTP API); internal
// errors are logged with the run's task_id, run_id and agent and answered
// "internal error". Tokens are never logged.
//
// Calls have a write timeout (DefaultRPCWriteTimeout) except ask, which
// waits as long as the human takes. An ask's context ends when the agent
// closes its connection, and when the server shuts down: the agent is then
// answered 503 ("the daemon is shutting down"), while other calls in
// flight may finish. Listen creates the socket's directory (0700) when
// missing, makes the socket 0600, replaces a stale socket file that nothing
// answers on and refuses a live one ("socket in use") or any other file;
// Serve removes the socket when it stops. A browser cannot reach the RPC:
// it speaks HTTP over TCP only, never to a Unix socket, and the socket's
// mode keeps other local users out.
package api
