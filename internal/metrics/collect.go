package metrics

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
)

// storeCollector reads the store at scrape time: one statement per group.
type storeCollector struct {
	m  *Metrics
	st Store

	tasks, taskOldest                       *prometheus.Desc
	agentState, agentPaused, agentUtil      *prometheus.Desc
	outboxBacklog, outboxOldest             *prometheus.Desc
	runTokens, runCost, runCount, runAgentS *prometheus.Desc
	windowTokens, windowSeconds, globalCap  *prometheus.Desc
	projectTokens, projectBudget            *prometheus.Desc
	dbSize, walSize                         *prometheus.Desc
	runners, runnerRuns, runnerSeen         *prometheus.Desc
}

// maxLabelledRunners caps the runners with series of their own
// (runner_runs, runner_last_seen_seconds): the first by name. The count
// of runners by state and connection counts them all.
const maxLabelledRunners = 1000

func newStoreCollector(m *Metrics, st Store) *storeCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil)
	}
	c := &storeCollector{m: m, st: st,
		tasks: d("tasks", "Tasks by project and status.", "project", "status"),
		taskOldest: d("task_oldest_age_seconds", "Age of the oldest last change of the tasks of a project in a status, "+
			"for the statuses a task leaves by itself or by a person (not DEFINED, COMPLETED or BLOCKED).", "project", "status"),
		agentState:    d("agent_state", "1 for the state each agent is in (status: IDLE, STARTING, BUSY, PAUSED, ERROR), 0 for the others.", "agent", "status"),
		agentPaused:   d("agent_paused", "1 when a person paused the agent: it takes no new task.", "agent"),
		agentUtil:     d("agent_utilization", "Share of the budget window the agent spent running tasks (0 to 1).", "agent"),
		outboxBacklog: d("outbox_backlog", "Notices written and not yet delivered to Discord."),
		outboxOldest:  d("outbox_oldest_age_seconds", "Age of the oldest notice not yet delivered to Discord; 0 when none waits."),
		runTokens: d("window_run_tokens", "Tokens of the runs that ended in the budget window or are running, "+
			"by project, agent and the model of the agent's profile.", "project", "agent", "model"),
		runCost: d("window_run_cost_usd", "Cost the agent CLIs reported for the runs of the budget window, "+
			"by project, agent and model.", "project", "agent", "model"),
		runCount: d("window_runs", "Runs that ended in the budget window or are running, by project, agent and model.",
			"project", "agent", "model"),
		runAgentS: d("window_agent_seconds", "Agent time inside the budget window, by project, agent and model.",
			"project", "agent", "model"),
		windowTokens: d("window_tokens", "Tokens counted against the budgets in the budget window "+
			"(the token ledger: runs and hook runs), by project.", "project"),
		windowSeconds: d("window_seconds", "Length of the budget window (orchestrator.window)."),
		globalCap:     d("global_token_budget", "orchestrator.global_token_budget: the cap of all projects' tokens in the window."),
		projectTokens: d("project_tokens_used_total", "Tokens a project has used since it was created.", "project"),
		projectBudget: d("project_token_budget", "A project's budget_limit on its total tokens (absent: unlimited).", "project"),
		dbSize:        d("db_size_bytes", "Size of the SQLite database file."),
		walSize:       d("db_wal_size_bytes", "Size of the database's write-ahead log."),
		runners: d("runners", "Runners by state (ACTIVE, DRAINING) and whether they are connected now (connected: "+
			"true, false).", "state", "connected"),
		runnerRuns: d("runner_runs", "Runs in progress on a runner's agents (the first 1000 runners by name).", "runner"),
		runnerSeen: d("runner_last_seen_seconds", "Seconds since a runner's last request (the first 1000 runners by "+
			"name; absent before its first).", "runner"),
	}
	return c
}

// descs are the collector's descriptions, the outbox's only when
// exported.
func (c *storeCollector) descs() []*prometheus.Desc {
	ds := []*prometheus.Desc{c.tasks, c.taskOldest, c.agentState, c.agentPaused, c.agentUtil, c.runTokens, c.runCost,
		c.runCount, c.runAgentS, c.windowTokens, c.windowSeconds, c.globalCap, c.projectTokens, c.projectBudget,
		c.dbSize, c.walSize, c.runners, c.runnerRuns, c.runnerSeen}
	if c.m.cfg.Outbox {
		ds = append(ds, c.outboxBacklog, c.outboxOldest)
	}
	return ds
}

// storeMetricNames are the names (without Namespace) of the metrics a
// storeCollector exports, the outbox's included (a daemon with Discord
// exports them).
var storeMetricNames = []string{"tasks", "task_oldest_age_seconds", "agent_state", "agent_paused", "agent_utilization",
	"window_run_tokens", "window_run_cost_usd", "window_runs", "window_agent_seconds", "window_tokens",
	"window_seconds", "global_token_budget", "project_tokens_used_total", "project_token_budget",
	"db_size_bytes", "db_wal_size_bytes", "outbox_backlog", "outbox_oldest_age_seconds", "runners", "runner_runs",
	"runner_last_seen_seconds"}

// Describe implements prometheus.Collector.
func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs() {
		ch <- d
	}
}

