package orchestrator

import (
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
)

// TestAStartedRunIsTimedWithoutARound: when a run's process starts, the
// loop arms the run's deadlines without a scheduling round (nothing a round
// reads changed), and the idle timeout still ends the run on time. The
// rounds are counted up to one the test asks for after the timer is armed:
// the dispatching round and the asked one, no round for the start.
func TestAStartedRunIsTimedWithoutARound(t *testing.T) {
	t.Parallel()
	const idle = 7 * time.Minute
	h := newHarness(t, nil)
	armed := h.clock.Armed()
	h.agent("a1", "command", "quiet", func(a *models.Agent) { a.IdleTimeout = models.Duration(idle) })
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "t"})["t"]
	h.start()
	h.waitStart()
	for d := time.Duration(0); d != idle; {
		select {
		case d = <-armed:
		case <-time.After(progresstest.Stall()):
			t.Fatal("the idle timeout was never armed")
		}
	}
	h.o.Wake()
	want := h.o.wakeSeq.Load()
	rounds := 0
	for done := false; !done; {
		select {
		case seq := <-h.rounds:
			rounds++
			done = seq >= want
		case <-time.After(progresstest.Stall()):
			t.Fatal("no round")
		}
	}
	if rounds != 2 {
		t.Fatalf("%d rounds until the one asked for, want 2 (the dispatch and the one asked for)", rounds)
	}
	h.clock.Advance(idle)
	h.waitEnd()
	h.settle()
	if tk := h.task(id); tk.Status != models.StatusFailed {
		t.Fatalf("after the idle timeout the task is %s %q", tk.Status, tk.StatusReason)
	}
}
