package workflow

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/agentqueued/agentqueued/internal/models"
)

// The keys of a workflow document and of one of its steps.
var (
	workflowKeys = []string{"name", "project", "description", "schedule", "timezone", "schedule_enabled", "inputs", "steps", "tasks"}
	inputKeys    = []string{"name", "description", "default", "required"}
	stepKeys     = []string{"name", "title", "description", "depends_on", "profile", "agent_type", "kind", "priority",
		"max_retries", "test_commands", "verification", "requires_approval", "parallel", "foreach", "concurrency", "timeout", "expected_count",
		"runner_labels"}
	// taskKeys are the keys of one entry of the tasks mapping: a step's,
	// but the name is the entry's key, and on_failure may make every
	// dependency soft.
	taskKeys       = append(slices.DeleteFunc(slices.Clone(stepKeys), func(k string) bool { return k == "name" }), "on_failure")
	dependencyKeys = []string{"step", "requires_success"}
)

// The values of a task's on_failure: what the task does when a task it
// depends on fails.
const (
	// OnFailureRun runs the task anyway: every dependency is
	// requires_success: false.
	OnFailureRun = "run"
	// OnFailureBlock blocks the task with its upstream (the default).
	OnFailureBlock = "block"
)

// Parse reads one workflow document, YAML or JSON, named filename in
// messages. The workflow's Source is src; Origin is left for the caller;
// ScheduleEnabled is true unless the document says schedule_enabled: false.
//
// A document has its steps in one of two shapes, read into the same
// models.Workflow: a list under steps, each with its name, or a mapping
// under tasks keyed by step name (in the document's order), where a step
// fans out over "<step>.<field>" (or "<step>.outputs.<field>") and
// on_failure: run makes its dependencies soft. A document with both is
// refused.
//
// Every problem, of the YAML or of the workflow (the checks of Validate),
// is one line "FILE:LINE:COL: PATH: MESSAGE" of the returned *models.Error
// (CodeInvalid), in the document's order; in the tasks shape a step's path
// is "tasks.<name>". A YAML syntax error, whose column is unknown, is one
// line "FILE:LINE: MESSAGE".
func Parse(filename string, src []byte) (models.Workflow, error) {
	d := &decoder{file: filename, pos: map[string]*yaml.Node{}, failed: map[string]bool{}, merging: map[*yaml.Node]bool{}}
	root, err := d.document(src)
	if err != nil {
		return models.Workflow{}, err
	}
	w := d.workflow(root)
	for _, p := range check(w) {
		if d.failed[p.path] {
			continue // its value could not be read: said once already
		}
		at := cmp.Or(p.at, p.path)
		n := d.node(at)
		p.line, p.col = n.Line, n.Column
		d.probs = append(d.probs, p)
	}
	if len(d.probs) > 0 {
		slices.SortStableFunc(d.probs, func(a, b problem) int {
			return cmp.Or(cmp.Compare(a.line, b.line), cmp.Compare(a.col, b.col))
		})
		lines := make([]string, len(d.probs))
		for i, p := range d.probs {
			lines[i] = d.prefix(p.line, p.col) + d.shown(p.text())
		}
		return models.Workflow{}, invalid(lines)
	}
	w.Source = string(src)
	return w, nil
}

// decoder reads a workflow from YAML nodes, recording where each value is
// and every value it could not read.
type decoder struct {
	file string
	// pos maps a path ("steps[1].title") to the node of its value.
	pos map[string]*yaml.Node
	// failed holds the paths whose values could not be read.
	failed map[string]bool
	probs  []problem
	root   *yaml.Node
	// merging holds the mappings whose merge keys are being read; merges
	// counts the mappings merged in so far.
	merging map[*yaml.Node]bool
	merges  int
	// names holds the step names of a document in the tasks shape, by
	// index: its paths "steps[i]" are shown as "tasks.<name>".
	names      []string
	tasksShape bool
}

// stepPathRE finds the steps[i] of a path or message.
var stepPathRE = regexp.MustCompile(`\bsteps\[(\d+)\]`)

