package orchestrator

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
)

// startHookStore calls before with each pid StartRun is about to record.
type startHookStore struct {
	Store
	before func(pid int)
}

func (s startHookStore) StartRunWith(ctx context.Context, runID int64, st models.RunStart) (models.TransitionResult, error) {
	s.before(st.PID)
	return s.Store.StartRunWith(ctx, runID, st)
}

// exeOf is the program process pid executes ("" when it cannot be read).
func exeOf(pid int) string {
	exe, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	return exe
}

// TestAgentRunsOnlyOnceItsPidIsRecorded checks that an agent's program is
// not executed before its pid is in the database: a daemon that dies in
// between must not leave an agent that recovery cannot find. The same pid
// then runs the program.
func TestAgentRunsOnlyOnceItsPidIsRecorded(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/exe"); err != nil {
		t.Skip("no /proc")
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("sleep is not installed")
	}
	if sleep, err = filepath.EvalSymlinks(sleep); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, nil)
	atRecord := make(chan string, 1)
	h.o.store = startHookStore{Store: h.o.store, before: func(pid int) {
		select {
		case atRecord <- exeOf(pid):
		default: // only the first run is looked at
		}
	}}
	h.agent("a1", "command", "", func(a *models.Agent) { a.Command, a.Args = sleep, []string{"300"} })
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "t"})["t"]
	h.start()
	h.waitStart()
	if exe := <-atRecord; exe == sleep {
		t.Fatalf("the agent's program %s ran before its pid was recorded", exe)
	}
	open, err := h.st.OpenRuns(context.Background())
	if err != nil || len(open) != 1 || open[0].PID == nil {
		t.Fatalf("open runs %+v %v", open, err)
	}
	pid := *open[0].PID
	ctx := progresstest.Context(t)
	for exeOf(pid) != sleep {
		select {
		case <-ctx.Done():
			t.Fatalf("the recorded process %d never ran the agent's program (it runs %q)", pid, exeOf(pid))
		case <-time.After(10 * time.Millisecond): // polling another process's state
		}
	}
	if _, err := h.o.StopTask(context.Background(), id, "done looking", "test"); err != nil {
		t.Fatal(err)
	}
	h.waitEnd()
}

// TestRecoveryEndsALeftoverGroupWhoseLeaderIsGone leaves what a killed
// daemon can leave of a run — its recorded process has exited, a child of
// it lives on in its process group — and checks that recovery ends the
// child before the task runs again on the agent's checkout.
func TestRecoveryEndsALeftoverGroupWhoseLeaderIsGone(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("recovery recognises a run's processes in /proc")
	}
	h := newHarness(t, nil)
	h.agent("a1", "command", "exit0", nil)
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "t"})["t"]
	ctx := context.Background()
	run, _, err := h.st.ClaimTask(ctx, id, "a1")
	if err != nil {
		t.Fatal(err)
	}
	leader := exec.Command("/bin/sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!")
	leader.Env = []string{"PATH=" + os.Getenv("PATH"), "AQ_TASK_ID=" + id} // as a real run carries it
	leader.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := leader.Output()
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("leader printed %q", out)
	}
	defer syscall.Kill(child, syscall.SIGKILL) //nolint:errcheck // gone when the test passes
	if _, err := h.st.StartRun(ctx, run.ID, leader.Process.Pid, ""); err != nil {
		t.Fatal(err)
	}
	var aliveAtRestart bool
	h.o.store = startHookStore{Store: h.o.store, before: func(int) { aliveAtRestart = agent.Alive(child) }}
	h.start() // recovery, then the task runs again on the freed agent
	if r := h.waitStart(); r.TaskID != id || r.Attempt != 2 {
		t.Fatalf("after recovery ran %+v", r)
	}
	if aliveAtRestart {
		t.Fatalf("process %d of the crashed run's group was alive when the task ran again", child)
	}
	h.waitEnd()
	if ev := h.events(id); !strings.Contains(strings.Join(ev, " "), "RECOVERY") {
		t.Fatalf("events %v", ev)
	}
}
