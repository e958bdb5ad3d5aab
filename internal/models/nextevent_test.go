package models_test

import (
	"math"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

func TestRetryBackoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name            string
		retries         int
		base, max, want time.Duration
	}{
		{"first retry waits the base", 0, 30 * time.Second, 30 * time.Minute, 30 * time.Second},
		{"second doubles it", 1, 30 * time.Second, 30 * time.Minute, time.Minute},
		{"fifth", 4, 30 * time.Second, 30 * time.Minute, 8 * time.Minute},
		{"last below the cap", 5, 30 * time.Second, 30 * time.Minute, 16 * time.Minute},
		{"the doubling passes the cap", 6, 30 * time.Second, 30 * time.Minute, 30 * time.Minute},
		{"past the cap stays at it", 40, 30 * time.Second, 30 * time.Minute, 30 * time.Minute},
		{"exactly at the cap", 2, time.Minute, 4 * time.Minute, 4 * time.Minute},
		{"a base above the cap waits the cap", 0, time.Hour, time.Minute, time.Minute},
		{"a tiny base doubles past 2^40", 45, time.Nanosecond, 100 * time.Hour, time.Duration(1 << 45)},
		{"a huge cap: the last doubling below it", 33, time.Second, time.Duration(math.MaxInt64), time.Second << 33},
		{"a huge cap does not overflow", 70, time.Second, time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)},
		{"no negative count", -3, time.Second, time.Minute, time.Second},
	} {
		if got := models.RetryBackoff(tc.retries, tc.base, tc.max); got != tc.want {
			t.Errorf("%s: RetryBackoff(%d, %s, %s) = %s, want %s", tc.name, tc.retries, tc.base, tc.max, got, tc.want)
		}
	}
	failed := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if got, want := models.RetryAt(failed, 2, 30*time.Second, 30*time.Minute), failed.Add(2*time.Minute); !got.Equal(want) {
		t.Errorf("RetryAt = %s, want %s", got, want)
	}
}

func TestSetNextEvent(t *testing.T) {
	t.Parallel()
	failed := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	resume := failed.Add(90 * time.Minute)
	for _, tc := range []struct {
		name   string
		task   models.Task
		event  models.TaskEvent
		at     time.Time
		reason string
	}{
		{"a first retry", models.Task{Status: models.StatusFailed, MaxRetries: 3, UpdatedAt: failed},
			models.EventRetry, failed.Add(time.Minute), "retry 1 of 3 at 2026-03-01T12:01:00Z (backoff 1m0s after the failure)"},
		{"a later retry doubles", models.Task{Status: models.StatusFailed, RetryCount: 2, MaxRetries: 3, UpdatedAt: failed},
			models.EventRetry, failed.Add(4 * time.Minute), "retry 3 of 3 at 2026-03-01T12:04:00Z (backoff 4m0s after the failure)"},
		{"a retry past the cap", models.Task{Status: models.StatusFailed, RetryCount: 9, MaxRetries: 10, UpdatedAt: failed},
			models.EventRetry, failed.Add(10 * time.Minute), "retry 10 of 10 at 2026-03-01T12:10:00Z (backoff 10m0s after the failure)"},
		{"no retries left", models.Task{Status: models.StatusFailed, RetryCount: 3, MaxRetries: 3, UpdatedAt: failed},
			models.EventMaxRetries, failed, "blocks at 2026-03-01T12:00:00Z: no retries left (3 of 3 used)"},
		{"no retries allowed", models.Task{Status: models.StatusFailed, UpdatedAt: failed},
			models.EventMaxRetries, failed, "blocks at 2026-03-01T12:00:00Z: the task allows no retries"},
		{"paused", models.Task{Status: models.StatusPaused, ResumeAfter: &resume, UpdatedAt: failed,
			StatusReason: "rate limited until 2026-03-01T13:30:00Z"},
			models.EventResumeTimer, resume, "resumes at 2026-03-01T13:30:00Z: rate limited until 2026-03-01T13:30:00Z"},
		{"paused without a reason", models.Task{Status: models.StatusPaused, ResumeAfter: &resume},
			models.EventResumeTimer, resume, "resumes at 2026-03-01T13:30:00Z"},
		{"ready", models.Task{Status: models.StatusReady, UpdatedAt: failed}, "", time.Time{}, ""},
		{"blocked after its retries", models.Task{Status: models.StatusBlocked, RetryCount: 3, MaxRetries: 3}, "", time.Time{}, ""},
	} {
		tc.task.NextEvent, tc.task.NextEventReason = "stale", "stale"
		tc.task.SetNextEvent(time.Minute, 10*time.Minute)
		var at time.Time
		if tc.task.NextEventAt != nil {
			at = *tc.task.NextEventAt
		}
		if tc.task.NextEvent != tc.event || !at.Equal(tc.at) || tc.task.NextEventReason != tc.reason {
			t.Errorf("%s: next event %q at %s (%q), want %q at %s (%q)", tc.name, tc.task.NextEvent, at, tc.task.NextEventReason,
				tc.event, tc.at, tc.reason)
		}
		if (tc.task.NextEventAt == nil) != (tc.event == "") {
			t.Errorf("%s: next_event_at %v for event %q", tc.name, tc.task.NextEventAt, tc.event)
		}
	}
}
