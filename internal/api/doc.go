// Package api is agentqueued's HTTP interface: a JSON API under /api/v1 for
// projects, tasks, agents, hooks and workflows, a health check, and a Client for it; and the
// agent RPC on a Unix socket, with an RPCClient for it.
//
// The Server translates requests into calls on a Service (the store), a
// HookService (the command layer's hook operations) and a WorkflowService
// (its workflow operations), and their answers into JSON. It owns no state: validation of domain
// values, the transition table and atomicity live behind the Service. The
// Server validates only the shape of requests: bodies must be a single JSON
// value (Content-Type application/json when one is given, at most
// Config.MaxBodyBytes, no unknown fields, no trailing data) and query
// parameters must be known and well formed. The one exception is a
// workflow document, posted as is in YAML or JSON.
//
// Endpoints:
//
//	GET   /healthz                    {"status":"ok"} when the store answers; never needs a token
//	POST  /api/v1/projects            create a project (body: id, name, credit_weight, max_concurrent_agents,
//	                                  status, budget_limit, discord_channel_id, repo — all but id optional) → 201 project
//	GET   /api/v1/projects            {"projects": [...]}
//	GET   /api/v1/projects/{id}       a project
//	PATCH /api/v1/projects/{id}       partial update (body: a project patch) → the project
//	POST  /api/v1/tasks               create tasks all-or-nothing (body: {"project_id", "created_by",
//	                                  "tasks": [...]} or a bare array of tasks) → 201 {"results": [...]}
//	GET   /api/v1/tasks               {"tasks": [...]}; query: project, status (comma-separated
//	                                  statuses or groups), limit, after (a task id, for paging)
//	GET   /api/v1/tasks/{id}          the task with its dependencies, dependents and events
//	PATCH /api/v1/tasks/{id}          edit a task not being worked on (body: title, description, priority,
//	                                  acceptance_criteria, test_commands, verification_type, requires_approval,
//	                                  profile — all optional, at least one) → the task
//	DELETE /api/v1/tasks/{id}         delete a task nothing runs or depends on → 204
//	POST  /api/v1/tasks/{id}/dependencies  {"add": [{"id", "requires_success"}], "remove": [ids]}
//	                                  → {"task", "dependencies", "added", "removed", "promoted", "blocked", "reopened"}
//	POST  /api/v1/tasks/{id}/events   {"event": "ADMIN_SKIP|ADMIN_STOP|ADMIN_RESTART", "reason", "actor"}
//	                                  → the transition's result
//	POST  /api/v1/tasks/{id}/approve  {"feedback", "by"} → the transition's result (HUMAN verification, or a plan)
//	POST  /api/v1/tasks/{id}/reject   {"feedback" (required), "by"} → the transition's result
//	POST  /api/v1/agents              register an agent (body: id, name, agent_type) → 201 agent, IDLE
//	GET   /api/v1/agents              {"agents": [...]}
//	DELETE /api/v1/agents/{id}        remove an agent that runs nothing → 204
//	POST  /api/v1/agents/{id}/pause   the agent takes no new task → the agent; /resume undoes it
//	GET   /api/v1/questions           {"questions": [...]}: agents' questions waiting for an answer, oldest first
//	POST  /api/v1/questions/{id}/answer  {"answer", "answered_by"} → the question; the waiting agent gets the answer
//	GET   /api/v1/budget              token use: {"window", "since", "global": {"budget", "tokens_in_window",
//	                                  "exhausted"}, "projects": [{"project_id", "tokens_in_window",
//	                                  "total_tokens_used", "budget_limit", "exhausted", ...}]}; null budgets are unlimited
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
//	GET   /api/v1/hooks/{id}/runs     {"runs": [...]}, newest first; query: status (running, completed,
//	                                  failed, skipped), limit
//	GET   /api/v1/hook-runs/{id}      a hook run: its trigger, context, prompt, answer, actions and tokens
//	GET   /api/v1/workflows           {"workflows": [...]}, by name; query: project (an unknown project is a 404)
//	POST  /api/v1/workflows           save a workflow (body: the YAML or JSON document as is, Content-Type
//	                                  application/yaml, application/x-yaml, text/yaml, application/json or none)
//	                                  → 201 the workflow with Location /api/v1/workflows/{name}, or 200 the
//	                                  workflow when it replaced one of its name
//	GET   /api/v1/workflows/{name}    a workflow: its steps, schedule, next_run, origin and source document
//	PATCH /api/v1/workflows/{name}    {"schedule_enabled": true|false} turns its schedule on or off → the workflow
//	DELETE /api/v1/workflows/{name}   delete a workflow; its runs and their tasks stay → 204
//	POST  /api/v1/workflows/{name}/runs  start a run by hand (optional body: {"actor"}) → 201 the run with
//	                                  Location /api/v1/runs/{id}
//	GET   /api/v1/runs                {"runs": [...]}, newest first, without their definitions; query: workflow,
//	                                  project (an unknown project is a 404), status (pending, running, success,
//	                                  failed, cancelled), limit (1-10000, default 500)
//	GET   /api/v1/runs/{id}           a run with its definition and its tasks counted by status
//	POST  /api/v1/runs/{id}/cancel    cancel a run: running tasks stopped, the rest BLOCKED (optional body:
//	                                  {"actor"}) → the run
//	POST  /api/v1/runs/{id}/retry     start a failed or cancelled run's FAILED and BLOCKED tasks again (optional
//	                                  body: {"actor"}) → the run; 409 when there is nothing to retry
//	GET   /api/v1/runs/{id}/tasks     {"tasks": [...]}: the run's tasks, each with its "name" in the run
//	GET   /api/v1/runs/{id}/tasks/{name}/logs  the logs of the task named name in the run ("build",
//	                                  "upgrade[2]", path-escaped: upgrade%5B2%5D) → {"task_id", "attempts":
//	                                  [{"attempt", "log", "truncated"}]}, oldest first; query: attempt (N ≥ 1,
//	                                  only that attempt); an unknown name is a 404 naming the run's tasks
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
//	{"error": {"code": "invalid|not_found|conflict|unauthorized|internal", "message": "..."}}
//
// with status 400, 404, 409, 401 or 500 (413, 415 and 405 for oversized
// bodies, wrong media types and wrong methods, with code invalid). Messages
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
//	progress       {"message"}                                              → {"ok": true}
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
// fields, no trailing data, at most RPCConfig.MaxBodyBytes) and are checked
// with the models' validators (messages and questions are required and at
// most 16000 bytes, token counts are not negative, a completion's outputs
// are a JSON object, a rate limit's kind is rate_limit or tokens). Errors
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
// Serve removes the socket when it stops.
package api
