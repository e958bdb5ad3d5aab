package workflow

import (
	"regexp"
	"slices"
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Limits of a workflow.
const (
	// MaxSteps caps the steps of one workflow.
	MaxSteps = 500
	// MaxInputs caps the inputs a workflow declares.
	MaxInputs = 100
	// MaxFanOut caps the tasks one step makes in one run: a parallel
	// count, or the items of a foreach list.
	MaxFanOut = 1000
	// MaxConcurrency caps a step's concurrency.
	MaxConcurrency = 1000
)

// fieldRE matches an output or item field name.
var fieldRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// parseRef reads "<step>.outputs.<field>". ok is false when expr does not
// have that shape; step and field are then empty.
func parseRef(expr string) (step, field string, ok bool) {
	step, field, found := strings.Cut(strings.TrimSpace(expr), ".outputs.")
	if !found || !models.ValidID(step) || !fieldRE.MatchString(field) {
		return "", "", false
	}
	return step, field, true
}

// fansOut reports whether a step makes a fan-out of tasks (parallel or
// foreach), as opposed to exactly one task.
func fansOut(s models.WorkflowStep) bool { return s.Parallel != nil || s.Foreach != "" }

// StepByName returns the workflow's step called name.
func StepByName(w models.Workflow, name string) (models.WorkflowStep, bool) {
	for _, s := range w.Steps {
		if s.Name == name {
			return s, true
		}
	}
	return models.WorkflowStep{}, false
}

// Order returns the names of the workflow's steps in a topological order
// (every step after the steps it depends on), taking at each point the
// earliest-defined step that is ready. Dependencies on unknown steps are
// ignored; steps caught in a cycle come last, in definition order.
func Order(w models.Workflow) []string {
	idx := orderIndexes(w)
	out := make([]string, len(idx))
	for i, k := range idx {
		out[i] = w.Steps[k].Name
	}
	return out
}

// stepIndex maps each step name to the index of its first definition.
func stepIndex(w models.Workflow) map[string]int {
	index := make(map[string]int, len(w.Steps))
	for i, s := range w.Steps {
		if _, dup := index[s.Name]; !dup {
			index[s.Name] = i
		}
	}
	return index
}

// edges returns, per step, the indexes of the distinct known steps it
// depends on (itself excluded).
func edges(w models.Workflow, index map[string]int) [][]int {
	out := make([][]int, len(w.Steps))
	for i, s := range w.Steps {
		for _, d := range s.DependsOn {
			j, ok := index[d.Step]
			if ok && j != i && !slices.Contains(out[i], j) {
				out[i] = append(out[i], j)
			}
		}
	}
	return out
}

// orderIndexes is Order on step indexes.
func orderIndexes(w models.Workflow) []int {
	deps := edges(w, stepIndex(w))
	n := len(w.Steps)
	waiting := make([]int, n) // unplaced dependencies per step
	dependents := make([][]int, n)
	for i, ds := range deps {
		waiting[i] = len(ds)
		for _, d := range ds {
			dependents[d] = append(dependents[d], i)
		}
	}
	placed := make([]bool, n)
	out := make([]int, 0, n)
	for len(out) < n {
		next := -1
		for i := range n {
			if !placed[i] && waiting[i] == 0 {
				next = i
				break
			}
		}
		if next < 0 { // a cycle: the rest in definition order
			for i := range n {
				if !placed[i] {
					out = append(out, i)
				}
			}
			break
		}
		placed[next] = true
		out = append(out, next)
		for _, d := range dependents[next] {
			waiting[d]--
		}
	}
	return out
}

// bitset is a set of step indexes.
type bitset []uint64

func newBitset(n int) bitset    { return make(bitset, (n+63)/64) }
func (b bitset) add(i int)      { b[i/64] |= 1 << (i % 64) }
func (b bitset) has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }
func (b bitset) union(c bitset) {
	for k := range b {
		b[k] |= c[k]
	}
}

// ancestors returns, per step, the set of steps transitively upstream of
// it through depends_on. Inside a cycle the sets may be incomplete.
func ancestors(w models.Workflow, index map[string]int) []bitset {
	deps := edges(w, index)
	out := make([]bitset, len(w.Steps))
	for i := range out {
		out[i] = newBitset(len(w.Steps))
	}
	for _, i := range orderIndexes(w) {
		for _, d := range deps[i] {
			out[i].add(d)
			out[i].union(out[d])
		}
	}
	return out
}

// Deferred reports whether a step's tasks are made only once its upstream
// steps are done: it fans out over an upstream's output, or its title,
// description or expected_count names one
// ({{<step>.outputs.<field>}}). The other steps' tasks are made when the
// run starts.
func Deferred(step models.WorkflowStep) bool {
	if step.Dynamic() {
		return true
	}
	templates := []string{step.Title, step.Description}
	if step.ExpectedCount != nil {
		templates = append(templates, step.ExpectedCount.Template)
	}
	for _, tmpl := range templates {
		for _, p := range placeholders(tmpl) {
			if p.kind == phOutput {
				return true
			}
		}
	}
	return false
}
