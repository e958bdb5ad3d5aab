package orchestrator

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// failingSnapshots is the store with its scheduling snapshot failing while
// fail is set, as a store whose totals cannot be read did.
type failingSnapshots struct {
	Store
	fail *atomic.Bool
}

func (f failingSnapshots) SchedulingState(ctx context.Context, now time.Time, window time.Duration) (models.SchedulingState, error) {
	if f.fail.Load() {
		return models.SchedulingState{}, errors.New("read projects: converting driver.Value type float64 to a int64")
	}
	return f.Store.SchedulingState(ctx, now, window)
}

// TestHealthSaysWhenEveryPassFails: with every scheduling pass failing,
// /healthz said ok. Health reports the failures and their reason once
// UnhealthyAfter rounds in a row failed, and clears after a good round.
func TestHealthSaysWhenEveryPassFails(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	var fail atomic.Bool
	h.o.store = failingSnapshots{Store: h.o.store, fail: &fail}
	h.start()
	h.settle()
	// One failed round is often a race the next resolves: still healthy.
	fail.Store(true)
	h.settle()
	if err := h.o.Health(); err != nil {
		t.Fatalf("unhealthy after one failed round: %v", err)
	}
	for range UnhealthyAfter {
		h.settle()
	}
	err := h.o.Health()
	if err == nil || !strings.Contains(err.Error(), "the scheduler failed its last") ||
		!strings.Contains(err.Error(), "schedule: read projects: converting") {
		t.Fatalf("Health after %d failed rounds: %v", UnhealthyAfter, err)
	}
	fail.Store(false)
	h.settle()
	if err := h.o.Health(); err != nil {
		t.Fatalf("Health after a good round: %v", err)
	}
}
