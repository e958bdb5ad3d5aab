package models_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// TestProjectPatchMergesSettings: the settings of a patch decoded from
// JSON are a merge patch: named keys are set, a null removes one, the
// others are kept; Settings set in Go replaces them all, also through JSON.
func TestProjectPatchMergesSettings(t *testing.T) {
	t.Parallel()
	cur := models.Project{ID: "web", Name: "web", CreditWeight: 1, MaxConcurrentAgents: 1, Status: models.ProjectActive,
		Settings: models.ProjectSettings{PRMode: models.PRAlways, PRDraft: true, PRLabels: []string{"bot"}}}
	tests := []struct {
		name, body string
		want       models.ProjectSettings
		err        string
	}{
		{"setting hook commands keeps pr_mode", `{"settings":{"hook_commands":["make lint"]}}`,
			models.ProjectSettings{PRMode: models.PRAlways, PRDraft: true, PRLabels: []string{"bot"}, HookCommands: []string{"make lint"}}, ""},
		{"a null removes a key", `{"settings":{"pr_draft":null,"pr_labels":null}}`,
			models.ProjectSettings{PRMode: models.PRAlways}, ""},
		{"an empty patch keeps everything", `{"settings":{}}`, cur.Settings, ""},
		{"an unknown key", `{"settings":{"colour":"red"}}`, models.ProjectSettings{}, "settings.colour: no such setting"},
		{"a wrong type", `{"settings":{"pr_labels":"bot"}}`, models.ProjectSettings{}, `settings.pr_labels: want a list of strings (got "bot")`},
		{"an invalid value", `{"settings":{"pr_mode":"often"}}`, models.ProjectSettings{}, "settings.pr_mode: must be never"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var pp models.ProjectPatch
			if err := json.Unmarshal([]byte(tt.body), &pp); err != nil {
				t.Fatal(err)
			}
			got, err := pp.Apply(cur)
			if tt.err != "" {
				if models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Apply = %v; want invalid %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Settings, tt.want) {
				t.Fatalf("settings = %+v; want %+v", got.Settings, tt.want)
			}
		})
	}

	// Settings set in Go replaces them all, through JSON too.
	data, err := json.Marshal(models.ProjectPatch{Settings: &models.ProjectSettings{QAAgent: "qa"}})
	if err != nil {
		t.Fatal(err)
	}
	var pp models.ProjectPatch
	if err := json.Unmarshal(data, &pp); err != nil {
		t.Fatal(err)
	}
	got, err := pp.Apply(cur)
	if err != nil || !reflect.DeepEqual(got.Settings, models.ProjectSettings{QAAgent: "qa"}) {
		t.Fatalf("a replacement through JSON (%s) = %+v, %v", data, got.Settings, err)
	}
}
