package workflow_test

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/workflow"
)

// genWorkflow draws a DAG of up to seven steps, defined in any order: a
// step makes one task, a fixed count, or fans out over an upstream's
// output; its dependencies, on steps drawn before it, are required or not.
func genWorkflow(t *rapid.T) models.Workflow {
	n := rapid.IntRange(1, 7).Draw(t, "steps")
	w := models.Workflow{Name: "prop", ProjectID: "web"}
	for i := range n {
		st := models.WorkflowStep{Name: fmt.Sprintf("s%d", i), Title: "T"}
		for j := range i {
			if rapid.IntRange(0, 2).Draw(t, "depends") == 0 {
				req := rapid.Bool().Draw(t, "requires success")
				st.DependsOn = append(st.DependsOn, models.StepDependency{Step: fmt.Sprintf("s%d", j), RequiresSuccess: &req})
			}
		}
		switch rapid.IntRange(0, 3).Draw(t, "shape") {
		case 1:
			st.Parallel = &models.FanOut{Count: rapid.IntRange(1, 3).Draw(t, "count")}
		case 2:
			if len(st.DependsOn) > 0 {
				st.Foreach = rapid.SampledFrom(st.DependsOn).Draw(t, "over").Step + ".outputs.items"
			}
		}
		w.Steps = append(w.Steps, st)
	}
	perm := rapid.Permutation(w.Steps).Draw(t, "definition order")
	w.Steps = perm
	return w
}

// simRun is a run as the store keeps it: its steps' tasks, by status.
type simRun struct {
	w     models.Workflow
	tasks map[string][]models.TaskStatus // by step; present once expanded
}

// progress is the run's Progress, its maps filled in the order drawn, so
// that nothing may depend on the order maps are filled or read in.
func (r *simRun) progress(t *rapid.T) workflow.Progress {
	p := workflow.Progress{Expanded: map[string]bool{}, Counts: map[string]map[models.TaskStatus]int{}}
	for _, step := range rapid.Permutation(slices.Sorted(maps.Keys(r.tasks))).Draw(t, "fill order") {
		p.Expanded[step] = true
		for _, st := range r.tasks[step] {
			if p.Counts[step] == nil {
				p.Counts[step] = map[models.TaskStatus]int{}
			}
			p.Counts[step][st]++
		}
	}
	return p
}

// advance makes the tasks of the due steps until none is, as the store
// does; a fan-out makes a drawn number of tasks, or one that stands for
// it, BLOCKED at once, when its output cannot be read.
func (r *simRun) advance(t *rapid.T) {
	for pass := 0; pass <= len(r.w.Steps); pass++ {
		due := workflow.DueSteps(r.w, r.progress(t))
		if len(due) == 0 {
			return
		}
		for _, st := range due {
			if _, ok := r.tasks[st.Name]; ok {
				t.Fatalf("step %s is due again", st.Name)
			}
			n := 1
			switch {
			case st.Foreach != "":
				n = rapid.IntRange(-1, 3).Draw(t, "items")
			case st.Parallel != nil:
				n = st.Parallel.Count
			}
			tasks := []models.TaskStatus{}
			if n < 0 {
				tasks = append(tasks, models.StatusBlocked)
			}
			for range n {
				tasks = append(tasks, models.StatusDefined)
			}
			r.tasks[st.Name] = tasks
		}
	}
	t.Fatalf("steps still due after %d passes", len(r.w.Steps)+1)
}

// upstreamState says whether a step's upstream tasks let it run: all
// finished, and blocked when one it requires succeed is BLOCKED.
func (r *simRun) upstreamState(step string) (finished, blocked bool) {
	st, _ := workflow.StepByName(r.w, step)
	for _, d := range st.DependsOn {
		for _, s := range r.tasks[d.Step] {
			if !s.Terminal() {
				return false, false
			}
			if s == models.StatusBlocked && d.Required() {
				blocked = true
			}
		}
	}
	return true, blocked
}

// step moves one task on: starts it, or finishes it (BLOCKED at once when
// an upstream it requires is). It reports false when every task has
// finished.
func (r *simRun) step(t *rapid.T) bool {
	type ref struct {
		step string
		i    int
	}
	var movable []ref
	for _, step := range slices.Sorted(maps.Keys(r.tasks)) {
		if finished, _ := r.upstreamState(step); !finished {
			continue
		}
		for i, s := range r.tasks[step] {
			if !s.Terminal() {
				movable = append(movable, ref{step, i})
			}
		}
	}
	if len(movable) == 0 {
		return false
	}
	m := rapid.SampledFrom(movable).Draw(t, "task")
	_, blocked := r.upstreamState(m.step)
	cur := &r.tasks[m.step][m.i]
	switch {
	case blocked:
		*cur = models.StatusBlocked
	case *cur == models.StatusDefined:
		*cur = rapid.SampledFrom([]models.TaskStatus{models.StatusReady, models.StatusInProgress}).Draw(t, "start")
	default:
		*cur = rapid.SampledFrom([]models.TaskStatus{models.StatusCompleted, models.StatusCompleted, models.StatusBlocked}).Draw(t, "finish")
	}
	return true
}

