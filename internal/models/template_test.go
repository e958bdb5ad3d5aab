package models_test

import (
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// TestTemplatesAreScannedAndFilledOnce: the one reader of {{…}} finds each
// placeholder with its offsets and trimmed expression, and filling is one
// pass: a value that contains a placeholder stays text.
func TestTemplatesAreScannedAndFilledOnce(t *testing.T) {
	t.Parallel()
	tmpl := "a {{ step_0 }} b {{x.y}}{{}} {{ {{z}}"
	ms := models.ScanTemplate(tmpl)
	want := []models.TemplateMatch{{Text: "{{ step_0 }}", Expr: "step_0", Start: 2, End: 14},
		{Text: "{{x.y}}", Expr: "x.y", Start: 17, End: 24}, {Text: "{{}}", Expr: "", Start: 24, End: 28},
		{Text: "{{z}}", Expr: "z", Start: 32, End: 37}}
	if len(ms) != len(want) {
		t.Fatalf("scanned %+v, want %+v", ms, want)
	}
	for i := range ms {
		if ms[i] != want[i] || tmpl[ms[i].Start:ms[i].End] != ms[i].Text {
			t.Errorf("match %d: %+v, want %+v", i, ms[i], want[i])
		}
	}
	got := models.FillTemplate(tmpl, func(m models.TemplateMatch) string { return "<" + strings.ToUpper(m.Expr) + "{{z}}>" })
	if w := "a <STEP_0{{z}}> b <X.Y{{z}}><{{z}}> {{ <Z{{z}}>"; got != w {
		t.Errorf("filled %q, want %q", got, w)
	}
}
