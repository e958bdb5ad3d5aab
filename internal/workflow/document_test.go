package workflow_test

import (
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/workflow"
)

// SetProject edits the project alone, where it stands or where no line
// moves, and the document parses with it.
func TestSetProject(t *testing.T) {
	t.Parallel()
	const steps = "steps:\n  - name: a\n    title: A\n"
	tests := []struct {
		name, src, want string
	}{
		{"plain value", "name: w\nproject: web\n" + steps, "name: w\nproject: \"shop\"\n" + steps},
		{"value with a comment", "name: w\nproject: web   # ours\n" + steps, "name: w\nproject: \"shop\"   # ours\n" + steps},
		{"double-quoted value", "name: w\nproject: \"web\"\n" + steps, "name: w\nproject: \"shop\"\n" + steps},
		{"single-quoted value", "name: w\nproject: 'we''b'\n" + steps, "name: w\nproject: \"shop\"\n" + steps},
		{"no project: added at the end", "# c\nname: w\n" + steps, "# c\nname: w\n" + steps + "project: \"shop\"\n"},
		{"no project and no final newline", "name: w\n" + strings.TrimSuffix(steps, "\n"),
			"name: w\n" + steps + "project: \"shop\"\n"},
		{"no project after a block scalar", "name: w\n" + steps + "    description: |\n      text\n",
			"name: w\n" + steps + "    description: |\n      text\nproject: \"shop\"\n"},
		{"JSON with a project", `{"name": "w", "project": "web", "steps": [{"name": "a", "title": "A"}]}`,
			`{"name": "w", "project": "shop", "steps": [{"name": "a", "title": "A"}]}`},
		{"JSON without one", "{\n  \"name\": \"w\",\n  \"steps\": [{\"name\": \"a\", \"title\": \"A\"}]\n}\n",
			"{\"project\": \"shop\", \n  \"name\": \"w\",\n  \"steps\": [{\"name\": \"a\", \"title\": \"A\"}]\n}\n"},
		{"flow YAML with a plain project", "{name: w, project: web, steps: [{name: a, title: A}]}",
			`{name: w, project: "shop", steps: [{name: a, title: A}]}`},
		{"not a mapping: as it is", "- a\n- b\n", "- a\n- b\n"},
		{"not YAML: as it is", "name: [\n", "name: [\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := workflow.SetProject([]byte(tt.src), "shop")
			if err != nil {
				t.Fatalf("SetProject: %v", err)
			}
			if string(got) != tt.want {
				t.Fatalf("SetProject:\n got %q\nwant %q", got, tt.want)
			}
			if strings.HasPrefix(tt.name, "not ") {
				return
			}
			w, err := workflow.Parse("w.yaml", got)
			if err != nil || w.ProjectID != "shop" {
				t.Fatalf("Parse: %+v, %v", w.ProjectID, err)
			}
		})
	}
}

// A project that cannot be replaced on its line is refused, naming it.
func TestSetProjectRefusesABlockProject(t *testing.T) {
	t.Parallel()
	_, err := workflow.SetProject([]byte("name: w\nproject: |\n  web\n"), "shop")
	if err == nil || err.Error() != "project: line 2: must be a project id on one line" {
		t.Fatalf("err = %v", err)
	}
}

// The lines of a problem are the file's own after SetProject added the
// project the file lacked.
func TestSetProjectKeepsLines(t *testing.T) {
	t.Parallel()
	src := "name: w\nsteps:\n  - name: a\n    title: A\n    depends_on: [b]\n"
	got, err := workflow.SetProject([]byte(src), "shop")
	if err != nil {
		t.Fatal(err)
	}
	_, err = workflow.Parse("w.yaml", got)
	if want := `w.yaml:5:18: steps[0].depends_on[0]: unknown step "b" (steps: a)`; err == nil || err.Error() != want {
		t.Fatalf("Parse: %v\nwant %s", err, want)
	}
}
