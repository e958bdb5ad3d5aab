package metrics_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/metrics"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// clock is a test clock moved by hand.
// scrape serves one scrape of h and parses it with Prometheus's own text
// parser.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse the scrape: %v", err)
	}
	return mfs
}

// value is the value of the sample of family name with exactly labels,
// and whether there is one.
func value(mfs map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	mf := mfs[name]
	if mf == nil {
		return 0, false
	}
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if len(got) != len(labels) {
			continue
		}
		match := true
		for k, v := range labels {
			match = match && got[k] == v
		}
		if !match {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// TestScrapeReadsTheStoreAndTheEvents runs a little work on a real store
// observed by the metrics and checks what a scrape says against it.
func TestScrapeReadsTheStoreAndTheEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	budget := int64(5000)
	m := metrics.New(metrics.Config{Window: time.Hour, GlobalBudget: &budget, Outbox: true, Clock: clk})
	st := storetest.Open(t, storetest.WithClock(clk), storetest.WithObserver(m))
	m.ReadFrom(st)

	limit := int64(1000)
	if _, err := st.CreateProject(ctx, models.Project{ID: "web", BudgetLimit: &limit}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RegisterAgent(ctx, models.Agent{ID: "a1", AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "/bin/true", Profile: models.Profile{Model: "m1"}}}); err != nil {
		t.Fatal(err)
	}
	res, err := st.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{
		{LocalID: "a", Title: "a"}, {LocalID: "b", Title: "b", Dependencies: []models.BatchDependency{{ID: "a"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := res[0].TaskID, res[1].TaskID
	clk.Advance(2 * time.Second)
	run, _, err := st.ClaimTask(ctx, a, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.StartRun(ctx, run.ID, 1, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RecordRunUsage(ctx, run.ID, models.TokenUsage{Input: 300, Output: 100}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(30 * time.Minute)
	if _, err := st.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentCompleted,
		ExpectFrom: models.StatusInProgress, Outcome: "completed"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApplyEvent(ctx, models.TransitionRequest{TaskID: a, Event: models.EventVerifyPassed, Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(3 * time.Second)
	run2, _, err := st.ClaimTask(ctx, b, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.StartRun(ctx, run2.ID, 2, ""); err != nil {
		t.Fatal(err)
	}
	m.RoundDone(20 * time.Millisecond)
	m.GitHubResponse(200, 4999)
	m.GitHubResponse(0, -1)
	m.HookRunEnded(models.HookRun{ProjectID: "web", Status: models.HookRunSkipped})
	clk.Advance(15 * time.Minute)

	mfs := scrape(t, m.Handler())
	counts, err := st.TaskCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	web := map[string]string{"project": "web"}
	type want struct {
		name   string
		labels map[string]string
		v      float64
	}
	wants := []want{
		{"agentqueued_transitions_total", map[string]string{"project": "web", "event": "DEPS_MET"}, 2},
		{"agentqueued_transitions_total", map[string]string{"project": "web", "event": "ASSIGNED"}, 2},
		{"agentqueued_transitions_total", map[string]string{"project": "web", "event": "AGENT_STARTED"}, 2},
		{"agentqueued_transitions_total", map[string]string{"project": "web", "event": "VERIFY_PASSED"}, 1},
		{"agentqueued_queue_wait_seconds", web, 2},
		{"agentqueued_dependency_start_latency_seconds", web, 1},
		{"agentqueued_runs_total", map[string]string{"project": "web", "agent": "a1", "outcome": "completed"}, 1},
		{"agentqueued_scheduler_round_duration_seconds", nil, 1},
		{"agentqueued_github_requests_total", map[string]string{"status": "200"}, 1},
		{"agentqueued_github_requests_total", map[string]string{"status": "error"}, 1},
		{"agentqueued_github_rate_limit_remaining", nil, 4999},
		{"agentqueued_hook_runs_total", map[string]string{"project": "web", "outcome": "skipped"}, 1},
		{"agentqueued_agent_state", map[string]string{"agent": "a1", "status": "BUSY"}, 1},
		{"agentqueued_agent_state", map[string]string{"agent": "a1", "status": "IDLE"}, 0},
		{"agentqueued_agent_paused", map[string]string{"agent": "a1"}, 0},
		// In the hour's window: a's 30 min run and b's 15 min so far.
		{"agentqueued_agent_utilization", map[string]string{"agent": "a1"}, 0.75},
		{"agentqueued_window_run_tokens", map[string]string{"project": "web", "agent": "a1", "model": "m1"}, 400},
		{"agentqueued_window_runs", map[string]string{"project": "web", "agent": "a1", "model": "m1"}, 2},
		{"agentqueued_window_tokens", web, 400},
		{"agentqueued_window_seconds", nil, 3600},
		{"agentqueued_global_token_budget", nil, 5000},
		{"agentqueued_project_tokens_used_total", web, 400},
		{"agentqueued_project_token_budget", web, 1000},
		{"agentqueued_task_oldest_age_seconds", map[string]string{"project": "web", "status": "IN_PROGRESS"}, 15 * 60},
	}
	for _, s := range models.TaskStatuses {
		wants = append(wants, want{"agentqueued_tasks", map[string]string{"project": "web", "status": string(s)},
			float64(counts["web"][s])})
	}
	for _, w := range wants {
		got, ok := value(mfs, w.name, w.labels)
		if !ok || got != w.v {
			t.Errorf("%s%v = %v (present %v), want %v", w.name, w.labels, got, ok, w.v)
		}
	}
	if n, _ := value(mfs, "agentqueued_outbox_backlog", nil); n == 0 {
		t.Error("outbox backlog 0: the notices of the completed task wait for delivery")
	}
	for _, name := range []string{"agentqueued_db_size_bytes", "agentqueued_outbox_oldest_age_seconds"} {
		if v, ok := value(mfs, name, nil); !ok || v <= 0 {
			t.Errorf("%s = %v (present %v), want positive", name, v, ok)
		}
	}
}

// TestNamesListEveryExportedFamily: Names, which the dashboard test
// trusts, lists every family a scrape exports, and nothing carries a label
// outside the bounded set.
func TestNamesListEveryExportedFamily(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := metrics.New(metrics.Config{Outbox: true})
	st := storetest.Open(t, storetest.WithObserver(m))
	m.ReadFrom(st)
	if _, err := st.CreateProject(ctx, models.Project{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateTasks(ctx, models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{{LocalID: "a", Title: "a"}}}); err != nil {
		t.Fatal(err)
	}
	m.RoundDone(time.Millisecond)
	m.GitHubResponse(200, 1)
	m.HookRunEnded(models.HookRun{ProjectID: "p", Status: "completed"})
	names := m.Names()
	allowed := []string{"project", "agent", "model", "status", "event", "outcome", "runner", "state", "connected"}
	for name, mf := range scrape(t, m.Handler()) {
		if !slices.Contains(names, name) {
			t.Errorf("family %s is exported but not in Names", name)
		}
		if !strings.HasPrefix(name, metrics.Namespace+"_") {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if !slices.Contains(allowed, l.GetName()) {
					t.Errorf("family %s has label %s", name, l.GetName())
				}
			}
		}
	}
}

// metricName finds the metric names in a PromQL expression: identifiers
// not followed by "(" (functions) and not label names or keywords.
var metricName = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)

// TestGrafanaDashboardQueriesExportedMetrics parses the dashboard and
// checks that it has a data source variable and that every metric each
// panel queries is one the daemon exports, so that the dashboard cannot
// rot as metrics change.
func TestGrafanaDashboardQueriesExportedMetrics(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "configs", "grafana", "agentqueued.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title      string `json:"title"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Type       string `json:"type"`
			Title      string `json:"title"`
			Datasource struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("the dashboard is not valid JSON: %v", err)
	}
	hasDS := false
	for _, v := range dash.Templating.List {
		hasDS = hasDS || (v.Type == "datasource" && string(v.Query) == `"prometheus"`)
	}
	if !hasDS {
		t.Error("no Prometheus data source variable")
	}
	names := metrics.New(metrics.Config{}).Names()
	exported := func(n string) bool {
		for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(n, suffix); ok && slices.Contains(names, base) {
				return true
			}
		}
		return false
	}
	queried := map[string]bool{}
	panels := 0
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		panels++
		if p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: data source %q, want the variable ${datasource}", p.Title, p.Datasource.UID)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, target := range p.Targets {
			for _, n := range promQLMetrics(target.Expr) {
				queried[n] = true
				if !exported(n) {
					t.Errorf("panel %q queries %s, which the daemon does not export", p.Title, n)
				}
			}
		}
	}
	if panels == 0 {
		t.Fatal("no panels")
	}
	// Every group of the daemon's own metrics is on the dashboard.
	for _, n := range names {
		if !strings.HasPrefix(n, metrics.Namespace+"_") {
			continue
		}
		if !queried[n] && !queried[n+"_bucket"] && !queried[n+"_count"] {
			t.Errorf("metric %s is on no panel", n)
		}
	}
}

// promQLMetrics returns the metric names of a PromQL expression: the
// identifiers outside label matchers and strings that are not functions,
// aggregation keywords or label lists of by/on/without.
func promQLMetrics(expr string) []string {
	// Drop label matchers, grouping lists and quoted strings.
	for _, re := range []*regexp.Regexp{regexp.MustCompile(`\{[^}]*\}`), regexp.MustCompile(`\b(by|on|without|ignoring|group_left|group_right)\s*\([^)]*\)`),
		regexp.MustCompile(`"[^"]*"`), regexp.MustCompile(`\[[^\]]*\]`)} {
		expr = re.ReplaceAllString(expr, " ")
	}
	var out []string
	for _, loc := range metricName.FindAllStringIndex(expr, -1) {
		word := expr[loc[0]:loc[1]]
		rest := strings.TrimLeft(expr[loc[1]:], " ")
		if strings.HasPrefix(rest, "(") {
			continue // a function or an aggregation
		}
		switch word {
		case "by", "on", "without", "ignoring", "and", "or", "unless", "bool", "offset", "le":
			continue
		}
		if word[0] >= '0' && word[0] <= '9' {
			continue
		}
		out = append(out, word)
	}
	return out
}

// TestOperationsGuideMatchesTheMetrics: docs/operations.md describes every
// metric the daemon exports under its own name, describes none it does
// not, and its suggested alerts query only exported metrics.
func TestOperationsGuideMatchesTheMetrics(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	names := metrics.New(metrics.Config{}).Names()
	described := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `("+metrics.Namespace+"_[a-z_]+)` \\|").FindAllStringSubmatch(doc, -1) {
		described[m[1]] = true
		if !slices.Contains(names, m[1]) {
			t.Errorf("docs/operations.md describes %s, which the daemon does not export", m[1])
		}
	}
	for _, n := range names {
		if strings.HasPrefix(n, metrics.Namespace+"_") && !described[n] {
			t.Errorf("docs/operations.md does not describe %s", n)
		}
	}
	_, alerts, ok := strings.Cut(doc, "## Suggested alerts")
	if !ok {
		t.Fatal("no suggested alerts")
	}
	_, block, _ := strings.Cut(alerts, "```yaml\n")
	block, _, _ = strings.Cut(block, "```")
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal([]byte(block), &rules); err != nil {
		t.Fatalf("the alerts are not YAML: %v", err)
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			found := promQLMetrics(r.Expr)
			if len(found) == 0 {
				t.Errorf("alert %s queries no metric", r.Alert)
			}
			for _, m := range found {
				base := m
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(m, suffix); ok && slices.Contains(names, b) {
						base = b
					}
				}
				if !slices.Contains(names, base) {
					t.Errorf("alert %s queries %s, which the daemon does not export", r.Alert, m)
				}
			}
		}
	}
	for _, want := range []string{"AgentqueuedQueueStuck", "AgentqueuedOutboxLag", "AgentqueuedAgentError", "AgentqueuedBudgetBurnFast"} {
		if !strings.Contains(block, "alert: "+want) {
			t.Errorf("no alert %s", want)
		}
	}
	if n == 0 {
		t.Fatal("no alert rules")
	}
}
