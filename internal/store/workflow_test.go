package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/workflow"
)

// fanOutFlow discovers items, fans out over them and fans in.
const fanOutFlow = `
name: sweep
project: web
steps:
  - name: discover
    title: Find packages
  - name: fix
    title: "Fix {{item}}"
    depends_on: [discover]
    foreach: discover.outputs.packages
    concurrency: 2
  - name: shards
    title: "Shard {{index}} of {{count}}"
    depends_on: [discover]
    parallel: discover.outputs.shards
  - name: summary
    title: Summarise
    depends_on:
      - step: fix
        requires_success: false
      - step: shards
`

type wfEnv struct {
	t  *testing.T
	s  *store.Store
	id int
}

func newWFEnv(t *testing.T, doc string) *wfEnv {
	t.Helper()
	s, _ := openClocked(t)
	mustProject(t, s, "web")
	mustAgent(t, s, "a1")
	w, err := workflow.Parse("flow.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	w.Origin = models.WorkflowFromAPI
	if _, err := s.SaveWorkflow(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	return &wfEnv{t: t, s: s}
}

// start starts a run of the workflow by hand.
func (e *wfEnv) start(name string) models.WorkflowRun {
	e.t.Helper()
	e.id++
	r, dup, err := e.s.StartWorkflowRun(context.Background(), models.RunRequest{Workflow: name, Trigger: models.TriggerByHand,
		TriggeredBy: "t", FireKey: fmt.Sprintf("manual:%d", e.id)})
	if err != nil || dup {
		e.t.Fatalf("start: %v (duplicate %v)", err, dup)
	}
	return r
}

// tasks returns the run's tasks by name.
func (e *wfEnv) tasks(runID string) map[string]models.RunTask {
	e.t.Helper()
	ts, err := e.s.RunTasks(context.Background(), runID)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]models.RunTask{}
	for _, t := range ts {
		out[t.Name] = t
	}
	return out
}

func (e *wfEnv) names(runID string) string {
	var ns []string
	for n, t := range e.tasks(runID) {
		ns = append(ns, n+"="+string(t.Status))
	}
	sort.Strings(ns)
	return strings.Join(ns, " ")
}

// apply applies events to a task.
func (e *wfEnv) apply(id string, evs ...models.TaskEvent) {
	e.t.Helper()
	for _, ev := range evs {
		if _, err := e.s.ApplyEvent(context.Background(), models.TransitionRequest{TaskID: id, Event: ev, AgentID: "a1", Actor: "t"}); err != nil {
			e.t.Fatalf("%s on %s: %v", ev, id, err)
		}
	}
}

// complete runs a READY task to COMPLETED, reporting outputs.
func (e *wfEnv) complete(id, outputs string) {
	e.t.Helper()
	e.apply(id, models.EventAssigned, models.EventAgentStarted)
	if outputs != "" {
		if err := e.s.SaveResult(context.Background(), id, 0, models.Completion{Summary: "done", Outputs: json.RawMessage(outputs)}); err != nil {
			e.t.Fatal(err)
		}
	}
	e.apply(id, models.EventAgentCompleted, models.EventVerifyPassed)
}

// fail runs a READY task to BLOCKED.
func (e *wfEnv) fail(id string) {
	e.t.Helper()
	e.apply(id, models.EventAssigned, models.EventAgentStarted, models.EventMaxRetries)
}

// retry retries a run as the workflow engine does, and returns the event
// each task got.
func (e *wfEnv) retry(runID string) map[string]models.TaskEvent {
	e.t.Helper()
	ctx := context.Background()
	ts, err := e.s.RetryWorkflowRun(ctx, runID)
	if err != nil {
		e.t.Fatal(err)
	}
	events := map[string]models.TaskEvent{}
	for _, t := range ts {
		req, ok, err := e.s.RetryEvent(ctx, t.ID, "retried")
		if err != nil {
			e.t.Fatal(err)
		}
		if !ok {
			continue
		}
		events[t.ID] = req.Event
		if _, err := e.s.ApplyEvent(ctx, req); err != nil {
			e.t.Fatal(err)
		}
	}
	return events
}

func (e *wfEnv) run(id string) models.WorkflowRun {
	e.t.Helper()
	r, err := e.s.GetWorkflowRun(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func TestARunFansOutOverItemsAndCountsAndFansIn(t *testing.T) {
	t.Parallel()
	e := newWFEnv(t, fanOutFlow)
	r := e.start("sweep")
	if r.ID != "sweep-1" || r.Status != models.RunPending {
		t.Fatalf("run %+v", r)
	}
	// Only the first step and the fan-in exist; the fan-in waits.
	if got := e.names(r.ID); got != "discover=READY summary=DEFINED" {
		t.Fatalf("tasks at the start: %s", got)
	}
	ts := e.tasks(r.ID)
	if d := ts["discover"]; d.RunID != r.ID || d.StepName != "discover" || d.CreatedBy != "workflow:sweep" || d.Metadata["workflow_run"] != r.ID {
		t.Fatalf("discover task %+v", d.Task)
	}
	e.complete(ts["discover"].ID, `{"packages":["api","db","ui"],"shards":2}`)
	if got := e.names(r.ID); got != "discover=COMPLETED fix[0]=READY fix[1]=READY fix[2]=READY shards[0]=READY shards[1]=READY summary=DEFINED" {
		t.Fatalf("tasks after discovery: %s", got)
	}
	ts = e.tasks(r.ID)
	if f := ts["fix[1]"]; f.Title != "Fix db" || f.ParallelCount != 3 || f.StepConcurrency != 2 || f.Metadata["item"] != "db" {
		t.Fatalf("fix[1] %+v", f.Task)
	}
	if s := ts["shards[1]"]; s.Title != "Shard 1 of 2" {
		t.Fatalf("shards[1] title %q", s.Title)
	}
	if got := e.run(r.ID).Status; got != models.RunRunning {
		t.Fatalf("run %s", got)
	}
	// A soft edge: one fix failing does not hold the summary back.
	e.complete(ts["fix[0]"].ID, "")
	e.fail(ts["fix[1]"].ID)
	e.complete(ts["fix[2]"].ID, "")
	e.complete(ts["shards[0]"].ID, "")
	if st := e.tasks(r.ID)["summary"].Status; st != models.StatusDefined {
		t.Fatalf("summary %s before the last shard", st)
	}
	e.complete(ts["shards[1]"].ID, "")
	if st := e.tasks(r.ID)["summary"].Status; st != models.StatusReady {
		t.Fatalf("summary %s after the last shard", st)
	}
	e.complete(ts["summary"].ID, "")
	// fix[1] is BLOCKED: the run cannot succeed, and nothing can go on.
	if got := e.run(r.ID); got.Status != models.RunFailed || !strings.Contains(got.Reason, ts["fix[1]"].ID) || got.EndedAt == nil {
		t.Fatalf("run %+v", got)
	}
}

func TestAnEmptyFanOutLetsTheStepsAfterItGoOn(t *testing.T) {
	t.Parallel()
	e := newWFEnv(t, fanOutFlow)
	r := e.start("sweep")
	e.complete(e.tasks(r.ID)["discover"].ID, `{"packages":[],"shards":0}`)
	if got := e.names(r.ID); got != "discover=COMPLETED summary=READY" {
		t.Fatalf("tasks: %s", got)
	}
	e.complete(e.tasks(r.ID)["summary"].ID, "")
	if got := e.run(r.ID); got.Status != models.RunSuccess || got.Tasks[models.StatusCompleted] != 2 {
		t.Fatalf("run %+v", got)
	}
	notices, err := e.s.PendingOutbox(context.Background(), 100)
	if err != nil {
		t.Fatal(err)
	}
	ended := 0
	for _, n := range notices {
		if n.Kind == "run.success" && strings.Contains(n.Payload, r.ID) {
			ended++
		}
	}
	if ended != 1 {
		t.Fatalf("%d run.success notices", ended)
	}
}

func TestAnUnreadableFanOutStopsItsStepWithTheReason(t *testing.T) {
	t.Parallel()
	e := newWFEnv(t, fanOutFlow)
	r := e.start("sweep")
	e.complete(e.tasks(r.ID)["discover"].ID, `{"packages":"api db","shards":1}`)
	ts := e.tasks(r.ID)
	fix := ts["fix"]
	if fix.Status != models.StatusBlocked || !strings.Contains(fix.StatusReason, "fan-out failed: foreach: discover.outputs.packages is not a list") {
		t.Fatalf("fix %s %q (tasks %s)", fix.Status, fix.StatusReason, e.names(r.ID))
	}
	// The summary's edge to fix is soft: it waits for the shard only.
	e.complete(ts["shards[0]"].ID, "")
	if st := e.tasks(r.ID)["summary"].Status; st != models.StatusReady {
		t.Fatalf("summary %s", st)
	}
}

func TestACompletionAppliedTwiceExpandsOnce(t *testing.T) {
	t.Parallel()
	e := newWFEnv(t, fanOutFlow)
	r := e.start("sweep")
	d := e.tasks(r.ID)["discover"].ID
	e.complete(d, `{"packages":["a","b"],"shards":1}`)
	res, err := e.s.ApplyEvent(context.Background(), models.TransitionRequest{TaskID: d, Event: models.EventVerifyPassed, Actor: "t"})
	if err != nil || !res.Duplicate {
		t.Fatalf("the completion again: %+v %v", res, err)
	}
	if n := len(e.tasks(r.ID)); n != 5 {
		t.Fatalf("%d tasks: %s", n, e.names(r.ID))
	}
}

func TestCancelAndRetryOfARun(t *testing.T) {
	t.Parallel()
	e := newWFEnv(t, fanOutFlow)
	ctx := context.Background()
	r := e.start("sweep")
	e.complete(e.tasks(r.ID)["discover"].ID, `{"packages":["a","b"],"shards":1}`)
	ts := e.tasks(r.ID)
	e.apply(ts["fix[0]"].ID, models.EventAssigned, models.EventAgentStarted)
	left, err := e.s.CancelWorkflowRun(ctx, r.ID, "ann")
	if err != nil || len(left) != 4 {
		t.Fatalf("cancel: %d tasks left, %v", len(left), err)
	}
	// A READY task of a cancelled run is not claimed.
	if _, _, err := e.s.ClaimTask(ctx, ts["fix[1]"].ID, "a1"); models.ErrorCodeOf(err) != models.CodeConflict {
		t.Fatalf("claim in a cancelled run: %v", err)
	}
	for _, lt := range left {
		if _, err := e.s.ApplyEvent(ctx, models.TransitionRequest{TaskID: lt.ID, Event: models.EventRunStopped, ExpectFrom: lt.Status,
			Reason: "cancelled", Actor: "ann"}); err != nil && models.ErrorCodeOf(err) != models.CodeConflict {
			t.Fatal(err)
		}
	}
	if again, _ := e.s.CancelWorkflowRun(ctx, r.ID, "ann"); len(again) != 0 {
		t.Fatalf("still unfinished after the stops: %s", e.names(r.ID))
	}
	got := e.run(r.ID)
	if got.Status != models.RunCancelled || got.Reason != "cancelled by ann" {
		t.Fatalf("run %+v", got)
	}
	for n, tk := range e.tasks(r.ID) {
		if n != "discover" && (tk.Status != models.StatusBlocked || !strings.Contains(tk.StatusReason, "cancelled")) {
			t.Errorf("%s: %s %q", n, tk.Status, tk.StatusReason)
		}
	}
	// Retry: the stopped tasks start again; the summary, blocked behind a
	// stopped upstream, goes back to waiting with it.
	events := e.retry(r.ID)
	if len(events) != 3 || events[ts["fix[0]"].ID] != models.EventAdminRestart || events[ts["summary"].ID] != "" {
		t.Fatalf("retry events %v", events)
	}
	if got := e.names(r.ID); got != "discover=COMPLETED fix[0]=READY fix[1]=READY shards[0]=READY summary=DEFINED" {
		t.Fatalf("after retry: %s", got)
	}
	if st := e.run(r.ID).Status; st != models.RunRunning {
		t.Fatalf("run %s after retry", st)
	}
	for _, n := range []string{"fix[0]", "fix[1]", "shards[0]"} {
		e.complete(e.tasks(r.ID)[n].ID, "")
	}
	e.complete(e.tasks(r.ID)["summary"].ID, "")
	if st := e.run(r.ID).Status; st != models.RunSuccess {
		t.Fatalf("run %s at the end (%s)", st, e.names(r.ID))
	}
	if _, err := e.s.CancelWorkflowRun(ctx, r.ID, "ann"); models.ErrorCodeOf(err) != models.CodeConflict {
		t.Fatalf("cancel of a finished run: %v", err)
	}
	if _, err := e.s.RetryWorkflowRun(ctx, r.ID); models.ErrorCodeOf(err) != models.CodeConflict {
		t.Fatalf("retry of a successful run: %v", err)
	}
}

func TestRetryRestartsOnlyFailedAndBlockedTasks(t *testing.T) {
	t.Parallel()
	e := newWFEnv(t, fanOutFlow)
	r := e.start("sweep")
	e.complete(e.tasks(r.ID)["discover"].ID, `{"packages":["a","b"],"shards":1}`)
	ts := e.tasks(r.ID)
	e.complete(ts["fix[0]"].ID, "")
	e.fail(ts["fix[1]"].ID)
	e.fail(ts["shards[0]"].ID) // blocks the summary behind it (cascade)
	if st := e.run(r.ID); st.Status != models.RunFailed {
		t.Fatalf("run %+v", st)
	}
	var ids []string
	for id := range e.retry(r.ID) {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	want := []string{ts["fix[1]"].ID, ts["shards[0]"].ID}
	sort.Strings(want)
	if strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Fatalf("retried %v, want %v", ids, want)
	}
	if got := e.names(r.ID); got != "discover=COMPLETED fix[0]=COMPLETED fix[1]=READY shards[0]=READY summary=DEFINED" {
		t.Fatalf("after retry: %s", got)
	}
}

func TestATaskStoppedBeforeItsUpstreamWaitsAgainAfterRetry(t *testing.T) {
	t.Parallel()
	e := newWFEnv(t, fanOutFlow)
	ctx := context.Background()
	r := e.start("sweep")
	ts := e.tasks(r.ID)
	if _, err := e.s.CancelWorkflowRun(ctx, r.ID, "ann"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"summary", "discover"} {
		if _, err := e.s.ApplyEvent(ctx, models.TransitionRequest{TaskID: ts[n].ID, Event: models.EventRunStopped, Reason: "cancelled"}); err != nil {
			t.Fatal(err)
		}
	}
	events := e.retry(r.ID)
	if events[ts["discover"].ID] != models.EventAdminRestart || events[ts["summary"].ID] != models.EventUpstreamReopened {
		t.Fatalf("retry events %v", events)
	}
	if got := e.names(r.ID); got != "discover=READY summary=DEFINED" {
		t.Fatalf("after retry: %s", got)
	}
}

func TestAStaticParallelStepHasItsTasksFromTheStart(t *testing.T) {
	t.Parallel()
	e := newWFEnv(t, `
name: shard
project: web
steps:
  - name: prepare
    title: Prepare
  - name: work
    title: "Shard {{index}} of {{count}}"
    depends_on: [prepare]
    parallel: 3
  - name: merge
    title: Merge
    depends_on: [work]
`)
	r := e.start("shard")
	if got := e.names(r.ID); got != "merge=DEFINED prepare=READY work[0]=DEFINED work[1]=DEFINED work[2]=DEFINED" {
		t.Fatalf("tasks: %s", got)
	}
	ts := e.tasks(r.ID)
	if w := ts["work[2]"]; w.Title != "Shard 2 of 3" || w.ParallelIndex != 2 || w.ParallelCount != 3 {
		t.Fatalf("work[2] %+v", w.Task)
	}
	e.complete(ts["prepare"].ID, "")
	for i := range 3 {
		e.complete(ts[fmt.Sprintf("work[%d]", i)].ID, "")
	}
	e.complete(ts["merge"].ID, "")
	if got := e.run(r.ID); got.Status != models.RunSuccess || got.Tasks[models.StatusCompleted] != 5 {
		t.Fatalf("run %+v", got)
	}
}

func TestARetriedRunsSoftFanInWaitsForItsUpstreamsAgain(t *testing.T) {
	t.Parallel()
	e := newWFEnv(t, `
name: soft
project: web
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
`)
	ctx := context.Background()
	r := e.start("soft")
	left, err := e.s.CancelWorkflowRun(ctx, r.ID, "ann")
	if err != nil {
		t.Fatal(err)
	}
	// Stopping build blocks the shards behind it, which lets report (soft
	// edges) become READY before it is stopped in turn.
	for pass := 0; len(left) > 0 && pass < 5; pass++ {
		for _, lt := range left {
			_, _ = e.s.ApplyEvent(ctx, models.TransitionRequest{TaskID: lt.ID, Event: models.EventRunStopped, ExpectFrom: lt.Status, Reason: "cancelled"})
		}
		if left, err = e.s.CancelWorkflowRun(ctx, r.ID, "ann"); err != nil {
			t.Fatal(err)
		}
	}
	if rep := e.tasks(r.ID)["report"]; rep.Status != models.StatusBlocked || rep.CascadeRootID != "" {
		t.Fatalf("report %s (root %q)", rep.Status, rep.CascadeRootID)
	}
	e.retry(r.ID)
	if got := e.names(r.ID); got != "build=READY report=DEFINED shards[0]=DEFINED shards[1]=DEFINED" {
		t.Fatalf("after retry: %s", got)
	}
}
