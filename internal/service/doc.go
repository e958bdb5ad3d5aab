// Package service is the daemon's command layer for people: the one set
// of operations the HTTP API, the Discord bot and the hook engine's
// actions call, with the same validation and the same errors whoever asks.
// Clients are thin: they translate requests into these calls and answers
// into their own form.
//
// # Areas
//
// The operations are declared once, by area, as small interfaces in
// package areas (internal/service/areas, which imports nothing but
// models, so that the API and the bot depend on the interfaces, not on
// the store and engines behind them): Projects, Landing, Tasks, Agents, Runners, Questions, Approvals,
// Status, Usage, Rules, Hooks, Workflows, WorkflowDocuments, WorkflowRuns,
// RunStarter, RunStarterWithInputs, RunTaskLogs, Changes, Logs,
// TokenHistory and TaskGraphs. No
// method is declared in two of them. A client's interface is the
// composition of the areas it uses (api.Service, api.HookService,
// api.WorkflowService, api.LogService, discord.Service, web.Service), so a client's
// test fake implements only those areas; *Service implements them all.
//
// # What goes where
//
// Every operation is an explicit method of *Service, and its doc comment
// says which component does the work:
//
//   - The store (*store.Store) keeps the state. Reads, and changes that
//     touch nothing running (deleting a task or an agent, changing
//     dependencies, rules, hook and workflow records), are the store's as
//     they are: the method is one line that says so.
//   - The service itself checks what only the configuration knows before
//     the store is asked: that the profiles a task, a project's settings
//     or a workflow's steps name are configured, that a project's
//     repository answers (a SourceChecker), that the program an agent runs
//     resolves, that a hook passes the hook engine's checks. It also adds
//     to the store's answers: a task's branch name, the budget report's
//     window and global budget, whether a log chunk is the last, and it
//     redacts hooks' secrets from every answer.
//   - The orchestrator (Orchestrator) does what touches running agents,
//     their checkouts and their logs: admin events (which may end a run),
//     answers to questions (handed to the waiting agent), pausing an agent
//     (which ends its rest after a rate limit), approvals and rejections
//     (merging or restarting work), landing, diffs and run logs.
//   - The hook engine (HookEngine) fires hooks by hand; the workflow engine
//     (WorkflowEngine) starts, cancels and retries workflow runs, and is
//     woken when a saved workflow's schedule may have changed.
//   - The Feed tells the API's followers about changes: the daemon's store
//     calls Feed.Notify after each commit, the orchestrator calls
//     Feed.Output when a task's log grows.
//
// # What is not here
//
// The agent RPC (api.RunService) and the MCP server an agent runs
// (cmd/agentqueued/mcp.go) are the agents' side, not people's: the
// orchestrator serves the RPC itself, for the one run a token names, and
// the MCP server is a client of that RPC. Neither goes through this
// package.
//
// New starts nothing and holds no goroutine: the daemon (cmd/agentqueued)
// builds the store and the engines, runs them, and hands a Service to
// api.New, discord.New and hooks.New. The hook engine's actions get a
// Service built before the engines exist (they create tasks, give
// feedback and queue notices, which need neither engine).
package service
