package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/config"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/proc"
	"github.com/agentqueued/agentqueued/internal/service"
)

// versionTimeout bounds an agent CLI's `--version`.
const versionTimeout = 10 * time.Second

// initAgentTypes are the agent types init looks for, in the order it
// writes them.
var initAgentTypes = []string{"claude", "codex", "cursor", "aider"}

// agentDefaults are the settings init writes for each agent type, as the
// example configuration has them (docs/agents.md).
var agentDefaults = map[string]struct {
	passEnv        []string
	permissionMode string
}{
	"claude": {passEnv: []string{"ANTHROPIC_API_KEY"}, permissionMode: "acceptEdits"},
	"codex":  {passEnv: []string{"OPENAI_API_KEY"}, permissionMode: "workspace-write"},
	"cursor": {passEnv: []string{"CURSOR_API_KEY"}},
	"aider":  {passEnv: []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY"}},
}

// foundAgent is an agent CLI found on PATH.
type foundAgent struct {
	Type, Path, Version string
}

// gitRepoInfo is what init learns of the repository it runs in.
type gitRepoInfo struct {
	Top, Branch, Remote string
}

// lookPathIn finds name as exec.LookPath does, in the directories of
// path (a PATH value) instead of the process's own.
func lookPathIn(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		return exec.LookPath(name)
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w", name, exec.ErrNotFound)
}

// scrubbedEnv is the environment CLIs are asked their version in: the
// PATH and HOME they need, nothing secret.
func scrubbedEnv(getenv func(string) (string, bool)) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "USER", "LANG", "TMPDIR"} {
		if v, ok := getenv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// programVersion runs `path --version` with a timeout and a scrubbed
// environment and returns the first line it printed.
func programVersion(ctx context.Context, path string, env []string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := proc.Command(ctx, path, "--version")
	cmd.Env = env
	cmd.Dir = os.TempDir()
	cmd.WaitDelay = time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	line, _, _ := strings.Cut(strings.TrimSpace(out.String()), "\n")
	line = strings.TrimSpace(line)
	if len(line) > 120 {
		line = line[:120]
	}
	if ctx.Err() != nil {
		return "", fmt.Errorf("%s --version: no answer within %s", path, timeout)
	}
	if err != nil {
		if line != "" {
			return "", fmt.Errorf("%s --version: %v: %s", path, err, line)
		}
		return "", fmt.Errorf("%s --version: %w", path, err)
	}
	return line, nil
}

// inspectRepo finds the repository dir is in: its top level, the default
// branch (the remote's HEAD, else the branch checked out, else main) and
// the origin remote.
func inspectRepo(ctx context.Context, dir string) (gitRepoInfo, error) {
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, versionTimeout)
		defer cancel()
		cmd := proc.Command(ctx, "git", append([]string{"-C", dir}, args...)...)
		cmd.WaitDelay = time.Second
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
		}
		return strings.TrimSpace(out.String()), nil
	}
	top, err := run("rev-parse", "--show-toplevel")
	if err != nil {
		return gitRepoInfo{}, fmt.Errorf("%s is not in a git repository (%v): run init inside your repository, or give --repo", dir, err)
	}
	info := gitRepoInfo{Top: top, Branch: models.DefaultBranch}
	info.Remote, _ = run("remote", "get-url", "origin")
	if head, err := run("symbolic-ref", "--short", "refs/remotes/origin/HEAD"); err == nil && strings.HasPrefix(head, "origin/") {
		info.Branch = strings.TrimPrefix(head, "origin/")
	} else if cur, err := run("symbolic-ref", "--short", "HEAD"); err == nil && cur != "" {
		info.Branch = cur
	}
	return info, nil
}

// projectID makes a project id of a directory's name.
func projectID(name string) string {
	id := strings.ToLower(name)
	id = regexp.MustCompile(`[^a-z0-9_-]+`).ReplaceAllString(id, "-")
	id = strings.Trim(id, "-_")
	if len(id) > 64 {
		id = id[:64]
	}
	if id == "" {
		return "project"
	}
	return id
}

// defaultConfigPath is $XDG_CONFIG_HOME/agentqueued/config.yaml, else
// ~/.config/agentqueued/config.yaml, else ./agentqueued.yaml.
func defaultConfigPath(getenv func(string) (string, bool)) string {
	if v, ok := getenv("XDG_CONFIG_HOME"); ok && filepath.IsAbs(v) {
		return filepath.Join(v, config.AppDirName, "config.yaml")
	}
	if v, ok := getenv("HOME"); ok && v != "" {
		return filepath.Join(v, ".config", config.AppDirName, "config.yaml")
	}
	return "agentqueued.yaml"
}

