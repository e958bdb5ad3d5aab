package main

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/models"
)

// reattachAgentScript prints a line, waits for a line from the FIFO
// $HOLD, prints another and completes its task with a commit.
const reattachAgentScript = `#!/bin/sh
set -eu
cat > /dev/null
echo "before the restart of $AQ_TASK_ID"
read -r _ < "$HOLD"
echo "after the restart of $AQ_TASK_ID"
echo "$AQ_TASK_ID by $DEMO_AGENT" > "result-$AQ_TASK_ID.txt"
git add "result-$AQ_TASK_ID.txt"
git -c user.name="$DEMO_AGENT" -c user.email=agent@localhost -c commit.gpgsign=false \
  commit -q -m "Result of $AQ_TASK_ID"
"$DEMO_BIN" agent complete --summary "wrote result-$AQ_TASK_ID.txt"
`

// reattachSetup starts a daemon and runner r0 whose one agent runs
// reattachAgentScript, creates a task and waits until its agent printed
// its first line and the daemon has it; it returns the task's id and
// the FIFO the agent waits on.
func reattachSetup(t *testing.T) (e *fleetEnv, r0 *fleetRunner, id, hold string) {
	t.Helper()
	e = newFleetEnv(t, "orchestrator: {retry_backoff: 100ms, max_backoff: 1s, safety_tick: 500ms}\n")
	script := writeFile(t, e.dir, "reattach.sh", reattachAgentScript)
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	hold = holdFIFO(t, e.dir, "hold")
	r0 = e.runnerWith("r0", 1, script, map[string]string{"HOLD": hold})
	res, err := e.client.CreateTasks(e.watch.Context(), models.TaskBatch{ProjectID: "fleet", CreatedBy: "fleet-test",
		Tasks: []models.BatchTask{{Title: "survive a restart"}}})
	if err != nil {
		e.fatalf("create task: %v", err)
	}
	id = res[0].TaskID
	e.startedOn(id, "r0/a0")
	e.awaitLog(id, "before the restart of "+id+"\n")
	return e, r0, id, hold
}

// awaitLog waits until the task's log, as ctl task logs prints it, holds
// want.
func (e *fleetEnv) awaitLog(id, want string) {
	e.t.Helper()
	ctx := e.watch.Context()
	for {
		out := e.mustCtl("task", "logs", id)
		if strings.Contains(out, want) {
			return
		}
		e.watch.Observe("the task's log at " + out)
		select {
		case <-ctx.Done():
			e.fatalf("the task's log lacks %q: %v\n%s", want, e.watch.Err(), out)
		case <-time.After(100 * time.Millisecond): // polling an external process
		}
	}
}

// shimsOf returns the pids of the agent shims the test's runners started.
func (e *fleetEnv) shimsOf() []int {
	var out []int
	for pid, cmdline := range markedProcesses(e.dir) {
		if strings.Contains(cmdline, " runner shim ") {
			out = append(out, pid)
		}
	}
	return out
}

// releaseHold writes the line an agent waits for on the FIFO hold.
func releaseHold(t *testing.T, hold string) {
	t.Helper()
	f, err := os.OpenFile(hold, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("go\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// A runner killed with SIGKILL while its agent works, and started again,
// takes the agent up where it was: the agent, still running under its
// shim, finishes its work and calls the restarted runner on its socket,
// and the task completes with its one run — no RECOVERY, no retry — its
// output in the task's log whole and once, its work merged once.
func TestRunnerRestartTakesUpItsAgent(t *testing.T) {
	t.Parallel()
	e, r0, id, hold := reattachSetup(t)
	shims := e.shimsOf()
	if len(shims) != 1 {
		e.fatalf("shims of agents: %v", markedProcesses(e.dir))
	}
	if err := r0.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-r0.exited
	if !agent.Alive(shims[0]) {
		e.fatalf("the agent's shim %d died with its runner", shims[0])
	}
	took := r0.log.await("took up the agent")
	r0.start(t)
	select {
	case <-took:
	case <-e.watch.Done():
		e.fatalf("the restarted runner did not take its agent up: %v", e.watch.Err())
	}
	releaseHold(t, hold)
	e.await("the task completed", allCompleted)
	det := e.checkOnce([]string{id})[id]
	for _, ev := range det.Events {
		if ev.Event == models.EventRecovery || ev.Event == models.EventRetry {
			t.Errorf("event %s: %s", ev.Event, ev.Reason)
		}
	}
	if len(det.Runs) != 1 || det.Runs[0].Outcome != models.RunOutcomeCompleted || det.Task.RetryCount != 0 {
		t.Errorf("runs %+v, retries %d", det.Runs, det.Task.RetryCount)
	}
	logs := e.mustCtl("task", "logs", id)
	for _, line := range []string{"before the restart of " + id + "\n", "after the restart of " + id + "\n"} {
		if n := strings.Count(logs, line); n != 1 {
			t.Errorf("the task's log has %q %d times:\n%s", line, n, logs)
		}
	}
	if strings.Index(logs, "before the restart") > strings.Index(logs, "after the restart") {
		t.Errorf("the task's log is out of order:\n%s", logs)
	}
	if t.Failed() || os.Getenv("AQ_TEST_LOG") != "" {
		t.Log(e.logs())
	}
}

// A runner killed with SIGKILL whose agent dies too while it is down
// (killed, so its shim wrote no status) finds nothing to take up: it
// tells the daemon it lost the run, which returns the task to READY
// without using a retry ("runner r0 restarted"); the task then runs again
// and completes once.
func TestRunnerRestartReportsTheAgentThatDiedMeanwhile(t *testing.T) {
	t.Parallel()
	e, r0, id, hold := reattachSetup(t)
	shims := e.shimsOf()
	if len(shims) != 1 {
		e.fatalf("shims of agents: %v", markedProcesses(e.dir))
	}
	if err := r0.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-r0.exited
	if err := syscall.Kill(-shims[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ctx := e.watch.Context()
	for agent.Alive(shims[0]) {
		select {
		case <-ctx.Done():
			e.fatalf("the killed shim is alive: %v", e.watch.Err())
		case <-time.After(10 * time.Millisecond): // polling another process's state
		}
	}
	r0.start(t)
	// The task runs again (on the same runner) and completes once released.
	e.await("the task running again", func(list []models.Task) bool {
		return len(list) == 1 && list[0].Status == models.StatusInProgress && list[0].RetryCount == 0 &&
			e.runsOf(id) == 2
	})
	releaseHold(t, hold)
	e.await("the task completed", allCompleted)
	det := e.checkOnce([]string{id})[id]
	var recovered bool
	for _, ev := range det.Events {
		recovered = recovered || ev.Event == models.EventRecovery && strings.Contains(ev.Reason, "runner r0 restarted")
	}
	if !recovered || det.Task.RetryCount != 0 {
		t.Errorf("events: recovered %v, retries %d", recovered, det.Task.RetryCount)
	}
	if t.Failed() || os.Getenv("AQ_TEST_LOG") != "" {
		t.Log(e.logs())
	}
}