// shown returns a problem's line as the document wrote its paths: in the
// tasks shape "steps[i]" is "tasks.<name>" and "steps" is "tasks".
func (d *decoder) shown(line string) string {
	if !d.tasksShape {
		return line
	}
	if rest, ok := strings.CutPrefix(line, "steps:"); ok {
		return "tasks:" + rest
	}
	return stepPathRE.ReplaceAllStringFunc(line, func(m string) string {
		i, err := strconv.Atoi(m[len("steps[") : len(m)-1])
		if err != nil || i >= len(d.names) {
			return m
		}
		return "tasks." + d.names[i]
	})
}

// maxMerges caps the mappings merge keys bring in, over a document.
const maxMerges = 1000

// prefix returns "FILE:LINE:COL: ".
func (d *decoder) prefix(line, col int) string {
	var b strings.Builder
	if d.file != "" {
		b.WriteString(d.file + ":")
	}
	fmt.Fprintf(&b, "%d:%d: ", line, col)
	return b.String()
}

// node returns the node recorded for path, or for the nearest enclosing
// path that has one.
func (d *decoder) node(path string) *yaml.Node {
	for {
		if n, ok := d.pos[path]; ok {
			return n
		}
		if path == "" {
			return d.root
		}
		path = path[:max(strings.LastIndexAny(path, ".["), 0)]
	}
}

// fail records that the value at path, node n, could not be read.
func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	d.failed[path] = true
	d.probs = append(d.probs, problem{path: path, msg: fmt.Sprintf(format, args...), line: n.Line, col: n.Column})
}

// yamlLineRE reads the line of a YAML syntax error.
var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// document parses src into its one document's root mapping.
func (d *decoder) document(src []byte) (*yaml.Node, error) {
	if line, col, msg := unreadable(src); msg != "" {
		return nil, d.single(line, col, msg)
	}
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	err := dec.Decode(&doc)
	if err == nil {
		var next yaml.Node
		switch err2 := dec.Decode(&next); {
		case err2 == nil:
			return nil, d.single(next.Line, next.Column, "one workflow per document; a second document starts here")
		case !errors.Is(err2, io.EOF):
			err = err2
		}
	}
	switch {
	case errors.Is(err, io.EOF):
		return nil, d.single(1, 1, "empty document; a workflow has name, project and steps")
	case err != nil:
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		var where []string
		if d.file != "" {
			where = append(where, d.file)
		}
		if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
			where, msg = append(where, m[1]), m[2]
		}
		line := "not valid YAML: " + msg
		if len(where) > 0 {
			line = strings.Join(where, ":") + ": " + line
		}
		return nil, invalid([]string{line})
	}
	root := deref(&doc)
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = deref(root.Content[0])
	}
	if root.Kind != yaml.MappingNode {
		return nil, d.single(root.Line, root.Column, "a workflow is a mapping with name, project and steps")
	}
	d.root = root
	d.pos[""] = root
	return root, nil
}

// unreadable finds the first byte sequence of src that is not UTF-8 or is
// a control character YAML does not allow unescaped (all but tab, line
// feed, carriage return and U+0085), and returns its line and column
// (from 1, in characters) and what is wrong; msg is "" when there is none.
// The YAML decoder refuses these too, but without saying where.
func unreadable(src []byte) (line, col int, msg string) {
	line, col = 1, 0
	for i := 0; i < len(src); {
		r, size := utf8.DecodeRune(src[i:])
		col++
		switch {
		case r == utf8.RuneError && size <= 1:
			return line, col, "not valid UTF-8 text"
		case r == '\n':
			line, col = line+1, 0
		case r == '\t' || r == '\r' || r == '\u0085':
		case r < 0x20 || (r >= 0x7f && r <= 0x9f):
			return line, col, fmt.Sprintf("control character U+%04X is not allowed in a workflow document", r)
		}
		i += size
	}
	return 0, 0, ""
}

// single returns one problem at a position as the error.
func (d *decoder) single(line, col int, msg string) error {
	return invalid([]string{d.prefix(line, col) + msg})
}