// yamlString quotes s for the configuration file: a double-quoted YAML
// string whose dollar signs are doubled, so that the loader does not
// take them for environment references.
func yamlString(s string) string {
	return strconv.Quote(strings.ReplaceAll(s, "$", "$$"))
}

// runInit is the "init" subcommand.
func (m *Main) runInit(ctx context.Context, args []string) error {
	fs := newFlagSet("agentqueued init")
	cfgPath := fs.String("config", "", "configuration `file` to write (default $XDG_CONFIG_HOME/agentqueued/config.yaml or ~/.config/agentqueued/config.yaml)")
	dataDir := fs.String("data-dir", "", "data `directory` of the daemon (default "+config.DefaultDataDir(m.Getenv)+")")
	project := fs.String("project", "", "project `id` (default the repository directory's name)")
	repoDir := fs.String("repo", "", "the git repository's `path` (default the current directory)")
	var agents repeatFlag
	fs.Var(&agents, "agent", "agent `type` to write: claude, codex, cursor or aider (repeatable; default every one found on PATH)")
	listen := fs.String("listen", "", "`address` the daemon's API listens on (default "+config.DefaultListen+
		", or the next free port when that one is in use)")
	var testCommands repeatFlag
	fs.Var(&testCommands, "test-command", "the project's test `command`, run to verify every task that names none "+
		"(repeatable; default the one detected in the repository)")
	noTests := fs.Bool("no-test-command", false, "write no test command: tasks land once their work merges")
	force := fs.Bool("force", false, "overwrite an existing configuration file")
	yes := fs.Bool("yes", false, "write without asking")
	pos, err := parseFlags(fs, args, m.Stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("init: unexpected argument %q", pos[0])
	}
	for _, a := range agents {
		if !slices.Contains(initAgentTypes, a) {
			return usagef("init: --agent %q: want one of %s", a, strings.Join(initAgentTypes, ", "))
		}
	}
	if *noTests && len(testCommands) > 0 {
		return usagef("init: give --test-command or --no-test-command, not both")
	}
	for _, c := range testCommands {
		if strings.TrimSpace(c) == "" {
			return usagef("init: --test-command: empty command")
		}
	}
	if *cfgPath == "" {
		*cfgPath = defaultConfigPath(m.Getenv)
	}
	path, err := filepath.Abs(*cfgPath)
	if err != nil {
		return fmt.Errorf("init: --config: %w", err)
	}
	if _, err := os.Stat(path); err == nil && !*force {
		return fmt.Errorf("init: %s exists: give --force to overwrite it, or --config to write another file", path)
	}
	dir := *repoDir
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			return fmt.Errorf("init: %w", err)
		}
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("init: --repo: %w", err)
	}
	info, err := inspectRepo(ctx, dir)
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	id := *project
	if id == "" {
		id = projectID(filepath.Base(info.Top))
	}
	if !models.ValidID(id) {
		return usagef("init: --project %q: use 1-64 lower-case letters, digits, '-' or '_'", id)
	}
	data := *dataDir
	if data == "" {
		data = config.DefaultDataDir(m.Getenv)
	}
	if data, err = filepath.Abs(data); err != nil {
		return fmt.Errorf("init: --data-dir: %w", err)
	}

	tests, testsNote := []string(testCommands), "(--test-command)"
	switch {
	case *noTests:
		tests, testsNote = nil, "(--no-test-command)"
	case len(tests) == 0:
		if cmd, found := detectTestCommand(info.Top); cmd != "" {
			tests, testsNote = []string{cmd}, "(found "+found+"; --test-command to change it, --no-test-command for none)"
		} else {
			testsNote = "(none found: no go.mod, package.json test script, pyproject.toml, setup.cfg, Cargo.toml or " +
				"Makefile test target; --test-command sets one)"
		}
	}

	listenAddr, listenNote, err := chooseListen(*listen, config.DefaultListen)
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}

	pathEnv, _ := m.Getenv("PATH")
	env := scrubbedEnv(m.Getenv)
	want := initAgentTypes
	if len(agents) > 0 {
		want = agents
	}
	var found []foundAgent
	for _, typ := range want {
		p, err := lookPathIn(service.TypeExecutable(typ), pathEnv)
		if err != nil {
			if len(agents) > 0 {
				return fmt.Errorf("init: --agent %s: %s is not on PATH: install it, or leave --agent %s out", typ, service.TypeExecutable(typ), typ)
			}
			continue
		}
		v, err := programVersion(ctx, p, env, versionTimeout)
		if err != nil {
			fmt.Fprintf(m.Stderr, "warning: %v\n", err)
			v = "version unknown"
		}
		found = append(found, foundAgent{Type: typ, Path: p, Version: v})
	}

	doc := initConfig(data, listenAddr, id, info, tests, found)
	if _, err := config.Parse([]byte(doc), m.Getenv); err != nil {
		return fmt.Errorf("init: the configuration written would not load: %w", err)
	}
	fmt.Fprintf(m.Stdout, "repository: %s (branch %s", info.Top, info.Branch)
	if info.Remote != "" {
		fmt.Fprintf(m.Stdout, ", remote %s", models.RedactURL(info.Remote))
	}
	fmt.Fprintf(m.Stdout, ")\nproject:    %s (LINK)\n            %s\n", id,
		repoKind(&models.RepoConfig{SourceType: models.RepoLink, DefaultBranch: info.Branch}))
	if len(tests) > 0 {
		fmt.Fprintf(m.Stdout, "tests:      %s %s: a task lands only once they pass\n", strings.Join(tests, "; "), testsNote)
	} else {
		fmt.Fprintf(m.Stdout, "tests:      none %s: a task lands once its work merges, unverified\n", testsNote)
	}
	for _, a := range found {
		fmt.Fprintf(m.Stdout, "agent:      %s-1 (%s) %s: %s\n", a.Type, a.Type, a.Path, a.Version)
	}
	if len(found) == 0 {
		fmt.Fprintf(m.Stdout, "agents:     none of %s on PATH; add one under agents: (a command agent runs any program)\n",
			strings.Join([]string{"claude", "codex", "cursor-agent", "aider"}, ", "))
	}
	fmt.Fprintf(m.Stdout, "listen:     %s%s\ndata dir:   %s\nconfig:     %s\n", listenAddr, listenNote, data, path)
	if !*yes {
		fmt.Fprint(m.Stdout, "Write it? [y/N] ")
		line, _ := bufio.NewReader(m.stdin()).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			return errors.New("init: nothing written (give --yes to write without asking)")
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	if err := writeFileAtomic(path, []byte(doc), 0o600); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	fmt.Fprintf(m.Stdout, "wrote %s\n\nNext:\n  agentqueued doctor --config %s\n  agentqueued run --config %s\n"+
		"  agentqueued ctl --config %s task add --project %s --title \"...\"\n", path, path, path, path, id)
	return nil
}

