package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// openQuestionOf waits until task id has an open question and returns it.
func (e *fleetEnv) openQuestionOf(id string) models.Question {
	e.t.Helper()
	ctx := e.watch.Context()
	for {
		qs, err := e.client.OpenQuestions(ctx)
		if err != nil {
			e.fatalf("questions: %v", err)
		}
		for _, q := range qs {
			if q.TaskID == id {
				return q
			}
		}
		e.watch.Observe("no open question yet")
		select {
		case <-ctx.Done():
			e.fatalf("no question of task %s: %v", id, e.watch.Err())
		case <-time.After(100 * time.Millisecond): // polling an external process
		}
	}
}

// A remote agent waiting on its question outlives the daemon: killed
// while the runner holds the relayed ask, the daemon comes back, takes
// the run up, and the runner's ask sent again waits for the same
// question; its answer reaches the agent, which completes in its one run.
func TestRemoteAskOutlivesTheDaemon(t *testing.T) {
	t.Parallel()
	e := newFleetEnv(t, fleetLease)
	script := writeFile(t, e.dir, "ask.sh", askingAgentScript)
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	e.runnerWith("r0", 1, script, nil)
	res, err := e.client.CreateTasks(e.watch.Context(), models.TaskBatch{ProjectID: "fleet", CreatedBy: "fleet-test",
		Tasks: []models.BatchTask{{Title: "Paint it"}}})
	if err != nil {
		e.fatalf("create task: %v", err)
	}
	id := res[0].TaskID
	asked := e.openQuestionOf(id)

	undelivered := e.fleet[0].log.await("report not delivered")
	e.d.kill(t)
	e.client.CloseIdleConnections()
	select {
	case <-undelivered:
	case <-e.watch.Done():
		e.fatalf("the runner did not send the ask again: %v", e.watch.Err())
	}
	e.d = startCrashDaemonAt(t, e.bin, e.cfgPath, filepath.Join(e.dir, "daemon"), e.dir, e.listen, e.watch)
	again := e.openQuestionOf(id)
	if again.ID != asked.ID {
		t.Errorf("the question after the restart is %d, want the one asked before, %d", again.ID, asked.ID)
	}
	for !strings.Contains(e.d.log.String(), "a question asked before the daemon restarted is waited for again") {
		e.watch.Observe("the ask not sent again yet")
		select {
		case <-e.watch.Done():
			e.fatalf("the runner's ask was not waited for again: %v", e.watch.Err())
		case <-time.After(100 * time.Millisecond): // polling an external process's log
		}
	}
	if _, err := e.client.AnswerQuestion(e.watch.Context(), asked.ID, "teal", "tester"); err != nil {
		e.fatalf("answer: %v", err)
	}
	e.await("the task completed", allCompleted)
	det := e.checkOnce([]string{id})[id]
	for _, ev := range det.Events {
		if ev.Event == models.EventRecovery {
			t.Errorf("the task was recovered: its run was lost (%s)", ev.Reason)
		}
	}
	if len(det.Runs) != 1 || det.Runs[0].Outcome != models.RunOutcomeCompleted {
		t.Errorf("runs %+v, want one completed", det.Runs)
	}
	if qs, err := e.client.OpenQuestions(e.watch.Context()); err != nil || len(qs) != 0 {
		t.Errorf("questions left open: %+v %v", qs, err)
	}
	out, err := exec.Command("git", "--git-dir", e.origin, "show", "main:result-"+id+".txt").Output()
	if err != nil || string(out) != "teal\n" {
		t.Errorf("the painted file in the origin: %q %v", out, err)
	}
	if t.Failed() || os.Getenv("AQ_TEST_LOG") != "" {
		t.Log(e.logs())
	}
}
