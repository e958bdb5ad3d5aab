package workflow_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
	"github.com/agentqueued/agentqueued/internal/workflow"
)

// storeTasks applies events straight to the store (no agent runs in
// these tests).
type storeTasks struct{ st *store.Store }

func (s storeTasks) ApplyAdminEvent(ctx context.Context, req models.TransitionRequest) (models.TransitionResult, error) {
	return s.st.ApplyEvent(ctx, req)
}

type env struct {
	t     *testing.T
	dir   string
	path  string
	clock *clocktest.Fake
	st    *store.Store
	eng   *workflow.Engine
}

const nightly = `
name: nightly
project: web
schedule: "0 2 * * *"
timezone: Europe/Paris
steps:
  - name: only
    title: Do the nightly thing
`

func newEnv(t *testing.T, files map[string]string) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), clock: clocktest.New(time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC))}
	e.path = filepath.Join(e.dir, "db.sqlite")
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(e.dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e.open()
	if _, err := e.st.CreateProject(context.Background(), models.Project{ID: "web"}); err != nil {
		t.Fatal(err)
	}
	e.eng = e.engine(e.st)
	if err := e.eng.LoadDir(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) open() {
	e.t.Helper()
	st := storetest.OpenAt(e.t, e.path, storetest.WithClock(e.clock))
	e.st = st
	e.t.Cleanup(func() { _ = st.Close() })
}

func (e *env) engine(st *store.Store) *workflow.Engine {
	e.t.Helper()
	eng, err := workflow.New(workflow.Config{Dir: e.dir, Clock: e.clock}, st, storeTasks{st})
	if err != nil {
		e.t.Fatal(err)
	}
	return eng
}

func (e *env) tick(eng *workflow.Engine) time.Time {
	e.t.Helper()
	next, err := eng.Tick(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return next
}

func (e *env) runs() []models.WorkflowRun {
	e.t.Helper()
	rs, err := e.st.ListWorkflowRuns(context.Background(), models.RunFilter{Workflow: "nightly"})
	if err != nil {
		e.t.Fatal(err)
	}
	return rs
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestScheduledRunsStartOncePerTimeAcrossConcurrentPassesAndRestarts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{"nightly.yaml": nightly})
	// 02:00 in Paris is 01:00 UTC in March.
	if next := e.tick(e.eng); !next.Equal(at("2026-03-03T01:00:00Z")) {
		t.Fatalf("next = %s", next)
	}
	w, err := e.st.GetWorkflow(context.Background(), "nightly")
	if err != nil || w.NextRun == nil || !w.NextRun.Equal(at("2026-03-03T01:00:00Z")) || w.Origin != models.WorkflowFromFile {
		t.Fatalf("workflow %+v, %v", w, err)
	}
	// A second daemon's view of the same database.
	other := storetest.OpenAt(t, e.path, storetest.WithClock(e.clock))
	second := e.engine(other)
	for day := 3; day <= 7; day++ {
		e.clock.Set(time.Date(2026, 3, day, 1, 0, 0, 0, time.UTC))
		var wg sync.WaitGroup
		for _, eng := range []*workflow.Engine{e.eng, second} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := eng.Tick(context.Background()); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	if n := len(e.runs()); n != 5 {
		t.Fatalf("%d runs for 5 scheduled times", n)
	}
	// A restart at the same instant starts nothing more.
	if err := e.st.Close(); err != nil {
		t.Fatal(err)
	}
	e.open()
	e.eng = e.engine(e.st)
	if err := e.eng.LoadDir(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.tick(e.eng)
	rs := e.runs()
	if len(rs) != 5 || rs[0].Trigger != models.TriggerBySchedule || !rs[0].ScheduledAt.Equal(at("2026-03-07T01:00:00Z")) {
		t.Fatalf("after the restart: %d runs, newest %+v", len(rs), rs[0])
	}
	if r, err := e.st.GetWorkflowRun(context.Background(), rs[0].ID); err != nil || r.Tasks[models.StatusReady] != 1 {
		t.Fatalf("the run's task: %+v, %v", r.Tasks, err)
	}
}

func TestAfterDowntimeOneCatchUpRunStarts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{"nightly.yaml": nightly})
	e.tick(e.eng)
	// Down from before the 3rd's run until the 6th at noon.
	e.clock.Set(at("2026-03-06T12:00:00Z"))
	e.tick(e.eng)
	e.tick(e.eng)
	rs := e.runs()
	if len(rs) != 1 || !rs[0].ScheduledAt.Equal(at("2026-03-06T01:00:00Z")) ||
		rs[0].TriggeredBy != "schedule (catch-up after downtime: 3 earlier scheduled times missed)" {
		t.Fatalf("runs %+v", rs)
	}
}

func TestADisabledScheduleStartsNothingAndResumesFromNow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{"nightly.yaml": nightly})
	if _, err := e.st.SetWorkflowSchedule(context.Background(), "nightly", false); err != nil {
		t.Fatal(err)
	}
	e.clock.Set(at("2026-03-05T12:00:00Z"))
	e.tick(e.eng)
	if n := len(e.runs()); n != 0 {
		t.Fatalf("%d runs while disabled", n)
	}
	if _, err := e.st.SetWorkflowSchedule(context.Background(), "nightly", true); err != nil {
		t.Fatal(err)
	}
	// No catch-up for the nights it was off.
	e.tick(e.eng)
	if n := len(e.runs()); n != 0 {
		t.Fatalf("%d runs right after enabling", n)
	}
	e.clock.Set(at("2026-03-06T01:00:00Z"))
	e.tick(e.eng)
	if rs := e.runs(); len(rs) != 1 || !rs[0].ScheduledAt.Equal(at("2026-03-06T01:00:00Z")) {
		t.Fatalf("runs %+v", rs)
	}
}

