package web_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/hooks"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/service"
	"github.com/agentqueued/agentqueued/internal/service/servicetest"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/web"
	"github.com/agentqueued/agentqueued/internal/web/dag"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// pagesNow is the dashboard's clock in the pages' tests.
var pagesNow = time.Date(2026, 11, 28, 12, 20, 0, 0, time.UTC)

// engineEnv is the dashboard over a service with the workflow and hook
// engines, as the daemon wires them.
type engineEnv struct {
	*env
	svc *service.Service
	// hookRunEnded receives each hook run as it ends.
	hookRunEnded chan models.HookRun
}

func newEngineEnv(t *testing.T) *engineEnv {
	t.Helper()
	return newEngineEnvWith(t, "")
}

// newEngineEnvWith is newEngineEnv with the API token token ("": none).
func newEngineEnvWith(t *testing.T, token string) *engineEnv {
	t.Helper()
	w := newWiringWith(t, token)
	srv := httptest.NewServer(w.handler)
	t.Cleanup(srv.Close)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &engineEnv{env: &env{t: t, store: w.store, srv: srv, client: client, runDir: w.runDir, feed: w.feed},
		svc: w.svc, hookRunEnded: w.hookRunEnded}
}

// wiring is the daemon's real service (servicetest: a store, the
// orchestrator, hook and workflow engines) and the API with the dashboard
// over it, without a listener.
type wiring struct {
	store        *store.Store
	svc          *service.Service
	handler      http.Handler
	runDir       string
	feed         *service.Feed
	hookRunEnded chan models.HookRun
}

func newWiring(tb testing.TB) wiring {
	tb.Helper()
	return newWiringWith(tb, "")
}

// newWiringWith is newWiring with the API token token ("": none).
func newWiringWith(tb testing.TB, token string) wiring {
	tb.Helper()
	ended := make(chan models.HookRun, 16)
	k := servicetest.New(tb, servicetest.WithHooks(hooks.Config{OnRunEnd: func(r models.HookRun) { ended <- r }}))
	svc := k.Service
	ui, err := web.New(web.Config{Token: token, Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return pagesNow }}, svc)
	if err != nil {
		tb.Fatal(err)
	}
	a, err := api.New(api.Config{Token: token, UI: ui.Handler(), Logs: svc}, svc)
	if err != nil {
		tb.Fatal(err)
	}
	return wiring{store: k.Store, svc: svc, handler: a.Handler(), runDir: k.RunDir, feed: k.Feed, hookRunEnded: ended}
}