// Collect implements prometheus.Collector: each group is one store read;
// a read that fails reports an invalid metric (the scrape logs it and
// serves the rest).
func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.m.cfg.ReadTimeout)
	defer cancel()
	now := c.m.cfg.Clock.Now()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	failed := func(d *prometheus.Desc, err error) { ch <- prometheus.NewInvalidMetric(d, err) }

	if counts, err := c.st.TaskStatusCounts(ctx); err != nil {
		failed(c.tasks, err)
	} else {
		// Every status of every project with tasks: a count that drops to
		// zero stays a series.
		byProject := map[string]map[models.TaskStatus]int{}
		for _, n := range counts {
			if byProject[n.ProjectID] == nil {
				byProject[n.ProjectID] = map[models.TaskStatus]int{}
			}
			byProject[n.ProjectID][n.Status] = n.Count
			if !n.Oldest.IsZero() {
				gauge(c.taskOldest, max(now.Sub(n.Oldest).Seconds(), 0), n.ProjectID, string(n.Status))
			}
		}
		for p, by := range byProject {
			for _, s := range models.TaskStatuses {
				gauge(c.tasks, float64(by[s]), p, string(s))
			}
		}
	}

	if agents, err := c.st.AgentStates(ctx); err != nil {
		failed(c.agentState, err)
	} else {
		for _, a := range agents {
			for _, s := range models.AgentStates {
				gauge(c.agentState, b2f(a.State == s), a.ID, string(s))
			}
			gauge(c.agentPaused, b2f(a.Paused), a.ID)
		}
	}

	if c.m.cfg.Outbox {
		if b, err := c.st.OutboxBacklog(ctx); err != nil {
			failed(c.outboxBacklog, err)
		} else {
			gauge(c.outboxBacklog, float64(b.Count))
			age := 0.0
			if !b.Oldest.IsZero() {
				age = max(now.Sub(b.Oldest).Seconds(), 0)
			}
			gauge(c.outboxOldest, age)
		}
	}

	window := c.m.cfg.Window
	since := now.Add(-window)
	gauge(c.windowSeconds, window.Seconds())
	if usage, err := c.st.RunUsageSince(ctx, since, now); err != nil {
		failed(c.runTokens, err)
	} else {
		busy := map[string]float64{}
		for _, u := range usage {
			labels := []string{u.ProjectID, u.AgentID, u.Model}
			t := u.Tokens
			gauge(c.runTokens, float64(t.Input+t.Output+t.CacheRead+t.CacheWrite), labels...)
			gauge(c.runCost, u.CostUSD, labels...)
			gauge(c.runCount, float64(u.Runs), labels...)
			gauge(c.runAgentS, u.Busy.Seconds(), labels...)
			busy[u.AgentID] += u.Busy.Seconds()
		}
		agents := make([]string, 0, len(busy))
		for a := range busy {
			agents = append(agents, a)
		}
		slices.Sort(agents)
		for _, a := range agents {
			gauge(c.agentUtil, min(busy[a]/window.Seconds(), 1), a)
		}
	}

	if used, err := c.st.TokensUsedByProjectSince(ctx, since); err != nil {
		failed(c.windowTokens, err)
	} else {
		for p, n := range used {
			gauge(c.windowTokens, float64(n), p)
		}
	}
	if g := c.m.cfg.GlobalBudget; g != nil {
		gauge(c.globalCap, float64(*g))
	}

	if projects, err := c.st.ProjectTokens(ctx); err != nil {
		failed(c.projectTokens, err)
	} else {
		for _, p := range projects {
			ch <- prometheus.MustNewConstMetric(c.projectTokens, prometheus.CounterValue, float64(p.Total), p.ProjectID)
			if p.Limit != nil {
				gauge(c.projectBudget, float64(*p.Limit), p.ProjectID)
			}
		}
	}

	if rs, err := c.st.RunnerActivity(ctx); err != nil {
		failed(c.runners, err)
	} else {
		c.collectRunners(gauge, now, rs)
	}

	if db, wal, err := c.st.FileSizes(); err != nil {
		failed(c.dbSize, err)
	} else {
		gauge(c.dbSize, float64(db))
		gauge(c.walSize, float64(wal))
	}
}

// collectRunners exports the runners: their count by state and
// connection (every pair, 0 included, so that a count that drops to zero
// stays a series), and for the first maxLabelledRunners by name their runs
// in progress and the seconds since their last request, the later of the
// database's and the connections' (the database is told of a polling
// runner's requests once a minute).
func (c *storeCollector) collectRunners(gauge func(*prometheus.Desc, float64, ...string), now time.Time,
	rs []store.RunnerActivity) {
	conns := c.m.runnerStatuses()
	type key struct {
		state     models.RunnerState
		connected bool
	}
	counts := map[key]int{}
	for i, r := range rs {
		conn := conns[r.Name]
		counts[key{r.State, conn.Connected}]++
		if i >= maxLabelledRunners {
			continue
		}
		gauge(c.runnerRuns, float64(r.Runs), r.Name)
		seen := r.LastSeen
		if conn.LastSeen.After(seen) {
			seen = conn.LastSeen
		}
		if !seen.IsZero() {
			gauge(c.runnerSeen, max(now.Sub(seen).Seconds(), 0), r.Name)
		}
	}
	for _, s := range models.RunnerStates {
		for _, connected := range []bool{false, true} {
			gauge(c.runners, float64(counts[key{s, connected}]), string(s), strconv.FormatBool(connected))
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
