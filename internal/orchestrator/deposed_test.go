package orchestrator

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/repo"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// leaseTTL is the lease of the daemons of these tests.
const leaseTTL = 30 * time.Second

// holdLease makes the harness's store daemon A's: it takes the lease.
func (h *harness) holdLease() {
	h.t.Helper()
	if err := h.st.AcquireLease(context.Background(), models.LeaseHolder{Owner: "a", Hostname: "host-a", PID: 1}, leaseTTL); err != nil {
		h.t.Fatal(err)
	}
}

// takeOver pauses daemon A past its lease's expiry (its clock moves on,
// nothing of it runs) and has daemon B, a second store on the same
// database file, take the lease over. It returns B's store.
func (h *harness) takeOver() *store.Store {
	h.t.Helper()
	h.clock.Advance(leaseTTL + 10*time.Second)
	b := storetest.OpenAt(h.t, h.dbPath, storetest.WithClock(h.clock))
	if err := b.AcquireLease(context.Background(), models.LeaseHolder{Owner: "b", Hostname: "host-b", PID: 2}, leaseTTL); err != nil {
		h.t.Fatal(err)
	}
	return b
}

// startProcess starts, through the agent process code, what daemon B
// runs for task taskID: a real process in its own group that carries the
// task's id as every run does. It is stopped when the test ends.
func startProcess(t *testing.T, taskID string) *agent.Process {
	t.Helper()
	p, err := agent.Start(agent.Spec{Argv: []string{"sleep", "300"}, Dir: t.TempDir(),
		Env: []string{"PATH=" + os.Getenv("PATH"), "AQ_TASK_ID=" + taskID}, LogPath: filepath.Join(t.TempDir(), "run.log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(time.Second) })
	return p
}

// wantAlive fails the test when process p has ended.
func wantAlive(t *testing.T, p *agent.Process, what string) {
	t.Helper()
	select {
	case <-p.Done():
		r, _ := p.Wait(context.Background())
		t.Fatalf("%s (pid %d) was ended: %+v", what, p.PID(), r)
	default:
	}
	if !agent.Alive(p.PID()) {
		t.Fatalf("%s (pid %d) is not alive", what, p.PID())
	}
}

// TestADeposedDaemonLeavesTheNewOwnersRunsAlone reproduces a daemon that
// was paused past its lease's expiry while another took the database over
// and started a run of its own: when the deposed daemon's loop comes back
// to its reconciliation, that run is one it does not supervise, and it was
// SIGKILLed as a leftover although only the daemon's writes were fenced.
// Now the run, claimed under a newer lease generation, is left alone, and
// the deposed orchestrator stands down with the lease's error.
func TestADeposedDaemonLeavesTheNewOwnersRunsAlone(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("leftovers are recognised in /proc")
	}
	h := newHarness(t, nil)
	h.holdLease()
	h.agent("a1", "command", "quiet", nil)
	ids := h.tasks(models.BatchTask{LocalID: "mine", Title: "mine"})
	h.start()
	if r := h.waitStart(); r.TaskID != ids["mine"] {
		t.Fatalf("daemon A ran %+v", r)
	}

	b := h.takeOver()
	ctx := context.Background()
	storetest.Agent(t, b, "a2")
	theirs := storetest.Task(t, b, "p", "theirs")
	run, _, err := b.ClaimTask(ctx, theirs, "a2")
	if err != nil {
		t.Fatal(err)
	}
	proc := startProcess(t, theirs)
	if _, err := b.StartRun(ctx, run.ID, proc.PID(), ""); err != nil {
		t.Fatal(err)
	}

	// Daemon A wakes up: its next round reconciles.
	h.o.Wake()
	want := h.o.wakeSeq.Load()
	var stood error
	stoodDown := false
	for waiting := true; waiting; {
		select {
		case stood = <-h.done:
			stoodDown, waiting = true, false
		case seq := <-h.rounds:
			waiting = seq < want
		case <-time.After(progresstest.Stall()):
			t.Fatal("daemon A made no round")
		}
	}
	wantAlive(t, proc, "daemon B's run")
	if !stoodDown {
		t.Fatal("daemon A's orchestrator goes on after finding that another daemon took the database over")
	}
	h.cancel()
	h.cancel = nil
	if !errors.Is(stood, store.ErrLeaseLost) {
		t.Fatalf("daemon A's orchestrator ended with %v, want the lease's error", stood)
	}
	if open, err := b.OpenRuns(ctx); err != nil || len(open) != 2 {
		t.Fatalf("open runs after daemon A stood down: %+v, %v; want its own and B's, for B to close or keep", open, err)
	}
}

// TestADeposedDaemonSignalsNoGroupItReadInTheDatabase: the generation a
// run records does not cover a pid read from the database that is
// another daemon's now — daemon A's own run, left open when the new owner
// took over, whose recorded pid the kernel has given to the new owner's
// run of the same task. The lease's fence, asked immediately before the
// signal, does: a deposed daemon signals nothing.
func TestADeposedDaemonSignalsNoGroupItReadInTheDatabase(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("leftovers are recognised in /proc")
	}
	h := newHarness(t, nil)
	h.holdLease()
	h.agent("a1", "command", "quiet", nil)
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "t"})["t"]
	ctx := context.Background()
	run, _, err := h.st.ClaimTask(ctx, id, "a1") // daemon A's, under generation 1
	if err != nil {
		t.Fatal(err)
	}
	b := h.takeOver()
	proc := startProcess(t, id)
	// The run's recorded pid is now the pid of B's process of the same
	// task, as after the kernel reused it.
	if _, err := b.StartRun(ctx, run.ID, proc.PID(), ""); err != nil {
		t.Fatal(err)
	}
	err = h.o.reconcile(ctx)
	wantAlive(t, proc, "daemon B's process")
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("daemon A's reconciliation: %v, want the lease's error", err)
	}
}

