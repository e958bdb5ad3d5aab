package orchestrator

import (
	"context"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// restart stops the harness's orchestrator and replaces it, and its store,
// with new ones on the same database, clock and workspaces: a daemon's
// restart. What the old one signalled is drained.
func (h *harness) restart() {
	h.t.Helper()
	h.stop()
	for drained := false; !drained; {
		select {
		case <-h.rounds:
		case <-h.starts:
		case <-h.ends:
		default:
			drained = true
		}
	}
	var o *Orchestrator
	st := storetest.OpenAt(h.t, h.dbPath, storetest.WithClock(h.clock), storetest.WithOnChange(func() {
		if o != nil {
			o.Wake()
		}
	}))
	var err error
	o, err = New(h.o.cfg, st, h.o.ws, h.o.adapters)
	if err != nil {
		h.t.Fatal(err)
	}
	h.st, h.o = st, o
}

func TestAgentRestOutlivesARestart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.agent("a1", "claude", "ratelimit-late", nil) // reports a reset a day on
	ids := h.tasks(models.BatchTask{LocalID: "first", Title: "first"}, models.BatchTask{LocalID: "second", Title: "second"})
	h.start()
	limited := h.waitStart()
	h.waitEnd()
	other := ids["first"]
	if other == limited.TaskID {
		other = ids["second"]
	}
	// The claim is made in the round: a task still READY after one was
	// handed to no agent.
	waits := func(when string) {
		t.Helper()
		h.noRunStarts()
		if st := h.task(other).Status; st != models.StatusReady {
			t.Fatalf("%s: the other task is %s", when, st)
		}
	}
	waits("after the rate limit")
	reset := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	a, err := h.st.GetAgent(context.Background(), "a1")
	if err != nil {
		t.Fatal(err)
	}
	if a.State != models.AgentPaused || a.RestUntil == nil || !a.RestUntil.Equal(reset) ||
		a.RestReason != "rate limited during task "+limited.TaskID {
		t.Fatalf("the rate-limited agent: %s until %v %q", a.State, a.RestUntil, a.RestReason)
	}

	h.restart()
	h.start()
	waits("after a restart") // a restart does not end the rest
	h.clock.Advance(reset.Sub(h.clock.Now()) - time.Second)
	waits("a second before the reset")
	h.clock.Advance(time.Second) // the reset: the rest is over
	if r := h.waitStart(); r.AgentID != "a1" {
		t.Fatalf("after the rest: %+v", r)
	}
	a, err = h.st.GetAgent(context.Background(), "a1")
	if err != nil {
		t.Fatal(err)
	}
	// The new run may have been limited again already: then it rests anew.
	if a.RestUntil != nil && !a.RestUntil.After(reset) {
		t.Fatalf("the agent still rests after its reset: %s until %v %q", a.State, a.RestUntil, a.RestReason)
	}
}

// TestACleanStartRunsARoundAtOnce: READY work an earlier life of the
// daemon left (nothing in flight to recover, so nothing written at start)
// waited for the first safety tick — 10 s by default, an hour here — before
// any round ran. The first round now runs at once.
func TestACleanStartRunsARoundAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil) // the safety tick is an hour on a clock that never moves
	h.agent("a1", "command", "exit0", nil)
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "left READY"})["t"]
	h.restart() // a new daemon on the database: no change wakes it
	h.start()
	if r := h.waitStart(); r.TaskID != id {
		t.Fatalf("started %s, want %s", r.TaskID, id)
	}
	h.waitEnd()
}
