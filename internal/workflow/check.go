package workflow

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/statemachine"
)

// problem is one thing wrong with a workflow.
type problem struct {
	// path locates the problem in the document: "steps[2].depends_on[0]";
	// empty for the document as a whole.
	path string
	// at, when set, is the path whose position is reported instead of
	// path's.
	at  string
	msg string
	// line and col are the position, when known (from 1).
	line, col int
}

// text returns the problem without a position: "PATH: MESSAGE".
func (p problem) text() string {
	if p.path == "" {
		return p.msg
	}
	return p.path + ": " + p.msg
}

// invalid returns the lines as one CodeInvalid error.
func invalid(lines []string) error {
	return models.Errorf(models.CodeInvalid, "%s", strings.Join(lines, "\n"))
}

// Validate checks an already decoded workflow: required and well-formed
// fields, steps that exist, an acyclic graph, fan-outs over outputs of
// upstream steps that make one task, and templates using only the
// placeholders their step can fill. Every problem is one line "PATH:
// MESSAGE" of the returned *models.Error (CodeInvalid); nil when there is
// none. Parse makes the same checks.
func Validate(w models.Workflow) error {
	probs := check(w)
	if len(probs) == 0 {
		return nil
	}
	lines := make([]string, len(probs))
	for i, p := range probs {
		lines[i] = p.text()
	}
	return invalid(lines)
}

// checker collects the problems of one workflow.
type checker struct {
	w     models.Workflow
	index map[string]int // step name -> index of its first definition
	anc   []bitset       // per step, the steps upstream of it
	probs []problem
}

// check returns every problem of w, in the order of its fields.
func check(w models.Workflow) []problem {
	c := &checker{w: w}
	c.workflow()
	return c.probs
}

func (c *checker) add(path, format string, args ...any) {
	c.probs = append(c.probs, problem{path: path, msg: fmt.Sprintf(format, args...)})
}

// text checks the text at path with check (models.CheckLine or
// models.CheckText) and adds its problem; it reports whether there was
// none.
func (c *checker) text(check func(field, s string, max int) error, path, v string, max int) bool {
	err := check(path, v, max)
	if err != nil {
		c.add(path, "%s", strings.TrimPrefix(models.ErrorMessageOf(err), path+": "))
	}
	return err == nil
}

const idRule = "(1-64 lower-case letters, digits, '-' or '_')"

const fieldRule = "(letters, digits and '_', not starting with a digit)"

func (c *checker) workflow() {
	w := c.w
	switch {
	case w.Name == "":
		c.add("name", "required")
	case !models.ValidID(w.Name):
		c.add("name", "%q is not a workflow name %s", w.Name, idRule)
	}
	switch {
	case w.ProjectID == "":
		c.add("project", "required")
	case !models.ValidID(w.ProjectID):
		c.add("project", "%q is not a project id %s", w.ProjectID, idRule)
	}
	c.text(models.CheckText, "description", w.Description, models.MaxDescriptionLen)
	if w.Timezone != "" && c.text(models.CheckLine, "timezone", w.Timezone, models.MaxShortLen) {
		if _, err := time.LoadLocation(w.Timezone); err != nil {
			c.add("timezone", "%q is not a known time zone", w.Timezone)
		}
	}
	if w.Schedule != "" && c.text(models.CheckLine, "schedule", w.Schedule, models.MaxShortLen) {
		// The zone is checked above, on its own line.
		if _, _, err := models.ParseCron(w.Schedule, "", "schedule", "timezone"); err != nil {
			c.add("schedule", "%s", strings.TrimPrefix(models.ErrorMessageOf(err), "schedule: "))
		}
	}
	c.inputs()
	switch {
	case len(w.Steps) == 0:
		c.add("steps", "required (at least one step)")
		return
	case len(w.Steps) > MaxSteps:
		c.add("steps", "at most %d steps (got %d)", MaxSteps, len(w.Steps))
		return
	}
	c.index = stepIndex(w)
	c.anc = ancestors(w, c.index)
	for i := range w.Steps {
		c.step(i)
	}
	c.cycle()
}

