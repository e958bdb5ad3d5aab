package workflow_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/workflow"
)

// diamond is a → (b, c soft on a) → d (b required, c soft), with c
// fanning out over a's output.
func diamond(t *testing.T) models.Workflow {
	t.Helper()
	w, err := workflow.Parse("diamond.yaml", []byte(`
name: diamond
project: web
steps:
  - name: a
    title: A
  - name: b
    title: B
    depends_on: [a]
  - name: c
    title: "C {{item}}"
    depends_on:
      - step: a
        requires_success: false
    foreach: a.outputs.items
  - name: d
    title: D
    depends_on:
      - b
      - step: c
        requires_success: false
`))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// counts is a step's tasks by status.
type counts = map[models.TaskStatus]int

// progress makes a run's progress: the steps given have their tasks.
func progress(steps map[string]counts) workflow.Progress {
	p := workflow.Progress{Expanded: map[string]bool{}, Counts: map[string]map[models.TaskStatus]int{}}
	for name, c := range steps {
		p.Expanded[name] = true
		if len(c) > 0 {
			p.Counts[name] = c
		}
	}
	return p
}

var (
	ready     = counts{models.StatusReady: 1}
	defined   = counts{models.StatusDefined: 1}
	working   = counts{models.StatusInProgress: 1}
	completed = counts{models.StatusCompleted: 1}
	blocked   = counts{models.StatusBlocked: 1}
	none      = counts{}
)

// edgeNames names a task's dependencies as "<id> hard" or "<id> soft".
func edgeNames(deps []models.BatchDependency) []string {
	var out []string
	for _, d := range deps {
		r := "hard"
		if !d.Required() {
			r = "soft"
		}
		out = append(out, d.ID+" "+r)
	}
	return out
}

func TestStepStatesAndDueSteps(t *testing.T) {
	t.Parallel()
	w := diamond(t)
	tests := []struct {
		name  string
		steps map[string]counts
		want  map[string]workflow.StepState
		due   []string
	}{
		{"nothing made yet: the first step is due", nil,
			map[string]workflow.StepState{"a": workflow.StepWaiting, "b": workflow.StepWaiting, "c": workflow.StepWaiting, "d": workflow.StepWaiting},
			[]string{"a"}},
		{"a's task waits", map[string]counts{"a": ready, "b": defined},
			map[string]workflow.StepState{"a": workflow.StepRunning, "b": workflow.StepRunning, "c": workflow.StepWaiting, "d": workflow.StepWaiting},
			nil},
		{"a done: the fan-out is due", map[string]counts{"a": completed, "b": ready},
			map[string]workflow.StepState{"a": workflow.StepDone, "b": workflow.StepRunning, "c": workflow.StepWaiting, "d": workflow.StepWaiting},
			[]string{"c"}},
		{"a blocked: b fails, the soft fan-out is still due", map[string]counts{"a": blocked, "b": blocked},
			map[string]workflow.StepState{"a": workflow.StepFailed, "b": workflow.StepFailed, "c": workflow.StepWaiting, "d": workflow.StepFailed},
			[]string{"c"}},
		{"an empty fan-out is done", map[string]counts{"a": completed, "b": completed, "c": none},
			map[string]workflow.StepState{"a": workflow.StepDone, "b": workflow.StepDone, "c": workflow.StepDone, "d": workflow.StepWaiting},
			[]string{"d"}},
		{"a failed fan-out lets a soft fan-in go on", map[string]counts{"a": completed, "b": completed,
			"c": {models.StatusBlocked: 1, models.StatusCompleted: 2}},
			map[string]workflow.StepState{"a": workflow.StepDone, "b": workflow.StepDone, "c": workflow.StepFailed, "d": workflow.StepWaiting},
			[]string{"d"}},
		{"a fan-out part way", map[string]counts{"a": completed, "b": completed,
			"c": {models.StatusBlocked: 1, models.StatusInProgress: 1}},
			map[string]workflow.StepState{"a": workflow.StepDone, "b": workflow.StepDone, "c": workflow.StepRunning, "d": workflow.StepWaiting},
			nil},
		{"everything made", map[string]counts{"a": completed, "b": completed, "c": completed, "d": working},
			map[string]workflow.StepState{"a": workflow.StepDone, "b": workflow.StepDone, "c": workflow.StepDone, "d": workflow.StepRunning},
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := progress(tt.steps)
			if got := workflow.StepStates(w, p); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("StepStates = %v, want %v", got, tt.want)
			}
			var due []string
			for _, st := range workflow.DueSteps(w, p) {
				due = append(due, st.Name)
			}
			if !reflect.DeepEqual(due, tt.due) {
				t.Errorf("DueSteps = %v, want %v", due, tt.due)
			}
		})
	}
}

