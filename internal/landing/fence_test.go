package landing_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// TestAVerificationTheFenceRefusesDecidesNothing: a daemon whose lease is
// about to expire without a renewal starts no test command (its
// verification checkout may be another daemon's by the time it runs), and
// the refusal is not the work's failure: the task stays VERIFYING in its
// checks phase, and once the lease is renewed the same verification runs
// the checks and lands it.
func TestAVerificationTheFenceRefusesDecidesNothing(t *testing.T) {
	t.Parallel()
	const ttl = 30 * time.Second
	clock := clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	e := newEnvWith(t, storetest.WithClock(clock))
	ctx := context.Background()
	if err := e.st.AcquireLease(ctx, models.LeaseHolder{Owner: "a", Hostname: "host-a", PID: 1}, ttl); err != nil {
		t.Fatal(err)
	}
	ran := filepath.Join(t.TempDir(), "ran")
	id := e.verifying(models.BatchTask{Title: "T", TestCommands: []string{"touch " + ran}})
	clock.Advance(ttl - time.Second) // renewals have failed: a second is left

	e.l.Verify(id)
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("a test command ran although the lease was about to expire")
	}
	v, ok, err := e.st.GetVerification(ctx, id)
	if tk := e.task(id); tk.Status != models.StatusVerifying || err != nil || !ok || v.Phase != models.PhaseChecks {
		t.Fatalf("after the refused checks: task %s %q, verification %+v %v %v; want it VERIFYING in its checks",
			tk.Status, tk.StatusReason, v, ok, err)
	}

	if err := e.st.RenewLease(ctx, "a", ttl); err != nil {
		t.Fatal(err)
	}
	e.l.Verify(id)
	if _, err := os.Stat(ran); err != nil {
		t.Fatalf("the test command did not run once the lease was renewed: %v", err)
	}
	if tk := e.task(id); tk.Status != models.StatusCompleted {
		t.Fatalf("after the renewal: %s %q, want COMPLETED", tk.Status, tk.StatusReason)
	}
}