func (c *checker) step(i int) {
	s := c.w.Steps[i]
	p := fmt.Sprintf("steps[%d]", i)
	switch {
	case s.Name == "":
		c.add(p+".name", "required")
	case !models.ValidID(s.Name):
		c.add(p+".name", "%q is not a step name %s", s.Name, idRule)
	case c.index[s.Name] != i:
		c.add(p+".name", "duplicate step %q (also steps[%d])", s.Name, c.index[s.Name])
	}
	if strings.TrimSpace(s.Title) == "" {
		c.add(p+".title", "required")
	} else {
		c.text(models.CheckLine, p+".title", s.Title, models.MaxTitleLen)
	}
	c.text(models.CheckText, p+".description", s.Description, models.MaxDescriptionLen)
	if s.Profile != "" && !models.ValidID(s.Profile) {
		c.add(p+".profile", "%q is not a profile name %s", s.Profile, idRule)
	}
	if s.AgentType != "" && !slices.Contains(models.AgentTypes, s.AgentType) {
		c.add(p+".agent_type", "%q is not an agent type (%s)", s.AgentType, strings.Join(models.AgentTypes, ", "))
	}
	for j, l := range s.RunnerLabels {
		if !models.ValidID(l) {
			c.add(fmt.Sprintf("%s.runner_labels[%d]", p, j), "%q is not a label %s", l, idRule)
		} else if slices.Contains(s.RunnerLabels[:j], l) {
			c.add(fmt.Sprintf("%s.runner_labels[%d]", p, j), "%q is listed twice", l)
		}
	}
	c.text(models.CheckLine, p+".kind", s.Kind, models.MaxKindLen)
	if s.Priority != nil && *s.Priority < 0 {
		c.add(p+".priority", "must not be negative (0 is the most urgent)")
	}
	if s.MaxRetries != nil && (*s.MaxRetries < 0 || *s.MaxRetries > 100) {
		c.add(p+".max_retries", "must be between 0 and 100 (got %d)", *s.MaxRetries)
	}
	if len(s.TestCommands) > models.MaxListEntries {
		c.add(p+".test_commands", "at most %d entries", models.MaxListEntries)
	} else {
		for j, cmd := range s.TestCommands {
			if strings.TrimSpace(cmd) == "" {
				c.add(fmt.Sprintf("%s.test_commands[%d]", p, j), "empty command")
			} else {
				c.text(models.CheckText, fmt.Sprintf("%s.test_commands[%d]", p, j), cmd, models.MaxTestCommandLen)
			}
		}
	}
	if s.Verification != "" && !s.Verification.Valid() {
		c.add(p+".verification", "must be AUTO_TEST, QA_AGENT or HUMAN (got %q)", s.Verification)
	}
	if !models.ValidTaskTimeout(s.Timeout.Std()) {
		c.add(p+".timeout", "must be 0 (none) or between %s and %s (got %s)", models.MinTaskTimeout, models.MaxTaskTimeout, s.Timeout)
	}
	if s.Concurrency < 0 || s.Concurrency > MaxConcurrency {
		c.add(p+".concurrency", "must be between 0 and %d (got %d)", MaxConcurrency, s.Concurrency)
	}
	c.dependsOn(i, p)
	c.fanOut(i, p)
	c.expectedCount(i, p)
	for _, t := range []struct{ key, text string }{{"title", s.Title}, {"description", s.Description}} {
		for _, ph := range placeholders(t.text) {
			if msg := c.placeholder(i, ph); msg != "" {
				c.add(p+"."+t.key, "%s: %s", ph.name(), msg)
			}
		}
	}
}

