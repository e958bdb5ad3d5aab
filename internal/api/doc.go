// Package api is agentqueued's HTTP interface: a JSON API under /api/v1 for
// projects, tasks and agents, a health check, and a Client for it.
//
// The Server translates requests into calls on a Service (the store) and
// the Service's answers into JSON. It owns no state: validation of domain
// values, the transition table and atomicity live behind the Service. The
// Server validates only the shape of requests: bodies must be a single JSON
// value (Content-Type application/json when one is given, at most
// Config.MaxBodyBytes, no unknown fields, no trailing data) and query
// parameters must be known and well formed.
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
//	POST  /api/v1/tasks/{id}/events   {"event": "ADMIN_SKIP|ADMIN_STOP|ADMIN_RESTART", "reason", "actor"}
//	                                  → the transition's result
//	POST  /api/v1/agents              register an agent (body: id, name, agent_type) → 201 agent, IDLE
//	GET   /api/v1/agents              {"agents": [...]}
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
package api
