package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// dagAgent completes every task it is given.
const dagAgent = `#!/bin/sh
set -eu
cat > /dev/null
"$DAG_BIN" agent complete --summary "done"
`

// getMetrics asks url for the metrics with token (none when empty) and
// returns the status and the body.
func getMetrics(t *testing.T, url, host, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// parseMetrics parses a scrape with Prometheus's text parser.
func parseMetrics(t *testing.T, body string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse the metrics: %v\n%s", err, body)
	}
	return mfs
}

// samples sums the samples of a family by the value of one label (the
// histogram's sample count for a histogram).
func samples(mfs map[string]*dto.MetricFamily, name, by string) map[string]float64 {
	out := map[string]float64{}
	mf := mfs[name]
	if mf == nil {
		return out
	}
	for _, m := range mf.GetMetric() {
		key := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == by {
				key = l.GetValue()
			}
		}
		switch {
		case m.Counter != nil:
			out[key] += m.GetCounter().GetValue()
		case m.Gauge != nil:
			out[key] += m.GetGauge().GetValue()
		case m.Histogram != nil:
			out[key] += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return out
}

// TestMetricsAfterADAG runs a small DAG to completion in a whole daemon
// with a token and command agents, scrapes /metrics on the API's listener
// and checks it against the store: the tasks by status, every committed
// transition by event, the queue wait and dependency start histograms,
// the runs by outcome. Without the token the scrape is refused.
func TestMetricsAfterADAG(t *testing.T) {
	t.Parallel()
	const token = "metrics-t0ken"
	bin := agentqueuedBinary(t)
	dir := t.TempDir()
	script := writeFile(t, dir, "agent.sh", dagAgent)
	cfg := writeFile(t, dir, "config.yaml", `api:
  token: `+token+`
agents:
  - name: w1
    type: command
    command: /bin/sh
    args: ["`+script+`"]
    env: {DAG_BIN: "`+bin+`"}
  - name: w2
    type: command
    command: /bin/sh
    args: ["`+script+`"]
    env: {DAG_BIN: "`+bin+`"}
`)
	dataDir := filepath.Join(dir, "data")
	changed := make(chan struct{}, 1)
	d, err := startMainWith(t, func(m *Main) {
		m.OnChange = func() {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}, "run", "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := d.watch.Context()
	c, err := api.NewClient("http://"+d.m.Addr(), token, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateProject(ctx, models.ProjectSpec{ID: "dag"}.Project()); err != nil {
		t.Fatal(err)
	}
	// a → b, a → c, (b, c) → d.
	dep := func(ids ...string) []models.BatchDependency {
		var out []models.BatchDependency
		for _, id := range ids {
			out = append(out, models.BatchDependency{ID: id})
		}
		return out
	}
	res, err := c.CreateTasks(ctx, models.TaskBatch{ProjectID: "dag", Tasks: []models.BatchTask{
		{LocalID: "a", Title: "a"}, {LocalID: "b", Title: "b", Dependencies: dep("a")},
		{LocalID: "c", Title: "c", Dependencies: dep("a")}, {LocalID: "d", Title: "d", Dependencies: dep("b", "c")}}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		tasks, err := c.ListTasks(ctx, models.TaskFilter{ProjectID: "dag"})
		if err != nil {
			t.Fatal(err)
		}
		done := 0
		for _, task := range tasks {
			if task.Status == models.StatusCompleted {
				done++
			}
		}
		if done == len(res) {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("the DAG did not finish: %+v\n%s", tasks, d.logs)
		}
	}
	// The runs' ends are committed with the completions; the agents may
	// still be freed: wait for them to be IDLE, so nothing moves after.
	for {
		agents, err := c.ListAgents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		idle := 0
		for _, a := range agents {
			if a.State == models.AgentIdle {
				idle++
			}
		}
		if idle == len(agents) {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("agents did not come back: %+v", agents)
		}
	}

	url := "http://" + d.m.Addr() + api.MetricsPath
	if code, body := getMetrics(t, url, "", ""); code != http.StatusUnauthorized || !strings.Contains(body, "missing bearer token") {
		t.Errorf("/metrics without the token: %d %s", code, body)
	}
	code, body := getMetrics(t, url, "", token)
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	mfs := parseMetrics(t, body)

	// Every committed transition, by event, as the tasks' histories say.
	events := map[string]float64{}
	for _, r := range res {
		detail, err := c.GetTask(ctx, r.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range detail.Events {
			events[string(e.Event)]++
		}
	}
	transitions := samples(mfs, "agentqueued_transitions_total", "event")
	if len(transitions) != len(events) {
		t.Errorf("transitions by event %v, the tasks' events %v", transitions, events)
	}
	for ev, n := range events {
		if transitions[ev] != n {
			t.Errorf("transitions_total{event=%q} = %v, the tasks have %v", ev, transitions[ev], n)
		}
	}
	if got := samples(mfs, "agentqueued_queue_wait_seconds", "project"); got["dag"] != events[string(models.EventAssigned)] || got["dag"] == 0 {
		t.Errorf("queue wait observations %v, want one per claim (%v)", got, events[string(models.EventAssigned)])
	}
	// b, c and d started once their dependencies were met.
	if got := samples(mfs, "agentqueued_dependency_start_latency_seconds", "project"); got["dag"] != 3 {
		t.Errorf("dependency start latency observations %v, want 3", got)
	}
	if got := samples(mfs, "agentqueued_runs_total", "outcome"); got["completed"] != 4 || len(got) != 1 {
		t.Errorf("runs by outcome %v, want 4 completed", got)
	}
	if got := samples(mfs, "agentqueued_scheduler_round_duration_seconds", ""); got[""] == 0 {
		t.Error("no scheduler round observed")
	}
	if got := samples(mfs, "agentqueued_agent_state", "status"); got["IDLE"] != 2 || got["BUSY"] != 0 {
		t.Errorf("agents by state %v, want 2 IDLE", got)
	}
	scraped := map[models.TaskStatus]float64{}
	for _, m := range mfs["agentqueued_tasks"].GetMetric() {
		var project, status string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "project":
				project = l.GetValue()
			case "status":
				status = l.GetValue()
			}
		}
		if project != "dag" {
			t.Errorf("tasks of project %q", project)
		}
		scraped[models.TaskStatus(status)] = m.GetGauge().GetValue()
	}

	// The store's counts, once the daemon has stopped.
	if err := d.m.Close(); err != nil {
		t.Fatal(err)
	}
	st := storetest.OpenAt(t, filepath.Join(dataDir, "agentqueued.db"))
	counts, err := st.TaskCounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range models.TaskStatuses {
		if scraped[s] != float64(counts["dag"][s]) {
			t.Errorf("tasks{status=%q} = %v, the store counts %d", s, scraped[s], counts["dag"][s])
		}
	}
	if scraped[models.StatusCompleted] != 4 {
		t.Errorf("tasks COMPLETED = %v, want 4", scraped[models.StatusCompleted])
	}
}

// TestMetricsListenerOfItsOwn: metrics.listen serves /metrics without a
// token on its own loopback address, refusing a foreign Host, and the
// API's listener no longer serves them; an address beyond loopback is
// refused at start unless metrics.allow_remote says so.
func TestMetricsListenerOfItsOwn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.yaml", "api:\n  token: s3cret\nmetrics:\n  listen: 127.0.0.1:0\n")
	d, err := startMain(t, nil, "run", "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	own := "http://" + d.m.MetricsAddr() + "/metrics"
	if code, body := getMetrics(t, own, "", ""); code != http.StatusOK || !strings.Contains(body, "agentqueued_window_seconds") {
		t.Errorf("metrics listener: %d %s", code, body)
	}
	if code, _ := getMetrics(t, own, "attacker.example", ""); code != http.StatusForbidden {
		t.Errorf("metrics listener with a foreign Host: %d, want 403", code)
	}
	if code, _ := getMetrics(t, "http://"+d.m.Addr()+api.MetricsPath, "", "s3cret"); code != http.StatusNotFound {
		t.Errorf("API listener with metrics.listen set: %d, want 404", code)
	}

	for _, listen := range []string{"0.0.0.0:0", "192.0.2.7:9464"} {
		bad := writeFile(t, dir, "bad.yaml", "metrics:\n  listen: "+listen+"\n")
		_, err := startMain(t, nil, "run", "--data-dir", filepath.Join(dir, "data2"), "--listen", "127.0.0.1:0", "--config", bad)
		if err == nil || ExitCode(err) != exitUsage || !strings.Contains(err.Error(), "metrics.allow_remote") {
			t.Errorf("metrics.listen %s: %v (exit %d), want a configuration error naming metrics.allow_remote", listen, err, ExitCode(err))
		}
	}
}