// expectedCount checks step i's expected_count: a whole number from 1 to
// models.MaxExpectedCount, or one placeholder the step can fill whose
// value can be a number.
func (c *checker) expectedCount(i int, p string) {
	ec := c.w.Steps[i].ExpectedCount
	if ec == nil {
		return
	}
	path := p + ".expected_count"
	if ec.Template == "" {
		if ec.Count < 1 || ec.Count > models.MaxExpectedCount {
			c.add(path, "must be between 1 and %d (got %d)", models.MaxExpectedCount, ec.Count)
		}
		return
	}
	if !c.text(models.CheckLine, path, ec.Template, models.MaxShortLen) {
		return
	}
	ph, ok := onePlaceholder(ec.Template)
	if !ok {
		c.add(path, "%q is neither a whole number nor one placeholder such as {{<step>.outputs.<field>}}", ec.Template)
		return
	}
	switch ph.kind {
	case phRunID, phRunWorkflow:
		c.add(path, "%s: not a number (allowed here: %s)", ph.name(), c.allowedCounts(i))
		return
	}
	if msg := c.placeholder(i, ph); msg != "" {
		if ph.kind == phUnknown {
			msg = "unknown placeholder; allowed here: " + c.allowedCounts(i)
		}
		c.add(path, "%s: %s", ph.name(), msg)
	}
}