// check asserts what the run's decisions must say of its state.
func (r *simRun) check(t *rapid.T, status models.WorkflowRunStatus) models.WorkflowRunStatus {
	p := r.progress(t)
	set := workflow.Settle(status, r.w, p)
	states := workflow.StepStates(r.w, p)
	// The same state, its maps filled in another order, decides the same.
	for range 3 {
		q := r.progress(t)
		if got := workflow.Settle(status, r.w, q); got != set {
			t.Fatalf("Settle = %+v, then %+v on the same run", set, got)
		}
		if got := workflow.StepStates(r.w, q); !reflect.DeepEqual(got, states) {
			t.Fatalf("StepStates = %v, then %v on the same run", states, got)
		}
	}
	var total, completed, blocked, waiting int
	allStarted := true
	for _, ts := range r.tasks {
		for _, s := range ts {
			total++
			switch s {
			case models.StatusCompleted:
				completed++
			case models.StatusBlocked:
				blocked++
			}
			if s != models.StatusDefined && s != models.StatusReady {
				allStarted = false
			}
		}
	}
	failedStep := false
	due := map[string]bool{}
	for _, st := range workflow.DueSteps(r.w, p) {
		due[st.Name] = true
	}
	for _, name := range workflow.Order(r.w) {
		_, expanded := r.tasks[name]
		st, _ := workflow.StepByName(r.w, name)
		var requiredFailed, upstreamGoesOn bool
		for _, d := range st.DependsOn {
			switch states[d.Step] {
			case workflow.StepFailed:
				requiredFailed = requiredFailed || d.Required()
			case workflow.StepWaiting, workflow.StepRunning:
				upstreamGoesOn = true
			}
		}
		s := states[name]
		if expanded {
			want := workflow.StepDone
			for _, ts := range r.tasks[name] {
				switch {
				case !ts.Terminal():
					want = workflow.StepRunning
				case ts == models.StatusBlocked && want == workflow.StepDone:
					want = workflow.StepFailed
				}
			}
			if s != want {
				t.Fatalf("step %s with tasks %v is %s, want %s", name, r.tasks[name], s, want)
			}
		}
		switch {
		case expanded && s == workflow.StepWaiting:
			t.Fatalf("step %s has its tasks but is waiting", name)
		case expanded && due[name]:
			t.Fatalf("step %s has its tasks but is due", name)
		case !expanded && s == workflow.StepFailed && !requiredFailed:
			t.Fatalf("step %s failed without tasks, yet no upstream it requires failed", name)
		case !expanded && s != workflow.StepFailed && requiredFailed:
			t.Fatalf("step %s is %s, yet an upstream it requires failed", name, s)
		case !expanded && s == workflow.StepWaiting && due[name] == upstreamGoesOn:
			t.Fatalf("step %s: due %v, with upstream steps still going on %v", name, due[name], upstreamGoesOn)
		}
		if s == workflow.StepWaiting {
			waiting++
		}
		if s == workflow.StepFailed && !expanded {
			failedStep = true
		}
	}
	if set.Total != total || set.Blocked != blocked {
		t.Fatalf("Settle counts %d tasks, %d BLOCKED; the run has %d, %d", set.Total, set.Blocked, total, blocked)
	}
	everyStep := len(r.tasks) == len(r.w.Steps)
	switch set.Status {
	case models.RunSuccess:
		if !everyStep || completed != total {
			t.Fatalf("success with %d of %d steps made and %d of %d tasks COMPLETED", len(r.tasks), len(r.w.Steps), completed, total)
		}
	case models.RunFailed:
		if completed+blocked != total || waiting > 0 || len(workflow.DueSteps(r.w, p)) > 0 {
			t.Fatalf("failed with %d of %d tasks finished and %d steps waiting", completed+blocked, total, waiting)
		}
		if blocked == 0 && !failedStep {
			t.Fatalf("failed with nothing BLOCKED and no step failed")
		}
	case models.RunPending:
		if !allStarted {
			t.Fatalf("pending while a task has started")
		}
	case models.RunRunning:
		if everyStep && completed == total {
			t.Fatalf("running, yet every step is made and every task COMPLETED")
		}
	default:
		t.Fatalf("status %q", set.Status)
	}
	return set.Status
}

// TestRunDecisionsProperties runs random workflows to their end through
// the pure decisions: at every point the status agrees with the tasks,
// the same state decides the same whatever order its maps are filled in,
// and a run whose tasks have all finished, with no step due, has ended in
// success or failure.
func TestRunDecisionsProperties(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		w := genWorkflow(t)
		r := &simRun{w: w, tasks: map[string][]models.TaskStatus{}}
		plan, err := workflow.InitialPlan(w, "prop-1", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range plan {
			ts := []models.TaskStatus{}
			for range p.Tasks {
				ts = append(ts, models.StatusDefined)
			}
			r.tasks[p.Step] = ts
		}
		status := models.RunPending
		for moves := 0; ; moves++ {
			if moves > 1000 {
				t.Fatalf("the run goes on after %d moves", moves)
			}
			// Before and after the due steps get their tasks: the store
			// settles after, but the decisions hold of any state.
			status = r.check(t, status)
			r.advance(t)
			status = r.check(t, status)
			if !r.step(t) {
				break
			}
		}
		r.advance(t)
		status = r.check(t, status)
		if status != models.RunSuccess && status != models.RunFailed {
			t.Fatalf("every task finished and nothing due, yet the run is %s (tasks %v)", status, r.tasks)
		}
	})
}
