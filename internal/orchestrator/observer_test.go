package orchestrator

import (
	"sync"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock"
	"github.com/agentqueued/agentqueued/internal/models"
)

// roundRecorder is an Observer that keeps the durations it is told.
type roundRecorder struct {
	mu   sync.Mutex
	took []time.Duration
}

func (r *roundRecorder) RoundDone(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.took = append(r.took, d)
}

func (r *roundRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.took)
}

// TestObserverIsToldEachRoundsDuration: every round is reported once,
// before OnRound, with the time it took on the orchestrator's clock (here
// one that moves a millisecond at each reading, so a round that reads it
// takes time).
func TestObserverIsToldEachRoundsDuration(t *testing.T) {
	rec := &roundRecorder{}
	var seen []int
	var h *harness
	h = newHarness(t, func(c *Config) {
		c.Clock = tickingClock{Clock: c.Clock, tick: func() { h.clock.Advance(time.Millisecond) }}
		c.Observer = rec
		onRound := c.OnRound
		c.OnRound = func(seq uint64) {
			seen = append(seen, rec.count())
			onRound(seq)
		}
	})
	h.agent("a1", "command", "ok", nil)
	h.tasks(models.BatchTask{LocalID: "a", Title: "a"})
	h.start()
	h.waitEnd()
	h.settle()
	h.stop()
	if len(seen) == 0 {
		t.Fatal("no round")
	}
	for i, n := range seen {
		if n != i+1 {
			t.Fatalf("round %d: %d durations reported before OnRound, want %d", i+1, n, i+1)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i, d := range rec.took {
		if d <= 0 {
			t.Errorf("round %d took %s, want a positive duration", i+1, d)
		}
	}
}

// tickingClock is a clock that calls tick before each reading.
type tickingClock struct {
	clock.Clock
	tick func()
}

func (c tickingClock) Now() time.Time {
	c.tick()
	return c.Clock.Now()
}
