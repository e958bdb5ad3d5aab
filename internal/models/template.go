package models

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Templates: hooks' prompts and filed tasks, and workflows' step titles
// and descriptions, name values as {{…}} placeholders. ScanTemplate is the
// one reader of them and FillTemplate the one writer; what a placeholder
// may name is each one's own (hooks below, internal/workflow for steps).

// templatePattern matches one placeholder: "{{", an expression without
// braces, "}}"; spaces inside the braces are allowed.
var templatePattern = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)

// TemplateMatch is one placeholder of a template.
type TemplateMatch struct {
	// Text is the whole placeholder, braces and spaces included; Expr is
	// what the braces hold, trimmed.
	Text, Expr string
	// Start and End are its byte offsets in the template.
	Start, End int
}

// ScanTemplate returns the placeholders of tmpl in order.
func ScanTemplate(tmpl string) []TemplateMatch {
	var out []TemplateMatch
	for _, m := range templatePattern.FindAllStringSubmatchIndex(tmpl, -1) {
		out = append(out, TemplateMatch{Text: tmpl[m[0]:m[1]], Expr: tmpl[m[2]:m[3]], Start: m[0], End: m[1]})
	}
	return out
}

// FillTemplate returns tmpl with each placeholder replaced by what fill
// answers for it, in one pass: text a value brings in is not read again,
// so a value containing "{{…}}" stays as it is.
func FillTemplate(tmpl string, fill func(TemplateMatch) string) string {
	var b strings.Builder
	last := 0
	for _, m := range ScanTemplate(tmpl) {
		b.WriteString(tmpl[last:m.Start])
		b.WriteString(fill(m))
		last = m.End
	}
	b.WriteString(tmpl[last:])
	return b.String()
}

// Placeholder is one {{...}} of a hook's template.
type Placeholder struct {
	// Text is the whole placeholder, braces included.
	Text string
	// Step is the step index of {{step_N…}}, -1 for {{event…}}.
	Step int
	// Field is what follows the dot, empty for the whole value.
	Field string
}

// ParsePlaceholders returns the placeholders of a template, or an error
// naming the template's field (of) and the first placeholder that is neither
// {{step_N[.field]}} nor {{event[.field]}}.
func ParsePlaceholders(of, tmpl string) ([]Placeholder, error) {
	var out []Placeholder
	for _, m := range ScanTemplate(tmpl) {
		name, field, _ := strings.Cut(m.Expr, ".")
		p := Placeholder{Text: m.Text, Step: -1, Field: field}
		switch {
		case name == "event":
		case strings.HasPrefix(name, "step_"):
			n, err := parseIndex(strings.TrimPrefix(name, "step_"))
			if err != nil {
				return nil, Errorf(CodeInvalid, "%s: %s: %s is not a step number", of, m.Text, Quote(strings.TrimPrefix(name, "step_")))
			}
			p.Step = n
		default:
			return nil, Errorf(CodeInvalid, "%s: unknown placeholder %s (use {{step_N}}, {{step_N.field}}, {{event}} or {{event.field}})", of, m.Text)
		}
		out = append(out, p)
	}
	return out, nil
}

func parseIndex(s string) (int, error) {
	if s == "" || len(s) > 3 || strings.TrimLeft(s, "0123456789") != "" || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("bad index")
	}
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n, nil
}

// CheckTemplate checks every placeholder of tmpl, the template of field,
// against the steps that will have run and, when withEvent, the event
// fields.
func CheckTemplate(field, tmpl string, steps []HookStep, withEvent bool) error {
	ps, err := ParsePlaceholders(field, tmpl)
	if err != nil {
		return err
	}
	for _, p := range ps {
		if p.Step < 0 {
			if !withEvent {
				return Errorf(CodeInvalid, "%s: %s: only event-triggered and manual hooks have an event", field, p.Text)
			}
			if p.Field != "" && !slices.Contains(HookEventFields, p.Field) {
				return Errorf(CodeInvalid, "%s: %s: events have no field %q (fields: %s)", field, p.Text, p.Field,
					strings.Join(HookEventFields, ", "))
			}
			continue
		}
		if p.Step >= len(steps) {
			return Errorf(CodeInvalid, "%s: %s: the hook has %d context steps (step_0 to step_%d)", field, p.Text,
				len(steps), len(steps)-1)
		}
		if f := StepResultFields[steps[p.Step].Type]; p.Field != "" && !slices.Contains(f, p.Field) {
			return Errorf(CodeInvalid, "%s: %s: %s steps have no field %q (fields: %s)", field, p.Text,
				steps[p.Step].Type, p.Field, strings.Join(f, ", "))
		}
	}
	return nil
}
