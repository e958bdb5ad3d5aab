package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// flakyRenewer passes renewals to the real store until failFrom, then fails
// them with err.
type flakyRenewer struct {
	st       *store.Store
	calls    atomic.Int32
	failFrom int32
	err      error
}

func (f *flakyRenewer) RenewLease(ctx context.Context, owner string, ttl time.Duration) error {
	if f.calls.Add(1) >= f.failFrom {
		return f.err
	}
	return f.st.RenewLease(ctx, owner, ttl)
}

// leasedStore opens a store whose lease "me" holds.
func leasedStore(t *testing.T, ttl time.Duration) *store.Store {
	t.Helper()
	st := storetest.Open(t)
	if err := st.AcquireLease(context.Background(), models.LeaseHolder{Owner: "me", Hostname: "h", PID: 1}, ttl); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestRenewLeaseOnAFakeClock(t *testing.T) {
	t.Parallel()
	const ttl = 30 * time.Second
	tests := []struct {
		name     string
		failFrom int32
		err      error
		wantErr  string
		// wantAfter is how long the loop runs before it gives up.
		wantAfter time.Duration
	}{
		{"lost to another owner", 3, models.Errorf(models.CodeConflict, "lease lost"), "lost the database lease", 3 * ttl / 3},
		// The last good renewal at ttl/3 holds the lease until 4·ttl/3.
		{"renewals failing for a whole ttl", 2, errors.New("disk I/O error"), "lease not renewed for 30s", 4 * ttl / 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := leasedStore(t, ttl)
				r := &flakyRenewer{st: st, failFrom: tc.failFrom, err: tc.err}
				start := time.Now()
				err := renewLease(context.Background(), r, "me", ttl, slog.New(slog.NewTextHandler(io.Discard, nil)))
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("renewLease = %v, want %q", err, tc.wantErr)
				}
				if got := time.Since(start); got != tc.wantAfter {
					t.Fatalf("gave up after %s, want %s", got, tc.wantAfter)
				}
			})
		})
	}
	t.Run("stops cleanly when cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := leasedStore(t, ttl)
			ctx, cancel := context.WithTimeout(context.Background(), 10*ttl)
			defer cancel()
			r := &flakyRenewer{st: st, failFrom: 1 << 30}
			if err := renewLease(ctx, r, "me", ttl, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
				t.Fatalf("renewLease = %v", err)
			}
			if n := r.calls.Load(); n != 29 && n != 30 {
				t.Fatalf("%d renewals in 10 ttl, want one every ttl/3", n)
			}
		})
	})
}

// TestRenewLeaseRidesOutAFullDisk: a full disk outlasting the lease's ttl
// made the daemon exit and stay down. Renewals failing with "disk full"
// keep the loop going, however long; it renews again once space returns,
// and still stops when the lease is lost meanwhile.
func TestRenewLeaseRidesOutAFullDisk(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const ttl = 30 * time.Second
		st := leasedStore(t, ttl)
		full := models.Errorf(models.CodeUnavailable, "disk full: the daemon cannot write")
		r := &scriptedRenewer{st: st, script: map[int32]error{}}
		for i := int32(2); i < 40; i++ { // thirteen ttls of a full disk
			r.script[i] = full
		}
		r.script[45] = models.Errorf(models.CodeConflict, "lease lost")
		start := time.Now()
		err := renewLease(context.Background(), r, "me", ttl, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err == nil || !strings.Contains(err.Error(), "lost the database lease") {
			t.Fatalf("renewLease = %v, want it to ride out the full disk and stop only at the lost lease", err)
		}
		if got, want := time.Since(start), 45*ttl/3; got != want {
			t.Fatalf("stopped after %s, want %s (the 45th renewal)", got, want)
		}
		if n := r.real.Load(); n != 1+5 {
			t.Fatalf("%d renewals reached the store, want 6 (before and after the full disk)", n)
		}
	})
}

// scriptedRenewer fails the renewals the script names and passes the
// others to the real store.
type scriptedRenewer struct {
	st     *store.Store
	calls  atomic.Int32
	real   atomic.Int32
	script map[int32]error
}

func (s *scriptedRenewer) RenewLease(ctx context.Context, owner string, ttl time.Duration) error {
	if err, ok := s.script[s.calls.Add(1)]; ok {
		return err
	}
	s.real.Add(1)
	return s.st.RenewLease(ctx, owner, ttl)
}
