package main

import (
	"bytes"
	"cmp"
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/config"
	"github.com/agentqueued/agentqueued/internal/models"
)

// fakeCLI writes an executable script named name into dir that prints
// its version line (with the value of SECRET_PROBE, to show what
// environment it ran in).
func fakeCLI(t *testing.T, dir, name, version string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	script := "#!/bin/sh\nif [ \"$1\" = --version ]; then echo \"" + version + " probe=${SECRET_PROBE:-unset}\"; fi\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// runMain runs agentqueued with args and env and returns its exit code,
// standard output and standard error.
func runMain(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := NewMain(args, &stdout, &stderr, envOf(env)).Exec(context.Background())
	return code, stdout.String(), stderr.String()
}

// TestInitWritesAWorkingConfig: init in a real repository with fake
// claude and codex CLIs on PATH writes a configuration that the real
// loader loads, with those agents and a LINK project of the repository,
// and a daemon started with it has the project.
func TestInitWritesAWorkingConfig(t *testing.T) {
	t.Parallel()
	repo := userRepo(t)
	gitCmd(t, repo, "remote", "add", "origin", "file://"+bareRepo(t))
	bin := t.TempDir()
	claude := fakeCLI(t, bin, "claude", "2.0.31 (Claude Code)")
	codex := fakeCLI(t, bin, "codex", "codex-cli 0.58.0")
	home := t.TempDir()
	env := map[string]string{"PATH": bin, "HOME": home, "SECRET_PROBE": "leaked"} // only the fakes on PATH
	cfgPath := filepath.Join(home, "aq", "config.yaml")
	data := filepath.Join(home, "data")
	args := []string{"init", "--config", cfgPath, "--data-dir", data, "--repo", filepath.Join(repo, "sub"), "--yes"}

	code, out, errOut := runMain(t, env, args...)
	if code != 0 {
		t.Fatalf("init: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"repository: " + repo + " (branch main, remote file://",
		"project:    repo (LINK)\n            your own repository: each agent works in a git worktree of it, on the task's branch aq/<task>",
		"agent:      claude-1 (claude) " + claude + ": 2.0.31 (Claude Code) probe=unset",
		"agent:      codex-1 (codex) " + codex + ": codex-cli 0.58.0 probe=unset",
		"wrote " + cfgPath,
		"agentqueued doctor --config " + cfgPath,
		"agentqueued run --config " + cfgPath,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("init output lacks %q:\n%s", want, out)
		}
	}
	if fi, err := os.Stat(cfgPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("config file: %v %v", fi, err)
	}

	cfg, err := config.Load(cfgPath, envOf(env))
	if err != nil {
		t.Fatalf("the written config does not load: %v", err)
	}
	if cfg.DataDir != data {
		t.Errorf("data_dir = %q", cfg.DataDir)
	}
	wantAgents := []struct {
		id, typ, command, mode string
		passEnv                []string
	}{
		{"claude-1", "claude", claude, "acceptEdits", []string{"ANTHROPIC_API_KEY"}},
		{"codex-1", "codex", codex, "workspace-write", []string{"OPENAI_API_KEY"}},
	}
	if len(cfg.Agents) != len(wantAgents) {
		t.Fatalf("agents = %+v", cfg.Agents)
	}
	for i, w := range wantAgents {
		a := cfg.Agents[i]
		if a.ID != w.id || a.AgentType != w.typ || a.Command != w.command || a.Profile.PermissionMode != w.mode ||
			!slices.Equal(a.PassEnv, w.passEnv) {
			t.Errorf("agents[%d] = %+v; want %+v", i, a, w)
		}
	}
	if len(cfg.Projects) != 1 {
		t.Fatalf("projects = %+v", cfg.Projects)
	}
	p := cfg.Projects[0]
	if p.ID != "repo" || p.Repo == nil || p.Repo.SourceType != models.RepoLink || p.Repo.SourcePath != repo ||
		p.Repo.DefaultBranch != "main" {
		t.Errorf("project = %+v repo %+v", p, p.Repo)
	}

	// An existing file is kept without --force.
	if code, _, errOut := runMain(t, env, args...); code != 1 || !strings.Contains(errOut, cfgPath+" exists: give --force") {
		t.Errorf("init over an existing file: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runMain(t, env, append(args, "--force", "--project", "web", "--agent", "claude")...); code != 0 {
		t.Errorf("init --force: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runMain(t, env, append(args, "--force", "--agent", "aider")...); code != 1 ||
		!strings.Contains(errOut, "--agent aider: aider is not on PATH") {
		t.Errorf("init --agent aider without aider: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runMain(t, env, "init", "--config", filepath.Join(home, "x.yaml"), "--repo", home, "--yes"); code != 1 ||
		!strings.Contains(errOut, home+" is not in a git repository") {
		t.Errorf("init outside a repository: exit %d, %s", code, errOut)
	}

	// A daemon started with the file has the project and the agent.
	d, err := startMain(t, env, "run", "--config", cfgPath, "--listen", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("start with the written config: %v", err)
	}
	show := mustCtl(t, d.m.Addr(), "project", "show", "web")
	if !regexp.MustCompile(`(?m)^Repo:\s+LINK ` + regexp.QuoteMeta(repo) + ` \(main\)$`).MatchString(show) {
		t.Errorf("project show:\n%s", show)
	}
	if agents := mustCtl(t, d.m.Addr(), "agent", "list"); !strings.Contains(agents, "claude-1") || strings.Contains(agents, "codex-1") {
		t.Errorf("agent list:\n%s", agents)
	}
}

// TestConfigProjectsAreCreatedOnce: a project of the configuration is
// created at the first start and left alone afterwards; a LINK path that
// is not a repository stops the start naming the key.
func TestConfigProjectsAreCreatedOnce(t *testing.T) {
	t.Parallel()
	repo := userRepo(t)
	dir := t.TempDir()
	cfg := writeFile(t, dir, "aq.yaml", "projects:\n  - id: web\n    repo:\n      path: "+repo+"\n")
	data := filepath.Join(dir, "data")
	d, err := startMain(t, nil, "run", "--config", cfg, "--data-dir", data, "--listen", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mustCtl(t, d.m.Addr(), "project", "edit", "web", "--set", "pr_mode=never")
	if err := d.m.Close(); err != nil {
		t.Fatal(err)
	}
	d, err = startMain(t, nil, "run", "--config", cfg, "--data-dir", data, "--listen", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if out := mustCtl(t, d.m.Addr(), "project", "show", "web"); !regexp.MustCompile(`(?m)^  pr_mode:\s+never$`).MatchString(out) {
		t.Errorf("the edit did not survive the restart:\n%s", out)
	}

	bad := writeFile(t, dir, "bad.yaml", "projects:\n  - id: api\n    repo:\n      path: "+dir+"\n")
	_, err = startMain(t, nil, "run", "--config", bad, "--data-dir", filepath.Join(dir, "data2"), "--listen", "127.0.0.1:0")
	if err == nil || ExitCode(err) != exitUsage || !strings.Contains(err.Error(), "config: projects[0] (api): repo.path: "+dir+" is not a git repository") {
		t.Fatalf("a LINK path without git: %v", err)
	}
}

// TestInitChoosesAFreePort: init writes the default address when it is
// free and the next free port when another program holds it, saying so;
// an address given with --listen that is held is refused, named.
func TestInitChoosesAFreePort(t *testing.T) {
	t.Parallel()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	busy := held.Addr().String()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freeAddr := free.Addr().String()
	free.Close()

	tests := []struct {
		name, given, def string
		// same: the address written is def (or given); else another port.
		same    bool
		wantErr string
	}{
		{"default free", "", freeAddr, true, ""},
		{"default held", "", busy, false, ""},
		{"given free", freeAddr, busy, true, ""},
		{"given held", busy, freeAddr, false, "--listen " + busy + ": cannot listen there: "},
		{"given bad", "nowhere", freeAddr, false, `--listen "nowhere": want host:port`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr, note, err := chooseListen(tt.given, tt.def)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := cmp.Or(tt.given, tt.def)
			switch {
			case tt.same && (addr != want || note != ""):
				t.Errorf("got %s %q, want %s", addr, note, want)
			case !tt.same && (addr == want || !strings.Contains(note, want+" is in use") ||
				!strings.Contains(note, "AGENTQUEUED_ADDR=http://"+addr)):
				t.Errorf("got %s %q, want another port than %s, with a note", addr, note, want)
			}
		})
	}
}

// TestDetectTestCommand: the repository's build files name its test
// command; the first that applies wins, and files that look alike but
// name no tests are passed over.
func TestDetectTestCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"go", map[string]string{"go.mod": "module x\n"}, "go test ./..."},
		{"npm", map[string]string{"package.json": `{"scripts": {"test": "jest"}}`}, "npm test"},
		{"npm's placeholder", map[string]string{"package.json": `{"scripts": {"test": "echo \"Error: no test specified\" && exit 1"}}`}, ""},
		{"npm without a test script", map[string]string{"package.json": `{"scripts": {"build": "tsc"}}`}, ""},
		{"pyproject", map[string]string{"pyproject.toml": "[project]\nname = \"x\"\n"}, "pytest"},
		{"setup.cfg", map[string]string{"setup.cfg": "[metadata]\n"}, "pytest"},
		{"cargo", map[string]string{"Cargo.toml": "[package]\n"}, "cargo test"},
		{"make", map[string]string{"Makefile": "all: build\n\ntest: build\n\tgo test ./...\n"}, "make test"},
		{"make, several targets", map[string]string{"Makefile": "check test:\n\t./run\n"}, "make test"},
		{"make, double colon", map[string]string{"makefile": "test::\n\t./run\n"}, "make test"},
		{"make without a test target", map[string]string{"Makefile": ".PHONY: test\ntesting: x\ntest := 1\n\ttest: y\n"}, ""},
		{"go before make", map[string]string{"go.mod": "module x\n", "Makefile": "test:\n"}, "go test ./..."},
		{"npm before pytest", map[string]string{"package.json": `{"scripts": {"test": "vitest"}}`, "pyproject.toml": ""}, "npm test"},
		{"a directory named go.mod", map[string]string{"go.mod/x": ""}, ""},
		{"nothing", map[string]string{"README.md": "x\n"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for name, content := range tt.files {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
					t.Fatal(err)
				}
				writeFile(t, dir, name, content)
			}
			got, found := detectTestCommand(dir)
			if got != tt.want || (got != "") != (found != "") {
				t.Errorf("detectTestCommand = %q (found %q), want %q", got, found, tt.want)
			}
		})
	}
}

// TestInitWritesTheTestCommand: init writes the detected test command as
// the project's settings.test_commands, or the one --test-command gives,
// or none with --no-test-command, and says which.
func TestInitWritesTheTestCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want []string
		line string
	}{
		{"detected", nil, []string{"go test ./..."}, "tests:      go test ./... (found go.mod;"},
		{"given", []string{"--test-command", "go vet ./...", "--test-command", "go test -race ./..."},
			[]string{"go vet ./...", "go test -race ./..."}, "tests:      go vet ./...; go test -race ./... (--test-command)"},
		{"none", []string{"--no-test-command"}, nil, "tests:      none (--no-test-command)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			repo := userRepo(t)
			writeFile(t, repo, "go.mod", "module example.com/x\n")
			home := t.TempDir()
			cfgPath := filepath.Join(home, "config.yaml")
			env := map[string]string{"PATH": t.TempDir(), "HOME": home}
			args := append([]string{"init", "--config", cfgPath, "--data-dir", filepath.Join(home, "data"), "--repo", repo,
				"--listen", "127.0.0.1:0", "--yes"}, tt.args...)
			code, out, errOut := runMain(t, env, args...)
			if code != 0 {
				t.Fatalf("init: exit %d\n%s%s", code, out, errOut)
			}
			if !strings.Contains(out, tt.line) {
				t.Errorf("init's output lacks %q:\n%s", tt.line, out)
			}
			cfg, err := config.Load(cfgPath, envOf(env))
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Projects[0].Settings.TestCommands; !slices.Equal(got, tt.want) {
				t.Errorf("settings.test_commands = %q, want %q", got, tt.want)
			}
		})
	}
	code, _, errOut := runMain(t, nil, "init", "--test-command", "make", "--no-test-command")
	if code != 2 || !strings.Contains(errOut, "--test-command or --no-test-command, not both") {
		t.Errorf("both flags: exit %d, %s", code, errOut)
	}
}