func TestSettle(t *testing.T) {
	t.Parallel()
	w := diamond(t)
	tests := []struct {
		name   string
		status models.WorkflowRunStatus
		steps  map[string]counts
		want   workflow.Settlement
		reason string
	}{
		{"just started", models.RunPending, map[string]counts{"a": ready, "b": defined},
			workflow.Settlement{Status: models.RunPending, Total: 2}, ""},
		{"a task started", models.RunPending, map[string]counts{"a": working, "b": defined},
			workflow.Settlement{Status: models.RunRunning, Total: 2}, ""},
		{"waiting for a fan-out to be made", models.RunRunning, map[string]counts{"a": completed, "b": completed},
			workflow.Settlement{Status: models.RunRunning, Total: 2}, ""},
		{"every step made and completed", models.RunRunning, map[string]counts{"a": completed, "b": completed, "c": none, "d": completed},
			workflow.Settlement{Status: models.RunSuccess, Total: 3}, ""},
		{"a required upstream blocked", models.RunRunning, map[string]counts{"a": completed, "b": blocked, "c": completed},
			workflow.Settlement{Status: models.RunFailed, Blocked: 1, Total: 3}, "task t1 is BLOCKED (why); 1 of 3 tasks are BLOCKED"},
		{"blocked but a soft step can still go on", models.RunRunning, map[string]counts{"a": blocked, "b": blocked},
			workflow.Settlement{Status: models.RunRunning, Blocked: 2, Total: 2}, ""},
		{"cancelled stays cancelled", models.RunCancelled, map[string]counts{"a": completed, "b": completed, "c": none, "d": completed},
			workflow.Settlement{Status: models.RunCancelled, Total: 3}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := workflow.Settle(tt.status, w, progress(tt.steps))
			if got != tt.want {
				t.Errorf("Settle = %+v, want %+v", got, tt.want)
			}
			if r := got.Reason("t1", "why"); r != tt.reason {
				t.Errorf("Reason = %q, want %q", r, tt.reason)
			}
		})
	}
}

func TestSettlementReason(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s         workflow.Settlement
		task, why string
		want      string
	}{
		{workflow.Settlement{Status: models.RunFailed, Blocked: 2, Total: 5}, "t9", "tests fail",
			"task t9 is BLOCKED (tests fail); 2 of 5 tasks are BLOCKED"},
		{workflow.Settlement{Status: models.RunFailed, Blocked: 0, Total: 1}, "", "", "0 of 1 tasks are BLOCKED"},
		{workflow.Settlement{Status: models.RunSuccess, Total: 3}, "t9", "x", ""},
		{workflow.Settlement{Status: models.RunRunning, Blocked: 1, Total: 3}, "t9", "x", ""},
	}
	for _, tt := range tests {
		if got := tt.s.Reason(tt.task, tt.why); got != tt.want {
			t.Errorf("%+v.Reason(%q, %q) = %q, want %q", tt.s, tt.task, tt.why, got, tt.want)
		}
	}
}

