package modeltest_test

import (
	"bytes"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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
