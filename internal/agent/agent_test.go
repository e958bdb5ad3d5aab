package agent_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
)

// scripts are the fake agents, written before any test runs: writing an
// executable while a parallel test forks makes exec fail with "text file
// busy".
var scripts = map[string]string{
	"echo":         `read line; echo "prompt:$line"; echo "task:$AQ_TASK_ID secret:${DISCORD_TOKEN:-none}"; pwd; echo oops >&2; exit 3`,
	"polite":       `sleep 300 & echo $!; wait`,
	"ignores-term": `trap '' TERM; sleep 300 & echo $!; while :; do wait; done`,
	"leaves-child": `sleep 300 & echo $!; exit 0`,
	// stderr-lines prints lines on stderr: one ending \r\n, one of 9000
	// bytes, a last one without its newline.
	"stderr-lines": `printf 'one\ntwo\r\n' >&2; head -c 9000 /dev/zero | tr '\0' x >&2; printf '\nlast' >&2; echo out`,
	// escapes leaves a child in a session of its own, holding stdout; the
	// FIFO makes the script wait until the child has left the group.
	"escapes": `f=$(mktemp -u); mkfifo "$f"; setsid sh -c "echo \$\$ > $f; exec sleep 300" & read -r pid < "$f"; rm -f "$f"; echo "$pid"; exit 0`,
}

var scriptDir string

func TestMain(m *testing.M) {
	if mark := os.Getenv(starterEnv); mark != "" {
		os.Exit(heldStarter(mark))
	}
	if len(os.Args) > 1 && os.Args[1] == shimArg {
		os.Exit(agent.RunShim(os.Args[2:]))
	}
	if dir := os.Getenv(detachedStarterEnv); dir != "" {
		os.Exit(detachedStarter(dir))
	}
	dir, err := os.MkdirTemp("", "agent-scripts")
	if err != nil {
		panic(err)
	}
	scriptDir = dir
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			panic(err)
		}
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// script returns the path of a fake agent from scripts.
func script(t *testing.T, name string) string {
	t.Helper()
	if _, ok := scripts[name]; !ok {
		t.Fatalf("no script %q", name)
	}
	return filepath.Join(scriptDir, name)
}

func wait(t *testing.T, p *agent.Process) agent.Result {
	t.Helper()
	r, err := p.Wait(progresstest.Context(t))
	if err != nil {
		t.Fatalf("process did not end: %v", err)
	}
	return r
}

func TestEnvironmentIsScrubbed(t *testing.T) {
	t.Parallel()
	daemon := []string{"PATH=/usr/bin", "HOME=/home/me", "LC_ALL=C", "DISCORD_TOKEN=secret", "GITHUB_TOKEN=secret",
		"AGENTQUEUED_TOKEN=secret", "AQ_TASK_ID=forged"}
	got := agent.Environment(daemon, map[string]string{"ANTHROPIC_MODEL": "m", "HOME": "/agent"},
		map[string]string{"AQ_TASK_ID": "bold-orbit", "AQ_RUN_TOKEN": "t"})
	want := []string{"ANTHROPIC_MODEL=m", "AQ_RUN_TOKEN=t", "AQ_TASK_ID=bold-orbit", "HOME=/agent", "LC_ALL=C", "PATH=/usr/bin"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("environment\n got %v\nwant %v", got, want)
	}
}

func TestProcessRunsWithPromptEnvAndLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "logs", "task", "1.log")
	sh := script(t, "echo")
	var lines []string
	var activity atomic.Int32
	p, err := agent.Start(agent.Spec{
		Argv: []string{sh}, Dir: dir, Stdin: "fix the bug\n", LogPath: log,
		Env:        agent.Environment(append(os.Environ(), "DISCORD_TOKEN=secret"), nil, map[string]string{"AQ_TASK_ID": "bold-orbit"}),
		OnLine:     func(b []byte) { lines = append(lines, string(b)) },
		OnActivity: func() { activity.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	r := wait(t, p)
	if r.ExitCode != 3 || !strings.Contains(r.StderrTail, "oops") || r.Stopped {
		t.Fatalf("result %+v", r)
	}
	want := []string{"prompt:fix the bug", "task:bold-orbit secret:none", dir}
	if strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Fatalf("lines %q, want %q", lines, want)
	}
	if activity.Load() < 3 {
		t.Fatalf("activity seen %d times", activity.Load())
	}
	b, err := os.ReadFile(log)
	if err != nil || !strings.Contains(string(b), "prompt:fix the bug") || !strings.Contains(string(b), "oops") {
		t.Fatalf("log %q, %v", b, err)
	}
}

// TestProcessHandsOnStderrLines: OnStderrLine gets standard error line by
// line, a long line cut, the last line without its newline too, while the
// log and the tail keep all of it.
func TestProcessHandsOnStderrLines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var lines []string
	p, err := agent.Start(agent.Spec{Argv: []string{script(t, "stderr-lines")}, Dir: dir, LogPath: filepath.Join(dir, "1.log"),
		OnStderrLine: func(b []byte) { lines = append(lines, string(b)) }})
	if err != nil {
		t.Fatal(err)
	}
	r := wait(t, p)
	want := []string{"one", "two", strings.Repeat("x", 8<<10), "last"}
	if strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Errorf("stderr lines %d: %.40q…, want %d", len(lines), lines, len(want))
	}
	if r.ExitCode != 0 || !strings.HasSuffix(r.StderrTail, "x\nlast") {
		t.Errorf("result %+v", r)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "1.log")); err != nil || strings.Count(string(b), "x") != 9000 {
		t.Errorf("log has %d x, %v", strings.Count(string(b), "x"), err)
	}
}

