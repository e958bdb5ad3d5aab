package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// gitCmd runs git in dir and fails the test when it fails.
func gitCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com",
		"-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// userRepo creates a git repository with one commit on main, its
// default branch, and returns its path.
func userRepo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, dir, "init", "-q")
	writeFile(t, dir, "README.md", "hello\n")
	gitCmd(t, dir, "add", "README.md")
	gitCmd(t, dir, "commit", "-q", "-m", "first")
	return dir
}

// bareRepo creates an empty bare repository and returns its path.
func bareRepo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "origin.git")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, dir, "init", "-q", "--bare")
	return dir
}

// TestProjectRepositoryIsChecked: a project's repository is checked when
// the project is created or its repository changed: a path must be a git
// repository's top level, a URL must answer git ls-remote; the error is
// invalid and names the field, the path or URL and git's message.
func TestProjectRepositoryIsChecked(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, t.TempDir())
	addr := d.m.Addr()
	repo, origin := userRepo(t), bareRepo(t)
	plain := t.TempDir()
	missing := filepath.Join(plain, "missing")
	tests := []struct {
		name string
		args []string
		want string // empty: accepted
	}{
		{"a missing path", []string{"--repo-path", missing}, "repo.source_path: " + missing + " does not exist"},
		{"a directory without git", []string{"--repo-path", plain}, "repo.source_path: " + plain + " is not a git repository"},
		{"a directory inside a repository", []string{"--repo-path", filepath.Join(repo, "sub")},
			"repo.source_path: " + filepath.Join(repo, "sub") + " is inside the repository"},
		{"a repository", []string{"--repo-path", repo}, ""},
		{"a URL that does not answer", []string{"--repo-url", "file://" + missing},
			"repo.url: file://" + missing + " does not answer `git ls-remote`: fatal: "},
		{"a bare repository's path as the URL", []string{"--repo-url", origin}, ""},
		{"init needs nothing", []string{"--repo-source", "init"}, ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := "p" + string(rune('a'+i))
			r := runCtl(t, addr, nil, append([]string{"project", "create", id}, tt.args...)...)
			if tt.want == "" {
				if r.code != 0 {
					t.Fatalf("refused: %+v", r)
				}
				return
			}
			if r.code != 1 || !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("got exit %d, stderr %q; want 1 and %q", r.code, r.stderr, tt.want)
			}
			if r := runCtl(t, addr, nil, "project", "show", id); r.code != 1 {
				t.Errorf("the refused project was stored: %+v", r)
			}
		})
	}

	client, err := api.NewClient("http://"+addr, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = client.UpdateProject(ctx, "pd", models.ProjectPatch{Repo: &models.RepoConfig{SourceType: models.RepoLink,
		SourcePath: plain}})
	if models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), "repo.source_path: "+plain) {
		t.Fatalf("an edit to a directory without git: %v", err)
	}
	if r := runCtl(t, addr, nil, "project", "edit", "pd", "--repo", "file://"+missing); r.code != 1 ||
		!strings.Contains(r.stderr, "repo.url: file://"+missing+" does not answer") {
		t.Fatalf("ctl project edit --repo to a URL that does not answer: %+v", r)
	}
	out := mustCtl(t, addr, "project", "edit", "pd", "--repo", "file://"+origin, "--branch", "trunk")
	if !regexp.MustCompile(`(?m)^Repo:\s+CLONE file://` + regexp.QuoteMeta(origin) + ` \(trunk\)$`).MatchString(out) {
		t.Fatalf("project edit --repo:\n%s", out)
	}
}

// TestAgentCommandMustResolve: an agent's program must be on the daemon's
// PATH or an executable path when the agent is registered.
func TestAgentCommandMustResolve(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, t.TempDir())
	addr := d.m.Addr()
	dir := t.TempDir()
	notExec := writeFile(t, dir, "agent.sh", "#!/bin/sh\n")
	tests := []struct {
		name, command, want string
	}{
		{"a missing path", filepath.Join(dir, "nope"), "command: " + filepath.Join(dir, "nope") + " does not exist"},
		{"a file that is not executable", notExec, "command: " + notExec + " is not an executable file"},
		{"a name not on PATH", "no-such-agent-program-x9", `command: "no-such-agent-program-x9" is not on the daemon's PATH`},
		{"an executable path", "/bin/sh", ""},
		{"a name on PATH", "sh", ""},
		{"a path relative to the checkout", "./scripts/agent", ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := "a" + string(rune('a'+i))
			r := runCtl(t, addr, nil, "agent", "add", id, "--type", "command", "--command", tt.command)
			if tt.want == "" {
				if r.code != 0 {
					t.Fatalf("refused: %+v", r)
				}
				return
			}
			if r.code != 1 || !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("got exit %d, stderr %q; want 1 and %q", r.code, r.stderr, tt.want)
			}
		})
	}
}