// deref follows aliases to the node they name.
func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// isNull reports whether n is an empty or null value.
func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// join returns the path of key inside path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fields returns the values of the mapping n by key, reporting unknown and
// repeated keys; merge keys ("<<: *base") bring in the keys not given.
func (d *decoder) fields(n *yaml.Node, path string, known []string) map[string]*yaml.Node {
	out := d.collect(n, path, known)
	for name, val := range out {
		d.pos[join(path, name)] = val
	}
	return out
}

// collect is fields without recording positions.
func (d *decoder) collect(n *yaml.Node, path string, known []string) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	var merged []*yaml.Node
	for k := 0; k+1 < len(n.Content); k += 2 {
		key, val := deref(n.Content[k]), deref(n.Content[k+1])
		if key.Kind == yaml.ScalarNode && key.ShortTag() == "!!merge" {
			merged = append(merged, val)
			continue
		}
		if key.Kind != yaml.ScalarNode {
			d.fail(key, path, "keys must be plain words")
			continue
		}
		name := key.Value
		kp := join(path, name)
		switch {
		case !slices.Contains(known, name):
			d.fail(key, kp, "unknown key; %s", suggest(name, known))
		case out[name] != nil:
			d.fail(key, kp, "key given twice")
		default:
			out[name] = val
		}
	}
	if len(merged) == 0 {
		return out
	}
	d.merging[n] = true
	defer delete(d.merging, n)
	for _, m := range merged {
		sources := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			sources = m.Content
		}
		for _, src := range sources {
			src = deref(src)
			d.merges++
			switch {
			case src.Kind != yaml.MappingNode:
				d.fail(src, path, "a merge key (<<) takes a mapping or a list of mappings")
				continue
			case d.merging[src]:
				d.fail(src, path, "a merge key (<<) brings in the mapping it is part of")
				continue
			case d.merges > maxMerges:
				if d.merges == maxMerges+1 {
					d.fail(src, path, "more than %d merges (<<)", maxMerges)
				}
				continue
			}
			for name, val := range d.collect(src, path, known) {
				if out[name] == nil {
					out[name] = val
				}
			}
		}
	}
	return out
}

// suggest names the known key closest to name, or lists them all.
func suggest(name string, known []string) string {
	best, bestDist := "", 3
	lower := strings.ToLower(name)
	for _, k := range known {
		dist := distance(lower, k)
		if len(k) >= 4 && (strings.HasPrefix(lower, k) || strings.HasPrefix(k, lower)) {
			dist = min(dist, 2) // project_id: project
		}
		if dist < bestDist {
			best, bestDist = k, dist
		}
	}
	if best != "" {
		return fmt.Sprintf("did you mean %s?", best)
	}
	return "known keys: " + strings.Join(known, ", ")
}

// distance is the edit distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// str reads a scalar as text; null is "".
func (d *decoder) str(n *yaml.Node, path string) string {
	switch {
	case n == nil || isNull(n):
		return ""
	case n.Kind != yaml.ScalarNode:
		d.fail(n, path, "must be text")
		return ""
	}
	return n.Value
}

// integer reads a whole number; null is 0 with ok false.
func (d *decoder) integer(n *yaml.Node, path string) (v int, ok bool) {
	if n == nil || isNull(n) {
		return 0, false
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
		d.fail(n, path, "must be a whole number")
		return 0, false
	}
	return v, true
}

// intPtr reads an optional whole number.
func (d *decoder) intPtr(n *yaml.Node, path string) *int {
	if v, ok := d.integer(n, path); ok {
		return &v
	}
	return nil
}

// boolean reads true or false; null is def.
func (d *decoder) boolean(n *yaml.Node, path string, def bool) bool {
	if n == nil || isNull(n) {
		return def
	}
	var v bool
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&v) != nil {
		d.fail(n, path, "must be true or false")
		return def
	}
	return v
}