func TestStopEndsTheWholeGroup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		wantSignal string
	}{
		{"polite", "polite", "terminated"},
		{"ignores TERM", "ignores-term", "killed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			child := make(chan int, 1)
			p, err := agent.Start(agent.Spec{Argv: []string{script(t, tc.body)}, Dir: t.TempDir(),
				LogPath: filepath.Join(t.TempDir(), "run.log"), Env: agent.Environment(os.Environ(), nil, nil),
				OnLine: func(b []byte) {
					if pid, err := strconv.Atoi(string(b)); err == nil {
						child <- pid
					}
				}})
			if err != nil {
				t.Fatal(err)
			}
			pid := <-child
			r := p.Stop(300 * time.Millisecond)
			if !r.Stopped || r.Signal != tc.wantSignal {
				t.Fatalf("result %+v, want signal %q", r, tc.wantSignal)
			}
			if agent.Alive(pid) {
				t.Fatalf("child %d of the stopped agent is still alive", pid)
			}
		})
	}
}

func TestLeaderExitEndsLeftoverChildren(t *testing.T) {
	t.Parallel()
	child := make(chan int, 1)
	p, err := agent.Start(agent.Spec{Argv: []string{script(t, "leaves-child")}, Dir: t.TempDir(),
		LogPath: filepath.Join(t.TempDir(), "run.log"), Env: agent.Environment(os.Environ(), nil, nil),
		OnLine: func(b []byte) {
			if pid, err := strconv.Atoi(string(b)); err == nil {
				child <- pid
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	r := wait(t, p) // must not hang on the child's open stdout
	if r.ExitCode != 0 {
		t.Fatalf("result %+v", r)
	}
	if pid := <-child; agent.Alive(pid) {
		t.Fatalf("leftover child %d still alive", pid)
	}
}

func TestStartFailures(t *testing.T) {
	t.Parallel()
	if _, err := agent.Start(agent.Spec{Argv: []string{filepath.Join(t.TempDir(), "missing")}, LogPath: filepath.Join(t.TempDir(), "l")}); err == nil {
		t.Fatal("a missing executable started")
	}
	if _, err := agent.Start(agent.Spec{LogPath: "x"}); err == nil {
		t.Fatal("an empty command started")
	}
}

func TestCommandAdapter(t *testing.T) {
	t.Parallel()
	reg := agent.DefaultRegistry()
	a, err := reg.For("command")
	if err != nil {
		t.Fatal(err)
	}
	inv, err := a.Invocation(agent.RunContext{Agent: models.Agent{ID: "a1", AgentSettings: models.AgentSettings{Command: "/bin/agent", Args: []string{"--fast"}}}, Prompt: "do it"})
	if err != nil || strings.Join(inv.Argv, " ") != "/bin/agent --fast" || inv.Stdin != "do it" {
		t.Fatalf("invocation %+v %v", inv, err)
	}
	if ev := a.NewParser(agent.RunContext{}).Line([]byte(`{"type":"result"}`)); ev != nil {
		t.Fatalf("command output parsed: %v", ev)
	}
	if _, err := a.Invocation(agent.RunContext{Agent: models.Agent{ID: "a1"}}); err == nil {
		t.Fatal("empty command accepted")
	}
	if _, err := reg.For("telepathy"); err == nil || !strings.Contains(err.Error(), "command") {
		t.Fatalf("unknown type: %v", err)
	}
}

func TestChildLeavingTheGroupDoesNotHangTheRun(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid is not installed")
	}
	child := make(chan int, 1)
	p, err := agent.Start(agent.Spec{Argv: []string{script(t, "escapes")}, Dir: t.TempDir(),
		LogPath: filepath.Join(t.TempDir(), "run.log"), Env: agent.Environment(os.Environ(), nil, nil),
		OnLine: func(b []byte) {
			if pid, err := strconv.Atoi(string(b)); err == nil {
				child <- pid
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	pid := <-child
	defer syscall.Kill(pid, syscall.SIGKILL)
	r := wait(t, p) // bounded by the output drain, not by the escaped child
	if r.ExitCode != 0 {
		t.Fatalf("result %+v", r)
	}
}

func TestIsRunOfChecksTheTask(t *testing.T) {
	t.Parallel()
	child := make(chan int, 1)
	p, err := agent.Start(agent.Spec{Argv: []string{script(t, "polite")}, Dir: t.TempDir(),
		LogPath: filepath.Join(t.TempDir(), "run.log"), Env: agent.Environment(os.Environ(), nil, map[string]string{"AQ_TASK_ID": "bold-orbit"}),
		OnLine: func(b []byte) {
			if pid, err := strconv.Atoi(string(b)); err == nil {
				child <- pid
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	<-child
	defer p.Stop(time.Second)
	if !agent.IsRunOf(p.PID(), "bold-orbit") {
		t.Fatal("the run's own process not recognised")
	}
	if agent.IsRunOf(p.PID(), "other-task") || agent.IsRunOf(os.Getpid(), "bold-orbit") {
		t.Fatal("an unrelated process taken for the run")
	}
}
