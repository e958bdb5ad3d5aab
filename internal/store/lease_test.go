package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// TestConfirmLeaseFencesActs walks one daemon's lease through its life,
// with a second daemon on the same database file: ConfirmLease, the fence
// of the daemon's acts outside the database, confirms the lease while it
// is current with the act margin left, refuses as expiring once renewals
// have failed long enough, confirms again after a renewal, and refuses as
// lost once the second daemon has taken the lease over, and after a
// release.
func TestConfirmLeaseFencesActs(t *testing.T) {
	t.Parallel()
	const ttl = 30 * time.Second
	margin := ttl / store.LeaseActShare
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "aq.db")
	ctx := context.Background()
	a := storetest.OpenAt(t, path, storetest.WithClock(clock))
	b := storetest.OpenAt(t, path, storetest.WithClock(clock))
	if err := a.ConfirmLease(ctx); err != nil {
		t.Fatalf("a store without a lease: %v", err)
	}
	if err := a.AcquireLease(ctx, models.LeaseHolder{Owner: "a", Hostname: "h", PID: 1}, ttl); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		do   func(t *testing.T)
		want error // nil, store.ErrLeaseExpiring or store.ErrLeaseLost
		says string
	}{
		{"just acquired", func(*testing.T) {}, nil, ""},
		{"the margin left exactly", func(*testing.T) { clock.Advance(ttl - margin) }, nil, ""},
		{"less than the margin left: two renewals missed", func(*testing.T) { clock.Advance(time.Millisecond) },
			store.ErrLeaseExpiring, "4.999s left of generation 1, an act needs 5s"},
		{"renewed", func(t *testing.T) {
			if err := a.RenewLease(ctx, "a", ttl); err != nil {
				t.Fatal(err)
			}
		}, nil, ""},
		{"expired, no one took it", func(*testing.T) { clock.Advance(2 * ttl) }, store.ErrLeaseExpiring, "0s left"},
		{"taken over", func(t *testing.T) {
			if err := b.AcquireLease(ctx, models.LeaseHolder{Owner: "b", Hostname: "h", PID: 2}, ttl); err != nil {
				t.Fatal(err)
			}
		}, store.ErrLeaseLost, "generation 2 is held by owner b"},
		{"the new owner released it", func(t *testing.T) {
			if err := b.ReleaseLease(ctx, "b"); err != nil {
				t.Fatal(err)
			}
		}, store.ErrLeaseLost, "no daemon holds it now"},
	}
	for _, st := range steps {
		st.do(t)
		err := a.ConfirmLease(ctx)
		if st.want == nil {
			if err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			continue
		}
		if !errors.Is(err, st.want) || !models.Fenced(err) || !strings.Contains(err.Error(), st.says) {
			t.Fatalf("%s: %v; want %v saying %q", st.name, err, st.want, st.says)
		}
	}
	if err := b.ConfirmLease(ctx); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the store that released its lease: %v", err)
	}
}

// TestRunsRecordTheirLeaseGeneration: a run claimed by a daemon records
// the generation of the lease it was claimed under, read back with every
// open run, so that a deposed daemon can tell the runs of the daemon that
// took the database over from its own.
func TestRunsRecordTheirLeaseGeneration(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "aq.db")
	ctx := context.Background()
	a := storetest.OpenAt(t, path, storetest.WithClock(clock))
	b := storetest.OpenAt(t, path, storetest.WithClock(clock))
	storetest.Project(t, a, "p")
	storetest.Agent(t, a, "a1")
	storetest.Agent(t, a, "a2")
	first, second := storetest.Task(t, a, "p", "first"), storetest.Task(t, a, "p", "second")
	if _, _, err := a.ClaimTask(ctx, first, "a1"); err != nil {
		t.Fatalf("a claim without a lease: %v", err)
	}
	if err := a.AcquireLease(ctx, models.LeaseHolder{Owner: "a", Hostname: "h", PID: 1}, time.Minute); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Minute)
	if err := b.AcquireLease(ctx, models.LeaseHolder{Owner: "b", Hostname: "h", PID: 2}, time.Minute); err != nil {
		t.Fatal(err)
	}
	run, _, err := b.ClaimTask(ctx, second, "a2")
	if err != nil {
		t.Fatal(err)
	}
	if run.LeaseGeneration != 2 {
		t.Fatalf("the claimed run's generation %d, want 2", run.LeaseGeneration)
	}
	open, err := a.OpenRuns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range open {
		got[r.TaskID] = r.LeaseGeneration
	}
	if len(got) != 2 || got[first] != 0 || got[second] != 2 {
		t.Fatalf("open runs' generations %v, want %s: 0 and %s: 2", got, first, second)
	}
}
