package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentqueued/agentqueued/internal/models"
)

// MaxItemMetadata caps the bytes of the "item" metadata of a foreach task.
const MaxItemMetadata = 200

// FanOut returns how many tasks a step makes in a run and, for a foreach
// step, their items. outputs maps an upstream step's name to its single
// task's outputs object.
//
// A foreach step reads the list its upstream reported: count is its length
// (0 for an empty list), at most MaxFanOut. A parallel step over an output
// reads a whole number from 0 to MaxFanOut. A parallel step with a fixed
// count makes that many tasks; any other step one. Items and counts that
// cannot be read are *models.Error (CodeInvalid) naming the field.
func FanOut(step models.WorkflowStep, outputs map[string]json.RawMessage) (items []json.RawMessage, count int, err error) {
	switch {
	case step.Foreach != "":
		raw, err := lookup("foreach", step.Foreach, outputs)
		if err != nil {
			return nil, 0, err
		}
		if k := jsonKind(raw); k != "a list" {
			return nil, 0, models.Errorf(models.CodeInvalid, "foreach: %s is not a list (it is %s)", step.Foreach, k)
		}
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, 0, models.Errorf(models.CodeInvalid, "foreach: %s is not a JSON list", step.Foreach)
		}
		if len(items) > MaxFanOut {
			return nil, 0, models.Errorf(models.CodeInvalid, "foreach: %s has %d items (at most %d)", step.Foreach, len(items), MaxFanOut)
		}
		for i, it := range items {
			var b bytes.Buffer
			if json.Compact(&b, it) == nil {
				items[i] = b.Bytes()
			}
		}
		return items, len(items), nil
	case step.Parallel != nil && step.Parallel.From != "":
		from := step.Parallel.From
		raw, err := lookup("parallel", from, outputs)
		if err != nil {
			return nil, 0, err
		}
		n, ok := wholeNumber(raw)
		switch {
		case !ok && jsonKind(raw) == "a number":
			return nil, 0, models.Errorf(models.CodeInvalid, "parallel: %s is not a whole number (it is %s)", from, bytes.TrimSpace(raw))
		case !ok:
			return nil, 0, models.Errorf(models.CodeInvalid, "parallel: %s is not a whole number (it is %s)", from, jsonKind(raw))
		case n < 0 || n > MaxFanOut:
			return nil, 0, models.Errorf(models.CodeInvalid, "parallel: %s is %d (must be between 0 and %d)", from, n, MaxFanOut)
		}
		return nil, int(n), nil
	case step.Parallel != nil:
		if c := step.Parallel.Count; c < 1 || c > MaxFanOut {
			return nil, 0, models.Errorf(models.CodeInvalid, "parallel: must be between 1 and %d (got %d)", MaxFanOut, c)
		}
		return nil, step.Parallel.Count, nil
	}
	return nil, 1, nil
}

// lookup returns the upstream output field expr ("<step>.outputs.<field>")
// names; key is the step's field, for messages.
func lookup(key, expr string, outputs map[string]json.RawMessage) (json.RawMessage, error) {
	name, field, ok := parseRef(expr)
	if !ok {
		return nil, models.Errorf(models.CodeInvalid, "%s: %q is not <step>.outputs.<field>", key, expr)
	}
	out, has := outputs[name]
	if k := jsonKind(out); !has || k == "null" || k == "nothing" {
		return nil, models.Errorf(models.CodeInvalid, "%s: %s is missing (%s reported no outputs)", key, expr, name)
	}
	val, msg := jsonField(out, field)
	switch msg {
	case "":
		return val, nil
	case missingField:
		return nil, models.Errorf(models.CodeInvalid, "%s: %s is missing (%s's outputs have no field %q)", key, expr, name, field)
	}
	return nil, models.Errorf(models.CodeInvalid, "%s: %s is missing (%s's outputs are %s, not an object)", key, expr, name, msg)
}

