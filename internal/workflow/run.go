package workflow

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/agentqueued/agentqueued/internal/models"
)

// StepState is a step's state in a run, derived from its tasks.
type StepState int

// Step states.
const (
	// StepWaiting: its tasks do not exist yet, and it may still get them.
	StepWaiting StepState = iota
	// StepRunning: it has tasks, and not all have finished.
	StepRunning
	// StepDone: it has tasks (or none, as an empty fan-out), all COMPLETED.
	StepDone
	// StepFailed: a task of it is BLOCKED and all have finished, or it can
	// never get its tasks.
	StepFailed
)

// String names the state: waiting, running, done or failed.
func (s StepState) String() string {
	switch s {
	case StepWaiting:
		return "waiting"
	case StepRunning:
		return "running"
	case StepDone:
		return "done"
	case StepFailed:
		return "failed"
	}
	return fmt.Sprintf("StepState(%d)", int(s))
}

// Progress is what a run's steps are, as the store reads them inside its
// transaction: which steps have their tasks, and their tasks counted by
// status.
type Progress struct {
	// Expanded holds the steps whose tasks were made (an empty fan-out,
	// which makes none, included).
	Expanded map[string]bool
	// Counts[step][status] counts the step's tasks.
	Counts map[string]map[models.TaskStatus]int
}

// total counts a step's tasks.
func (p Progress) total(step string) int {
	n := 0
	for _, c := range p.Counts[step] {
		n += c
	}
	return n
}

// expanded counts the steps that have their tasks.
func (p Progress) expanded() int {
	n := 0
	for _, ok := range p.Expanded {
		if ok {
			n++
		}
	}
	return n
}

// StepStates derives every step's state, upstream first. A step with
// tasks is running until they have all finished, then failed when one is
// BLOCKED and done otherwise. A step without tasks is failed when an
// upstream it requires succeeds has failed, and waiting otherwise: for
// its upstreams, or to be made now (DueSteps).
func StepStates(w models.Workflow, p Progress) map[string]StepState {
	out := make(map[string]StepState, len(w.Steps))
	for _, name := range Order(w) {
		st, _ := StepByName(w, name)
		if p.Expanded[name] {
			c := p.Counts[name]
			finished := c[models.StatusCompleted] + c[models.StatusBlocked]
			switch {
			case finished < p.total(name):
				out[name] = StepRunning
			case c[models.StatusBlocked] > 0:
				out[name] = StepFailed
			default:
				out[name] = StepDone
			}
			continue
		}
		state := StepDone // "could expand now", when no upstream says otherwise
		for _, d := range st.DependsOn {
			switch up := out[d.Step]; {
			case up == StepFailed && d.Required():
				state = StepFailed
			case (up == StepWaiting || up == StepRunning) && state != StepFailed:
				state = StepWaiting
			}
		}
		if state == StepDone {
			state = StepWaiting // it is due: DueSteps names it
		}
		out[name] = state
	}
	return out
}

// DueSteps returns the steps of a run whose tasks are to be made now, in
// Order: each step without tasks, not failed, whose upstream steps are
// done (an upstream it does not require succeeds may have failed
// instead).
func DueSteps(w models.Workflow, p Progress) []models.WorkflowStep {
	states := StepStates(w, p)
	var due []models.WorkflowStep
	for _, name := range Order(w) {
		if p.Expanded[name] || states[name] == StepFailed {
			continue
		}
		st, _ := StepByName(w, name)
		ready := true
		for _, d := range st.DependsOn {
			if up := states[d.Step]; up != StepDone && !(up == StepFailed && !d.Required()) {
				ready = false
			}
		}
		if ready {
			due = append(due, st)
		}
	}
	return due
}

// Settlement is a run's status as its steps make it.
type Settlement struct {
	Status models.WorkflowRunStatus
	// Blocked and Total count the run's BLOCKED tasks and all its tasks.
	Blocked, Total int
}