// TestProjectSettingsMerge: PATCH merges settings (a null removes a key,
// absent keys are kept); ctl project edit sets each setting typed, and
// project show shows them.
func TestProjectSettingsMerge(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, t.TempDir())
	addr := d.m.Addr()
	mustCtl(t, addr, "project", "create", "web")
	out := mustCtl(t, addr, "project", "edit", "web", "--set", "pr_mode=always", "--set", "pr_draft=true",
		"--set", "pr_labels=bot", "--set", "pr_labels=needs review")
	for _, re := range []string{`(?m)^  pr_mode:\s+always$`, `(?m)^  pr_draft:\s+true$`, `(?m)^  pr_labels:\s+bot; needs review$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("project edit --set lacks %s:\n%s", re, out)
		}
	}

	// The API: setting hook commands keeps pr_mode; a null removes a key.
	patch := func(body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPatch, "http://"+addr+"/api/v1/projects/web", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var p struct {
			Settings json.RawMessage `json:"settings"`
			Error    *struct {
				Code, Message string
			} `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Error != nil {
			return resp.StatusCode, p.Error.Code + ": " + p.Error.Message
		}
		return resp.StatusCode, string(p.Settings)
	}
	tests := []struct {
		name, body string
		status     int
		want       string
	}{
		{"hook commands keep pr_mode", `{"settings":{"hook_commands":["make lint"]}}`, 200,
			`{"pr_mode":"always","pr_draft":true,"pr_labels":["bot","needs review"],"hook_commands":["make lint"]}`},
		{"a null removes a key", `{"settings":{"pr_draft":null,"pr_labels":null}}`, 200,
			`{"pr_mode":"always","hook_commands":["make lint"]}`},
		{"an unknown key is named", `{"settings":{"pr_modes":"never"}}`, 400, "invalid: settings.pr_modes: no such setting"},
		{"a value of the wrong type is named", `{"settings":{"pr_draft":"yes"}}`, 400, `invalid: settings.pr_draft: want a boolean (got "yes")`},
		{"a bad value is named", `{"settings":{"pr_mode":"sometimes"}}`, 400, "invalid: settings.pr_mode: must be never, when_required or always"},
		{"other fields leave settings alone", `{"name":"Web"}`, 200, `{"pr_mode":"always","hook_commands":["make lint"]}`},
	}
	for _, tt := range tests {
		status, got := patch(tt.body)
		if status != tt.status || !strings.HasPrefix(got, tt.want) {
			t.Errorf("%s: PATCH %s = %d %s; want %d %s", tt.name, tt.body, status, got, tt.status, tt.want)
		}
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "pr_moed=never"}, `"pr_moed" is not a project setting (settings: default_profile, `},
		{[]string{"--set", "pr_draft=maybe"}, `pr_draft: "maybe" is not true or false`},
		{[]string{"--unset", "nope"}, `"nope" is not a project setting`},
		{[]string{"--set", "pr_mode"}, `"pr_mode" is not KEY=VALUE`},
	} {
		if r := runCtl(t, addr, nil, append([]string{"project", "edit", "web"}, tt.args...)...); r.code != 2 || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("project edit %v: %+v; want exit 2 and %q", tt.args, r, tt.want)
		}
	}
	out = mustCtl(t, addr, "project", "edit", "web", "--unset", "pr_mode", "--set", "hook_commands=", "--weight", "2.5")
	if !regexp.MustCompile(`(?m)^Settings:\s+\(defaults\)$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^Credit weight:\s+2.5$`).MatchString(out) {
		t.Errorf("project edit --unset:\n%s", out)
	}
	out = mustCtl(t, addr, "project", "archive", "web")
	if !regexp.MustCompile(`(?m)^Status:\s+ARCHIVED$`).MatchString(out) {
		t.Errorf("project archive:\n%s", out)
	}
}

// TestCtlProjectDelete: ctl project delete asks for --yes, deletes the
// project with its tasks, and names a project that does not exist.
func TestCtlProjectDelete(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, t.TempDir())
	addr := d.m.Addr()
	mustCtl(t, addr, "project", "create", "web")
	id := taskIDs(t, mustCtl(t, addr, "task", "add", "--project", "web", "--title", "A"))[0]
	tests := []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"project", "delete", "web"}, 2, "", "give --yes to confirm (or archive it: ctl project archive web)"},
		{[]string{"project", "delete", "web", "--yes"}, 0, "project web deleted\n", ""},
		{[]string{"project", "show", "web"}, 1, "", `project "web" not found`},
		{[]string{"task", "show", id}, 1, "", "not found"},
		{[]string{"project", "delete", "web", "--yes"}, 1, "", `project "web" not found`},
	}
	for _, tt := range tests {
		r := runCtl(t, addr, nil, tt.args...)
		if r.code != tt.code || r.stdout != tt.stdout && tt.stdout != "" || !strings.Contains(r.stderr, tt.stderr) {
			t.Errorf("ctl %v: %+v; want exit %d, %q, %q", tt.args, r, tt.code, tt.stdout, tt.stderr)
		}
	}
}