// confirmingStore confirms every act, as a fence read that raced ahead of
// a takeover would.
type confirmingStore struct{ Store }

func (confirmingStore) ConfirmLease(context.Context) error { return nil }

// TestARunOfANewerGenerationIsNeverSignalled: a run records the lease
// generation it was claimed under, and a daemon never signals a run of a
// newer generation than its own, whatever its fence read said: that run
// is the new owner's, and the daemon knows it has been deposed.
func TestARunOfANewerGenerationIsNeverSignalled(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("leftovers are recognised in /proc")
	}
	h := newHarness(t, nil)
	h.holdLease()
	b := h.takeOver()
	ctx := context.Background()
	storetest.Agent(t, b, "a2")
	theirs := storetest.Task(t, b, "p", "theirs")
	run, _, err := b.ClaimTask(ctx, theirs, "a2")
	if err != nil {
		t.Fatal(err)
	}
	proc := startProcess(t, theirs)
	if _, err := b.StartRun(ctx, run.ID, proc.PID(), ""); err != nil {
		t.Fatal(err)
	}
	h.o.store = confirmingStore{h.o.store}
	err = h.o.reconcile(ctx)
	wantAlive(t, proc, "daemon B's run")
	if !errors.Is(err, store.ErrLeaseLost) || !strings.Contains(err.Error(), "generation 2, newer than this daemon's 1") {
		t.Fatalf("daemon A's reconciliation: %v, want the lease's error naming the generations", err)
	}
}

// TestADaemonThatCannotRenewDispatchesNothing: a daemon whose lease has
// less than its act margin left (its renewals failed) may not have it by
// the time a checkout is prepared and an agent started: it dispatches
// nothing until a renewal succeeds, then runs the work as usual.
func TestADaemonThatCannotRenewDispatchesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.holdLease()
	h.agent("a1", "command", "exit0", nil)
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "t"})["t"]
	h.clock.Advance(leaseTTL - time.Second) // a second is left
	h.start()
	h.noRunStarts()
	if got := h.task(id).Status; got != models.StatusReady {
		t.Fatalf("task %s while the lease was about to expire", got)
	}
	if err := h.st.RenewLease(context.Background(), "a", leaseTTL); err != nil {
		t.Fatal(err)
	}
	h.o.Wake()
	if r := h.waitStart(); r.TaskID != id {
		t.Fatalf("after the renewal ran %+v", r)
	}
	h.waitEnd()
}

// TestARefusedPreparationIsNotTheProjectsFault: the lease's fence that
// refuses to prepare the agent's checkout (the lease ran low while the run
// was being claimed) fails neither the project nor the agent: the run
// ends by RECOVERY, the task is READY again without a retry consumed, and
// the project does not cool down.
func TestARefusedPreparationIsNotTheProjectsFault(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.holdLease()
	ws, err := repo.New(repo.Config{BaseDir: t.TempDir(), Fence: h.st.ConfirmLease})
	if err != nil {
		t.Fatal(err)
	}
	g := newGate()
	h.o.ws = gatedWorkspaces{Workspaces: ws, g: g}
	if _, err := h.st.CreateProject(context.Background(), models.Project{ID: "g",
		Repo: &models.RepoConfig{ID: "g", SourceType: models.RepoInit, SourcePath: filepath.Join(t.TempDir(), "origin.git"),
			DefaultBranch: "main"}}); err != nil {
		t.Fatal(err)
	}
	h.agent("a1", "command", "exit0", nil)
	res, err := h.st.CreateTasks(context.Background(), models.TaskBatch{ProjectID: "g", Tasks: []models.BatchTask{{Title: "t"}}})
	if err != nil {
		t.Fatal(err)
	}
	id := res[0].TaskID
	h.start()
	g.reached(t)
	h.clock.Advance(leaseTTL - time.Second) // meanwhile, renewals failed
	close(g.release)
	if r := h.waitEnd(); r.TaskID != id {
		t.Fatalf("ended %+v", r)
	}
	tk := h.task(id)
	if tk.Status != models.StatusReady || tk.RetryCount != 0 {
		t.Fatalf("task %s after %d retries (%q); want READY with none consumed", tk.Status, tk.RetryCount, tk.StatusReason)
	}
	if ev := h.events(id); ev[len(ev)-1] != string(models.EventRecovery) {
		t.Fatalf("events %v, want the run ended by RECOVERY", ev)
	}
	h.o.mu.Lock()
	_, cooling := h.o.cooldown["project:g"]
	h.o.mu.Unlock()
	if cooling {
		t.Fatal("the project cools down after the fence refused its preparation")
	}
}