// wholeNumber reads a JSON number without a fraction (2, 2.0, 2e1).
func wholeNumber(raw json.RawMessage) (int64, bool) {
	if jsonKind(raw) != "a number" {
		return 0, false
	}
	s := string(bytes.TrimSpace(raw))
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// StepTasks returns the tasks one step makes in run runID: count tasks, the
// i-th with items[i] for a foreach step (items and count as FanOut returns
// them). outputs maps each upstream step to its single task's outputs.
//
// Each task's title and description are the step's templates filled for
// it. What fills them comes from upstream agents' outputs, so it is
// cleaned rather than refused: the title is put on one line (control
// characters, runs of spaces and line breaks become one space; invalid
// UTF-8 becomes U+FFFD), cut to models.MaxTitleLen characters ending in
// "…" when longer, and is the task's local id when left blank; the
// description loses its control characters other than line breaks and
// tabs and is cut to models.MaxDescriptionLen characters. Kind, profile,
// priority, retries, test commands, verification and approval come from
// the step; the project from the workflow; CreatedBy is
// "workflow:<name>". Metadata holds "workflow", "workflow_run" and
// "step", "item" (the item as text, cleaned like the description and cut
// to MaxItemMetadata bytes) for a foreach step. LocalID is the step's
// name, "<step>[i]" when the step fans out, and Workflow places the task
// in the run. inputs fill {{inputs.<name>}} (the run's, from
// ResolveInputs). Dependencies are left to the caller.
func StepTasks(w models.Workflow, step models.WorkflowStep, runID string, inputs map[string]string, items []json.RawMessage, count int, outputs map[string]json.RawMessage) ([]models.BatchTask, error) {
	fan := fansOut(step)
	switch {
	case count < 0 || count > MaxFanOut:
		return nil, models.Errorf(models.CodeInvalid, "step %s: %d tasks (must be between 0 and %d)", step.Name, count, MaxFanOut)
	case !fan && count != 1:
		return nil, models.Errorf(models.CodeInvalid, "step %s: makes one task (got a count of %d)", step.Name, count)
	case step.Foreach != "" && len(items) != count:
		return nil, models.Errorf(models.CodeInvalid, "step %s: %d items for %d tasks", step.Name, len(items), count)
	}
	tasks := make([]models.BatchTask, 0, count)
	for i := range count {
		v := Vars{RunID: runID, Workflow: w.Name, Index: i, Count: count, FanOut: fan, Outputs: outputs, Inputs: inputs}
		local := step.Name
		if fan {
			local = fmt.Sprintf("%s[%d]", step.Name, i)
		}
		meta := map[string]string{"workflow": w.Name, "workflow_run": runID, "step": step.Name}
		if step.Foreach != "" {
			v.Item, v.HasItem = items[i], true
			meta["item"] = cutBytes(models.CleanText(jsonText(items[i]), 0), MaxItemMetadata)
		}
		title, err := Render(step.Title, v)
		if err != nil {
			return nil, prefixed(local+".title", err)
		}
		desc, err := Render(step.Description, v)
		if err != nil {
			return nil, prefixed(local+".description", err)
		}
		expected, err := expectedCount(step.ExpectedCount, v)
		if err != nil {
			return nil, prefixed(local+".expected_count", err)
		}
		title = models.CleanLine(title, models.MaxTitleLen)
		if title == "" {
			title = local
		}
		place := &models.TaskPlace{RunID: runID, Step: step.Name, Index: i, Concurrency: step.Concurrency}
		if fan {
			place.Count = count
		}
		tasks = append(tasks, models.BatchTask{
			LocalID:          local,
			ProjectID:        w.ProjectID,
			Title:            title,
			Description:      models.CleanText(desc, models.MaxDescriptionLen),
			Priority:         clonePtr(step.Priority),
			VerificationType: step.Verification,
			MaxRetries:       clonePtr(step.MaxRetries),
			RequiresApproval: step.RequiresApproval,
			Kind:             step.Kind,
			Metadata:         meta,
			CreatedBy:        "workflow:" + w.Name,
			TestCommands:     slices.Clone(step.TestCommands),
			Profile:          step.Profile,
			Timeout:          step.Timeout,
			AgentType:        step.AgentType,
			RunnerLabels:     slices.Clone(step.RunnerLabels),
			ExpectedCount:    expected,
			Workflow:         place,
		})
	}
	return tasks, nil
}

// expectedCount returns a task's expected_count: the step's number, or
// its placeholder filled from v, which must be a whole number from 0 to
// models.MaxExpectedCount; 0 when the step has none.
func expectedCount(ec *models.StepCount, v Vars) (int, error) {
	if ec == nil {
		return 0, nil
	}
	if ec.Template == "" {
		return ec.Count, nil
	}
	s, err := Render(ec.Template, v)
	if err != nil {
		return 0, err
	}
	expr := strings.TrimSpace(ec.Template)
	n, ok := wholeNumber(json.RawMessage(strings.TrimSpace(s)))
	switch {
	case !ok:
		return 0, models.Errorf(models.CodeInvalid, "%s is not a whole number (it is %q)", expr, s)
	case n < 0 || n > models.MaxExpectedCount:
		return 0, models.Errorf(models.CodeInvalid, "%s is %d (must be between 0 and %d)", expr, n, models.MaxExpectedCount)
	}
	return int(n), nil
}

// prefixed puts path before each line of a Render error.
func prefixed(path string, err error) error {
	lines := strings.Split(models.ErrorMessageOf(err), "\n")
	for i, l := range lines {
		lines[i] = path + ": " + l
	}
	return invalid(lines)
}

// cutBytes cuts s to at most n bytes on a character boundary, the last
// three "…" when cut.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	end := n - len("…")
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + "…"
}

// clonePtr returns a copy of *p, or nil.
func clonePtr(p *int) *int {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
