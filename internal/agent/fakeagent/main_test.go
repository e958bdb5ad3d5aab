package main

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
)

// env is a getenv over a map.
func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// runFake runs the fake in dir with the prompt on stdin and returns its
// exit code, stdout and stderr.
func runFake(t *testing.T, dir string, vars map[string]string, prompt string, argv ...string) (int, string, string) {
	t.Helper()
	if vars["FAKEAGENT_STATE_DIR"] == "" {
		vars = maps.Clone(vars)
		if vars == nil {
			vars = map[string]string{}
		}
		vars["FAKEAGENT_STATE_DIR"] = t.TempDir() // never the shared default
	}
	var out, errOut bytes.Buffer
	code := run(argv, strings.NewReader(prompt), &out, &errOut, dir, env(vars))
	return code, out.String(), errOut.String()
}

// jsonLines decodes every line of out, failing on one that is not a JSON object.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for l := range strings.Lines(out) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON object: %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

func TestFormatOf(t *testing.T) {
	t.Parallel()
	for argv0, want := range map[string]string{
		"/usr/bin/claude": "claude", "codex": "codex", "/x/cursor-agent": "cursor", "agent": "cursor",
		"/opt/aider": "aider", "/tmp/fakeagent": "",
	} {
		if got := formatOf(argv0, ""); got != want {
			t.Errorf("formatOf(%q) = %q, want %q", argv0, got, want)
		}
	}
	if got := formatOf("/tmp/fakeagent", "codex"); got != "codex" {
		t.Errorf("FAKEAGENT_FORMAT=codex gave %q", got)
	}
}

func TestParseArgs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		format string
		args   []string
		want   invocation
		code   int
	}{
		{"claude", []string{"-p", "--output-format", "stream-json", "--verbose", "--model", "opus", "--allowedTools", "Bash(git log:*)", "Edit",
			"--mcp-config", "/s/mcp.json", "--strict-mcp-config", "--resume", "abc", "--max-turns", "3", "--unknown"},
			invocation{print: true, verbose: true, outputFormat: "stream-json", model: "opus", resume: "abc", mcpConfig: []string{"/s/mcp.json"},
				allowedTools: []string{"Bash(git log:*)", "Edit"}}, 0},
		{"claude", []string{"-p", "--output-format", "stream-json"}, invocation{}, 1},
		{"codex", []string{"exec", "--json", "--skip-git-repo-check", "-m", "o3", "-s", "read-only", "-c", `a="b"`, "resume", "t-1", "-"},
			invocation{json: true, model: "o3", permissionMode: "read-only", resume: "t-1", positional: []string{"-"}, overrides: []string{`a="b"`}}, 0},
		{"codex", []string{"exec", "-"}, invocation{}, 2},
		{"cursor", []string{"-p", "--output-format", "stream-json", "--force", "--resume", "c-1", "--trust"},
			invocation{print: true, outputFormat: "stream-json", resume: "c-1"}, 0},
		{"aider", []string{"--message-file", "/p", "--yes-always", "--model", "sonnet", "--read", "/c.md"},
			invocation{messageFile: "/p", model: "sonnet"}, 0},
		{"aider", []string{"--yes-always"}, invocation{}, 1},
	}
	for _, c := range cases {
		inv, code, err := parseArgs(c.format, c.args)
		if code != c.code || (err != nil) != (c.code != 0) {
			t.Errorf("%s %q: code %d, err %v; want code %d", c.format, c.args, code, err, c.code)
			continue
		}
		if c.code == 0 && !reflect.DeepEqual(inv, c.want) {
			t.Errorf("%s %q:\n got %+v\nwant %+v", c.format, c.args, inv, c.want)
		}
	}
}

