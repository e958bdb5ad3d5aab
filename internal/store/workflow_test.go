package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
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
	t     testing.TB
	s     *store.Store
	clock *clocktest.Fake
	id    int
}

func newWFEnv(t testing.TB, doc string) *wfEnv {
	t.Helper()
	s, clock := openClocked(t)
	storetest.Project(t, s, "web")
	storetest.Agent(t, s, "a1")
	w, err := workflow.Parse("flow.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	w.Origin = models.WorkflowFromAPI
	if _, err := s.SaveWorkflow(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	return &wfEnv{t: t, s: s, clock: clock}
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

// retry retries a run and returns the last event of each task.
func (e *wfEnv) retry(runID string) map[string]models.TaskEvent {
	e.t.Helper()
	if _, err := e.s.RetryWorkflowRun(context.Background(), runID, "t"); err != nil {
		e.t.Fatal(err)
	}
	return e.lastEvents(runID)
}

// lastEvents returns the last event of each task of a run, by name.
func (e *wfEnv) lastEvents(runID string) map[string]models.TaskEvent {
	e.t.Helper()
	out := map[string]models.TaskEvent{}
	for name, t := range e.tasks(runID) {
		d, err := e.s.GetTaskDetail(context.Background(), t.ID)
		if err != nil {
			e.t.Fatal(err)
		}
		out[name] = d.Events[len(d.Events)-1].Event
	}
	return out
}

// cancel cancels a run as the workflow engine does, stopping the running
// tasks as the orchestrator would.
func (e *wfEnv) cancel(runID string) {
	e.t.Helper()
	ctx := context.Background()
	for range 5 {
		running, err := e.s.CancelWorkflowRun(ctx, runID, "ann")
		if err != nil {
			e.t.Fatal(err)
		}
		if len(running) == 0 {
			return
		}
		for _, t := range running {
			if _, err := e.s.ApplyEvent(ctx, models.TransitionRequest{TaskID: t.ID, Event: models.EventRunStopped, ExpectFrom: t.Status,
				Reason: "cancelled", Actor: "ann"}); err != nil && models.ErrorCodeOf(err) != models.CodeConflict {
				e.t.Fatal(err)
			}
		}
	}
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
	// Only the first step exists: the others come after a fan-out over
	// its outputs.
	if got := e.names(r.ID); got != "discover=READY" {
		t.Fatalf("tasks at the start: %s", got)
	}
	ts := e.tasks(r.ID)
	if d := ts["discover"]; d.RunID != r.ID || d.StepName != "discover" || d.CreatedBy != "workflow:sweep" || d.Metadata["workflow_run"] != r.ID {
		t.Fatalf("discover task %+v", d.Task)
	}
	e.complete(ts["discover"].ID, `{"packages":["api","db","ui"],"shards":2}`)
	if got := e.names(r.ID); got != "discover=COMPLETED fix[0]=READY fix[1]=READY fix[2]=READY shards[0]=READY shards[1]=READY" {
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
	if _, ok := e.tasks(r.ID)["summary"]; ok {
		t.Fatalf("the summary exists before the last shard: %s", e.names(r.ID))
	}
	e.complete(ts["shards[1]"].ID, "")
	sum := e.tasks(r.ID)["summary"]
	if sum.Status != models.StatusReady {
		t.Fatalf("summary after the last shard: %s", e.names(r.ID))
	}
	e.complete(sum.ID, "")
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

func TestAnUnreadableFanOutStopsItsStepAndARetryReadsItAgain(t *testing.T) {
	t.Parallel()
	e := newWFEnv(t, fanOutFlow)
	r := e.start("sweep")
	discover := e.tasks(r.ID)["discover"].ID
	e.complete(discover, `{"packages":"api db","shards":1}`)
	ts := e.tasks(r.ID)
	fix := ts["fix"]
	if fix.Status != models.StatusBlocked || !strings.Contains(fix.StatusReason, "fan-out failed: foreach: discover.outputs.packages is not a list") {
		t.Fatalf("fix %s %q (tasks %s)", fix.Status, fix.StatusReason, e.names(r.ID))
	}
	// The summary's edge to fix is soft: it waits for the shard only.
	e.complete(ts["shards[0]"].ID, "")
	e.complete(e.tasks(r.ID)["summary"].ID, "")
	if st := e.run(r.ID).Status; st != models.RunFailed {
		t.Fatalf("run %s", st)
	}
	// The discovery is put right; the retry reads its output again.
	if err := e.s.SaveResult(context.Background(), discover, 0, models.Completion{Outputs: json.RawMessage(`{"packages":["api"],"shards":1}`)}); err != nil {
		t.Fatal(err)
	}
	e.retry(r.ID)
	if got := e.names(r.ID); got != "discover=COMPLETED fix[0]=READY shards[0]=COMPLETED summary=COMPLETED" {
		t.Fatalf("after retry: %s", got)
	}
	if st := e.run(r.ID).Status; st != models.RunRunning {
		t.Fatalf("run %s after retry", st)
	}
}

func TestARealSecondCompletionDoesNotExpandAgain(t *testing.T) {
	t.Parallel()
	e := newWFEnv(t, fanOutFlow)
	r := e.start("sweep")
	d := e.tasks(r.ID)["discover"].ID
	e.complete(d, `{"packages":["a","b"],"shards":1}`)
	// Done again, with other outputs: its dependents' steps have their tasks.
	e.apply(d, models.EventAdminRestart)
	e.complete(d, `{"packages":["c","d","e"],"shards":2}`)
	if got := e.names(r.ID); got != "discover=COMPLETED fix[0]=READY fix[1]=READY shards[0]=READY" {
		t.Fatalf("tasks: %s", got)
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
	running, err := e.s.CancelWorkflowRun(ctx, r.ID, "ann")
	if err != nil || len(running) != 1 || running[0].ID != ts["fix[0]"].ID {
		t.Fatalf("cancel: running %v, %v", running, err)
	}
	// The idle tasks were stopped with the run.
	if got := e.names(r.ID); got != "discover=COMPLETED fix[0]=IN_PROGRESS fix[1]=BLOCKED shards[0]=BLOCKED" {
		t.Fatalf("after the cancel: %s", got)
	}
	e.cancel(r.ID)
	got := e.run(r.ID)
	if got.Status != models.RunCancelled || got.Reason != "cancelled by ann" {
		t.Fatalf("run %+v", got)
	}
	for n, tk := range e.tasks(r.ID) {
		if n != "discover" && (tk.Status != models.StatusBlocked || tk.StatusReason != "cancelled") {
			t.Errorf("%s: %s %q", n, tk.Status, tk.StatusReason)
		}
	}
	if _, err := e.s.RetryWorkflowRun(ctx, "sweep-9", "t"); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("retry of an unknown run: %v", err)
	}
	events := e.retry(r.ID)
	if events["fix[0]"] != models.EventAdminRestart || events["discover"] != models.EventVerifyPassed {
		t.Fatalf("retry events %v", events)
	}
	if got := e.names(r.ID); got != "discover=COMPLETED fix[0]=READY fix[1]=READY shards[0]=READY" {
		t.Fatalf("after retry: %s", got)
	}
	if st := e.run(r.ID).Status; st != models.RunRunning {
		t.Fatalf("run %s after retry", st)
	}
	if _, err := e.s.RetryWorkflowRun(ctx, r.ID, "t"); models.ErrorCodeOf(err) != models.CodeConflict {
		t.Fatalf("retry of a run under way: %v", err)
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
	if _, err := e.s.RetryWorkflowRun(ctx, r.ID, "t"); models.ErrorCodeOf(err) != models.CodeConflict {
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
	e.fail(ts["shards[0]"].ID) // the summary can never come
	if st := e.run(r.ID); st.Status != models.RunFailed {
		t.Fatalf("run %+v", st)
	}
	events := e.retry(r.ID)
	if events["fix[0]"] != models.EventVerifyPassed || events["fix[1]"] != models.EventAdminRestart || events["shards[0]"] != models.EventAdminRestart {
		t.Fatalf("retry events %v", events)
	}
	if got := e.names(r.ID); got != "discover=COMPLETED fix[0]=COMPLETED fix[1]=READY shards[0]=READY" {
		t.Fatalf("after retry: %s", got)
	}
}

func TestATaskStoppedBeforeItsUpstreamWaitsAgainAfterRetry(t *testing.T) {
	t.Parallel()
	// "check" sorts before "work": the cancel stops it first, directly.
	e := newWFEnv(t, `
name: pipe
project: web
steps:
  - name: work
    title: Work
  - name: check
    title: Check
    depends_on: [work]
`)
	r := e.start("pipe")
	e.cancel(r.ID)
	if ev := e.lastEvents(r.ID); ev["check"] != models.EventRunStopped || ev["work"] != models.EventRunStopped {
		t.Fatalf("events after the cancel %v", ev)
	}
	events := e.retry(r.ID)
	if events["work"] != models.EventAdminRestart || events["check"] != models.EventUpstreamReopened {
		t.Fatalf("retry events %v", events)
	}
	if got := e.names(r.ID); got != "check=DEFINED work=READY" {
		t.Fatalf("after retry: %s", got)
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
	r := e.start("soft")
	e.cancel(r.ID)
	if rep := e.tasks(r.ID)["report"]; rep.Status != models.StatusBlocked || rep.CascadeRootID != "" {
		t.Fatalf("report %s (root %q): %s", rep.Status, rep.CascadeRootID, e.names(r.ID))
	}
	e.retry(r.ID)
	if got := e.names(r.ID); got != "build=READY report=DEFINED shards[0]=DEFINED shards[1]=DEFINED" {
		t.Fatalf("after retry: %s", got)
	}
}

func TestDeferredStepsInChainsAndDiamonds(t *testing.T) {
	t.Parallel()
	e := newWFEnv(t, `
name: diamond
project: web
steps:
  - name: discover
    title: Discover
  - name: fix
    title: "Fix {{item}}"
    depends_on: [discover]
    foreach: discover.outputs.items
  - name: report
    title: "Report on {{discover.outputs.name}}"
    depends_on: [fix]
  - name: final
    title: Final
    depends_on: [fix, report]
`)
	r := e.start("diamond")
	e.complete(e.tasks(r.ID)["discover"].ID, `{"items":["a","b"],"name":"web"}`)
	ts := e.tasks(r.ID)
	e.complete(ts["fix[0]"].ID, "")
	e.complete(ts["fix[1]"].ID, "")
	rep := e.tasks(r.ID)["report"]
	if rep.Title != "Report on web" || rep.Status != models.StatusReady {
		t.Fatalf("report %+v: %s", rep.Task, e.names(r.ID))
	}
	e.complete(rep.ID, "")
	final := e.tasks(r.ID)["final"]
	d, err := e.s.GetTaskDetail(context.Background(), final.ID)
	if err != nil || final.Status != models.StatusReady || len(d.Dependencies) != 3 {
		t.Fatalf("final %s with %d dependencies, %v", final.Status, len(d.Dependencies), err)
	}
	e.complete(final.ID, "")
	if st := e.run(r.ID).Status; st != models.RunSuccess {
		t.Fatalf("run %s", st)
	}
}

func TestASoftUpstreamFailingDoesNotStopADeferredStep(t *testing.T) {
	t.Parallel()
	e := newWFEnv(t, `
name: soft2
project: web
steps:
  - name: lint
    title: Lint
  - name: plan
    title: Plan
  - name: build
    title: "Build {{plan.outputs.target}}"
    depends_on:
      - step: lint
        requires_success: false
      - plan
  - name: ship
    title: Ship
    depends_on: [build]
`)
	r := e.start("soft2")
	ts := e.tasks(r.ID)
	e.fail(ts["lint"].ID)
	e.complete(ts["plan"].ID, `{"target":"v2"}`)
	b := e.tasks(r.ID)["build"]
	if b.Title != "Build v2" || b.Status != models.StatusReady {
		t.Fatalf("build %+v: %s", b.Task, e.names(r.ID))
	}
	e.complete(b.ID, "")
	e.complete(e.tasks(r.ID)["ship"].ID, "")
	if got := e.names(r.ID); got != "build=COMPLETED lint=BLOCKED plan=COMPLETED ship=COMPLETED" {
		t.Fatalf("tasks: %s", got)
	}
	if st := e.run(r.ID).Status; st != models.RunFailed {
		t.Fatalf("run %s with a blocked task", st)
	}
}

func TestAnUpstreamDoneDuringACancelExpandsOnRetry(t *testing.T) {
	t.Parallel()
	e := newWFEnv(t, fanOutFlow)
	ctx := context.Background()
	r := e.start("sweep")
	d := e.tasks(r.ID)["discover"].ID
	e.apply(d, models.EventAssigned, models.EventAgentStarted)
	if err := e.s.SaveResult(ctx, d, 0, models.Completion{Outputs: json.RawMessage(`{"packages":["a"],"shards":1}`)}); err != nil {
		t.Fatal(err)
	}
	e.apply(d, models.EventAgentCompleted)
	if _, err := e.s.CancelWorkflowRun(ctx, r.ID, "ann"); err != nil {
		t.Fatal(err)
	}
	// Its verification passes before the stop reaches it.
	e.apply(d, models.EventVerifyPassed)
	if got := e.names(r.ID); got != "discover=COMPLETED" {
		t.Fatalf("a cancelled run expanded: %s", got)
	}
	e.retry(r.ID)
	if got := e.names(r.ID); got != "discover=COMPLETED fix[0]=READY shards[0]=READY" {
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

// BenchmarkFanOutOf1000 measures the transaction that completes a
// discovery and creates the 1000 tasks that fan out over its output.
func BenchmarkFanOutOf1000(b *testing.B) {
	items := make([]string, 1000)
	for i := range items {
		items[i] = fmt.Sprintf("%q", fmt.Sprintf("pkg%d", i))
	}
	outputs := `{"packages":[` + strings.Join(items, ",") + `],"shards":0}`
	for b.Loop() {
		b.StopTimer()
		e := newWFEnv(b, fanOutFlow)
		r := e.start("sweep")
		d := e.tasks(r.ID)["discover"].ID
		e.apply(d, models.EventAssigned, models.EventAgentStarted, models.EventAgentCompleted)
		if err := e.s.SaveResult(context.Background(), d, 0, models.Completion{Outputs: json.RawMessage(outputs)}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		e.apply(d, models.EventVerifyPassed)
		b.StopTimer()
		if n := len(e.tasks(r.ID)); n != 1001 {
			b.Fatalf("%d tasks", n)
		}
		b.StartTimer()
	}
}

// BenchmarkCompletionInARunOf1000 measures one task's completion in a run
// of 1000 fanned-out tasks: each finishing task settles its run.
func BenchmarkCompletionInARunOf1000(b *testing.B) {
	items := make([]string, 1000)
	for i := range items {
		items[i] = fmt.Sprintf("%q", fmt.Sprintf("pkg%d", i))
	}
	e := newWFEnv(b, fanOutFlow)
	r := e.start("sweep")
	e.complete(e.tasks(r.ID)["discover"].ID, `{"packages":[`+strings.Join(items, ",")+`],"shards":0}`)
	var ids []string
	for name, t := range e.tasks(r.ID) {
		if strings.HasPrefix(name, "fix[") {
			e.apply(t.ID, models.EventAssigned, models.EventAgentStarted, models.EventAgentCompleted)
			ids = append(ids, t.ID)
		}
	}
	if b.N > len(ids) {
		b.Skipf("%d completions asked, the run has %d tasks", b.N, len(ids))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.apply(ids[i], models.EventVerifyPassed)
	}
}

// A run keeps the inputs it was given, defaults filled in, and every task
// of it is rendered with them: those made at the start and those a
// fan-out makes later, from the run's stored inputs. Bad inputs start no
// run.
func TestARunKeepsItsInputsForEveryStep(t *testing.T) {
	t.Parallel()
	e := newWFEnv(t, `name: release
project: web
inputs:
  - name: version
    required: true
  - name: channel
    default: stable
steps:
  - name: plan
    title: "Plan {{inputs.version}}"
  - name: ship
    title: "Ship {{item}} {{inputs.version}} to {{inputs.channel}}"
    depends_on: [plan]
    foreach: plan.outputs.targets
`)
	ctx := context.Background()
	r, _, err := e.s.StartWorkflowRun(ctx, models.RunRequest{Workflow: "release", Trigger: models.TriggerByHand,
		TriggeredBy: "t", FireKey: "manual:1", Inputs: map[string]string{"version": "2.0"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"version": "2.0", "channel": "stable"}
	got, err := e.s.GetWorkflowRun(ctx, r.ID)
	if err != nil || !reflect.DeepEqual(r.Inputs, want) || !reflect.DeepEqual(got.Inputs, want) {
		t.Fatalf("inputs answered %v, stored %v (%v); want %v", r.Inputs, got.Inputs, err, want)
	}
	if runs, err := e.s.ListWorkflowRuns(ctx, models.RunFilter{Workflow: "release"}); err != nil || !reflect.DeepEqual(runs[0].Inputs, want) {
		t.Fatalf("listed inputs %+v (%v)", runs, err)
	}
	plan := e.tasks(r.ID)["plan"]
	if plan.Title != "Plan 2.0" {
		t.Fatalf("plan title %q", plan.Title)
	}
	e.complete(plan.ID, `{"targets": ["eu", "us"]}`)
	ts := e.tasks(r.ID)
	if ts["ship[0]"].Title != "Ship eu 2.0 to stable" || ts["ship[1]"].Title != "Ship us 2.0 to stable" {
		t.Fatalf("fanned-out titles %q, %q", ts["ship[0]"].Title, ts["ship[1]"].Title)
	}
	// A listed run counts its tasks by status, as the run read alone does.
	wantCounts := map[models.TaskStatus]int{models.StatusCompleted: 1, models.StatusReady: 2}
	if got, err := e.s.GetWorkflowRun(ctx, r.ID); err != nil || !reflect.DeepEqual(got.Tasks, wantCounts) {
		t.Fatalf("the run's tasks %v (%v), want %v", got.Tasks, err, wantCounts)
	}
	if runs, err := e.s.ListWorkflowRuns(ctx, models.RunFilter{Workflow: "release"}); err != nil || len(runs) != 1 ||
		!reflect.DeepEqual(runs[0].Tasks, wantCounts) {
		t.Fatalf("listed runs %+v (%v), want tasks %v", runs, err, wantCounts)
	}

	_, _, err = e.s.StartWorkflowRun(ctx, models.RunRequest{Workflow: "release", Trigger: models.TriggerByHand,
		TriggeredBy: "t", FireKey: "manual:2", Inputs: map[string]string{"versoin": "2.1"}})
	if models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), "inputs.version: required") ||
		!strings.Contains(err.Error(), "inputs.versoin: unknown input") {
		t.Fatalf("bad inputs: %v", err)
	}
	if runs, _ := e.s.ListWorkflowRuns(ctx, models.RunFilter{Workflow: "release"}); len(runs) != 1 {
		t.Fatalf("%d runs after a refused start", len(runs))
	}
}

func TestARunWithAnUnknownTriggerIsRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		trigger models.WorkflowTrigger
		ok      bool
	}{
		{models.TriggerByHand, true},
		{models.TriggerBySchedule, true},
		{"", false},
		{"cron", false},
	}
	e := newWFEnv(t, fanOutFlow)
	for i, tt := range tests {
		_, _, err := e.s.StartWorkflowRun(context.Background(), models.RunRequest{Workflow: "sweep", Trigger: tt.trigger,
			TriggeredBy: "t", FireKey: fmt.Sprintf("k%d", i)})
		if (err == nil) != tt.ok {
			t.Errorf("trigger %q: err = %v, want ok %v", tt.trigger, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("trigger %q", tt.trigger)) {
			t.Errorf("trigger %q: error %q does not name the trigger", tt.trigger, err)
		}
	}
	runs, err := e.s.ListWorkflowRuns(context.Background(), models.RunFilter{Workflow: "sweep"})
	if err != nil || len(runs) != 2 {
		t.Errorf("runs = %d (%v), want the two with a known trigger", len(runs), err)
	}
}

// soloFlow makes one task a run.
const soloFlow = `
name: solo
project: web
steps:
  - name: only
    title: Only
`

func TestRunsEndingTogetherAreSettledInIDOrder(t *testing.T) {
	t.Parallel()
	const runs = 7
	e := newWFEnv(t, soloFlow)
	ctx := context.Background()
	var first string
	for i := range runs {
		r := e.start("solo")
		id := e.tasks(r.ID)["only"].ID
		if i == 0 {
			first = id
			continue
		}
		// A task of every other run waits for the first run's task: its
		// failure ends every run in one transaction.
		if _, err := e.s.ChangeDependencies(ctx, id, models.DependencyChange{Add: []models.BatchDependency{{ID: first}}}); err != nil {
			t.Fatal(err)
		}
	}
	e.fail(first)
	msgs, err := e.s.PendingOutbox(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		if m.Kind != "run.failed" {
			continue
		}
		var p struct {
			RunID string `json:"run_id"`
		}
		if err := json.Unmarshal([]byte(m.Payload), &p); err != nil {
			t.Fatal(err)
		}
		got = append(got, p.RunID)
	}
	var want []string
	for i := range runs {
		want = append(want, fmt.Sprintf("solo-%d", i+1))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("run.failed notices in the order %v, want %v", got, want)
	}
}

// TestAFanOutAboveTheBatchCapFailsItsStepsOnce: steps due together that
// would make more tasks than one batch may hold are counted before any
// is made. The completion that makes them due is applied; each step gets
// its failed stand-in naming the cap, and the run ends failed. Not
// parallel: it measures what the completion allocates.
func TestAFanOutAboveTheBatchCapFailsItsStepsOnce(t *testing.T) {
	const steps = models.MaxBatchSize/workflow.MaxFanOut + 1 // at MaxFanOut each, over the cap together
	var doc strings.Builder
	doc.WriteString("name: wide\nproject: web\nsteps:\n  - name: discover\n    title: Count shards\n")
	for i := range steps {
		fmt.Fprintf(&doc, "  - name: s%02d\n    title: \"Shard {{index}}\"\n    depends_on: [discover]\n    parallel: discover.outputs.n\n", i)
	}
	e := newWFEnv(t, doc.String())
	r := e.start("wide")
	discover := e.tasks(r.ID)["discover"].ID
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	e.complete(discover, fmt.Sprintf(`{"n": %d}`, workflow.MaxFanOut))
	runtime.ReadMemStats(&after)
	// Making the steps' tasks would take hundreds of megabytes.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Errorf("the completion allocated %d MB", grew>>20)
	}
	ts := e.tasks(r.ID)
	if d := ts["discover"]; d.Status != models.StatusCompleted {
		t.Fatalf("discover %s", d.Status)
	}
	if len(ts) != steps+1 {
		t.Fatalf("%d tasks, want discover and one stand-in per step", len(ts))
	}
	for i := range steps {
		name := fmt.Sprintf("s%02d", i)
		s, ok := ts[name]
		want := fmt.Sprintf("fan-out failed: %s would make %d tasks and the %d steps due with it %d more: %d in all, more than the batch cap of %d",
			name, workflow.MaxFanOut, steps-1, (steps-1)*workflow.MaxFanOut, steps*workflow.MaxFanOut, models.MaxBatchSize)
		if !ok || s.Status != models.StatusBlocked || s.StatusReason != want || s.Metadata[workflow.FanOutFailedKey] != "true" {
			t.Fatalf("%s: %s %q, want BLOCKED %q", name, s.Status, s.StatusReason, want)
		}
	}
	if got := e.run(r.ID); got.Status != models.RunFailed || got.EndedAt == nil {
		t.Fatalf("run %s (%s)", got.Status, got.Reason)
	}
}

// TestAFanInOverTooManyUpstreamTasksFailsItsStepOnce: a deferred step
// whose tasks would depend on more upstream tasks than one task may have
// is counted before any is made. The completion that makes it due is
// applied; the step gets its failed stand-in, with no dependencies,
// naming the limit, and the run ends failed.
func TestAFanInOverTooManyUpstreamTasksFailsItsStepOnce(t *testing.T) {
	t.Parallel()
	e := newWFEnv(t, `
name: join
project: web
steps:
  - name: discover
    title: Count shards
  - name: one
    title: One more
  - name: shards
    title: "Shard {{index}}"
    depends_on: [discover]
    parallel: discover.outputs.n
  - name: join
    title: Join
    depends_on: [shards, one]
`)
	r := e.start("join")
	ts := e.tasks(r.ID)
	e.complete(ts["one"].ID, "")
	e.complete(ts["discover"].ID, fmt.Sprintf(`{"n": %d}`, models.MaxDependencies))
	all, err := e.s.RunTasks(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range all {
		if task.StepName == "shards" {
			e.complete(task.ID, "") // the last one makes join due
		}
	}
	join, ok := e.tasks(r.ID)["join"]
	want := fmt.Sprintf("fan-out failed: each task of join would depend on %d upstream tasks, more than the limit of %d dependencies",
		models.MaxDependencies+1, models.MaxDependencies)
	if !ok || join.Status != models.StatusBlocked || join.StatusReason != want || join.Metadata[workflow.FanOutFailedKey] != "true" {
		t.Fatalf("join: %s %q, want BLOCKED %q", join.Status, join.StatusReason, want)
	}
	d, err := e.s.GetTaskDetail(context.Background(), join.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Dependencies) != 0 {
		t.Errorf("the stand-in has %d dependencies, want none", len(d.Dependencies))
	}
	if got := e.run(r.ID); got.Status != models.RunFailed || got.EndedAt == nil {
		t.Fatalf("run %s (%s)", got.Status, got.Reason)
	}
}