// Settle derives a run's status from its steps: success when every step
// has its tasks and all are COMPLETED; failed when nothing can go on
// (every task finished, no step waiting, and a task BLOCKED or a step
// that can never get its tasks); pending while every task is DEFINED or
// READY; running otherwise. A cancelled run stays cancelled.
func Settle(status models.WorkflowRunStatus, w models.Workflow, p Progress) Settlement {
	var s Settlement
	counts := map[models.TaskStatus]int{}
	for _, c := range p.Counts {
		for st, n := range c {
			counts[st] += n
			s.Total += n
		}
	}
	s.Blocked = counts[models.StatusBlocked]
	if status == models.RunCancelled {
		s.Status = models.RunCancelled
		return s
	}
	states := StepStates(w, p)
	waiting := 0
	for _, name := range Order(w) {
		if states[name] == StepWaiting {
			waiting++
		}
	}
	finished := counts[models.StatusCompleted] + counts[models.StatusBlocked]
	switch {
	case p.expanded() == len(w.Steps) && counts[models.StatusCompleted] == s.Total:
		s.Status = models.RunSuccess
	case finished == s.Total && waiting == 0:
		s.Status = models.RunFailed
	case counts[models.StatusDefined]+counts[models.StatusReady] == s.Total:
		s.Status = models.RunPending
	default:
		s.Status = models.RunRunning
	}
	return s
}

// Reason says why a run ended as it did: for a failed run, how many of
// its tasks are BLOCKED and, when taskID is set, the first task BLOCKED
// by itself (not by an upstream) and its reason why; "" otherwise.
func (s Settlement) Reason(taskID, why string) string {
	if s.Status != models.RunFailed {
		return ""
	}
	reason := fmt.Sprintf("%d of %d tasks are BLOCKED", s.Blocked, s.Total)
	if taskID != "" {
		reason = fmt.Sprintf("task %s is BLOCKED (%s); %s", taskID, why, reason)
	}
	return reason
}

// StepPlan is the tasks one step of a run makes.
type StepPlan struct {
	Step  string
	Tasks []models.BatchTask
}

// InitialPlan returns the steps of a run known from the start, in Order,
// with their tasks: the steps that do not fan out over an output (nor
// name one; see Deferred), nor come after one that does. Each task
// depends, by local id, on every task of its step's upstream steps. The
// tasks are counted before any is made: more than models.MaxBatchSize in
// all is invalid, and none is made. So is a step, made now or later,
// whose upstream steps are all made now and have more than
// models.MaxDependencies tasks together (DependencyRefusal).
func InitialPlan(w models.Workflow, runID string, inputs map[string]string) ([]StepPlan, error) {
	deferred := map[string]bool{}
	var (
		known  []models.WorkflowStep
		counts []int
		total  int
		count  = map[string]int{}
	)
	for _, name := range Order(w) {
		st, _ := StepByName(w, name)
		deferred[name] = Deferred(st)
		upstreamKnown, seen, deps := true, map[string]bool{}, 0
		for _, d := range st.DependsOn {
			deferred[name] = deferred[name] || deferred[d.Step]
			upstreamKnown = upstreamKnown && !deferred[d.Step]
			if !seen[d.Step] {
				seen[d.Step], deps = true, deps+count[d.Step]
			}
		}
		if why := DependencyRefusal(st, deps); upstreamKnown && why != "" {
			return nil, models.Errorf(models.CodeInvalid, "%s", why)
		}
		if deferred[name] {
			continue
		}
		_, n, err := FanOut(st, nil)
		if err != nil {
			return nil, err
		}
		count[name] = n
		known, counts, total = append(known, st), append(counts, n), total+n
	}
	if total > models.MaxBatchSize {
		return nil, models.Errorf(models.CodeInvalid, "the steps known from the start would make %d tasks, more than the batch cap of %d",
			total, models.MaxBatchSize)
	}
	local := map[string][]string{}
	plan := make([]StepPlan, 0, len(known))
	for i, st := range known {
		var deps []models.BatchDependency
		for _, d := range st.DependsOn {
			req := d.Required()
			for _, id := range local[d.Step] {
				deps = append(deps, models.BatchDependency{ID: id, RequiresSuccess: &req})
			}
		}
		tasks, err := StepTasks(w, st, runID, inputs, nil, counts[i], nil)
		if err != nil {
			return nil, err
		}
		for i := range tasks {
			tasks[i].Dependencies = deps
			local[st.Name] = append(local[st.Name], tasks[i].LocalID)
		}
		plan = append(plan, StepPlan{Step: st.Name, Tasks: tasks})
	}
	return plan, nil
}