func TestInitialPlan(t *testing.T) {
	t.Parallel()
	w, err := workflow.Parse("plan.yaml", []byte(`
name: plan
project: web
steps:
  - name: a
    title: A
  - name: shards
    title: "S{{index}}"
    depends_on: [a]
    parallel: 2
  - name: fan
    title: "F {{item}}"
    depends_on: [a]
    foreach: a.outputs.items
  - name: after
    title: After
    depends_on: [fan]
  - name: join
    title: Join
    depends_on:
      - step: shards
        requires_success: false
`))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := workflow.InitialPlan(w, "plan-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	type task struct {
		local string
		deps  []string
	}
	got := map[string][]task{}
	var steps []string
	for _, p := range plan {
		steps = append(steps, p.Step)
		for _, bt := range p.Tasks {
			got[p.Step] = append(got[p.Step], task{bt.LocalID, edgeNames(bt.Dependencies)})
		}
	}
	if want := []string{"a", "shards", "join"}; !reflect.DeepEqual(steps, want) {
		t.Errorf("steps %v, want %v (fan and what follows it wait)", steps, want)
	}
	want := map[string][]task{
		"a":      {{"a", nil}},
		"shards": {{"shards[0]", []string{"a hard"}}, {"shards[1]", []string{"a hard"}}},
		"join":   {{"join", []string{"shards[0] soft", "shards[1] soft"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("plan %v, want %v", got, want)
	}
}

func TestExpand(t *testing.T) {
	t.Parallel()
	w := diamond(t)
	run := models.WorkflowRun{ID: "diamond-1", Workflow: "diamond"}
	c, _ := workflow.StepByName(w, "c")
	d, _ := workflow.StepByName(w, "d")
	tests := []struct {
		name     string
		step     models.WorkflowStep
		outputs  string
		upstream map[string][]string
		locals   []string
		deps     []string
		failure  string
	}{
		{"one task per item", c, `{"a": {"items": ["x", "y"]}}`, map[string][]string{"a": {"t1"}},
			[]string{"c[0]", "c[1]"}, []string{"t1 soft"}, ""},
		{"an empty list makes none", c, `{"a": {"items": []}}`, map[string][]string{"a": {"t1"}}, nil, nil, ""},
		{"a missing output stands in for the step", c, `{}`, map[string][]string{"a": {"t1"}},
			[]string{"c"}, []string{"t1 soft"}, "foreach: a.outputs.items"},
		{"not a list", c, `{"a": {"items": 3}}`, map[string][]string{"a": {"t1"}},
			[]string{"c"}, []string{"t1 soft"}, "is not a list"},
		{"a fan-in depends on every upstream task", d, `{}`, map[string][]string{"b": {"t2"}, "c": {"t3", "t4"}},
			[]string{"d"}, []string{"t2 hard", "t3 soft", "t4 soft"}, ""},
		{"an upstream task named twice is one edge, required when either is", d, `{}`, map[string][]string{"b": {"t2"}, "c": {"t2", "t3"}},
			[]string{"d"}, []string{"t2 hard", "t3 soft"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var outputs map[string]json.RawMessage
			if err := json.Unmarshal([]byte(tt.outputs), &outputs); err != nil {
				t.Fatal(err)
			}
			tasks, failure := workflow.Expand(w, tt.step, run, outputs, tt.upstream)
			if tt.failure == "" && failure != "" || !strings.Contains(failure, tt.failure) {
				t.Errorf("failure %q, want one containing %q", failure, tt.failure)
			}
			var locals []string
			for i, bt := range tasks {
				locals = append(locals, bt.LocalID)
				if deps := edgeNames(bt.Dependencies); !reflect.DeepEqual(deps, tt.deps) {
					t.Errorf("task %d depends on %v, want %v", i, deps, tt.deps)
				}
				marked := bt.Metadata[workflow.FanOutFailedKey] == "true"
				if marked != (failure != "") {
					t.Errorf("task %d marked failed %v with failure %q", i, marked, failure)
				}
				if bt.Workflow == nil || bt.Workflow.RunID != run.ID || bt.Workflow.Step != tt.step.Name {
					t.Errorf("task %d placed %+v", i, bt.Workflow)
				}
			}
			if !reflect.DeepEqual(locals, tt.locals) {
				t.Errorf("tasks %v, want %v", locals, tt.locals)
			}
		})
	}
}

func TestStepStateNames(t *testing.T) {
	t.Parallel()
	for s, want := range map[workflow.StepState]string{workflow.StepWaiting: "waiting", workflow.StepRunning: "running",
		workflow.StepDone: "done", workflow.StepFailed: "failed", workflow.StepState(9): "StepState(9)"} {
		if got := s.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(s), got, want)
		}
	}
}

func TestRetryEvent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status models.TaskStatus
		root   string
		unmet  int
		want   models.TaskEvent
		ok     bool
	}{
		{"failed", models.StatusFailed, "", 0, models.EventAdminRestart, true},
		{"failed with an upstream not completed", models.StatusFailed, "", 2, models.EventAdminRestart, true},
		{"blocked by itself", models.StatusBlocked, "", 0, models.EventAdminRestart, true},
		{"blocked by itself, an upstream reopened", models.StatusBlocked, "", 1, models.EventUpstreamReopened, true},
		{"blocked by an upstream", models.StatusBlocked, "t1", 1, "", false},
		{"moved on meanwhile", models.StatusDefined, "", 1, "", false},
		{"completed", models.StatusCompleted, "", 0, "", false},
	}
	for _, tt := range tests {
		ev, ok := workflow.RetryEvent(models.Task{Status: tt.status, CascadeRootID: tt.root}, tt.unmet)
		if ev != tt.want || ok != tt.ok {
			t.Errorf("%s: RetryEvent = %s, %v; want %s, %v", tt.name, ev, ok, tt.want, tt.ok)
		}
	}
}