// list returns the items of a sequence of at most limit items; null is an
// empty list.
func (d *decoder) list(n *yaml.Node, path string, limit int) []*yaml.Node {
	switch {
	case n == nil || isNull(n):
		return nil
	case n.Kind != yaml.SequenceNode:
		d.fail(n, path, "must be a list")
		return nil
	case len(n.Content) > limit:
		d.fail(n, path, "at most %d entries (got %d)", limit, len(n.Content))
		return nil
	}
	out := make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		out[i] = deref(c)
		d.pos[fmt.Sprintf("%s[%d]", path, i)] = out[i]
	}
	return out
}

// workflow reads the root mapping.
func (d *decoder) workflow(root *yaml.Node) models.Workflow {
	f := d.fields(root, "", workflowKeys)
	w := models.Workflow{
		Name:            d.str(f["name"], "name"),
		ProjectID:       d.str(f["project"], "project"),
		Description:     d.str(f["description"], "description"),
		Schedule:        d.str(f["schedule"], "schedule"),
		Timezone:        d.str(f["timezone"], "timezone"),
		ScheduleEnabled: d.boolean(f["schedule_enabled"], "schedule_enabled", true),
	}
	for i, n := range d.list(f["inputs"], "inputs", MaxInputs) {
		p := fmt.Sprintf("inputs[%d]", i)
		if n.Kind != yaml.MappingNode {
			d.fail(n, p, "an input is a mapping with name, and description, default or required")
			w.Inputs = append(w.Inputs, models.WorkflowInput{})
			d.failed[p+".name"] = true
			continue
		}
		g := d.fields(n, p, inputKeys)
		in := models.WorkflowInput{Name: d.str(g["name"], p+".name"), Description: d.str(g["description"], p+".description"),
			Required: d.boolean(g["required"], p+".required", false)}
		if v := g["default"]; v != nil && !isNull(v) {
			def := d.str(v, p+".default")
			in.Default = &def
		}
		w.Inputs = append(w.Inputs, in)
	}
	if tasks := f["tasks"]; tasks != nil {
		if steps := f["steps"]; steps != nil {
			d.fail(tasks, "tasks", "a workflow has steps (a list) or tasks (a mapping by name), not both; steps is at line %d", steps.Line)
		} else {
			w.Steps = d.tasks(tasks)
			return w
		}
	}
	for i, n := range d.list(f["steps"], "steps", MaxSteps) {
		p := fmt.Sprintf("steps[%d]", i)
		if n.Kind != yaml.MappingNode {
			d.fail(n, p, "a step is a mapping with name and title")
			w.Steps = append(w.Steps, models.WorkflowStep{})
			d.failed[p+".name"], d.failed[p+".title"] = true, true
			continue
		}
		w.Steps = append(w.Steps, d.step(n, p, stepKeys))
	}
	return w
}

// tasks reads the steps of the tasks shape: a mapping of step name to
// step, in the document's order. Paths are recorded as the steps shape's
// ("steps[i].title"), for the checks, and shown as "tasks.<name>.title".
func (d *decoder) tasks(n *yaml.Node) []models.WorkflowStep {
	d.tasksShape = true
	d.pos["steps"] = n
	switch {
	case isNull(n):
		return nil
	case n.Kind != yaml.MappingNode:
		d.fail(n, "tasks", "must be a mapping of task name to task")
		d.failed["steps"] = true
		return nil
	case len(n.Content)/2 > MaxSteps:
		d.fail(n, "tasks", "at most %d tasks (got %d)", MaxSteps, len(n.Content)/2)
		d.failed["steps"] = true
		return nil
	}
	var out []models.WorkflowStep
	for k := 0; k+1 < len(n.Content); k += 2 {
		key, val := deref(n.Content[k]), deref(n.Content[k+1])
		p := fmt.Sprintf("steps[%d]", len(out))
		d.pos[p], d.pos[p+".name"] = key, key
		name := key.Value
		if key.Kind != yaml.ScalarNode {
			name = ""
			d.fail(key, p+".name", "a task's name is a plain word")
		}
		d.names = append(d.names, name)
		if val.Kind != yaml.MappingNode {
			d.fail(val, p, "a task is a mapping with title")
			out = append(out, models.WorkflowStep{Name: name})
			d.failed[p+".title"] = true
			continue
		}
		s := d.step(val, p, taskKeys)
		s.Name = name
		out = append(out, s)
	}
	return out
}