// detectTestCommand returns the test command of the repository at dir,
// as its build files name it, and the file it was found by; "" when none
// says. The first that applies wins: go.mod (go test ./...), package.json
// with a test script (npm test; npm's placeholder script does not count),
// pyproject.toml or setup.cfg (pytest), Cargo.toml (cargo test), a
// Makefile with a test target (make test).
func detectTestCommand(dir string) (cmd, found string) {
	has := func(name string) bool { return isRegular(filepath.Join(dir, name)) }
	if has("go.mod") {
		return "go test ./...", "go.mod"
	}
	if b, err := os.ReadFile(filepath.Join(dir, "package.json")); err == nil {
		var pkg struct {
			Scripts map[string]string `json:"scripts"`
		}
		if json.Unmarshal(b, &pkg) == nil {
			if t := strings.TrimSpace(pkg.Scripts["test"]); t != "" && !strings.Contains(t, "no test specified") {
				return "npm test", "a test script in package.json"
			}
		}
	}
	for _, name := range []string{"pyproject.toml", "setup.cfg"} {
		if has(name) {
			return "pytest", name
		}
	}
	if has("Cargo.toml") {
		return "cargo test", "Cargo.toml"
	}
	for _, name := range []string{"GNUmakefile", "makefile", "Makefile"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err == nil && makeTestTarget.Match(b) {
			return "make test", "a test target in " + name
		}
	}
	return "", ""
}

// makeTestTarget matches a Makefile rule whose targets include test.
var makeTestTarget = regexp.MustCompile(`(?m)^(?:[^\s:#=]+[ \t]+)*test(?:[ \t]+[^\s:#=]+)*[ \t]*::?(?:[^=]|$)`)

