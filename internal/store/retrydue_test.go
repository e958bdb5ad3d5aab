package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// TestDueFailedAgreesWithRetryAt: the due time DueFailed computes in SQL is
// models.RetryAt, the time a task's JSON names for its retry, to the
// nanosecond: the task is not due a nanosecond before, is the next retry
// then, and is due at it — below the cap, at it, past it, and with a base
// so small that the doubling runs long.
func TestDueFailedAgreesWithRetryAt(t *testing.T) {
	t.Parallel()
	s, _ := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "p")
	maxRetries := 100
	id := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "t", Title: "t", MaxRetries: &maxRetries})["t"]
	failed := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	for _, tc := range []struct {
		name      string
		retries   int
		base, max time.Duration
	}{
		{"first retry", 0, 30 * time.Second, 30 * time.Minute},
		{"third retry", 2, 30 * time.Second, 30 * time.Minute},
		{"the doubling passes the cap", 6, 30 * time.Second, 30 * time.Minute},
		{"far past the cap", 99, 30 * time.Second, 30 * time.Minute},
		{"a base above the cap", 0, time.Hour, time.Minute},
		{"an odd base", 3, 1700 * time.Millisecond, 7 * time.Minute},
		{"a 1ns base doubled 45 times", 45, time.Nanosecond, 100 * time.Hour},
		{"a 1ns base doubled 62 times", 62, time.Nanosecond, 200 * 365 * 24 * time.Hour},
	} {
		if err := store.ExecForTest(s, fmt.Sprintf("UPDATE tasks SET status = 'FAILED', retry_count = %d, updated_at = %d WHERE id = '%s'",
			tc.retries, failed.UnixNano(), id)); err != nil {
			t.Fatal(err)
		}
		want := models.RetryAt(failed, tc.retries, tc.base, tc.max)
		due, next, err := s.DueFailed(ctx, want.Add(-time.Nanosecond), tc.base, tc.max, time.Time{}, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(due) != 0 || next == nil || !next.Equal(want) {
			t.Errorf("%s: a nanosecond before %s: due %d, next retry %v", tc.name, want, len(due), next)
		}
		due, _, err = s.DueFailed(ctx, want, tc.base, tc.max, time.Time{}, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(due) != 1 || due[0].ID != id {
			t.Errorf("%s: at %s: due %d tasks, want the task", tc.name, want, len(due))
		}
	}
}
