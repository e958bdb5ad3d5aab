package models_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

func TestRuleDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		json    string
		want    models.Rule
		wantErr string
	}{
		{
			name: "concurrency",
			json: `{"type": "Concurrency", "project_id": "web", "matcher": {"kind": "ingest", "status": "Running", "fields": ["source"]}, "max_concurrency": 2}`,
			want: models.Rule{ProjectID: "web", Type: models.RuleConcurrency,
				Matcher: models.RuleMatcher{Kind: "ingest", Status: "Running", Fields: []string{"source"}}, MaxConcurrency: 2},
		},
		{
			name: "capacity",
			json: `{"id": "r1", "type": "Capacity", "matcher": {"kind": "ingest"}, "max_capacity": 100}`,
			want: models.Rule{ID: "r1", Type: models.RuleCapacity, Matcher: models.RuleMatcher{Kind: "ingest"}, MaxCapacity: 100},
		},
		{
			name: "misspelt type and key",
			json: `{"type": "Concurency", "matcher": {"kind": "ingest"}, "max_concurency": 3}`,
			want: models.Rule{Type: models.RuleConcurrency, Matcher: models.RuleMatcher{Kind: "ingest"}, MaxConcurrency: 3},
		},
		{
			name: "both spellings agreeing",
			json: `{"type": "concurrency", "matcher": {"kind": "ingest"}, "max_concurrency": 3, "max_concurency": 3}`,
			want: models.Rule{Type: models.RuleConcurrency, Matcher: models.RuleMatcher{Kind: "ingest"}, MaxConcurrency: 3},
		},
		{
			name:    "both spellings differing",
			json:    `{"type": "Concurrency", "matcher": {"kind": "ingest"}, "max_concurrency": 3, "max_concurency": 4}`,
			wantErr: "max_concurency",
		},
		{
			name:    "unknown key",
			json:    `{"type": "Concurrency", "matcher": {"kind": "ingest"}, "max_concurrency": 3, "max_parallel": 4}`,
			wantErr: `unknown key "max_parallel"`,
		},
		{
			name:    "unknown matcher key",
			json:    `{"type": "Concurrency", "matcher": {"kind": "ingest", "field": ["a"]}, "max_concurrency": 3}`,
			wantErr: `matcher: unknown key "field"`,
		},
		{
			name:    "limit not an integer",
			json:    `{"type": "Concurrency", "matcher": {"kind": "ingest"}, "max_concurrency": 2.5}`,
			wantErr: "max_concurrency: must be an integer",
		},
		{
			name:    "misspelt limit not an integer",
			json:    `{"type": "Concurrency", "matcher": {"kind": "ingest"}, "max_concurency": "2"}`,
			wantErr: "max_concurency: must be an integer",
		},
		{
			name:    "fields not a list",
			json:    `{"type": "Concurrency", "matcher": {"fields": "source"}, "max_concurrency": 2}`,
			wantErr: "matcher.fields: must be a list of strings",
		},
		{
			name:    "not an object",
			json:    `["Concurrency"]`,
			wantErr: "rule: must be a JSON object",
		},
		{
			name:    "matcher not an object",
			json:    `{"type": "Concurrency", "matcher": "ingest", "max_concurrency": 2}`,
			wantErr: "matcher: must be a JSON object",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got models.Rule
			err := json.Unmarshal([]byte(tc.json), &got)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one mentioning %q", err, tc.wantErr)
				}
				if models.ErrorCodeOf(err) != models.CodeInvalid {
					t.Fatalf("code %s, want invalid", models.ErrorCodeOf(err))
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			if err := got.Validate(); err != nil {
				t.Fatalf("decoded rule invalid: %v", err)
			}
		})
	}
}

