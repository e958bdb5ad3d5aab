package workflow_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/workflow"
)

func TestRender(t *testing.T) {
	t.Parallel()
	outputs := map[string]json.RawMessage{
		"discover": json.RawMessage(`{"owner": "web-team", "modules": ["a", "b"], "n": 3, "meta": {"x": 1}, "trap": "{{run.id}}"}`),
		"listing":  json.RawMessage(`["not", "an", "object"]`),
		"silent":   json.RawMessage(`null`),
	}
	base := workflow.Vars{RunID: "run-1", Workflow: "nightly", Outputs: outputs}
	item := func(raw string) workflow.Vars {
		v := base
		v.Item, v.HasItem = json.RawMessage(raw), true
		v.Index, v.Count, v.FanOut = 1, 4, true
		return v
	}
	tests := []struct {
		name    string
		tmpl    string
		vars    workflow.Vars
		want    string
		wantErr []string
	}{
		{name: "plain text", tmpl: "no placeholders { here }", vars: base, want: "no placeholders { here }"},
		{name: "run", tmpl: "{{run.id}}/{{ run.workflow }}", vars: base, want: "run-1/nightly"},
		{name: "string item unquoted", tmpl: "Upgrade {{item}}", vars: item(`"golang.org/x/net"`), want: "Upgrade golang.org/x/net"},
		{name: "object item", tmpl: "{{item}}", vars: item(`{"name": "x", "n": [1, 2]}`), want: `{"name":"x","n":[1,2]}`},
		{name: "number item", tmpl: "#{{item}}", vars: item(`42`), want: "#42"},
		{name: "item fields", tmpl: "{{item.name}} {{ item.n }}", vars: item(`{"name": "x", "n": [1, 2]}`), want: "x [1,2]"},
		{name: "index and count", tmpl: "Shard {{index}} of {{count}}", vars: item(`1`), want: "Shard 1 of 4"},
		{name: "outputs", tmpl: "{{discover.outputs.owner}} {{discover.outputs.n}} {{discover.outputs.modules}} {{discover.outputs.meta}}",
			vars: base, want: `web-team 3 ["a","b"] {"x":1}`},
		{name: "values are not read again", tmpl: "{{discover.outputs.trap}} {{item}}", vars: item(`"{{index}}"`), want: "{{run.id}} {{index}}"},
		{name: "unbalanced braces stay", tmpl: "{{run.id} {{ {{run.id}}", vars: base, want: "{{run.id} {{ run-1"},
		{name: "missing output field", tmpl: "{{discover.outputs.owner}} {{discover.outputs.team}}", vars: base,
			wantErr: []string{`{{discover.outputs.team}}: discover's outputs have no field "team"`}},
		{name: "outputs not reported", tmpl: "{{silent.outputs.x}} {{nobody.outputs.x}}", vars: base,
			wantErr: []string{"{{silent.outputs.x}}: silent reported no outputs", "{{nobody.outputs.x}}: nobody reported no outputs"}},
		{name: "outputs not an object", tmpl: "{{listing.outputs.x}}", vars: base,
			wantErr: []string{"{{listing.outputs.x}}: listing's outputs are not an object (they are a list)"}},
		{name: "no item", tmpl: "{{item}} {{ item.name }} {{index}}", vars: base, wantErr: []string{
			"{{item}}: this task has no item (the step has no foreach)",
			"{{item.name}}: this task has no item (the step has no foreach)",
			"{{index}}: this step does not fan out (no parallel or foreach)",
		}},
		{name: "item not an object", tmpl: "{{item.name}}", vars: item(`"x"`),
			wantErr: []string{"{{item.name}}: the item is not an object (it is a string)"}},
		{name: "item field missing", tmpl: "{{item.name}} {{item.name}}", vars: item(`{"n": 1}`),
			wantErr: []string{`{{item.name}}: the item has no field "name"`}},
		{name: "unknown placeholder", tmpl: "{{ nope }}", vars: base, wantErr: []string{"{{nope}}: unknown placeholder"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := workflow.Render(tt.tmpl, tt.vars)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("Render = %q, want an error", got)
				}
				if code := models.ErrorCodeOf(err); code != models.CodeInvalid {
					t.Errorf("code %q, want %q", code, models.CodeInvalid)
				}
				if lines := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(lines, tt.wantErr) {
					t.Errorf("error lines:\n got %q\nwant %q", lines, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if got != tt.want {
				t.Errorf("Render = %q, want %q", got, tt.want)
			}
		})
	}
}
