// Package metrics exports agentqueued's Prometheus metrics.
//
// A Metrics holds its own prometheus.Registry (never the global one) with
// two kinds of metrics:
//
//   - Read at scrape time from the store, each group by one named store
//     method that runs one statement over an index or a small table: tasks
//     by project and status (with the age of the oldest active one), agents
//     by state, the outbox backlog and the age of its oldest notice, run
//     tokens, cost and agent time by project, agent and model in the
//     budget window, project tokens against their budgets, runners by
//     state and connection with each one's runs in progress and time since
//     its last request (with the hub's connections, RunnersFrom), and the
//     database's size. A whole scrape takes 20–30 ms with 100,000 tasks
//     of history on a loaded two-core machine (docs/performance.md).
//   - Fed by events, through the small observer interfaces the reporting
//     packages declare and Metrics implements: status transitions by event
//     with the queue wait (READY → claimed) and the dependency start
//     latency (dependencies met → dependent started) histograms, and runs by
//     outcome (store.Observer); the scheduler's round duration
//     (orchestrator.Observer); GitHub answers by status and the rate limit
//     left (repo.GitHubObserver); hook runs by outcome (HookRunEnded, for
//     hooks.Config.OnRunEnd). These count from the daemon's start.
//
// Labels are only project, agent, model, status, event and outcome, and for
// runners runner, state and connected: never a task, run or hook id, so the
// number of series stays bounded by the configuration (the runners with
// series of their own by maxLabelledRunners, 1000). docs/operations.md
// describes every metric and suggests alerts;
// configs/grafana/agentqueued.json is a dashboard over them, and a test
// checks that every metric it queries is one Names lists.
//
// Handler serves the registry in the Prometheus text format. Where it is
// served is the daemon's choice: on the API's listener behind the API's
// authorisation, or on a listener of its own (metrics.listen).
package metrics