// step reads one step whose keys are known.
func (d *decoder) step(n *yaml.Node, p string, known []string) models.WorkflowStep {
	f := d.fields(n, p, known)
	s := models.WorkflowStep{
		Name:             d.str(f["name"], p+".name"),
		Title:            d.str(f["title"], p+".title"),
		Description:      d.str(f["description"], p+".description"),
		Profile:          d.str(f["profile"], p+".profile"),
		AgentType:        d.str(f["agent_type"], p+".agent_type"),
		Kind:             d.str(f["kind"], p+".kind"),
		Priority:         d.intPtr(f["priority"], p+".priority"),
		MaxRetries:       d.intPtr(f["max_retries"], p+".max_retries"),
		Verification:     verification(d.str(f["verification"], p+".verification")),
		RequiresApproval: d.boolean(f["requires_approval"], p+".requires_approval", false),
		Foreach:          d.str(f["foreach"], p+".foreach"),
	}
	s.Concurrency, _ = d.integer(f["concurrency"], p+".concurrency")
	for j, c := range d.list(f["runner_labels"], p+".runner_labels", models.MaxRunnerLabels) {
		s.RunnerLabels = append(s.RunnerLabels, d.str(c, fmt.Sprintf("%s.runner_labels[%d]", p, j)))
	}
	for j, c := range d.list(f["test_commands"], p+".test_commands", models.MaxListEntries) {
		s.TestCommands = append(s.TestCommands, d.str(c, fmt.Sprintf("%s.test_commands[%d]", p, j)))
	}
	for j, c := range d.list(f["depends_on"], p+".depends_on", MaxSteps) {
		s.DependsOn = append(s.DependsOn, d.dependency(c, fmt.Sprintf("%s.depends_on[%d]", p, j)))
	}
	s.Parallel = d.parallel(f["parallel"], p+".parallel")
	s.Timeout = d.duration(f["timeout"], p+".timeout")
	s.ExpectedCount = d.expectedCount(f["expected_count"], p+".expected_count")
	if d.tasksShape {
		s.Foreach = outputsRef(s.Foreach)
		if s.Parallel != nil {
			s.Parallel.From = outputsRef(s.Parallel.From)
		}
		d.onFailure(f["on_failure"], p, s.DependsOn)
	}
	return s
}

// outputsRef returns "<step>.<field>" as "<step>.outputs.<field>"; any
// other text is returned as it is.
func outputsRef(ref string) string {
	t := strings.TrimSpace(ref)
	if strings.Contains(t, ".outputs.") {
		return ref
	}
	step, field, ok := strings.Cut(t, ".")
	if !ok || step == "" || field == "" || strings.Contains(field, ".") {
		return ref
	}
	return step + ".outputs." + field
}

// onFailure reads a task's on_failure: run makes every dependency of deps
// soft (requires_success: false); block, the default, leaves them.
func (d *decoder) onFailure(n *yaml.Node, p string, deps []models.StepDependency) {
	v := d.str(n, p+".on_failure")
	switch v {
	case "", OnFailureBlock:
	case OnFailureRun:
		for j := range deps {
			if r := deps[j].RequiresSuccess; r != nil && *r {
				at := fmt.Sprintf("%s.depends_on[%d].requires_success", p, j)
				d.fail(d.node(at), at, "true contradicts the task's on_failure: run")
				continue
			}
			deps[j].RequiresSuccess = new(bool)
		}
	default:
		d.fail(n, p+".on_failure", "must be %s or %s (got %q)", OnFailureRun, OnFailureBlock, v)
	}
}

