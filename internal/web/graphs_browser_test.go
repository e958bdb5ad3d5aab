package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/web/dag"
	"github.com/agentqueued/agentqueued/internal/web/webtest"
)

// graphBrowser starts headless Chromium for a test (webtest.Start) and
// returns it with the test's watchdog context, which bounds its waits.
func graphBrowser(t *testing.T) (*webtest.Browser, context.Context) {
	t.Helper()
	ctx := progresstest.Context(t)
	return webtest.Start(t, ctx), ctx
}

// rgb is a "#rrggbb" colour as getComputedStyle writes it.
func rgb(hex string) string {
	v, _ := strconv.ParseUint(strings.TrimPrefix(hex, "#"), 16, 32)
	return fmt.Sprintf("rgb(%d, %d, %d)", v>>16, v>>8&0xff, v&0xff)
}

// drawnBox is a task's box as the browser shows it.
type drawnBox struct {
	Fill    string  `json:"fill"`
	Stroke  string  `json:"stroke"`
	Y       float64 `json:"y"`
	Classes string  `json:"classes"`
	Href    string  `json:"href"`
}

const readBoxes = `(() => {
	const out = {};
	for (const n of document.querySelectorAll('svg.dag [data-id]')) {
		const r = n.querySelector('rect');
		out[n.getAttribute('data-id')] = {fill: getComputedStyle(r).fill, stroke: getComputedStyle(r).stroke, y: r.getBoundingClientRect().top,
			classes: n.getAttribute('class'), href: n.getAttribute('href') || ''};
	}
	return JSON.stringify(out);
})()`