func TestRetryOrder(t *testing.T) {
	t.Parallel()
	w := diamond(t)
	ts := []models.Task{{ID: "d", StepName: "d"}, {ID: "c0", StepName: "c"}, {ID: "b", StepName: "b"},
		{ID: "c1", StepName: "c"}, {ID: "a", StepName: "a"}}
	workflow.RetryOrder(w, ts)
	var got []string
	for _, tk := range ts {
		got = append(got, tk.ID)
	}
	if want := []string{"a", "b", "c0", "c1", "d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("RetryOrder = %v, want %v", got, want)
	}
}

// wideSteps returns n steps after "up", each fanning out over its output
// n, or making parallel tasks when fixed is set.
func wideSteps(n, fixed int) []models.WorkflowStep {
	steps := make([]models.WorkflowStep, n)
	for i := range steps {
		steps[i] = models.WorkflowStep{Name: fmt.Sprintf("s%02d", i), Title: "t",
			DependsOn: []models.StepDependency{{Step: "up"}}, Parallel: &models.FanOut{From: "up.outputs.n"}}
		if fixed > 0 {
			steps[i].DependsOn, steps[i].Parallel = nil, &models.FanOut{Count: fixed}
		}
	}
	return steps
}

func TestExpansionRefusals(t *testing.T) {
	t.Parallel()
	atCap := models.MaxBatchSize / workflow.MaxFanOut
	unreadable := models.WorkflowStep{Name: "bad", Title: "t", Foreach: "up.outputs.missing"}
	empty := models.WorkflowStep{Name: "none", Title: "t", Parallel: &models.FanOut{From: "up.outputs.zero"}}
	tests := []struct {
		name    string
		due     []models.WorkflowStep
		refused []string
		reason  string
	}{
		{"at the cap they fit", wideSteps(atCap, 0), nil, ""},
		{"one step over the cap refuses each", wideSteps(atCap+1, 0), []string{"s00", fmt.Sprintf("s%02d", atCap)},
			fmt.Sprintf(" would make 1000 tasks and the %d steps due with it %d more: %d in all, more than the batch cap of %d",
				atCap, atCap*1000, (atCap+1)*1000, models.MaxBatchSize)},
		{"a stand-in counts, and keeps its own reason", append(wideSteps(atCap, 0), unreadable), []string{"s00"},
			"in all, more than the batch cap"},
		{"a step that makes nothing is not refused", append(wideSteps(atCap+1, 0), empty), []string{"s00"},
			"in all, more than the batch cap"},
	}
	outputs := map[string]json.RawMessage{"up": json.RawMessage(`{"n": 1000, "zero": 0}`)}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := workflow.ExpansionRefusals(tt.due, outputs)
			if tt.refused == nil {
				if got != nil {
					t.Fatalf("refused %v", got)
				}
				return
			}
			for _, name := range tt.refused {
				if !strings.Contains(got[name], tt.reason) {
					t.Errorf("%s refused %q, want %q", name, got[name], tt.reason)
				}
			}
			for _, name := range []string{"bad", "none"} {
				if why, ok := got[name]; ok {
					t.Errorf("%s refused %q", name, why)
				}
			}
		})
	}
}

func TestInitialPlanCountsBeforeMaking(t *testing.T) {
	t.Parallel()
	atCap := models.MaxBatchSize / workflow.MaxFanOut
	w := models.Workflow{Name: "wide", ProjectID: "web", Steps: wideSteps(atCap+1, workflow.MaxFanOut)}
	plan, err := workflow.InitialPlan(w, "wide-1", nil)
	want := fmt.Sprintf("the steps known from the start would make %d tasks, more than the batch cap of %d",
		(atCap+1)*workflow.MaxFanOut, models.MaxBatchSize)
	if plan != nil || models.ErrorCodeOf(err) != models.CodeInvalid || models.ErrorMessageOf(err) != want {
		t.Fatalf("plan of %d steps, error %v; want %q", len(plan), err, want)
	}
}

