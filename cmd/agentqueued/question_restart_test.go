package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
)

// questionAgentScript asks on its first run and waits for the answer
// there; a later run finds the answer in its prompt (a command agent's
// context), keeps it in $STATE_DIR/answer.<attempt> and completes with it.
const questionAgentScript = `#!/bin/sh
set -eu
cat > /dev/null
answer=$(sed -n 's/^A: //p' "$AQ_PROMPT_FILE" | tail -n 1)
if [ -n "$answer" ]; then
  echo "$answer" > "$STATE_DIR/answer.$AQ_ATTEMPT"
  exec "$DEMO_BIN" agent complete --summary "went on with: $answer"
fi
exec "$DEMO_BIN" agent ask "Postgres or SQLite?"
`

// TestAQuestionOutlivesARestart runs the built daemon with a command agent
// that asks, restarts it — with SIGTERM, as an upgrade does, and with
// SIGKILL, as a crash does — and checks that the question is listed by
// `ctl question list`, the API and the dashboard's overview as soon as the
// new daemon answers (it was never hidden: no retry of the look is
// needed), that the task waits for it without a run, and that the answer
// reaches the agent, whose task then completes.
func TestAQuestionOutlivesARestart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary and restarts it")
	}
	bin := agentqueuedBinary(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			watch := progresstest.New(t, "the start of the test")
			dir := t.TempDir()
			script := writeFile(t, dir, "ask.sh", questionAgentScript)
			if err := os.Chmod(script, 0o755); err != nil {
				t.Fatal(err)
			}
			dataDir := filepath.Join(dir, "data")
			cfg := writeFile(t, dir, "agentqueued.yaml", fmt.Sprintf(`log:
  level: info
agents:
  - {name: asker, type: command, command: %q, env: {DEMO_BIN: %q, STATE_DIR: %q, %s: %q}}
orchestrator: {stop_grace: 1s, safety_tick: 500ms}
`, script, bin, dir, crashMarkEnv, dir))
			var lives []*crashDaemon
			t.Cleanup(func() {
				for _, d := range lives {
					select {
					case <-d.exited:
					default:
						syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // clean-up after a failure
						<-d.exited
					}
				}
				if left := markedProcesses(dir); len(left) > 0 {
					killMarked(left)
				}
			})
			failf := func(format string, args ...any) {
				t.Helper()
				var all strings.Builder
				for i, d := range lives {
					fmt.Fprintf(&all, "--- daemon life %d ---\n%s", i+1, d.log.String())
				}
				t.Fatalf(format+"\n%s", append(args, all.String())...)
			}
			d := startCrashDaemon(t, bin, cfg, dataDir, dir, watch)
			lives = append(lives, d)
			mustCtl(t, d.addr, "project", "create", "notes")
			id := taskIDs(t, mustCtl(t, d.addr, "task", "add", "--project", "notes", "--title", "Pick a database"))[0]
			// waitTask polls the daemon (another process) until ok holds, as
			// long as what it sees keeps changing or the watchdog allows.
			waitTask := func(d *crashDaemon, what string, ok func(models.TaskDetail) bool) models.TaskDetail {
				t.Helper()
				c, err := api.NewClient("http://"+d.addr, "", nil)
				if err != nil {
					t.Fatal(err)
				}
				defer c.CloseIdleConnections()
				for {
					td, err := c.GetTask(watch.Context(), id)
					if err != nil {
						failf("read task %s: %v", id, err)
					}
					if ok(td) {
						return td
					}
					watch.Observe(fmt.Sprintf("task %s %s (%d runs)", id, td.Task.Status, len(td.Runs)))
					select {
					case <-watch.Done():
						failf("waiting for %s: %v", what, watch.Err())
					case <-d.exited:
						failf("the daemon exited while waiting for %s: %v", what, d.err)
					case <-time.After(50 * time.Millisecond): // polling another process
					}
				}
			}
			waitTask(d, "the question", func(td models.TaskDetail) bool { return td.Task.Status == models.StatusWaitingInput })

			switch sig {
			case syscall.SIGKILL:
				d.kill(t)
			default:
				if err := d.cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				select {
				case <-d.exited:
					if d.err != nil {
						failf("the daemon's planned stop ended with %v", d.err)
					}
				case <-watch.Done():
					failf("the daemon did not stop: %v", watch.Err())
				}
			}
			d = startCrashDaemon(t, bin, cfg, dataDir, dir, watch)
			lives = append(lives, d)

			// Listed at once, everywhere: the question was never hidden.
			if out := mustCtl(t, d.addr, "question", "list"); !strings.Contains(out, "Postgres or SQLite?") || !strings.Contains(out, id) {
				failf("ctl question list after the restart:\n%s", out)
			}
			c, err := api.NewClient("http://"+d.addr, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseIdleConnections()
			qs, err := c.OpenQuestions(watch.Context())
			if err != nil || len(qs) != 1 || qs[0].TaskID != id {
				failf("open questions through the API after the restart: %+v %v", qs, err)
			}
			resp, err := http.Get("http://" + d.addr + "/ui/overview")
			if err != nil {
				t.Fatal(err)
			}
			page, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "Postgres or SQLite?") {
				failf("the overview after the restart (%s) lacks the question:\n%s", resp.Status, page)
			}
			// The task waits for its answer without a run: no pause, no
			// resume timer, no retry used, its agent free.
			td := waitTask(d, "the first run to be closed", func(td models.TaskDetail) bool {
				return len(td.Runs) == 1 && td.Runs[0].EndedAt != nil
			})
			if td.Task.Status != models.StatusWaitingInput || td.Task.ResumeAfter != nil || td.Task.RetryCount != 0 {
				failf("after the restart the task is %s until %v with %d retries used (%s)", td.Task.Status, td.Task.ResumeAfter,
					td.Task.RetryCount, td.Task.StatusReason)
			}

			mustCtl(t, d.addr, "question", "answer", "--by", "ana", fmt.Sprint(qs[0].ID), "SQLite, please.")
			td = waitTask(d, "the completion", func(td models.TaskDetail) bool {
				return td.Task.Status == models.StatusCompleted || td.Task.Status == models.StatusBlocked ||
					td.Task.Status == models.StatusFailed
			})
			if td.Task.Status != models.StatusCompleted || !strings.Contains(td.Task.StatusReason, "went on with: SQLite, please.") &&
				(td.Result == nil || !strings.Contains(td.Result.Summary, "SQLite, please.")) {
				failf("after the answer the task is %s (%s)", td.Task.Status, td.Task.StatusReason)
			}
			got, err := os.ReadFile(filepath.Join(dir, "answer.2"))
			if err != nil || strings.TrimSpace(string(got)) != "SQLite, please." {
				failf("the agent's second run did not receive the answer: %q %v", got, err)
			}
			if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			<-d.exited
		})
	}
}