func TestBrowserProjectDAGShowsThreeLevelsInTheirColours(t *testing.T) {
	t.Parallel()
	e := newEngineEnv(t)
	b, _ := graphBrowser(t)
	bg := context.Background()
	if _, err := e.store.CreateProject(bg, models.Project{ID: "p", Name: "Parser"}); err != nil {
		t.Fatal(err)
	}
	// base and lint start; test waits for base, pack for lint, ship for
	// both: three levels. lint is stopped, so pack and ship are blocked by
	// its cascade.
	res, err := e.store.CreateTasks(bg, models.TaskBatch{ProjectID: "p", CreatedBy: "ana", Tasks: []models.BatchTask{
		{LocalID: "base", Title: "Base"},
		{LocalID: "lint", Title: "Lint"},
		{LocalID: "test", Title: "Test", Dependencies: []models.BatchDependency{{ID: "base"}}},
		{LocalID: "pack", Title: "Pack", Dependencies: []models.BatchDependency{{ID: "lint"}}},
		{LocalID: "ship", Title: "Ship", Dependencies: []models.BatchDependency{{ID: "test"}, {ID: "pack"}}},
		{LocalID: "gate", Title: "Gate"},
		{LocalID: "land", Title: "Land"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, r := range res {
		ids[r.LocalID] = r.TaskID
	}
	for _, step := range []struct {
		task   string
		events []models.TaskEvent
	}{
		{"base", []models.TaskEvent{models.EventAssigned, models.EventAgentStarted}},
		{"lint", []models.TaskEvent{models.EventAssigned, models.EventAgentStarted, models.EventAdminStop}},
		// gate waits for a person's approval, land is verified (or waits
		// to land): drawn apart.
		{"gate", []models.TaskEvent{models.EventAssigned, models.EventAgentStarted, models.EventAgentCompleted, models.EventApprovalRequested}},
		{"land", []models.TaskEvent{models.EventAssigned, models.EventAgentStarted, models.EventAgentCompleted}},
	} {
		for _, ev := range step.events {
			if _, err := e.store.ApplyEvent(bg, models.TransitionRequest{TaskID: ids[step.task], Event: ev, AgentID: "a1", Actor: "test"}); err != nil {
				t.Fatalf("%s %s: %v", step.task, ev, err)
			}
		}
	}
	b.Do("open the DAG page", chromedp.Navigate(e.srv.URL+"/ui/projects/p/dag"), chromedp.WaitVisible(chromedp.CSS(`svg.dag`)))
	ctx, cancel := b.Context()
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](readBoxes))
	if err != nil {
		t.Fatal(err)
	}
	var boxes map[string]drawnBox
	if err := json.Unmarshal([]byte(raw), &boxes); err != nil {
		t.Fatal(err)
	}
	want := map[string]models.TaskStatus{"base": models.StatusInProgress, "lint": models.StatusBlocked,
		"test": models.StatusDefined, "pack": models.StatusBlocked, "ship": models.StatusBlocked,
		"gate": models.StatusAwaitingApproval, "land": models.StatusVerifying}
	for name, st := range want {
		b, ok := boxes[ids[name]]
		if !ok {
			t.Fatalf("%s is not drawn: %v", name, boxes)
		}
		if b.Fill != rgb(dag.StatusColor(st).Fill) {
			t.Errorf("%s (%s) is filled %s, want %s", name, st, b.Fill, rgb(dag.StatusColor(st).Fill))
		}
		if b.Href != "/ui/tasks/"+ids[name] {
			t.Errorf("%s links to %q", name, b.Href)
		}
	}
	if gate, land := boxes[ids["gate"]], boxes[ids["land"]]; gate.Fill == land.Fill ||
		gate.Stroke != rgb(dag.StatusColor(models.StatusAwaitingApproval).Stroke) || gate.Stroke == land.Stroke {
		t.Errorf("a task waiting for approval is drawn like one being verified: %+v, %+v", gate, land)
	}
	y := func(name string) float64 { return boxes[ids[name]].Y }
	if !(y("base") == y("lint") && y("lint") < y("test") && y("test") == y("pack") && y("pack") < y("ship")) {
		t.Errorf("not three levels, upstreams above: %+v", boxes)
	}
	if !strings.Contains(boxes[ids["lint"]].Classes, "root-cause") || strings.Contains(boxes[ids["pack"]].Classes, "root-cause") {
		t.Errorf("lint alone should be outlined as the root cause: %+v", boxes)
	}
	// A box is a link to its task.
	b.Do("open ship from its box", chromedp.Click(chromedp.CSS(`svg.dag [data-id="`+ids["ship"]+`"] rect`)),
		chromedp.WaitVisible(chromedp.CSS(`#task-deps svg.dag`)))
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(title, "Ship") {
		t.Errorf("clicking ship's box opened %q", title)
	}
}

func TestBrowserCancelsAWorkflowRun(t *testing.T) {
	t.Parallel()
	e := newEngineEnv(t)
	b, _ := graphBrowser(t)
	bg := context.Background()
	if _, err := e.store.CreateProject(bg, models.Project{ID: "p", Name: "Parser"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.SaveWorkflowDocument(bg, "pipeline.yaml", []byte(pipeline)); err != nil {
		t.Fatal(err)
	}
	run, err := e.svc.StartRun(bg, "pipeline", "ana")
	if err != nil {
		t.Fatal(err)
	}
	b.Do("cancel the run from its page", chromedp.Navigate(e.srv.URL+"/ui/runs/"+run.ID),
		chromedp.WaitVisible(chromedp.CSS(`svg.dag [data-id="shards"]`)),
		chromedp.Click(chromedp.CSS(`form[action$="/cancel"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-run-status="cancelled"]`)))
	flash := b.Text(`p.flash`)
	if !strings.Contains(flash, "is cancelled") {
		t.Errorf("flash after cancel: %q", flash)
	}
	got, err := e.svc.GetWorkflowRun(bg, run.ID)
	if err != nil || got.Status != models.RunCancelled {
		t.Fatalf("run after the page's cancel: %+v, %v", got, err)
	}
}

func TestBrowserFiresAHook(t *testing.T) {
	t.Parallel()
	e := newEngineEnv(t)
	b, ctx := graphBrowser(t)
	bg := context.Background()
	if _, err := e.store.CreateProject(bg, models.Project{ID: "p", Name: "Parser"}); err != nil {
		t.Fatal(err)
	}
	var spec models.HookSpec
	if err := json.Unmarshal([]byte(reportHook), &spec); err != nil {
		t.Fatal(err)
	}
	h, err := e.svc.CreateHook(bg, spec.Hook())
	if err != nil {
		t.Fatal(err)
	}
	b.Do("fire the hook from the hooks page", chromedp.Navigate(e.srv.URL+"/ui/hooks"),
		chromedp.Click(chromedp.CSS(`form[action="/ui/hooks/`+h.ID+`/fire"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`p.flash`)))
	flash := b.Text(`p.flash`)
	if !strings.HasPrefix(flash, "Hook fired: run ") {
		t.Fatalf("flash after fire: %q", flash)
	}
	var run models.HookRun
	select {
	case run = <-e.hookRunEnded:
	case <-ctx.Done():
		t.Fatal("the hook fired from the page did not run")
	}
	if run.HookID != h.ID || run.TriggerReason != models.TriggerReasonManual || run.TriggerDetail != "fired by web" {
		t.Errorf("run %+v", run)
	}
	b.Do("see the run on the hook's page", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#run-`+cssID(run.ID))))
	card := b.Text(`#run-` + cssID(run.ID))
	if !strings.Contains(card, string(run.Status)) {
		t.Errorf("the run's card %q lacks its status %s", card, run.Status)
	}
}

// cssID escapes an id for a CSS selector ("report.1" → "report\\.1").
func cssID(id string) string { return strings.ReplaceAll(id, ".", `\.`) }