func TestRuleListDecodeNamesBadEntry(t *testing.T) {
	t.Parallel()
	var rules []models.Rule
	err := json.Unmarshal([]byte(`[{"type": "Capacity", "matcher": {"kind": "a"}, "max_capacity": 1}, {"type": "Capacity", "matcher": {"kind": "a"}, "capacity": 1}]`), &rules)
	if err == nil || !strings.Contains(err.Error(), `"capacity"`) {
		t.Fatalf("got %v", err)
	}
}

func TestRuleRoundTripIsCanonical(t *testing.T) {
	t.Parallel()
	var r models.Rule
	if err := json.Unmarshal([]byte(`{"type": "Concurency", "matcher": {"kind": "ingest", "fields": ["source"]}, "max_concurency": 2}`), &r); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(out); !strings.Contains(s, `"type":"Concurrency"`) || !strings.Contains(s, `"max_concurrency":2`) || strings.Contains(s, "concurency") {
		t.Fatalf("marshalled %s", s)
	}
	var back models.Rule
	if err := json.Unmarshal(out, &back); err != nil || !reflect.DeepEqual(back, r) {
		t.Fatalf("round trip: %+v, %v; want %+v", back, err, r)
	}
}

func TestRuleValidate(t *testing.T) {
	t.Parallel()
	valid := func() models.Rule {
		return models.Rule{Type: models.RuleConcurrency, Matcher: models.RuleMatcher{Kind: "ingest", Fields: []string{"source"}}, MaxConcurrency: 2}
	}
	tests := []struct {
		name    string
		mutate  func(*models.Rule)
		wantErr string
	}{
		{"valid", func(*models.Rule) {}, ""},
		{"fields only", func(r *models.Rule) { r.Matcher.Kind = "" }, ""},
		{"kind only", func(r *models.Rule) { r.Matcher.Fields = nil }, ""},
		{"alias type", func(r *models.Rule) { r.Type = "Concurency" }, ""},
		{"status group", func(r *models.Rule) { r.Matcher.Status = "Running" }, ""},
		{"status names", func(r *models.Rule) { r.Matcher.Status = "IN_PROGRESS|verifying" }, ""},
		{"capacity", func(r *models.Rule) { r.Type = models.RuleCapacity; r.MaxConcurrency = 0; r.MaxCapacity = 10 }, ""},
		{"scoped", func(r *models.Rule) { r.ProjectID = "web" }, ""},
		{"unknown type", func(r *models.Rule) { r.Type = "Throttle" }, "type"},
		{"missing type", func(r *models.Rule) { r.Type = "" }, "type"},
		{"zero concurrency", func(r *models.Rule) { r.MaxConcurrency = 0 }, "max_concurrency"},
		{"negative concurrency", func(r *models.Rule) { r.MaxConcurrency = -1 }, "max_concurrency"},
		{"capacity on concurrency", func(r *models.Rule) { r.MaxCapacity = 5 }, "max_capacity"},
		{"zero capacity", func(r *models.Rule) { r.Type = models.RuleCapacity; r.MaxConcurrency = 0 }, "max_capacity"},
		{"concurrency on capacity", func(r *models.Rule) { r.Type = models.RuleCapacity; r.MaxCapacity = 5 }, "max_concurrency"},
		{"nothing to match", func(r *models.Rule) { r.Matcher = models.RuleMatcher{Status: "Running"} }, "matcher: a kind or fields"},
		{"empty field", func(r *models.Rule) { r.Matcher.Fields = []string{"source", ""} }, "matcher.fields[1]"},
		{"duplicate field", func(r *models.Rule) { r.Matcher.Fields = []string{"source", "source"} }, "matcher.fields[1]"},
		{"unknown status", func(r *models.Rule) { r.Matcher.Status = "Sleeping" }, "matcher.status"},
		{"no running status", func(r *models.Rule) { r.Matcher.Status = "Pending" }, "no running status"},
		{"bad project", func(r *models.Rule) { r.ProjectID = "Web App" }, "project_id"},
		{"long kind", func(r *models.Rule) { r.Matcher.Kind = strings.Repeat("k", 101) }, "matcher.kind"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := valid()
			tc.mutate(&r)
			err := r.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.wantErr)
			}
			if models.ErrorCodeOf(err) != models.CodeInvalid {
				t.Fatalf("code %s, want invalid", models.ErrorCodeOf(err))
			}
		})
	}
}

