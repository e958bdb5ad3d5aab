package agent_test

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
)

// buildFakeAgent builds fakeagent into dir and links it under every CLI's
// name; it returns the directory.
func buildFakeAgent(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "fakeagent")
	cmd := exec.Command(goBin, "build", "-o", bin, "github.com/agentqueued/agentqueued/internal/agent/fakeagent")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build fakeagent: %v\n%s", err, out)
	}
	// Links, not copies: writing an executable while a parallel test forks
	// makes exec fail with "text file busy".
	for _, name := range []string{"claude", "codex", "cursor-agent", "aider"} {
		if err := os.Symlink(bin, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// gitRepo makes a repository with one commit.
func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, args := range [][]string{{"init", "-q"}, {"commit", "-q", "--allow-empty", "-m", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

// fakeRun is one run of an adapter's invocation of the fake agent.
type fakeRun struct {
	events []agent.Event
	exit   int
}

func (r fakeRun) last(kind agent.EventKind) (agent.Event, bool) {
	for i := len(r.events) - 1; i >= 0; i-- {
		if r.events[i].Kind == kind {
			return r.events[i], true
		}
	}
	return agent.Event{}, false
}

// runFake runs adapter a on the prompt the way the orchestrator does:
// invocation files in the state directory, a scrubbed environment, the
// parser fed line by line and ended with the exit code.
func runFake(t *testing.T, a agent.Adapter, bin, repo, home string, rc agent.RunContext) fakeRun {
	t.Helper()
	state := t.TempDir()
	rc.Agent = models.Agent{ID: "fake", AgentType: a.Type(), AgentSettings: models.AgentSettings{Command: bin}}
	rc.Dir, rc.StateDir = repo, state
	rc.PromptFile = filepath.Join(state, "prompt")
	rc.MCPServers = []models.MCPServer{{Name: "agentqueued", Command: "agentqueued", Args: []string{"mcp"}}}
	rc.Profile = models.Profile{Model: "fake-model", SystemPromptSuffix: "Be brief."}
	if err := os.WriteFile(rc.PromptFile, []byte(rc.Prompt), 0o600); err != nil {
		t.Fatal(err)
	}
	inv, err := a.Invocation(rc)
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range inv.Files {
		if err := os.WriteFile(filepath.Join(state, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	runEnv := map[string]string{"HOME": home, "FAKEAGENT_STATE_DIR": filepath.Join(home, "fakeagent"), "AQ_ATTEMPT": "1",
		"AQ_PROMPT_FILE": rc.PromptFile}
	maps.Copy(runEnv, inv.Env)
	parser := a.NewParser(rc)
	var events []agent.Event
	// Held and released, as the orchestrator starts every run.
	proc, err := agent.Start(agent.Spec{Argv: inv.Argv, Dir: repo, Env: agent.Environment(os.Environ(), nil, runEnv),
		Stdin: inv.Stdin, LogPath: filepath.Join(state, "run.log"), Hold: true,
		OnLine: func(line []byte) { events = append(events, parser.Line(line)...) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Release(); err != nil {
		t.Fatal(err)
	}
	res, err := proc.Wait(progresstest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	events = append(events, parser.End(res.ExitCode)...)
	if t.Failed() || testing.Verbose() {
		log, _ := os.ReadFile(filepath.Join(state, "run.log"))
		t.Logf("%s %q exited %d:\n%s", a.Type(), inv.Argv, res.ExitCode, log)
	}
	return fakeRun{events: events, exit: res.ExitCode}
}

// TestFakeAgentEndToEnd runs each adapter's real command line against the
// fake agent installed under the CLI's name and checks what the adapter's
// parser makes of its output: a session that a second run resumes, this
// run's usage, the result, the commit in the repository, rate limits,
// streams cut short and lost sessions.
func TestFakeAgentEndToEnd(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	bins := buildFakeAgent(t)
	fixed := models.TokenUsage{Input: 1000, Output: 200, CacheRead: 300, CacheWrite: 40}
	cases := []struct {
		a       agent.Adapter
		bin     string
		usage   models.TokenUsage
		summary string // prefix of the first run's summary
		reset   bool   // the rate-limit output carries a reset time
	}{
		{agent.Claude{}, "claude", fixed, "done", true},
		{agent.Codex{}, "codex", fixed, "done", true},
		{agent.Cursor{}, "cursor-agent", fixed, "done", true},
		// aider prints "1.3k sent, 40 cache write, 300 cache hit": input 960.
		{agent.Aider{}, "aider", models.TokenUsage{Input: 960, Output: 200, CacheRead: 300, CacheWrite: 40},
			"Applied edit to notes.txt\nCommit ", false},
	}
	t.Run("sleep-until-killed", func(t *testing.T) {
		t.Parallel()
		repo := gitRepo(t)
		inv, err := agent.Claude{}.Invocation(agent.RunContext{Agent: models.Agent{AgentSettings: models.AgentSettings{
			Command: filepath.Join(bins, "claude")}}, Prompt: "@sleep-until-killed\n"})
		if err != nil {
			t.Fatal(err)
		}
		parser := agent.Claude{}.NewParser(agent.RunContext{})
		started := make(chan struct{})
		var once sync.Once
		proc, err := agent.Start(agent.Spec{Argv: inv.Argv, Dir: repo, Stdin: inv.Stdin,
			Env:     agent.Environment(os.Environ(), nil, map[string]string{"HOME": t.TempDir(), "FAKEAGENT_STATE_DIR": t.TempDir()}),
			LogPath: filepath.Join(t.TempDir(), "run.log"),
			OnLine: func(line []byte) {
				parser.Line(line)
				once.Do(func() { close(started) })
			}})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-started:
		case <-proc.Done():
			t.Fatal("the fake ended before it was stopped")
		}
		res := proc.Stop(30 * time.Second)
		end := parser.End(res.ExitCode)
		if res.ExitCode != 143 || len(end) != 1 || end[0].Error != "the stream ended without a result (exit status 143)" {
			t.Errorf("stopped: %+v, %+v", res, end)
		}
	})
	for _, c := range cases {
		t.Run(c.a.Type(), func(t *testing.T) {
			t.Parallel()
			bin := filepath.Join(bins, c.bin)
			repo, home := gitRepo(t), t.TempDir()
			first := runFake(t, c.a, bin, repo, home, agent.RunContext{Prompt: "Write the notes.\n@write notes.txt hello\n@commit add notes\n"})
			res, ok := first.last(agent.EventResult)
			if first.exit != 0 || !ok || res.IsError || !strings.HasPrefix(res.Summary, c.summary) {
				t.Fatalf("first run: exit %d, result %+v", first.exit, res)
			}
			if u, _ := first.last(agent.EventUsage); u.Usage != c.usage {
				t.Errorf("usage %+v, want %+v", u.Usage, c.usage)
			}
			if b, err := os.ReadFile(filepath.Join(repo, "notes.txt")); err != nil || string(b) != "hello\n" {
				t.Errorf("notes.txt = %q, %v", b, err)
			}
			if out, err := exec.Command("git", "-C", repo, "log", "-1", "--format=%s").Output(); err != nil || strings.TrimSpace(string(out)) != "add notes" {
				t.Errorf("last commit %q, %v", out, err)
			}

			session, hasSession := first.last(agent.EventSession)
			if c.a.Type() == "aider" {
				if hasSession {
					t.Errorf("aider reported a session: %+v", session)
				}
			} else {
				if !hasSession || session.SessionID == "" {
					t.Fatalf("no session: %+v", first.events)
				}
				resumed := runFake(t, c.a, bin, repo, home, agent.RunContext{Prompt: "More.\n", SessionID: session.SessionID, SessionUsage: c.usage})
				s, _ := resumed.last(agent.EventSession)
				u, _ := resumed.last(agent.EventUsage)
				if res, _ := resumed.last(agent.EventResult); res.IsError || s.SessionID != session.SessionID || u.Usage != c.usage {
					t.Errorf("resumed run: session %q (want %q), usage %+v, result %+v", s.SessionID, session.SessionID, u.Usage, res)
				}
				again := runFake(t, c.a, bin, repo, home, agent.RunContext{Prompt: "More.\n@complete second run\n",
					SessionID: session.SessionID, SessionUsage: twice(c.usage)})
				// @complete needs the RPC, which this test does not run.
				if res, _ := again.last(agent.EventResult); again.exit != 2 || !res.IsError || res.SessionInvalid {
					t.Errorf("RPC directive without AQ_SOCKET: exit %d, result %+v", again.exit, res)
				}
				lost := runFake(t, c.a, bin, repo, home, agent.RunContext{Prompt: "More.\n", SessionID: "0000-lost-session"})
				if res, _ := lost.last(agent.EventResult); !res.IsError || !res.SessionInvalid {
					t.Errorf("unknown session: result %+v", res)
				}
			}

			before := time.Now()
			limited := runFake(t, c.a, bin, repo, home, agent.RunContext{Prompt: "@ratelimit 600\n"})
			rl, ok := limited.last(agent.EventRateLimit)
			if res, _ := limited.last(agent.EventResult); !ok || !res.IsError {
				t.Errorf("rate limit: %+v, result %+v", rl, res)
			}
			if c.reset {
				want := before.Add(600 * time.Second)
				if rl.ResetAt == nil || rl.ResetAt.Before(want.Add(-time.Second)) || rl.ResetAt.After(time.Now().Add(660*time.Second)) {
					t.Errorf("reset at %v, want about %v", rl.ResetAt, want)
				}
			}

			cut := runFake(t, c.a, bin, repo, home, agent.RunContext{Prompt: "Start.\n@exit 3\n"})
			if res, _ := cut.last(agent.EventResult); cut.exit != 3 || !res.IsError || !strings.Contains(res.Error, "status 3") {
				t.Errorf("cut short: exit %d, result %+v", cut.exit, res)
			}
		})
	}
}

// twice is the usage of two runs: a session's total after a resume.
func twice(u models.TokenUsage) models.TokenUsage {
	return models.TokenUsage{Input: 2 * u.Input, Output: 2 * u.Output, CacheRead: 2 * u.CacheRead, CacheWrite: 2 * u.CacheWrite}
}