// ExpansionRefusals counts the tasks the due steps of a run would make
// together (FanOut's count for each; one, its stand-in, for a step whose
// fan-out cannot be read), without making any. When they are more than
// models.MaxBatchSize in all, it returns why each due step that would
// make tasks cannot, by step name, to fail them (Refuse) instead of
// making what could never be created; nil when they fit.
func ExpansionRefusals(due []models.WorkflowStep, outputs map[string]json.RawMessage) map[string]string {
	counts := make([]int, len(due))
	total := 0
	for i, st := range due {
		counts[i] = 1
		if _, n, err := FanOut(st, outputs); err == nil {
			counts[i] = n
		}
		total += counts[i]
	}
	if total <= models.MaxBatchSize {
		return nil
	}
	out := map[string]string{}
	for i, st := range due {
		if _, _, err := FanOut(st, outputs); err != nil || counts[i] == 0 {
			continue // its own failure, or nothing to make
		}
		if len(due) == 1 {
			out[st.Name] = fmt.Sprintf("%s would make %d tasks, more than the batch cap of %d", st.Name, counts[i], models.MaxBatchSize)
			continue
		}
		out[st.Name] = fmt.Sprintf("%s would make %d tasks and the %d steps due with it %d more: %d in all, more than the batch cap of %d",
			st.Name, counts[i], len(due)-1, total-counts[i], total, models.MaxBatchSize)
	}
	return out
}

// FanOutFailedKey is the metadata key that marks the task standing for a
// step whose fan-out failed ("true").
const FanOutFailedKey = "fanout_failed"

// Expand returns the tasks a due step makes in a run, each depending on
// every task of the step's upstream steps (upstream maps a step's name to
// its tasks' ids; an upstream named twice is one edge, required when
// either is). outputs are the run's steps' outputs (see FanOut). A step
// whose fan-out cannot be read or rendered makes one task standing for
// it, marked with FanOutFailedKey, and failure is the reason. So does a
// step whose tasks would depend on more than models.MaxDependencies
// upstream tasks (DependencyRefusal), counted before any task is built;
// its stand-in depends on none.
func Expand(w models.Workflow, st models.WorkflowStep, run models.WorkflowRun, outputs map[string]json.RawMessage,
	upstream map[string][]string) (tasks []models.BatchTask, failure string) {
	deps := mergeDeps(upstreamDeps(st, upstream))
	if why := DependencyRefusal(st, len(deps)); why != "" {
		return []models.BatchTask{StandIn(w, st, run, why)}, why
	}
	items, count, err := FanOut(st, outputs)
	if err == nil {
		tasks, err = StepTasks(w, st, run.ID, run.Inputs, items, count, outputs)
	}
	if err != nil {
		failure = models.ErrorMessageOf(err)
		return Refuse(w, st, run, upstream, failure), failure
	}
	for i := range tasks {
		tasks[i].Dependencies = append([]models.BatchDependency(nil), deps...)
	}
	return tasks, ""
}

