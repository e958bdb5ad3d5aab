package modeltest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/agentqueued/agentqueued/internal/agent/clitest"
	"github.com/agentqueued/agentqueued/internal/agent/modeltest"
	"github.com/agentqueued/agentqueued/internal/progresstest"
)

// TestRealCLIsTalkToTheFakeModel runs the real claude and codex, as the
// adapters start them but without the daemon, against the fake model: a
// file is written through the CLI's own edit tool, the tool's result comes
// back to the model, and the run ends with the model's last text.
func TestRealCLIsTalkToTheFakeModel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cli  string
		argv []string
		// done is in the last line of a successful run.
		done string
	}{
		{clitest.Claude, []string{"-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "acceptEdits"},
			`"subtype":"success"`},
		{clitest.Codex, []string{"exec", "--json", "--skip-git-repo-check", "-s", "workspace-write", "-"}, `"type":"turn.completed"`},
	}
	for _, tc := range tests {
		t.Run(tc.cli, func(t *testing.T) {
			t.Parallel()
			bin := clitest.Find(t, tc.cli)
			srv := modeltest.New(modeltest.Options{Logf: t.Logf})
			defer srv.Close()
			srv.Add(modeltest.Script{Name: "hello", Match: "Write the greeting", Turns: []modeltest.Turn{
				{Text: "Writing it.", Calls: []modeltest.Call{modeltest.Write("greeting.txt", "hello from "+tc.cli+"\n")}},
				{Text: "The greeting is written."},
			}})
			dir := t.TempDir()
			if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
				t.Fatalf("git init: %v\n%s", err, out)
			}
			env := clitest.Env(t, srv.URL())
			maps.Copy(env, clitest.Keys())
			cmd := exec.CommandContext(progresstest.Context(t), bin, tc.argv...)
			cmd.Dir, cmd.Stdin = dir, strings.NewReader("Write the greeting.\n")
			cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
			for _, k := range slices.Sorted(maps.Keys(env)) {
				cmd.Env = append(cmd.Env, k+"="+env[k])
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", tc.cli, err, out, stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if last := lines[len(lines)-1]; !strings.Contains(last, tc.done) {
				t.Errorf("last line %s, want %s", last, tc.done)
			}
			if !strings.Contains(string(out), "The greeting is written.") {
				t.Errorf("the model's last text is not in the output:\n%s", out)
			}
			got, err := os.ReadFile(filepath.Join(dir, "greeting.txt"))
			if err != nil || string(got) != "hello from "+tc.cli+"\n" {
				t.Errorf("greeting.txt = %q, %v", got, err)
			}
			var results []modeltest.ToolResult
			for _, r := range srv.Requests() {
				if r.Turn == 1 {
					results = r.ToolResults
				}
			}
			if len(results) != 1 || results[0].IsError {
				t.Errorf("tool results sent back at turn 1: %+v", results)
			}
			if un := srv.Unscripted(); len(un) > 0 {
				t.Errorf("unscripted requests: %q", un)
			}
		})
	}
}

// TestRealClaudeMakesAgainACallItDiedIn: a Claude Code process killed
// while a tool call runs (the daemon ending a run) leaves the call without
// a result; resuming the session, the CLI puts its own note in the
// history that the call's outcome is unknown, and the model, as a real one
// told to check and run it again, makes the call again rather than going
// on as though it had run.
func TestRealClaudeMakesAgainACallItDiedIn(t *testing.T) {
	t.Parallel()
	bin := clitest.Find(t, clitest.Claude)
	srv := modeltest.New(modeltest.Options{Logf: t.Logf})
	defer srv.Close()
	// The first time, the command kills the CLI that runs it ($PPID) once
	// the call is in the session's transcript, which the CLI writes on its
	// own time: a call it never recorded is not resumed, only lost. The
	// second time it answers.
	srv.Add(modeltest.Script{Name: "killed", Match: "Run the command", Turns: []modeltest.Turn{
		{Calls: []modeltest.Call{modeltest.Shell(`if [ -e ran ]; then echo ran again; else touch ran; ` +
			`while kill -0 $PPID && ! grep -qs toolu_modeltest_ "$HOME"/.claude/projects/*/*.jsonl; do sleep 0.01; done; ` +
			`kill -KILL $PPID; fi`)}},
		{Text: "The command ran."},
	}})
	dir := t.TempDir()
	env := clitest.Env(t, srv.URL())
	maps.Copy(env, clitest.Keys())
	run := func(args ...string) (string, error) {
		argv := append([]string{"-p", "--output-format", "stream-json", "--verbose", "--allowedTools", "Bash"}, args...)
		cmd := exec.CommandContext(progresstest.Context(t), bin, argv...)
		cmd.Dir, cmd.Stdin = dir, strings.NewReader("Run the command.\n")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		for _, k := range slices.Sorted(maps.Keys(env)) {
			cmd.Env = append(cmd.Env, k+"="+env[k])
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			err = fmt.Errorf("%w\nstderr:\n%s", err, stderr.String())
		}
		return string(out), err
	}
	out, err := run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the first run was not killed by its command: %v\nstdout:\n%s", err, out)
	}
	var session string
	for _, l := range strings.Split(out, "\n") {
		var ev struct {
			SessionID string `json:"session_id"`
		}
		if json.Unmarshal([]byte(l), &ev) == nil && ev.SessionID != "" {
			session = ev.SessionID
			break
		}
	}
	if session == "" {
		t.Fatalf("no session id in the first run's output:\n%s", out)
	}
	n := len(srv.Requests())
	if out, err = run("--resume", session); err != nil {
		t.Fatalf("the resumed run: %v\nstdout:\n%s", err, out)
	}
	if !strings.Contains(out, "The command ran.") {
		t.Errorf("the model's last text is not in the output:\n%s", out)
	}
	resumed := srv.Requests()[n:]
	if len(resumed) == 0 {
		t.Fatal("the resumed session asked the model nothing")
	}
	if r := resumed[0]; r.Turn != 0 {
		t.Fatalf("the resumed session's first request is at turn %d (answered %s), want turn 0 again; its tool results: %+v",
			r.Turn, r.Answer, r.ToolResults)
	}
	var notes, again int
	for _, r := range resumed[len(resumed)-1].ToolResults {
		switch {
		case r.IsError && strings.HasPrefix(r.Content, "[Tool call interrupted"):
			notes++
		case strings.TrimSpace(r.Content) == "ran again":
			again++
		}
	}
	if notes != 1 || again != 1 {
		t.Errorf("tool results of the last request %+v: want the CLI's note of the interrupted call, then the call made again",
			resumed[len(resumed)-1].ToolResults)
	}
	if un := srv.Unscripted(); len(un) > 0 {
		t.Errorf("unscripted requests: %q", un)
	}
}