func TestRuleTypeCanonical(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   models.RuleType
		want models.RuleType
	}{
		{"Concurrency", models.RuleConcurrency},
		{"Concurency", models.RuleConcurrency},
		{"CONCURRENCY", models.RuleConcurrency},
		{"capacity", models.RuleCapacity},
		{"Throttle", "Throttle"},
	} {
		if got := tc.in.Canonical(); got != tc.want {
			t.Errorf("%q.Canonical() = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRuleMatches(t *testing.T) {
	t.Parallel()
	rule := models.Rule{Type: models.RuleConcurrency, Matcher: models.RuleMatcher{Kind: "ingest", Status: "Running", Fields: []string{"source"}}, MaxConcurrency: 1}
	scoped := rule
	scoped.ProjectID = "web"
	anyKind := rule
	anyKind.Matcher.Kind = ""
	cand := models.RuleTask{ProjectID: "web", Kind: "ingest", Metadata: map[string]string{"source": "s3", "x": "1"}, Status: models.StatusReady}
	other := func(mut func(*models.RuleTask)) models.RuleTask {
		o := models.RuleTask{ProjectID: "api", Kind: "ingest", Metadata: map[string]string{"source": "s3"}, Status: models.StatusInProgress}
		mut(&o)
		return o
	}
	tests := []struct {
		name  string
		rule  models.Rule
		cand  models.RuleTask
		other models.RuleTask
		want  bool
	}{
		{"same group other project", rule, cand, other(func(*models.RuleTask) {}), true},
		{"different source", rule, cand, other(func(o *models.RuleTask) { o.Metadata = map[string]string{"source": "gcs"} }), false},
		{"missing source", rule, cand, other(func(o *models.RuleTask) { o.Metadata = nil }), false},
		{"both missing source", rule, models.RuleTask{ProjectID: "web", Kind: "ingest"}, other(func(o *models.RuleTask) { o.Metadata = nil }), true},
		{"status outside set", rule, cand, other(func(o *models.RuleTask) { o.Status = models.StatusReady }), false},
		{"other kind", rule, cand, other(func(o *models.RuleTask) { o.Kind = "build" }), false},
		{"candidate of other kind", rule, models.RuleTask{ProjectID: "web", Kind: "build", Metadata: cand.Metadata}, other(func(o *models.RuleTask) { o.Kind = "build" }), false},
		{"any kind compares own kind", anyKind, models.RuleTask{ProjectID: "web", Kind: "build", Metadata: cand.Metadata}, other(func(o *models.RuleTask) { o.Kind = "build" }), true},
		{"any kind other kind", anyKind, cand, other(func(o *models.RuleTask) { o.Kind = "build" }), false},
		{"scoped ignores other project", scoped, cand, other(func(*models.RuleTask) {}), false},
		{"scoped counts own project", scoped, cand, other(func(o *models.RuleTask) { o.ProjectID = "web" }), true},
		{"scoped does not apply elsewhere", scoped, models.RuleTask{ProjectID: "api", Kind: "ingest", Metadata: cand.Metadata}, other(func(*models.RuleTask) {}), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.rule.Matches(tc.cand, tc.other); got != tc.want {
				t.Fatalf("Matches = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRemainingWork(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ expected, success, failure, want int }{
		{100, 30, 20, 50},
		{10, 10, 5, 0},
		{0, 0, 0, 0},
	} {
		if got := models.RemainingWork(tc.expected, tc.success, tc.failure); got != tc.want {
			t.Errorf("RemainingWork(%d, %d, %d) = %d, want %d", tc.expected, tc.success, tc.failure, got, tc.want)
		}
	}
}
