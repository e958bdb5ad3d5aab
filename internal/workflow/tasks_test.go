package workflow_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/workflow"
)

func raws(ss ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(ss))
	for i, s := range ss {
		out[i] = json.RawMessage(s)
	}
	return out
}

func TestFanOut(t *testing.T) {
	t.Parallel()
	many := make([]string, workflow.MaxFanOut+1)
	for i := range many {
		many[i] = "1"
	}
	outputs := map[string]json.RawMessage{
		"discover": json.RawMessage(`{"modules": ["a", {"name": "b"}, 3], "empty": [], "owner": "web",
			"n": 3, "float_n": 2.0, "half": 2.5, "negative": -1, "huge": 1001, "many": [` + strings.Join(many, ",") + `]}`),
		"listing": json.RawMessage(`[1, 2]`),
	}
	foreach := func(expr string) models.WorkflowStep { return models.WorkflowStep{Name: "s", Foreach: expr} }
	parallelFrom := func(expr string) models.WorkflowStep {
		return models.WorkflowStep{Name: "s", Parallel: &models.FanOut{From: expr}}
	}
	tests := []struct {
		name      string
		step      models.WorkflowStep
		wantItems []json.RawMessage
		wantCount int
		wantErr   string
	}{
		{name: "list", step: foreach("discover.outputs.modules"), wantItems: raws(`"a"`, `{"name":"b"}`, `3`), wantCount: 3},
		{name: "empty list", step: foreach("discover.outputs.empty"), wantItems: raws(), wantCount: 0},
		{name: "not a list", step: foreach("discover.outputs.owner"),
			wantErr: "foreach: discover.outputs.owner is not a list (it is a string)"},
		{name: "missing field", step: foreach("discover.outputs.modulez"),
			wantErr: `foreach: discover.outputs.modulez is missing (discover's outputs have no field "modulez")`},
		{name: "missing outputs", step: foreach("plan.outputs.modules"),
			wantErr: "foreach: plan.outputs.modules is missing (plan reported no outputs)"},
		{name: "outputs not an object", step: foreach("listing.outputs.x"),
			wantErr: "foreach: listing.outputs.x is missing (listing's outputs are a list, not an object)"},
		{name: "too many items", step: foreach("discover.outputs.many"),
			wantErr: "foreach: discover.outputs.many has 1001 items (at most 1000)"},
		{name: "count", step: parallelFrom("discover.outputs.n"), wantCount: 3},
		{name: "count written as a float", step: parallelFrom("discover.outputs.float_n"), wantCount: 2},
		{name: "count that is text", step: parallelFrom("discover.outputs.owner"),
			wantErr: "parallel: discover.outputs.owner is not a whole number (it is a string)"},
		{name: "fractional count", step: parallelFrom("discover.outputs.half"),
			wantErr: "parallel: discover.outputs.half is not a whole number (it is 2.5)"},
		{name: "negative count", step: parallelFrom("discover.outputs.negative"),
			wantErr: "parallel: discover.outputs.negative is -1 (must be between 0 and 1000)"},
		{name: "too large a count", step: parallelFrom("discover.outputs.huge"),
			wantErr: "parallel: discover.outputs.huge is 1001 (must be between 0 and 1000)"},
		{name: "static parallel", step: models.WorkflowStep{Name: "s", Parallel: &models.FanOut{Count: 4}}, wantCount: 4},
		{name: "single task", step: models.WorkflowStep{Name: "s"}, wantCount: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			items, count, err := workflow.FanOut(tt.step, outputs)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr || models.ErrorCodeOf(err) != models.CodeInvalid {
					t.Fatalf("FanOut error = %v, want %q (invalid)", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("FanOut: %v", err)
			}
			if count != tt.wantCount || len(items) != len(tt.wantItems) {
				t.Fatalf("FanOut = %d items, count %d; want %d items, count %d", len(items), count, len(tt.wantItems), tt.wantCount)
			}
			for i := range items {
				if string(items[i]) != string(tt.wantItems[i]) {
					t.Errorf("item %d = %s, want %s", i, items[i], tt.wantItems[i])
				}
			}
		})
	}
}

