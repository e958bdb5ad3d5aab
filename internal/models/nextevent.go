package models

import (
	"fmt"
	"time"
)

// RetryBackoff is the wait before retry number retries+1 of a FAILED task:
// base doubled for each earlier retry, at most maxBackoff. It is the one
// formula of the retry timer: the orchestrator's backoff and the
// next_event of a task's JSON use it, and the store's due-time SQL
// (store.DueFailed) computes the same, which a store test holds equal.
func RetryBackoff(retries int, base, maxBackoff time.Duration) time.Duration {
	d := min(base, maxBackoff)
	for range max(retries, 0) {
		// Doubling past maxBackoff/2 passes maxBackoff: stop before the
		// product could overflow.
		if d > maxBackoff/2 {
			return maxBackoff
		}
		d *= 2
	}
	return d
}

// RetryAt is when a FAILED task that failed at failedAt (its updated_at),
// after retries earlier retries, is due for RETRY: RetryBackoff after the
// failure.
func RetryAt(failedAt time.Time, retries int, base, maxBackoff time.Duration) time.Time {
	return failedAt.Add(RetryBackoff(retries, base, maxBackoff))
}

// SetNextEvent fills the task's NextEvent, NextEventAt and NextEventReason
// from its status, for people reading it: a PAUSED task resumes
// (RESUME_TIMER) at its resume_after; a FAILED task with retries left is
// retried (RETRY) at RetryAt of its failure, with the retry backoff base
// and its cap maxBackoff; a FAILED task with none left is blocked
// (MAX_RETRIES) as soon as it is seen, so at its failure. Any other task
// has none (the three are cleared). The times are when the task is due:
// a round applies the event then, or at the daemon's next round when it
// was not running.
func (t *Task) SetNextEvent(base, maxBackoff time.Duration) {
	t.NextEvent, t.NextEventAt, t.NextEventReason = "", nil, ""
	var at time.Time
	switch {
	case t.Status == StatusPaused && t.ResumeAfter != nil:
		at = *t.ResumeAfter
		t.NextEvent, t.NextEventReason = EventResumeTimer, "resumes at "+stamp(at)
		if t.StatusReason != "" {
			t.NextEventReason += ": " + t.StatusReason
		}
	case t.Status == StatusFailed && t.RetryCount >= t.MaxRetries:
		at = t.UpdatedAt
		t.NextEvent = EventMaxRetries
		if t.MaxRetries == 0 {
			t.NextEventReason = "blocks at " + stamp(at) + ": the task allows no retries"
		} else {
			t.NextEventReason = fmt.Sprintf("blocks at %s: no retries left (%d of %d used)", stamp(at), t.RetryCount, t.MaxRetries)
		}
	case t.Status == StatusFailed:
		wait := RetryBackoff(t.RetryCount, base, maxBackoff)
		at = t.UpdatedAt.Add(wait)
		t.NextEvent = EventRetry
		t.NextEventReason = fmt.Sprintf("retry %d of %d at %s (backoff %s after the failure)", t.RetryCount+1, t.MaxRetries,
			stamp(at), wait)
	default:
		return
	}
	t.NextEventAt = &at
}

// stamp is a time as a sentence of NextEventReason names it: RFC 3339 in
// UTC, to the second.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