func TestStreamsAndSessions(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	vars := map[string]string{"FAKEAGENT_STATE_DIR": state}
	argv := map[string][]string{
		"claude": {"claude", "-p", "--output-format", "stream-json", "--verbose"},
		"codex":  {"codex", "exec", "--json", "-"},
		"cursor": {"cursor-agent", "-p", "--output-format", "stream-json", "--trust"},
	}
	resume := map[string]func(id string) []string{
		"claude": func(id string) []string { return append(argv["claude"], "--resume", id) },
		"codex":  func(id string) []string { return []string{"codex", "exec", "--json", "resume", id, "-"} },
		"cursor": func(id string) []string { return append(argv["cursor"], "--resume", id) },
	}
	sessionOf := func(lines []map[string]any) string {
		for _, l := range lines {
			if id, ok := l["session_id"].(string); ok && l["type"] == "system" {
				return id
			}
			if id, ok := l["thread_id"].(string); ok {
				return id
			}
		}
		return ""
	}
	for format := range argv {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			code, out, errOut := runFake(t, dir, vars, "Say hi.\n@write hello.txt hi there\n", argv[format]...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			lines := jsonLines(t, out)
			id := sessionOf(lines)
			if id == "" {
				t.Fatalf("no session in %s", out)
			}
			if last := lines[len(lines)-1]["type"]; last != "result" && last != "turn.completed" {
				t.Errorf("last line is %v", last)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "hello.txt")); err != nil || string(b) != "hi there\n" {
				t.Errorf("hello.txt = %q, %v", b, err)
			}
			code, out, errOut = runFake(t, dir, vars, "Again.\n", resume[format](id)...)
			if code != 0 || sessionOf(jsonLines(t, out)) != id {
				t.Fatalf("resume: exit %d, %s %s", code, out, errOut)
			}
			if format == "codex" && !strings.Contains(out, `"input_tokens":2680`) {
				t.Errorf("codex resume does not report the thread's running total: %s", out)
			}
			code, out, errOut = runFake(t, dir, vars, "Again.\n", resume[format]("0000-unknown")...)
			if code != 1 {
				t.Errorf("resume of an unknown session: exit %d", code)
			}
			if format == "claude" && !strings.Contains(out, "No conversation found with session ID: 0000-unknown") {
				t.Errorf("claude's unknown session result is missing: %q", out)
			}
			if format == "codex" && !strings.Contains(errOut, "no rollout found for thread id 0000-unknown") {
				t.Errorf("codex's unknown thread error is missing: %q", errOut)
			}
		})
	}
}

func TestAiderOutput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prompt := filepath.Join(dir, "prompt")
	if err := os.WriteFile(prompt, []byte("@write src/a.go package a\n@ratelimit 10\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runFake(t, dir, nil, "", "aider", "--message-file", prompt, "--yes-always")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"Aider v0.86.2", "Tokens: 1.3k sent, 40 cache write, 300 cache hit, 200 received.",
		"Applied edit to src/a.go", "The API provider has rate limited you."} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code, _, _ := runFake(t, dir, nil, "", "aider", "--message-file", filepath.Join(dir, "missing")); code != 1 {
		t.Errorf("missing message file: exit %d", code)
	}
}

func TestDirectives(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	conflict := "a\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> other\n"
	if err := os.WriteFile(filepath.Join(dir, "c.txt"), []byte(conflict), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "clean.txt"), []byte("clean\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	prompt := strings.Join([]string{
		"Text without directives.",
		"@write f.txt one",
		"  @append f.txt two",
		"@conflict-resolve c.txt resolved",
		"@conflict-resolve clean.txt must not be written",
		"@only-attempt 2 @write second.txt attempt two",
		"@only-attempt 3 @write third.txt attempt three",
		"@someday maybe",
		"@exit 5",
		"@write never.txt x",
	}, "\n")
	vars := map[string]string{"AQ_ATTEMPT": "2"}
	code, out, errOut := runFake(t, dir, vars, prompt, "claude", "-p", "--output-format", "stream-json", "--verbose")
	if code != 5 {
		t.Fatalf("exit %d, want 5: %s", code, errOut)
	}
	if strings.Contains(out, `"type":"result"`) {
		t.Errorf("@exit printed a result: %s", out)
	}
	for name, want := range map[string]string{"f.txt": "one\ntwo\n", "c.txt": "resolved\n", "clean.txt": "clean\n", "second.txt": "attempt two\n"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
			t.Errorf("%s = %q (%v), want %q", name, b, err, want)
		}
	}
	for _, name := range []string{"third.txt", "never.txt"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s was written", name)
		}
	}
	if !strings.Contains(errOut, `unknown directive "@someday maybe"`) {
		t.Errorf("unknown directive not reported: %q", errOut)
	}
	code, _, errOut = runFake(t, dir, nil, "@write ../escape.txt x\n", "claude", "-p", "--output-format", "stream-json", "--verbose")
	if code != 1 || !strings.Contains(errOut, "inside the working directory") {
		t.Errorf("a path outside the directory: exit %d, %q", code, errOut)
	}
	code, _, errOut = runFake(t, dir, nil, "@complete done\n", "cursor-agent", "-p", "--output-format", "stream-json")
	if code != 2 || !strings.Contains(errOut, "@complete needs the agent RPC") || !strings.Contains(errOut, "AQ_SOCKET") {
		t.Errorf("RPC without AQ_SOCKET: exit %d, %q", code, errOut)
	}
}

func TestCommit(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	code, out, errOut := runFake(t, dir, nil, "@write a.txt A\n@commit add a\n@commit nothing new\n", "codex", "exec", "--json", "-")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, `"type":"command_execution"`) || !strings.Contains(errOut, "nothing to commit") {
		t.Errorf("stdout %s\nstderr %s", out, errOut)
	}
	log, err := exec.Command("git", "-C", dir, "log", "--format=%an %s").Output()
	if err != nil || strings.TrimSpace(string(log)) != "fakeagent add a" {
		t.Errorf("git log = %q, %v", log, err)
	}
}