// Refuse returns the one task a due step makes in a run instead of its
// own, failure the reason: its stand-in (StandIn), depending on every
// task of the step's upstream steps as Expand's tasks would, or on none
// when they are more than models.MaxDependencies (it is stopped at once
// either way).
func Refuse(w models.Workflow, st models.WorkflowStep, run models.WorkflowRun, upstream map[string][]string,
	failure string) []models.BatchTask {
	standIn := StandIn(w, st, run, failure)
	if deps := mergeDeps(upstreamDeps(st, upstream)); len(deps) <= models.MaxDependencies {
		standIn.Dependencies = deps
	}
	return []models.BatchTask{standIn}
}

// DependencyRefusal says why the tasks of step st cannot be made when
// they would depend on n upstream tasks: more than models.MaxDependencies,
// the most one task may have; "" when they fit.
func DependencyRefusal(st models.WorkflowStep, n int) string {
	if n <= models.MaxDependencies {
		return ""
	}
	return fmt.Sprintf("each task of %s would depend on %d upstream tasks, more than the limit of %d dependencies",
		st.Name, n, models.MaxDependencies)
}

// upstreamDeps returns an edge to every task of step st's upstream steps,
// required as its dependency on their step is.
func upstreamDeps(st models.WorkflowStep, upstream map[string][]string) []models.BatchDependency {
	var deps []models.BatchDependency
	for _, d := range st.DependsOn {
		req := d.Required()
		for _, id := range upstream[d.Step] {
			deps = append(deps, models.BatchDependency{ID: id, RequiresSuccess: &req})
		}
	}
	return deps
}

// StandIn returns the task standing for step st of a run whose tasks
// could not be made, marked with FanOutFailedKey, failure its
// description; its dependencies are left to the caller.
func StandIn(w models.Workflow, st models.WorkflowStep, run models.WorkflowRun, failure string) models.BatchTask {
	return models.BatchTask{LocalID: st.Name, Title: fmt.Sprintf("%s: fan-out failed", st.Name),
		Description: failure, Kind: st.Kind,
		Metadata: map[string]string{"workflow": w.Name, "workflow_run": run.ID, "step": st.Name, FanOutFailedKey: "true"},
		Workflow: &models.TaskPlace{RunID: run.ID, Step: st.Name}}
}

// mergeDeps folds repeated upstreams into one edge, required when any is.
func mergeDeps(deps []models.BatchDependency) []models.BatchDependency {
	var out []models.BatchDependency
	at := map[string]int{}
	for _, d := range deps {
		if k, ok := at[d.ID]; ok {
			r := out[k].Required() || d.Required()
			out[k].RequiresSuccess = &r
			continue
		}
		at[d.ID] = len(out)
		out = append(out, d)
	}
	return out
}

// RetryOrder sorts the tasks a retry restarts upstream first: by their
// step's place in Order, keeping the order given within a step.
func RetryOrder(w models.Workflow, ts []models.Task) {
	rank := map[string]int{}
	for i, name := range Order(w) {
		rank[name] = i
	}
	sort.SliceStable(ts, func(i, j int) bool { return rank[ts[i].StepName] < rank[ts[j].StepName] })
}

// RetryEvent returns the event a retry restarts a task of the run with,
// given how many of its upstream tasks are not COMPLETED: ADMIN_RESTART
// for a FAILED task, or a BLOCKED one (blocked by itself) whose upstream
// tasks are all COMPLETED; UPSTREAM_REOPENED (back to waiting) for such a
// BLOCKED task with one that is not. ok is false for any other task: one
// BLOCKED only because an upstream was follows its root, and one that
// moved on meanwhile is left alone.
func RetryEvent(t models.Task, unmet int) (ev models.TaskEvent, ok bool) {
	switch {
	case t.Status == models.StatusFailed:
		return models.EventAdminRestart, true
	case t.Status != models.StatusBlocked || t.CascadeRootID != "":
		return "", false
	case unmet > 0:
		return models.EventUpstreamReopened, true
	}
	return models.EventAdminRestart, true
}