func TestInvalidWorkflowFilesStopTheStartWithTheirLines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"good.yaml": nightly,
		"bad.yaml":  "name: bad\nproject: web\nsteps:\n  - name: a\n    title: A\n    depends_on: [b]\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	st := storetest.OpenAt(t, filepath.Join(dir, "db.sqlite"))
	if _, err := st.CreateProject(context.Background(), models.Project{ID: "web"}); err != nil {
		t.Fatal(err)
	}
	eng, err := workflow.New(workflow.Config{Dir: dir}, st, storeTasks{st})
	if err != nil {
		t.Fatal(err)
	}
	err = eng.LoadDir(context.Background())
	want := filepath.Join(dir, "bad.yaml") + `:6:18: steps[0].depends_on[0]: unknown step "b"`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("load: %v\nwant it to contain %s", err, want)
	}
	if ws, _ := st.ListWorkflows(context.Background(), ""); len(ws) != 0 {
		t.Fatalf("saved %d workflows from a directory with an invalid file", len(ws))
	}
}

func TestCancelStopsEveryTaskAndRetryRestartsThem(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{"pipe.yaml": `
name: pipe
project: web
steps:
  - name: fix
    title: Fix
  - name: test
    title: Test
    depends_on: [fix]
  - name: document
    title: Document
    depends_on: [test]
`})
	ctx := context.Background()
	run, err := e.eng.Trigger(ctx, "pipe", "ann")
	if err != nil || run.Status != models.RunPending || run.TriggeredBy != "ann" {
		t.Fatalf("trigger: %+v %v", run, err)
	}
	got, err := e.eng.Cancel(ctx, run.ID, "ann")
	if err != nil || got.Status != models.RunCancelled || got.Tasks[models.StatusBlocked] != 3 {
		t.Fatalf("cancel: %+v %v", got, err)
	}
	got, err = e.eng.Retry(ctx, run.ID, "bob")
	if err != nil || got.Status != models.RunPending || got.Tasks[models.StatusReady] != 1 || got.Tasks[models.StatusDefined] != 2 {
		t.Fatalf("retry: %+v %v", got, err)
	}
}

func TestWorkflowFilesNamingUnknownProfilesAreRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	doc := "name: p\nproject: web\nsteps:\n  - name: a\n    title: A\n    profile: cheap\n  - name: b\n    title: B\n    profile: gold\n"
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	st := storetest.OpenAt(t, filepath.Join(dir, "db.sqlite"))
	eng, err := workflow.New(workflow.Config{Dir: dir, KnownProfile: func(p string) bool { return p == "cheap" }}, st, storeTasks{st})
	if err != nil {
		t.Fatal(err)
	}
	err = eng.LoadDir(context.Background())
	want := filepath.Join(dir, "p.yaml") + `: steps[1] (b).profile: no profile "gold" is configured`
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "cheap") {
		t.Fatalf("load: %v", err)
	}
}

// A schedule a person switched off stays off when the daemon starts again
// and reads the unchanged file; a file that changes its own
// schedule_enabled is obeyed.
func TestAScheduleSwitchedOffStaysOffAcrossRestarts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, map[string]string{"nightly.yaml": nightly})
	enabled := func() bool {
		t.Helper()
		w, err := e.st.GetWorkflow(ctx, "nightly")
		if err != nil {
			t.Fatal(err)
		}
		return w.ScheduleEnabled
	}
	if _, err := e.st.SetWorkflowSchedule(ctx, "nightly", false); err != nil {
		t.Fatal(err)
	}
	// A restart reads the same file again.
	if err := e.engine(e.st).LoadDir(ctx); err != nil {
		t.Fatal(err)
	}
	if enabled() {
		t.Fatal("the schedule switched off is on again after a restart")
	}
	e.clock.Set(at("2026-03-05T12:00:00Z"))
	e.tick(e.engine(e.st))
	if n := len(e.runs()); n != 0 {
		t.Fatalf("%d runs of a schedule switched off", n)
	}
	// The file turns it off itself, then on: the file's change wins.
	for _, c := range []struct {
		doc  string
		want bool
	}{
		{nightly + "schedule_enabled: false\n", false},
		{nightly + "schedule_enabled: true\n", true},
		{nightly, true},
	} {
		if err := os.WriteFile(filepath.Join(e.dir, "nightly.yaml"), []byte(c.doc), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := e.engine(e.st).LoadDir(ctx); err != nil {
			t.Fatal(err)
		}
		if got := enabled(); got != c.want {
			t.Fatalf("schedule_enabled %v after loading\n%s\nwant %v", got, c.doc, c.want)
		}
	}
	// Switched on by a person and read again: stays on.
	if _, err := e.st.SetWorkflowSchedule(ctx, "nightly", false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.SetWorkflowSchedule(ctx, "nightly", true); err != nil {
		t.Fatal(err)
	}
	if err := e.engine(e.st).LoadDir(ctx); err != nil {
		t.Fatal(err)
	}
	if !enabled() {
		t.Fatal("the schedule switched on is off after a restart")
	}
}