// rpcRecorder is a stand-in daemon: it records the RPC calls made on a Unix
// socket and answers them.
type rpcRecorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *rpcRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.calls = append(r.calls, strings.TrimPrefix(req.URL.Path, api.RPCPrefix+"/")+" "+string(body)+" "+req.Header.Get("Authorization"))
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case strings.HasSuffix(req.URL.Path, "/"+api.ToolAsk):
		json.NewEncoder(w).Encode(api.AskResponse{Answer: "blue"}) //nolint:errcheck // test server
	case strings.HasSuffix(req.URL.Path, "/"+api.ToolProposePlan):
		json.NewEncoder(w).Encode(api.BatchResponse{}) //nolint:errcheck // test server
	default:
		json.NewEncoder(w).Encode(api.RPCOK{OK: true}) //nolint:errcheck // test server
	}
}

func TestRPCDirectives(t *testing.T) {
	t.Parallel()
	sockDir, err := os.MkdirTemp("", "fa")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "rpc.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	rec := &rpcRecorder{}
	srv := &http.Server{Handler: rec}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	t.Cleanup(func() { srv.Close() })

	dir := t.TempDir()
	vars := map[string]string{"AQ_SOCKET": sock, "AQ_TASK_ID": "t1", "AQ_RUN_TOKEN": "tok"}
	prompt := "@ask Which colour?\n@plan [{\"id\":\"a\",\"title\":\"A\"}]\n@approve looks right\n@reject needs tests\n@fail cannot\n@complete all done\n"
	code, out, errOut := runFake(t, dir, vars, prompt, "cursor-agent", "-p", "--output-format", "stream-json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := []string{
		`ask {"question":"Which colour?"} Bearer tok`,
		`propose_plan {"tasks":[{"id":"a","title":"A"}]} Bearer tok`,
		`approve {"reasons":"looks right"} Bearer tok`,
		`reject {"reasons":"needs tests"} Bearer tok`,
		`fail {"message":"cannot"} Bearer tok`,
		`complete {"summary":"all done"} Bearer tok`,
	}
	rec.mu.Lock()
	got := rec.calls
	rec.mu.Unlock()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if b, err := os.ReadFile(filepath.Join(dir, "ANSWER.txt")); err != nil || string(b) != "blue\n" {
		t.Errorf("ANSWER.txt = %q, %v", b, err)
	}
	lines := jsonLines(t, out)
	if last := lines[len(lines)-1]; last["type"] != "result" || last["result"] != "all done" {
		t.Errorf("last line %v", last)
	}
}

// TestDeniedLikeTheCLIs checks the fake's imitation of the CLIs' refusals
// of agentqueued's tools.
func TestDeniedLikeTheCLIs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mcp := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(mcp, []byte(`{"mcpServers":{"agentqueued":{"type":"stdio","command":"/aq","args":["mcp"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	withBin := func(k string) string {
		if k == "AQ_BIN" {
			return "/aq"
		}
		return ""
	}
	noBin := func(string) string { return "" }
	cases := []struct {
		name   string
		format string
		inv    invocation
		getenv func(string) string
		denied bool
	}{
		{"claude without allowed tools", "claude", invocation{mcpConfig: []string{mcp}}, withBin, true},
		{"claude with the server allowed", "claude", invocation{mcpConfig: []string{mcp}, allowedTools: []string{"mcp__agentqueued"}}, noBin, false},
		{"claude with the tool allowed", "claude", invocation{mcpConfig: []string{mcp}, allowedTools: []string{"mcp__agentqueued__complete"}}, noBin, false},
		{"claude allowed a server it lacks", "claude", invocation{allowedTools: []string{"mcp__agentqueued"}}, noBin, true},
		{"claude with the shell rule", "claude", invocation{allowedTools: []string{"Bash(/aq agent:*)"}}, withBin, false},
		{"claude bypassing", "claude", invocation{permissionMode: "bypassPermissions"}, noBin, false},
		{"codex without approval", "codex", invocation{overrides: []string{`mcp_servers.agentqueued.command="/aq"`}}, withBin, true},
		{"codex approved", "codex", invocation{overrides: []string{`mcp_servers.agentqueued.command="/aq"`,
			`mcp_servers.agentqueued.default_tools_approval_mode="approve"`}}, noBin, false},
		{"codex's shell without a sandbox", "codex", invocation{permissionMode: "danger-full-access"}, withBin, false},
		{"codex's shell in a sandbox", "codex", invocation{permissionMode: "workspace-write"}, withBin, true},
		{"cursor", "cursor", invocation{}, noBin, false},
	}
	for _, c := range cases {
		f := &fake{format: c.format, inv: c.inv, getenv: c.getenv, dir: dir}
		if got := f.refusal("complete") != ""; got != c.denied {
			t.Errorf("%s: denied %t, want %t", c.name, got, c.denied)
		}
	}
}
