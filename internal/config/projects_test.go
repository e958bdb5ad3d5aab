package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/config"
	"github.com/agentqueued/agentqueued/internal/models"
)

// TestProjects: projects of the file become projects with their
// defaults; a bad one is an error naming its key.
func TestProjects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, doc, err string
		want           models.RepoSourceType
	}{
		{"a path is linked", "projects:\n  - id: web\n    repo: {path: /src/web}\n", "", models.RepoLink},
		{"a url is cloned", "projects:\n  - id: web\n    repo: {url: 'git@github.com:me/web.git'}\n", "", models.RepoClone},
		{"no repo", "projects:\n  - id: web\n", "", ""},
		{"both", "projects:\n  - id: web\n    repo: {path: /src/web, url: x}\n", "config: projects[0].repo: give path", ""},
		{"a relative path is made absolute", "projects:\n  - id: web\n    repo: {path: src/web}\n", "", models.RepoLink},
		{"a bad id", "projects:\n  - id: Web Site\n", `config: projects[0] (Web Site): project id "Web Site"`, ""},
		{"twice", "projects:\n  - id: web\n  - id: web\n", `config: projects[1].id: "web" is listed twice`, ""},
		{"an unknown key", "projects:\n  - id: web\n    colour: red\n", "colour", ""},
		{"settings", "projects:\n  - id: web\n    settings:\n      test_commands: [\"go test ./...\"]\n      pr_mode: never\n", "", ""},
		{"an unknown setting", "projects:\n  - id: web\n    settings: {colour: red}\n", "config: projects[0].settings.colour: no such setting", ""},
		{"a setting of the wrong type", "projects:\n  - id: web\n    settings: {test_commands: go test}\n",
			"config: projects[0].settings.test_commands: want a list of strings", ""},
		{"a bad setting", "projects:\n  - id: web\n    settings: {test_commands: [\" \"]}\n",
			"config: projects[0] (web): settings.test_commands[0]: empty command", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := config.Parse([]byte(tt.doc), func(string) (string, bool) { return "", false })
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Parse = %v; want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p := cfg.Projects[0]
			if p.Name != "web" || p.CreditWeight != 1 || p.MaxConcurrentAgents != models.DefaultMaxConcurrentAgents {
				t.Errorf("defaults not applied: %+v", p)
			}
			if tt.name == "settings" && (!slices.Equal(p.Settings.TestCommands, []string{"go test ./..."}) || p.Settings.PRMode != "never") {
				t.Errorf("settings = %+v", p.Settings)
			}
			if (p.Repo == nil) != (tt.want == "") || (p.Repo != nil && (p.Repo.SourceType != tt.want || p.Repo.DefaultBranch != "main")) {
				t.Errorf("repo = %+v; want %s", p.Repo, tt.want)
			}
		})
	}
}