// allowedCounts lists the placeholders step i's expected_count can use:
// those of its templates that can be a number.
func (c *checker) allowedCounts(i int) string {
	var out []string
	for _, a := range strings.Split(c.allowed(i), ", ") {
		if a != "{{run.id}}" && a != "{{run.workflow}}" {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return "none (give a number)"
	}
	return strings.Join(out, ", ")
}

func (c *checker) dependsOn(i int, p string) {
	s := c.w.Steps[i]
	if len(s.DependsOn) > MaxSteps {
		c.add(p+".depends_on", "at most %d entries", MaxSteps)
		return
	}
	first := map[string]int{}
	for j, d := range s.DependsOn {
		dp := fmt.Sprintf("%s.depends_on[%d]", p, j)
		_, known := c.index[d.Step]
		k, dup := first[d.Step]
		switch {
		case d.Step == "":
			c.add(dp, "step required")
		case d.Step == s.Name:
			c.add(dp, "a step cannot depend on itself")
		case !known:
			c.add(dp, "unknown step %q (steps: %s)", d.Step, c.stepList())
		case dup:
			c.add(dp, "duplicate dependency on %q (also depends_on[%d])", d.Step, k)
		}
		if !dup {
			first[d.Step] = j
		}
	}
}

func (c *checker) fanOut(i int, p string) {
	s := c.w.Steps[i]
	if s.Parallel != nil && s.Foreach != "" {
		c.add(p+".foreach", "use either parallel or foreach, not both")
	}
	if f := s.Parallel; f != nil {
		switch {
		case f.From != "" && f.Count != 0:
			c.add(p+".parallel", "a count or <step>.outputs.<field>, not both")
		case f.From != "":
			if c.text(models.CheckLine, p+".parallel", f.From, models.MaxShortLen) {
				c.ref(i, p+".parallel", f.From, fmt.Sprintf("a count (1-%d) or ", MaxFanOut))
			}
		case f.Count < 1 || f.Count > MaxFanOut:
			c.add(p+".parallel", "must be between 1 and %d (got %d)", MaxFanOut, f.Count)
		}
	}
	if s.Foreach != "" && c.text(models.CheckLine, p+".foreach", s.Foreach, models.MaxShortLen) {
		c.ref(i, p+".foreach", s.Foreach, "")
	}
}

// ref checks the "<step>.outputs.<field>" a step fans out over; alt names
// what else the field could have been.
func (c *checker) ref(i int, path, expr, alt string) {
	step, field, found := strings.Cut(strings.TrimSpace(expr), ".outputs.")
	switch {
	case !found || step == "" || strings.ContainsAny(step, ". \t"):
		c.add(path, "%q is not %s<step>.outputs.<field>", expr, alt)
	case !fieldRE.MatchString(field):
		c.add(path, "%q is not a field name %s", field, fieldRule)
	default:
		if msg := c.upstream(i, step); msg != "" {
			c.add(path, "%s", msg)
		}
	}
}

// upstream says why step i cannot read the outputs of the step called
// name, or returns "".
func (c *checker) upstream(i int, name string) string {
	j, known := c.index[name]
	switch {
	case !known:
		return fmt.Sprintf("unknown step %q (steps: %s)", name, c.stepList())
	case j == i || name == c.w.Steps[i].Name:
		return "a step cannot read its own outputs"
	case !c.anc[i].has(j):
		return fmt.Sprintf("%s is not upstream of %s (add it to depends_on)", name, c.w.Steps[i].Name)
	case fansOut(c.w.Steps[j]):
		return fmt.Sprintf("%s makes several tasks (it has parallel or foreach); only the outputs of a step that makes one task can be read", name)
	}
	return ""
}

// placeholder says why step i cannot use ph, or returns "".
func (c *checker) placeholder(i int, ph placeholder) string {
	s := c.w.Steps[i]
	switch ph.kind {
	case phRunID, phRunWorkflow:
		return ""
	case phInput:
		if !slices.ContainsFunc(c.w.Inputs, func(in models.WorkflowInput) bool { return in.Name == ph.field }) {
			return fmt.Sprintf("no input %q is declared (%s)", ph.field, inputList(c.w))
		}
		return ""
	case phItem, phItemField:
		if s.Foreach == "" {
			return "only in steps with foreach"
		}
		if ph.kind == phItemField && !fieldRE.MatchString(ph.field) {
			return fmt.Sprintf("%q is not a field name %s", ph.field, fieldRule)
		}
		return ""
	case phIndex, phCount:
		if !fansOut(s) {
			return "only in steps with parallel or foreach"
		}
		return ""
	case phOutput:
		if !fieldRE.MatchString(ph.field) {
			return fmt.Sprintf("%q is not a field name %s", ph.field, fieldRule)
		}
		return c.upstream(i, ph.step)
	}
	return "unknown placeholder; allowed here: " + c.allowed(i)
}

// allowed lists the placeholders step i can use.
func (c *checker) allowed(i int) string {
	s := c.w.Steps[i]
	list := []string{"{{run.id}}", "{{run.workflow}}"}
	if len(c.w.Inputs) > 0 {
		list = append(list, "{{inputs.<name>}}")
	}
	if s.Foreach != "" {
		list = append(list, "{{item}}", "{{item.<field>}}")
	}
	if fansOut(s) {
		list = append(list, "{{index}}", "{{count}}")
	}
	n := 0
	for j, u := range c.w.Steps {
		if c.anc[i].has(j) && !fansOut(u) && c.index[u.Name] == j {
			if n++; n > 10 {
				list = append(list, "…")
				break
			}
			list = append(list, "{{"+u.Name+".outputs.<field>}}")
		}
	}
	return strings.Join(list, ", ")
}

// stepList names the workflow's steps for messages.
func (c *checker) stepList() string {
	var names []string
	for j, s := range c.w.Steps {
		if s.Name == "" || c.index[s.Name] != j {
			continue
		}
		if len(names) == 20 {
			names = append(names, "…")
			break
		}
		names = append(names, s.Name)
	}
	return strings.Join(names, ", ")
}

// cycle reports one dependency cycle, if any, at the dependency that
// closes it: "a -> b -> a" reads "a depends on b, which depends on a".
func (c *checker) cycle() {
	graph := make(map[string][]string, len(c.w.Steps))
	for i, s := range c.w.Steps {
		if c.index[s.Name] != i {
			continue // a duplicate, reported as such
		}
		deps := []string{}
		for _, d := range s.DependsOn {
			if _, known := c.index[d.Step]; known && d.Step != s.Name {
				deps = append(deps, d.Step)
			}
		}
		graph[s.Name] = deps
	}
	var ce *statemachine.CyclicDependencyError
	if !errors.As(statemachine.ValidateDAG(graph), &ce) {
		return
	}
	i := c.index[ce.From]
	j := slices.IndexFunc(c.w.Steps[i].DependsOn, func(d models.StepDependency) bool { return d.Step == ce.To })
	c.probs = append(c.probs, problem{
		path: fmt.Sprintf("steps[%d]", i),
		at:   fmt.Sprintf("steps[%d].depends_on[%d]", i, j),
		msg:  "dependency cycle: " + strings.Join(cyclePath(graph, ce.From, ce.To), " -> "),
	})
}

// cyclePath returns from, to, then the shortest way from to back to from.
func cyclePath(graph map[string][]string, from, to string) []string {
	prev := map[string]string{to: ""}
	queue := []string{to}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if n == from {
			var back []string
			for m := from; m != ""; m = prev[m] {
				back = append(back, m)
			}
			slices.Reverse(back) // to … from
			return append([]string{from}, back...)
		}
		for _, d := range graph[n] {
			if _, seen := prev[d]; !seen {
				prev[d] = n
				queue = append(queue, d)
			}
		}
	}
	return []string{from, to} // not reached: to leads back to from
}