func TestStepTasks(t *testing.T) {
	t.Parallel()
	w := models.Workflow{Name: "nightly", ProjectID: "web"}
	outputs := map[string]json.RawMessage{"discover": json.RawMessage(`{"owner": "web-team"}`)}
	meta := func(step string, extra ...string) map[string]string {
		m := map[string]string{"workflow": "nightly", "workflow_run": "run-1", "step": step}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	tests := []struct {
		name  string
		step  models.WorkflowStep
		items []json.RawMessage
		count int
		want  []models.BatchTask
	}{
		{
			name: "single task",
			step: models.WorkflowStep{Name: "discover", Title: "List modules of {{run.workflow}}", Description: "Run {{run.id}}",
				Profile: "cheap", AgentType: "codex", Kind: "deps", Priority: intp(50), MaxRetries: intp(2),
				TestCommands: []string{"go test ./..."}, Verification: models.VerifyQAAgent, RequiresApproval: true, Concurrency: 3,
				Timeout: models.Duration(10 * time.Minute)},
			count: 1,
			want: []models.BatchTask{{
				LocalID: "discover", ProjectID: "web", Title: "List modules of nightly", Description: "Run run-1",
				Priority: intp(50), MaxRetries: intp(2), VerificationType: models.VerifyQAAgent, RequiresApproval: true,
				Kind: "deps", Profile: "cheap", AgentType: "codex", TestCommands: []string{"go test ./..."}, CreatedBy: "workflow:nightly",
				Timeout:  models.Duration(10 * time.Minute),
				Metadata: meta("discover"),
				Workflow: &models.TaskPlace{RunID: "run-1", Step: "discover", Concurrency: 3},
			}},
		},
		{
			name:  "parallel 3",
			step:  models.WorkflowStep{Name: "shards", Title: "Shard {{index}} of {{count}} for {{discover.outputs.owner}}", Parallel: &models.FanOut{Count: 3}, Concurrency: 2},
			count: 3,
			want: func() []models.BatchTask {
				var out []models.BatchTask
				for i := range 3 {
					out = append(out, models.BatchTask{
						LocalID: fmt.Sprintf("shards[%d]", i), ProjectID: "web", Title: fmt.Sprintf("Shard %d of 3 for web-team", i),
						CreatedBy: "workflow:nightly", Metadata: meta("shards"),
						Workflow: &models.TaskPlace{RunID: "run-1", Step: "shards", Index: i, Count: 3, Concurrency: 2},
					})
				}
				return out
			}(),
		},
		{
			name:  "foreach over strings",
			step:  models.WorkflowStep{Name: "upgrade", Title: "Upgrade {{item}}", Description: "{{index}}/{{count}}: go get {{item}}@latest", Foreach: "discover.outputs.modules"},
			items: raws(`"golang.org/x/net"`, `"golang.org/x/text"`),
			count: 2,
			want: []models.BatchTask{
				{LocalID: "upgrade[0]", ProjectID: "web", Title: "Upgrade golang.org/x/net", Description: "0/2: go get golang.org/x/net@latest",
					CreatedBy: "workflow:nightly", Metadata: meta("upgrade", "item", "golang.org/x/net"),
					Workflow: &models.TaskPlace{RunID: "run-1", Step: "upgrade", Index: 0, Count: 2}},
				{LocalID: "upgrade[1]", ProjectID: "web", Title: "Upgrade golang.org/x/text", Description: "1/2: go get golang.org/x/text@latest",
					CreatedBy: "workflow:nightly", Metadata: meta("upgrade", "item", "golang.org/x/text"),
					Workflow: &models.TaskPlace{RunID: "run-1", Step: "upgrade", Index: 1, Count: 2}},
			},
		},
		{
			name:  "foreach over objects",
			step:  models.WorkflowStep{Name: "fix", Title: "Fix {{item.name}}\n(line {{item.line}})", Foreach: "lint.outputs.findings"},
			items: raws(`{"name":"unused import","line":12}`),
			count: 1,
			want: []models.BatchTask{
				{LocalID: "fix[0]", ProjectID: "web", Title: "Fix unused import (line 12)",
					CreatedBy: "workflow:nightly", Metadata: meta("fix", "item", `{"name":"unused import","line":12}`),
					Workflow: &models.TaskPlace{RunID: "run-1", Step: "fix", Index: 0, Count: 1}},
			},
		},
		{
			name:  "empty foreach",
			step:  models.WorkflowStep{Name: "fix", Title: "Fix {{item}}", Foreach: "lint.outputs.findings"},
			items: raws(),
			count: 0,
			want:  []models.BatchTask{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := workflow.StepTasks(w, tt.step, "run-1", nil, tt.items, tt.count, outputs)
			if err != nil {
				t.Fatalf("StepTasks: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("StepTasks:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestStepTasksCutsAndErrors(t *testing.T) {
	t.Parallel()
	w := models.Workflow{Name: "nightly", ProjectID: "web"}
	long := strings.Repeat("é", 400)
	step := models.WorkflowStep{Name: "fix", Title: "Fix {{item}}", Foreach: "lint.outputs.findings"}
	tasks, err := workflow.StepTasks(w, step, "run-1", nil, raws(`"`+long+`"`, `"  "`), 2, nil)
	if err != nil {
		t.Fatalf("StepTasks: %v", err)
	}
	if title := []rune(tasks[0].Title); len(title) != models.MaxTitleLen || title[len(title)-1] != '…' {
		t.Errorf("long title: %d characters ending %q, want %d ending …", len(title), title[len(title)-1], models.MaxTitleLen)
	}
	if item := tasks[0].Metadata["item"]; len(item) > workflow.MaxItemMetadata || !strings.HasSuffix(item, "…") || !strings.HasPrefix(item, "éé") {
		t.Errorf("item metadata %q (%d bytes), want at most %d bytes ending …", item, len(item), workflow.MaxItemMetadata)
	}
	if tasks[1].Title != "Fix" {
		t.Errorf("title of a blank item = %q, want %q", tasks[1].Title, "Fix")
	}

	blank := models.WorkflowStep{Name: "fix", Title: "{{item}}", Foreach: "lint.outputs.findings"}
	if tasks, err := workflow.StepTasks(w, blank, "run-1", nil, raws(`""`), 1, nil); err != nil || tasks[0].Title != "fix[0]" {
		t.Errorf("blank title: %+v, %v; want the local id fix[0]", tasks, err)
	}

	errs := []struct {
		name  string
		step  models.WorkflowStep
		items []json.RawMessage
		count int
		want  string
	}{
		{name: "unfilled placeholder", step: models.WorkflowStep{Name: "s", Title: "{{discover.outputs.owner}}"}, count: 1,
			want: "s.title: {{discover.outputs.owner}}: discover reported no outputs"},
		{name: "unfilled in description", step: models.WorkflowStep{Name: "s", Title: "t", Description: "{{item.x}}", Foreach: "a.outputs.b"},
			items: raws(`"x"`), count: 1, want: "s[0].description: {{item.x}}: the item is not an object (it is a string)"},
		{name: "several tasks from a single step", step: models.WorkflowStep{Name: "s", Title: "t"}, count: 2,
			want: "step s: makes one task (got a count of 2)"},
		{name: "items and count disagree", step: step, items: raws(`"a"`), count: 2, want: "step fix: 1 items for 2 tasks"},
		{name: "too many", step: models.WorkflowStep{Name: "s", Title: "t", Parallel: &models.FanOut{Count: 1}}, count: 1001,
			want: "step s: 1001 tasks (must be between 0 and 1000)"},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := workflow.StepTasks(w, tt.step, "run-1", nil, tt.items, tt.count, nil)
			if err == nil || err.Error() != tt.want || models.ErrorCodeOf(err) != models.CodeInvalid {
				t.Errorf("StepTasks error = %v, want %q (invalid)", err, tt.want)
			}
		})
	}
}
