package workflow

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
)

// phKind is what a placeholder stands for.
type phKind int

const (
	phUnknown     phKind = iota
	phRunID              // {{run.id}}
	phRunWorkflow        // {{run.workflow}}
	phItem               // {{item}}
	phItemField          // {{item.<field>}}
	phIndex              // {{index}}
	phCount              // {{count}}
	phOutput             // {{<step>.outputs.<field>}}
	phInput              // {{inputs.<name>}}
)

// placeholder is one placeholder of a template.
type placeholder struct {
	expr        string // the expression inside the braces, trimmed
	kind        phKind
	step, field string
}

// name returns the placeholder as it is named in messages: "{{expr}}".
func (p placeholder) name() string { return "{{" + p.expr + "}}" }

// classify reads the expression inside a placeholder's braces. Fields and
// step names are not checked here: an item or output placeholder with a
// bad field is still one of those kinds.
func classify(expr string) placeholder {
	p := placeholder{expr: expr}
	switch expr {
	case "run.id":
		p.kind = phRunID
	case "run.workflow":
		p.kind = phRunWorkflow
	case "item":
		p.kind = phItem
	case "index":
		p.kind = phIndex
	case "count":
		p.kind = phCount
	default:
		if f, ok := strings.CutPrefix(expr, "inputs."); ok {
			p.kind, p.field = phInput, f
		} else if f, ok := strings.CutPrefix(expr, "item."); ok {
			p.kind, p.field = phItemField, f
		} else if s, f, ok := strings.Cut(expr, ".outputs."); ok && s != "" && !strings.ContainsAny(s, ". \t") {
			p.kind, p.step, p.field = phOutput, s, f
		}
	}
	return p
}

// onePlaceholder returns the placeholder tmpl is made of, spaces around
// it aside; ok is false when tmpl is anything else.
func onePlaceholder(tmpl string) (placeholder, bool) {
	t := strings.TrimSpace(tmpl)
	ms := models.ScanTemplate(t)
	if len(ms) != 1 || ms[0].Text != t {
		return placeholder{}, false
	}
	return classify(ms[0].Expr), true
}

// placeholders returns the distinct placeholders of tmpl in order.
func placeholders(tmpl string) []placeholder {
	var out []placeholder
	for _, m := range models.ScanTemplate(tmpl) {
		p := classify(m.Expr)
		if !slices.ContainsFunc(out, func(q placeholder) bool { return q.expr == p.expr }) {
			out = append(out, p)
		}
	}
	return out
}

// Vars are the values a step's templates are filled with for one task.
type Vars struct {
	// RunID and Workflow fill {{run.id}} and {{run.workflow}}.
	RunID, Workflow string
	// Item fills {{item}} and {{item.<field>}} when HasItem is set (a task
	// of a foreach step).
	Item    json.RawMessage
	HasItem bool
	// Index (from 0) and Count fill {{index}} and {{count}} when FanOut is
	// set (a task of a step with parallel or foreach).
	Index, Count int
	FanOut       bool
	// Outputs maps an upstream step's name to the outputs object of its
	// single task, for {{<step>.outputs.<field>}}.
	Outputs map[string]json.RawMessage
	// Inputs are the run's inputs, for {{inputs.<name>}}.
	Inputs map[string]string
}

// Render fills the placeholders of tmpl from v in one pass: text a value
// brings in is not read again, so a value containing "{{…}}" stays as it
// is. A JSON string fills in unquoted; any other JSON value as its compact
// JSON. Every placeholder that cannot be filled is named in the error, a
// *models.Error with CodeInvalid, one line each.
func Render(tmpl string, v Vars) (string, error) {
	var problems []string
	out := models.FillTemplate(tmpl, func(m models.TemplateMatch) string {
		p := classify(m.Expr)
		s, msg := fill(p, v)
		if msg != "" {
			if line := p.name() + ": " + msg; !slices.Contains(problems, line) {
				problems = append(problems, line)
			}
		}
		return s
	})
	if len(problems) > 0 {
		return "", models.Errorf(models.CodeInvalid, "%s", strings.Join(problems, "\n"))
	}
	return out, nil
}

// fill returns the text of one placeholder, or a message saying why it
// cannot be filled.
func fill(p placeholder, v Vars) (string, string) {
	switch p.kind {
	case phRunID:
		return v.RunID, ""
	case phRunWorkflow:
		return v.Workflow, ""
	case phInput:
		val, ok := v.Inputs[p.field]
		if !ok {
			return "", "the run has no input " + strconv.Quote(p.field)
		}
		return val, ""
	case phIndex, phCount:
		if !v.FanOut {
			return "", "this step does not fan out (no parallel or foreach)"
		}
		if p.kind == phIndex {
			return strconv.Itoa(v.Index), ""
		}
		return strconv.Itoa(v.Count), ""
	case phItem, phItemField:
		if !v.HasItem {
			return "", "this task has no item (the step has no foreach)"
		}
		if p.kind == phItem {
			return jsonText(v.Item), ""
		}
		val, msg := jsonField(v.Item, p.field)
		switch msg {
		case "":
			return jsonText(val), ""
		case missingField:
			return "", "the item has no field " + strconv.Quote(p.field)
		default:
			return "", "the item is not an object (it is " + msg + ")"
		}
	case phOutput:
		out, ok := v.Outputs[p.step]
		if k := jsonKind(out); !ok || k == "null" || k == "nothing" {
			return "", p.step + " reported no outputs"
		}
		val, msg := jsonField(out, p.field)
		switch msg {
		case "":
			return jsonText(val), ""
		case missingField:
			return "", p.step + "'s outputs have no field " + strconv.Quote(p.field)
		default:
			return "", p.step + "'s outputs are not an object (they are " + msg + ")"
		}
	}
	return "", "unknown placeholder"
}

// missingField is jsonField's message for an object without the field.
const missingField = "missing"

// jsonField returns the field name of the JSON object raw. The message is
// missingField when the object has no such field, or the kind of raw
// ("a string", …) when it is not an object.
func jsonField(raw json.RawMessage, name string) (json.RawMessage, string) {
	var obj map[string]json.RawMessage
	if jsonKind(raw) != "an object" || json.Unmarshal(raw, &obj) != nil {
		return nil, jsonKind(raw)
	}
	val, ok := obj[name]
	if !ok {
		return nil, missingField
	}
	return val, ""
}

// jsonText returns a JSON value as template text: a string unquoted, any
// other value as compact JSON.
func jsonText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) == nil {
		return b.String()
	}
	return string(raw)
}

// jsonKind names the kind of a JSON value for messages: "a string", "a
// number", "true or false", "null", "a list", "an object", or "nothing"
// when raw is empty.
func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "a list"
	case 't', 'f':
		return "true or false"
	case 'n':
		return "null"
	}
	return "a number"
}