// inputs checks the declared inputs: names, texts, and that a required
// input has no default and the workflow no schedule (a scheduled run is
// given no value).
func (c *checker) inputs() {
	if len(c.w.Inputs) > MaxInputs {
		c.add("inputs", "at most %d inputs (got %d)", MaxInputs, len(c.w.Inputs))
		return
	}
	seen := map[string]bool{}
	for i, in := range c.w.Inputs {
		p := fmt.Sprintf("inputs[%d]", i)
		switch {
		case in.Name == "":
			c.add(p+".name", "required")
		case !fieldRE.MatchString(in.Name) || len(in.Name) > models.MaxShortLen:
			c.add(p+".name", "%q is not an input name %s", in.Name, fieldRule)
		case seen[in.Name]:
			c.add(p+".name", "input %q is declared twice", in.Name)
		}
		seen[in.Name] = true
		c.text(models.CheckText, p+".description", in.Description, models.MaxDescriptionLen)
		if in.Default != nil {
			c.text(models.CheckText, p+".default", *in.Default, models.MaxDescriptionLen)
		}
		switch {
		case in.Required && in.Default != nil:
			c.add(p+".required", "a required input has no default (drop one of them)")
		case in.Required && c.w.Schedule != "":
			c.add(p+".required", "a workflow with a schedule cannot require an input: its scheduled runs are given none (give it a default)")
		}
	}
}

// inputList names a workflow's inputs for messages.
func inputList(w models.Workflow) string {
	if len(w.Inputs) == 0 {
		return "workflow " + w.Name + " declares no inputs"
	}
	names := make([]string, len(w.Inputs))
	for i, in := range w.Inputs {
		names[i] = in.Name
	}
	return "inputs: " + strings.Join(names, ", ")
}

// ResolveInputs checks the values given for a run of w and fills in the
// defaults. Every problem is one line of the returned *models.Error
// (CodeInvalid), naming the input: a value for an input w does not
// declare, a required input without a value, a value that is not text
// (control characters, too long). The answer holds every declared input;
// an optional one without a value or a default is "".
func ResolveInputs(w models.Workflow, given map[string]string) (map[string]string, error) {
	var problems []string
	out := make(map[string]string, len(w.Inputs))
	declared := map[string]bool{}
	for _, in := range w.Inputs {
		declared[in.Name] = true
		v, ok := given[in.Name]
		switch {
		case ok:
		case in.Default != nil:
			v = *in.Default
		case in.Required:
			msg := "inputs." + in.Name + ": required"
			if in.Description != "" {
				msg += " (" + models.CleanText(in.Description, 0) + ")"
			}
			problems = append(problems, msg+"; give it with --input "+in.Name+"=VALUE")
			continue
		}
		if err := models.CheckText("inputs."+in.Name, v, models.MaxDescriptionLen); err != nil {
			problems = append(problems, models.ErrorMessageOf(err))
			continue
		}
		out[in.Name] = v
	}
	for _, k := range slices.Sorted(maps.Keys(given)) {
		if !declared[k] {
			problems = append(problems, fmt.Sprintf("inputs.%s: unknown input (%s)", k, inputList(w)))
		}
	}
	if len(problems) > 0 {
		return nil, invalid(problems)
	}
	return out, nil
}