// duration reads a Go duration ("10m", "1h30m") or a whole number of
// seconds; null is 0.
func (d *decoder) duration(n *yaml.Node, path string) models.Duration {
	if n == nil || isNull(n) {
		return 0
	}
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!int":
			var secs int64
			if n.Decode(&secs) == nil && secs >= 0 && secs <= int64(models.MaxTaskTimeout/time.Second) {
				return models.Duration(time.Duration(secs) * time.Second)
			}
		case "!!str":
			if v, err := time.ParseDuration(strings.TrimSpace(n.Value)); err == nil {
				return models.Duration(v)
			}
		}
	}
	d.fail(n, path, "must be a duration such as 10m or 1h30m, or a whole number of seconds")
	return 0
}

// verification reads a verification type in any case; an unknown one is
// kept as written, for the message.
func verification(s string) models.VerificationType {
	if v := models.VerificationType(strings.ToUpper(strings.TrimSpace(s))); v.Valid() {
		return v
	}
	return models.VerificationType(s)
}

// dependency reads a step name or {step, requires_success}.
func (d *decoder) dependency(n *yaml.Node, p string) models.StepDependency {
	switch n.Kind {
	case yaml.ScalarNode:
		return models.StepDependency{Step: d.str(n, p)}
	case yaml.MappingNode:
		f := d.fields(n, p, dependencyKeys)
		dep := models.StepDependency{Step: d.str(f["step"], p+".step")}
		if r := f["requires_success"]; r != nil && !isNull(r) {
			v := d.boolean(r, p+".requires_success", true)
			dep.RequiresSuccess = &v
		}
		if d.failed[p+".step"] {
			d.failed[p] = true
		}
		return dep
	}
	d.fail(n, p, "must be a step name or {step: <name>, requires_success: false}")
	return models.StepDependency{}
}

// expectedCount reads a step's expected_count: a whole number, or text
// (one placeholder, checked with the step); null is none.
func (d *decoder) expectedCount(n *yaml.Node, p string) *models.StepCount {
	if n == nil || isNull(n) {
		return nil
	}
	switch count, text, kind := d.countOrText(n, p); kind {
	case scalarCount:
		return &models.StepCount{Count: count}
	case scalarText:
		return &models.StepCount{Template: text}
	case scalarBad:
		return nil
	}
	if n.Kind == yaml.MappingNode {
		// {{a.outputs.n}} unquoted is a YAML mapping in a mapping.
		d.fail(n, p, "a placeholder is written in quotes: \"{{<step>.outputs.<field>}}\"")
		return nil
	}
	d.fail(n, p, "must be a whole number (1-%d) or one placeholder such as \"{{<step>.outputs.<field>}}\"", models.MaxExpectedCount)
	return nil
}

// parallel reads a count or "<step>.outputs.<field>".
func (d *decoder) parallel(n *yaml.Node, p string) *models.FanOut {
	if n == nil || isNull(n) {
		return nil
	}
	switch count, text, kind := d.countOrText(n, p); kind {
	case scalarCount:
		return &models.FanOut{Count: count}
	case scalarText:
		return &models.FanOut{From: text}
	case scalarBad:
		return nil
	}
	d.fail(n, p, "must be a count (1-%d) or <step>.outputs.<field>", MaxFanOut)
	return nil
}

// scalarKind is what countOrText read.
type scalarKind int

const (
	scalarOther scalarKind = iota // not a number or text: the caller says what it wants
	scalarCount                   // a whole number, written as one or as text
	scalarText                    // other non-blank text
	scalarBad                     // a number out of range, already reported
)

// countOrText reads a scalar that is a whole number (an integer, or text
// that is one) or other non-blank text, for fields that take either.
func (d *decoder) countOrText(n *yaml.Node, p string) (int, string, scalarKind) {
	if n.Kind != yaml.ScalarNode {
		return 0, "", scalarOther
	}
	switch n.ShortTag() {
	case "!!int":
		if v, ok := d.integer(n, p); ok {
			return v, "", scalarCount
		}
		return 0, "", scalarBad
	case "!!str":
		if v, err := strconv.Atoi(strings.TrimSpace(n.Value)); err == nil {
			return v, "", scalarCount
		}
		if strings.TrimSpace(n.Value) != "" {
			return 0, n.Value, scalarText
		}
	}
	return 0, "", scalarOther
}