// ids returns n task ids with a prefix.
func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

func TestAStepOverTheDependencyLimitStandsInWithoutEdges(t *testing.T) {
	t.Parallel()
	w := diamond(t)
	run := models.WorkflowRun{ID: "diamond-1", Workflow: "diamond"}
	d, _ := workflow.StepByName(w, "d")
	over := fmt.Sprintf("each task of d would depend on %d upstream tasks, more than the limit of %d dependencies",
		models.MaxDependencies+1, models.MaxDependencies)
	tests := []struct {
		name     string
		upstream map[string][]string
		edges    int
		failure  string
	}{
		{"at the limit it is made", map[string][]string{"b": {"t"}, "c": ids("c", models.MaxDependencies-1)},
			models.MaxDependencies, ""},
		{"one over stands in with none", map[string][]string{"b": {"t"}, "c": ids("c", models.MaxDependencies)}, 0, over},
		{"an upstream task named twice counts once", map[string][]string{"b": {"c0"}, "c": ids("c", models.MaxDependencies)},
			models.MaxDependencies, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tasks, failure := workflow.Expand(w, d, run, nil, tt.upstream)
			if failure != tt.failure || len(tasks) != 1 || len(tasks[0].Dependencies) != tt.edges {
				t.Fatalf("%d tasks, failure %q; want one with %d edges, failure %q", len(tasks), failure, tt.edges, tt.failure)
			}
			if marked := tasks[0].Metadata[workflow.FanOutFailedKey] == "true"; marked != (failure != "") {
				t.Errorf("marked failed %v with failure %q", marked, failure)
			}
			refused := workflow.Refuse(w, d, run, tt.upstream, "refused")
			if len(refused) != 1 || len(refused[0].Dependencies) != tt.edges {
				t.Errorf("the refused stand-in has %d edges, want %d", len(refused[0].Dependencies), tt.edges)
			}
		})
	}
}

func TestInitialPlanRefusesAStepOverTheDependencyLimit(t *testing.T) {
	t.Parallel()
	fixed := func(name string, n int) models.WorkflowStep {
		return models.WorkflowStep{Name: name, Title: "t", Parallel: &models.FanOut{Count: n}}
	}
	join := func(deferred bool) models.WorkflowStep {
		st := models.WorkflowStep{Name: "join", Title: "t", DependsOn: []models.StepDependency{{Step: "a"}, {Step: "b"}}}
		if deferred {
			st.Title = "{{a.outputs.x}}"
		}
		return st
	}
	tests := []struct {
		name  string
		steps []models.WorkflowStep
		want  string
	}{
		{"at the limit", []models.WorkflowStep{fixed("a", workflow.MaxFanOut-1), {Name: "b", Title: "t"}, join(false)}, ""},
		{"a step made now", []models.WorkflowStep{fixed("a", workflow.MaxFanOut), fixed("b", 2), join(false)},
			"each task of join would depend on 1002 upstream tasks, more than the limit of 1000 dependencies"},
		{"a step made later", []models.WorkflowStep{fixed("a", workflow.MaxFanOut), fixed("b", 2), join(true)},
			"each task of join would depend on 1002 upstream tasks, more than the limit of 1000 dependencies"},
	}
	if models.MaxDependencies != workflow.MaxFanOut {
		t.Fatalf("the cases assume MaxDependencies %d = MaxFanOut %d", models.MaxDependencies, workflow.MaxFanOut)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := models.Workflow{Name: "wide", ProjectID: "web", Steps: tt.steps}
			plan, err := workflow.InitialPlan(w, "wide-1", nil)
			if tt.want == "" {
				if err != nil || len(plan) == 0 {
					t.Fatalf("plan of %d steps, error %v", len(plan), err)
				}
				return
			}
			if plan != nil || models.ErrorCodeOf(err) != models.CodeInvalid || models.ErrorMessageOf(err) != tt.want {
				t.Fatalf("plan of %d steps, error %v; want %q", len(plan), err, tt.want)
			}
		})
	}
}