// threeLevels creates project p with a three-level DAG: base (completed)
// → lint, test → ship, and docs depending on base without requiring its
// success; lint is stopped (BLOCKED), so ship is blocked by its cascade.
// It returns the tasks' ids by name.
func threeLevels(t *testing.T, st *store.Store) map[string]string {
	t.Helper()
	ctx := context.Background()
	if _, err := st.CreateProject(ctx, models.Project{ID: "p", Name: "Parser"}); err != nil {
		t.Fatal(err)
	}
	soft := false
	res, err := st.CreateTasks(ctx, models.TaskBatch{ProjectID: "p", CreatedBy: "ana", Tasks: []models.BatchTask{
		{LocalID: "base", Title: "Base"},
		{LocalID: "lint", Title: "Lint", Dependencies: []models.BatchDependency{{ID: "base"}}},
		{LocalID: "test", Title: "Test", Dependencies: []models.BatchDependency{{ID: "base"}}},
		{LocalID: "ship", Title: "Ship", Dependencies: []models.BatchDependency{{ID: "lint"}, {ID: "test"}}},
		{LocalID: "docs", Title: "Docs", Dependencies: []models.BatchDependency{{ID: "base", RequiresSuccess: &soft}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, r := range res {
		ids[r.LocalID] = r.TaskID
	}
	apply := func(name string, events ...models.TaskEvent) {
		t.Helper()
		for _, ev := range events {
			if _, err := st.ApplyEvent(ctx, models.TransitionRequest{TaskID: ids[name], Event: ev, AgentID: "a1", Actor: "test"}); err != nil {
				t.Fatalf("%s %s: %v", name, ev, err)
			}
		}
	}
	apply("base", models.EventAssigned, models.EventAgentStarted, models.EventAgentCompleted, models.EventVerifyPassed)
	apply("lint", models.EventAssigned, models.EventAgentStarted, models.EventAdminStop)
	apply("test", models.EventAssigned, models.EventAgentStarted)
	return ids
}

// svgOf returns the first <svg class="dag"...</svg> of a page.
func svgOf(t *testing.T, body string) string {
	t.Helper()
	i := strings.Index(body, `<svg xmlns="http://www.w3.org/2000/svg" class="dag"`)
	if i < 0 {
		t.Fatalf("no graph on the page:\n%s", body)
	}
	j := strings.Index(body[i:], "</svg>")
	return body[i : i+j+len("</svg>")]
}

// nodeRe finds a drawn task: its id, status and box fill.
var nodeRe = regexp.MustCompile(`class="(node[^"]*)" data-id="([^"]+)" data-status="([A-Z_]*)"><title>[^<]*</title>\s*<rect [^>]*fill="(#[0-9a-f]{6})"`)

type drawnNode struct{ classes, status, fill string }

func drawnNodes(svg string) map[string]drawnNode {
	out := map[string]drawnNode{}
	for _, m := range nodeRe.FindAllStringSubmatch(svg, -1) {
		out[m[2]] = drawnNode{classes: m[1], status: m[3], fill: m[4]}
	}
	return out
}

// named replaces the tasks' random ids by their names, for golden files.
func named(s string, ids map[string]string) string {
	names := make([]string, 0, len(ids))
	for n := range ids {
		names = append(names, n)
	}
	// Longer ids first, so that "bold-orbit-2" is not cut by "bold-orbit".
	sort.Slice(names, func(i, j int) bool { return len(ids[names[i]]) > len(ids[names[j]]) })
	for _, n := range names {
		s = strings.ReplaceAll(s, ids[n], "<"+n+">")
	}
	return s
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if got != string(want) {
		t.Fatalf("%s differs (run with -update after checking):\n%s", path, got)
	}
}

func TestProjectDAGPage(t *testing.T) {
	t.Parallel()
	e := newEngineEnv(t)
	ids := threeLevels(t, e.store)
	p := e.get("/ui/projects/p/dag")
	if p.status != http.StatusOK {
		t.Fatalf("GET dag: %d\n%s", p.status, p.body)
	}
	svg := svgOf(t, p.body)
	nodes := drawnNodes(svg)
	want := map[string]models.TaskStatus{"lint": models.StatusBlocked, "test": models.StatusInProgress,
		"ship": models.StatusBlocked, "docs": models.StatusReady}
	if len(nodes) != len(want) {
		t.Fatalf("drawn %v, want the open tasks %v (base is completed)", nodes, want)
	}
	for name, st := range want {
		n := nodes[ids[name]]
		if n.status != string(st) || n.fill != dag.StatusColor(st).Fill {
			t.Errorf("%s drawn as %+v, want %s filled %s", name, n, st, dag.StatusColor(st).Fill)
		}
	}
	if !strings.Contains(nodes[ids["lint"]].classes, "root-cause") || strings.Contains(nodes[ids["ship"]].classes, "root-cause") {
		t.Errorf("lint is the root cause of ship's block, and only it: %+v", nodes)
	}
	if !strings.Contains(svg, `<a href="/ui/tasks/`+ids["ship"]+`"`) {
		t.Errorf("ship's box does not link to its page:\n%s", svg)
	}
	i := strings.Index(p.body, `<figure class="graph">`)
	j := strings.Index(p.body, "</figure>")
	golden(t, "dag-page.html", named(p.body[i:j+len("</figure>")], ids))

	if p := e.get("/ui/projects/nope/dag"); p.status != http.StatusNotFound {
		t.Errorf("unknown project: %d", p.status)
	}
	if p := e.get("/ui/projects"); p.status != http.StatusOK || !strings.Contains(p.body, `href="/ui/projects/p/dag"`) {
		t.Errorf("projects page: %d\n%s", p.status, p.body)
	}
}

func TestTaskPageDrawsItsNeighbourhood(t *testing.T) {
	t.Parallel()
	e := newEngineEnv(t)
	ids := threeLevels(t, e.store)
	p := e.get("/ui/tasks/" + ids["ship"])
	if p.status != http.StatusOK {
		t.Fatalf("GET task: %d\n%s", p.status, p.body)
	}
	nodes := drawnNodes(svgOf(t, p.body))
	for _, name := range []string{"base", "lint", "test", "ship"} {
		if _, ok := nodes[ids[name]]; !ok {
			t.Errorf("%s is not drawn around ship: %v", name, nodes)
		}
	}
	if _, ok := nodes[ids["docs"]]; ok {
		t.Errorf("docs is no neighbour of ship within two edges but is drawn")
	}
	if !strings.Contains(nodes[ids["ship"]].classes, "focus") || !strings.Contains(nodes[ids["lint"]].classes, "root-cause") {
		t.Errorf("ship should be the focus and lint the root cause: %+v", nodes)
	}
}

// pipeline fans out its tests in two shards.
const pipeline = `name: pipeline
project: p
steps:
  - name: build
    title: Build
  - name: shards
    title: "Shard {{index}}"
    depends_on: [build]
    parallel: 2
  - name: report
    title: Report
    depends_on:
      - step: shards
        requires_success: false
`

func TestWorkflowPagesAndCancel(t *testing.T) {
	t.Parallel()
	e := newEngineEnv(t)
	ctx := context.Background()
	if _, err := e.store.CreateProject(ctx, models.Project{ID: "p", Name: "Parser"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.SaveWorkflowDocument(ctx, "pipeline.yaml", []byte(pipeline)); err != nil {
		t.Fatal(err)
	}
	run, err := e.svc.StartRun(ctx, "pipeline", "ana")
	if err != nil {
		t.Fatal(err)
	}
	if p := e.get("/ui/workflows"); p.status != http.StatusOK || !strings.Contains(p.body, `href="/ui/workflows/pipeline"`) ||
		!strings.Contains(p.body, `href="/ui/runs/`+run.ID+`"`) {
		t.Fatalf("workflows page: %d\n%s", p.status, p.body)
	}
	// The run's row counts its tasks: build READY, the two shards and the
	// report DEFINED.
	if p := e.get("/ui/workflows"); !strings.Contains(p.body,
		`<td><span class="status s-DEFINED">DEFINED 3</span> <span class="status s-READY">READY 1</span> </td>`) {
		t.Errorf("the runs' Tasks column does not count the run's tasks:\n%s", p.body)
	}
	def := e.get("/ui/workflows/pipeline")
	if def.status != http.StatusOK || !strings.Contains(def.body, `<title>shards (×2)</title>`) {
		t.Fatalf("workflow page: %d\n%s", def.status, def.body)
	}
	p := e.get("/ui/runs/" + run.ID)
	if p.status != http.StatusOK {
		t.Fatalf("run page: %d\n%s", p.status, p.body)
	}
	steps := drawnNodes(svgOf(t, p.body))
	if steps["build"].status != string(models.StatusReady) || steps["shards"].status != string(models.StatusDefined) {
		t.Errorf("steps drawn %+v: build READY, shards DEFINED", steps)
	}
	if !strings.Contains(p.body, "<title>shards — DEFINED (×2 · 0/2 done)</title>") {
		t.Errorf("the shards step does not show its fan-out:\n%s", p.body)
	}
	csrf := csrfField.FindStringSubmatch(p.body)
	if csrf == nil || !strings.Contains(p.body, `action="/ui/runs/`+run.ID+`/cancel"`) {
		t.Fatalf("no cancel form on a running run's page:\n%s", p.body)
	}
	post := e.post("/ui/runs/"+run.ID+"/cancel", url.Values{"csrf": {csrf[1]}})
	if post.status != http.StatusSeeOther || post.header.Get("Location") != "/ui/runs/"+run.ID {
		t.Fatalf("cancel: %d %s\n%s", post.status, post.header.Get("Location"), post.body)
	}
	got, err := e.svc.GetWorkflowRun(ctx, run.ID)
	if err != nil || got.Status != models.RunCancelled {
		t.Fatalf("run after cancel: %+v, %v", got, err)
	}
	p = e.get("/ui/runs/" + run.ID)
	if !strings.Contains(p.body, `data-run-status="cancelled"`) || !strings.Contains(p.body, "is cancelled") ||
		strings.Contains(p.body, "/cancel\"") || !strings.Contains(p.body, `action="/ui/runs/`+run.ID+`/retry"`) {
		t.Fatalf("the page after cancel should say so, offer retry and no cancel:\n%s", p.body)
	}
	if p := e.post("/ui/runs/"+run.ID+"/cancel", url.Values{"csrf": {"stale"}}); p.status != http.StatusForbidden {
		t.Errorf("cancel with a bad csrf token: %d", p.status)
	}
}

// reportHook is a manual hook that completes without an LLM.
const reportHook = `{"project_id":"p","name":"Report","trigger":{"type":"manual"},
	"context_steps":[{"type":"db_query","query":"task_counts"}]}`

func TestHookPagesAndFire(t *testing.T) {
	t.Parallel()
	e := newEngineEnv(t)
	ctx := progresstest.Context(t)
	if _, err := e.store.CreateProject(ctx, models.Project{ID: "p", Name: "Parser"}); err != nil {
		t.Fatal(err)
	}
	var spec models.HookSpec
	if err := json.Unmarshal([]byte(reportHook), &spec); err != nil {
		t.Fatal(err)
	}
	h, err := e.svc.CreateHook(ctx, spec.Hook())
	if err != nil {
		t.Fatal(err)
	}
	list := e.get("/ui/hooks")
	if list.status != http.StatusOK || !strings.Contains(list.body, `action="/ui/hooks/`+h.ID+`/fire"`) {
		t.Fatalf("hooks page: %d\n%s", list.status, list.body)
	}
	csrf := csrfField.FindStringSubmatch(list.body)
	post := e.post("/ui/hooks/"+h.ID+"/fire", url.Values{"csrf": {csrf[1]}})
	if post.status != http.StatusSeeOther || post.header.Get("Location") != "/ui/hooks/"+h.ID {
		t.Fatalf("fire: %d %s\n%s", post.status, post.header.Get("Location"), post.body)
	}
	var run models.HookRun
	select {
	case run = <-e.hookRunEnded:
	case <-ctx.Done():
		t.Fatal("the fired hook's run did not end")
	}
	p := e.get("/ui/hooks/" + h.ID)
	if p.status != http.StatusOK {
		t.Fatalf("hook page: %d\n%s", p.status, p.body)
	}
	for _, want := range []string{"Hook fired: run " + run.ID, `id="run-` + run.ID + `"`, "fired by web", "<summary>Context</summary>"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("hook page lacks %q:\n%s", want, p.body)
		}
	}
	if p := e.get("/ui/hooks/nope"); p.status != http.StatusNotFound {
		t.Errorf("unknown hook: %d", p.status)
	}
}

func TestBudgetPage(t *testing.T) {
	t.Parallel()
	e := newEngineEnv(t)
	ctx := context.Background()
	for _, id := range []string{"web", "api"} {
		if _, err := e.store.CreateProject(ctx, models.Project{ID: id, Name: strings.ToUpper(id)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.store.RegisterAgent(ctx, models.Agent{ID: "a1", Name: "claude-1", AgentType: "command", AgentSettings: models.AgentSettings{Command: "/bin/true"}}); err != nil {
		t.Fatal(err)
	}
	for _, u := range []models.TokenUsage{
		{ProjectID: "web", AgentID: "a1", Input: 1000, CreatedAt: pagesNow.Add(-3 * time.Hour)},
		{ProjectID: "web", AgentID: "a1", Output: 500, CreatedAt: pagesNow.Add(-time.Hour)},
		{ProjectID: "api", HookRunID: "h", Input: 250, CreatedAt: pagesNow.Add(-10 * time.Minute)},
		{ProjectID: "api", AgentID: "a1", Input: 9999, CreatedAt: pagesNow.Add(-3 * 24 * time.Hour)}, // only in 7d
	} {
		if err := e.store.RecordTokenUsage(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		query  string
		status int
		want   []string
	}{
		{"", http.StatusOK, []string{"1,750 tokens from 2026-11-27 13:00:00Z to 2026-11-28 13:00:00Z",
			`data-series="WEB"`, `data-series="API"`, `data-series="claude-1"`, `data-series="hooks (no agent)"`,
			"<title>WEB 2026-11-28 09:00: 1k tokens</title>", "<td>claude-1</td><td class=\"num\">1,500</td>"}},
		{"?span=7d", http.StatusOK, []string{"11,749 tokens", `<option value="7d" selected>`}},
		{"?span=1y", http.StatusBadRequest, []string{"span: &#34;1y&#34; is not one of"}},
	}
	for _, tc := range tests {
		p := e.get("/ui/budget" + tc.query)
		if p.status != tc.status {
			t.Errorf("GET /ui/budget%s: %d, want %d\n%s", tc.query, p.status, tc.status, p.body)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(p.body, w) {
				t.Errorf("GET /ui/budget%s lacks %q:\n%s", tc.query, w, p.body)
			}
		}
	}
}

// BenchmarkProjectDAGPage1000Tasks serves the DAG page of a project of
// 1,000 open tasks in 25 layers of 40, each depending on three tasks of
// the layer above: store read, layout, SVG and page.
func BenchmarkProjectDAGPage1000Tasks(b *testing.B) {
	w := newWiring(b)
	ctx := context.Background()
	if _, err := w.store.CreateProject(ctx, models.Project{ID: "p", Name: "P"}); err != nil {
		b.Fatal(err)
	}
	const n, width = 1000, 40
	batch := models.TaskBatch{ProjectID: "p", CreatedBy: "ana"}
	for i := range n {
		bt := models.BatchTask{LocalID: fmt.Sprintf("t%d", i), Title: fmt.Sprintf("task %d", i)}
		if i >= width {
			base := (i/width - 1) * width
			seen := map[int]bool{}
			for k := range 3 {
				up := base + (i*7+k*13)%width
				if !seen[up] {
					seen[up] = true
					bt.Dependencies = append(bt.Dependencies, models.BatchDependency{ID: fmt.Sprintf("t%d", up)})
				}
			}
		}
		batch.Tasks = append(batch.Tasks, bt)
	}
	if _, err := w.store.CreateTasks(ctx, batch); err != nil {
		b.Fatal(err)
	}
	var size int
	for b.Loop() {
		rec := httptest.NewRecorder()
		w.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/ui/projects/p/dag", nil))
		if rec.Code != http.StatusOK {
			b.Fatalf("GET: %d\n%s", rec.Code, rec.Body.String())
		}
		size = rec.Body.Len()
	}
	b.ReportMetric(float64(size), "page-bytes")
}

// TestLargeProjectDAGIsNotRedrawnLive: a project graph of more than
// MaxLiveGraphTasks tasks is drawn once: its page opens no event stream,
// its drawing is no live part, and it says to reload; a smaller one is
// redrawn on each change.
func TestLargeProjectDAGIsNotRedrawnLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	ctx := context.Background()
	tests := []struct {
		project string
		tasks   int
		live    bool
	}{
		{"small", web.MaxLiveGraphTasks, true},
		{"large", web.MaxLiveGraphTasks + 1, false},
	}
	for _, tc := range tests {
		if _, err := e.store.CreateProject(ctx, models.Project{ID: tc.project, Name: tc.project}); err != nil {
			t.Fatal(err)
		}
		b := models.TaskBatch{ProjectID: tc.project}
		for i := range tc.tasks {
			b.Tasks = append(b.Tasks, models.BatchTask{Title: fmt.Sprintf("task %d", i)})
		}
		if _, err := e.store.CreateTasks(ctx, b); err != nil {
			t.Fatal(err)
		}
		p := e.get("/ui/projects/" + tc.project + "/dag")
		if p.status != http.StatusOK {
			t.Fatalf("%s: %d\n%s", tc.project, p.status, p.body)
		}
		for what, got := range map[string]bool{
			"an event stream":           strings.Contains(p.body, `data-events=`),
			"a live drawing":            strings.Contains(p.body, `<section id="dag" data-live`),
			"no note to reload instead": !strings.Contains(p.body, "Reload the page to redraw it."),
		} {
			if got != tc.live {
				t.Errorf("the graph of %d tasks: %s is %v, want %v", tc.tasks, what, got, tc.live)
			}
		}
	}
}