// isRegular reports whether p is a regular file.
func isRegular(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// listenTries is how many ports after the default one init tries when
// the default is in use.
const listenTries = 20

// chooseListen returns the address init writes for the daemon's API and a
// note on how it was chosen. A given address must be free to listen on;
// without one the default is taken when free, else the first free port
// after it (another agentqueued, or another program, holds the default
// def).
func chooseListen(given, def string) (addr, note string, err error) {
	if given != "" {
		if _, _, err := net.SplitHostPort(given); err != nil {
			return "", "", usagef("init: --listen %q: want host:port, such as %s", given, config.DefaultListen)
		}
		if err := listenFree(given); err != nil {
			return "", "", fmt.Errorf("--listen %s: %w: stop what holds it, or give another port", given, err)
		}
		return given, "", nil
	}
	err = listenFree(def)
	if err == nil {
		return def, "", nil
	}
	host, port, _ := net.SplitHostPort(def)
	first, _ := strconv.Atoi(port)
	for p := first + 1; p <= first+listenTries; p++ {
		addr := net.JoinHostPort(host, strconv.Itoa(p))
		if listenFree(addr) == nil {
			return addr, fmt.Sprintf(" (%s is in use: another agentqueued or another program holds it; "+
				"ctl finds this one with --config or %s=http://%s)", def, envAddr, addr), nil
		}
	}
	return "", "", fmt.Errorf("%s and the %d ports after it are in use (%v): give a free one with --listen",
		def, listenTries, err)
}

// listenFree reports whether a listener can be opened at addr now: nil
// when it can, else why not ("address already in use").
func listenFree(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Err != nil {
			return fmt.Errorf("cannot listen there: %v", op.Err)
		}
		return err
	}
	return ln.Close()
}

// stdin is the standard input init asks on.
func (m *Main) stdin() io.Reader {
	if m.Stdin != nil {
		return m.Stdin
	}
	return os.Stdin
}

// writeFileAtomic writes data to path through a temporary file renamed
// over it.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// initConfig is the configuration init writes.
func initConfig(dataDir, listen, projectID string, info gitRepoInfo, tests []string, agents []foundAgent) string {
	var b strings.Builder
	b.WriteString("# agentqueued configuration written by `agentqueued init`.\n")
	b.WriteString("# configs/agentqueued.example.yaml describes every key; `agentqueued doctor` checks this file.\n\n")
	fmt.Fprintf(&b, "data_dir: %s\nlisten: %s\n\n", yamlString(dataDir), listen)
	b.WriteString("api:\n  token: ${AGENTQUEUED_TOKEN:-}\n\n")
	b.WriteString("# Created at the daemon's first start; later changes go through\n# `agentqueued ctl project edit`.\n")
	fmt.Fprintf(&b, "projects:\n  - id: %s\n    repo:\n      path: %s\n      default_branch: %s\n",
		projectID, yamlString(info.Top), yamlString(info.Branch))
	if len(tests) > 0 {
		quoted := make([]string, len(tests))
		for i, c := range tests {
			quoted[i] = yamlString(c)
		}
		fmt.Fprintf(&b, "    settings:\n      # Run to verify each task that names no test commands of its own:\n"+
			"      # its work lands only once every one exits 0.\n      test_commands: [%s]\n", strings.Join(quoted, ", "))
	}
	if len(agents) == 0 {
		b.WriteString("\n# No agent CLI was found on PATH. A command agent runs any program:\n" +
			"# agents:\n#   - name: worker-1\n#     type: command\n#     command: /usr/local/bin/my-agent\n")
		return b.String()
	}
	b.WriteString("\n# Agents, registered at every start. Keys stay out of this file: pass_env\n" +
		"# copies them from the daemon's environment.\nagents:\n")
	for _, a := range agents {
		d := agentDefaults[a.Type]
		fmt.Fprintf(&b, "  - name: %s-1\n    type: %s\n    command: %s   # %s\n", a.Type, a.Type, yamlString(a.Path),
			strings.ReplaceAll(a.Version, "\n", " "))
		if len(d.passEnv) > 0 {
			fmt.Fprintf(&b, "    pass_env: [%s]\n", strings.Join(d.passEnv, ", "))
		}
		if d.permissionMode != "" {
			fmt.Fprintf(&b, "    profile:\n      permission_mode: %s\n", d.permissionMode)
		}
		if a.Type == "claude" {
			// acceptEdits covers file edits only: a Bash call the profile
			// does not allow is refused, and a refused call fails the run.
			b.WriteString("      # The shell commands the agent may run (a refused call fails the run):\n" +
				"      # allowed_tools: [\"Bash(go test:*)\", \"Bash(npm test:*)\"]\n")
		}
	}
	return b.String()
}
