// Package progresstest lets tests wait on a system's progress instead of a
// wall-clock budget.
//
// A test that runs real processes, real git and real SQLite takes as long
// as the machine lets it: seconds when idle, minutes on two busy cores. A
// fixed budget sized for an idle machine fails on a loaded one, and one
// sized for the worst case hides a hang for as long. Instead a Watchdog
// fails a wait only when nothing has moved for a stall limit: the test
// reports each sign of progress it sees (a task that changed status, a
// line of output, a committed change) and waits as long as they keep
// coming.
//
// The stall limit is DefaultStall unless the AQ_TEST_STALL environment
// variable holds another Go duration. Every context this package returns
// also ends shortly before the test binary's -timeout, so that a test
// fails with its own message rather than the binary's panic.
package progresstest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// DefaultStall is how long a wait may see no progress before it fails. It
// is generous on purpose: one step of these tests (starting a process,
// a git merge, a transaction) takes well under a second on an idle
// machine and a few seconds on two cores with a load average of 25.
const DefaultStall = 2 * time.Minute

// StallEnv names the environment variable that overrides DefaultStall.
const StallEnv = "AQ_TEST_STALL"

// deadlineMargin is how long before the test binary's deadline contexts
// of this package end.
const deadlineMargin = 20 * time.Second

// Stall returns the stall limit in effect: AQ_TEST_STALL when it holds a
// positive duration, DefaultStall otherwise.
func Stall() time.Duration {
	if v := os.Getenv(StallEnv); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			return d
		}
	}
	return DefaultStall
}

// deadliner is the part of *testing.T that knows the binary's deadline.
type deadliner interface {
	Deadline() (time.Time, bool)
}

// Context returns a context for one wait on one event: it ends after one
// stall limit, before the test binary's deadline, or when the test ends.
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Stall())
	t.Cleanup(cancel)
	return beforeDeadline(t, ctx)
}

// beforeDeadline bounds ctx by the test binary's deadline, less a margin.
func beforeDeadline(t testing.TB, ctx context.Context) context.Context {
	end, ok := binaryDeadline(t)
	if !ok {
		return ctx
	}
	ctx, cancel := context.WithDeadline(ctx, end.Add(-deadlineMargin))
	t.Cleanup(cancel)
	return ctx
}

// binaryDeadline returns the test binary's deadline, if it has one. A test
// in a synctest bubble has none: its clock is not the deadline's, and
// testing panics when asked.
func binaryDeadline(t testing.TB) (end time.Time, ok bool) {
	d, is := t.(deadliner)
	if !is {
		return time.Time{}, false
	}
	defer func() {
		if recover() != nil {
			end, ok = time.Time{}, false
		}
	}()
	return d.Deadline()
}

// Watchdog ends its context when no progress has been reported for the
// stall limit. It is safe for concurrent use.
type Watchdog struct {
	limit  time.Duration
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	timer    *time.Timer
	last     string    // what moved last
	at       time.Time // when
	observed string    // the state Observe saw last
}

// New returns a watchdog that starts counting at once; it stops when the
// test ends. what names the starting point in its failure message.
func New(t testing.TB, what string) *Watchdog {
	t.Helper()
	return NewWithLimit(t, what, Stall())
}

// NewWithLimit is New with a stall limit of the caller's choosing, for a
// test whose steps are known to be long (a whole daemon's start, say).
func NewWithLimit(t testing.TB, what string, limit time.Duration) *Watchdog {
	t.Helper()
	if limit <= 0 {
		panic("progresstest: the stall limit must be positive")
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	w := &Watchdog{limit: limit, cancel: cancel, last: what, at: time.Now()}
	w.timer = time.AfterFunc(limit, w.fire)
	t.Cleanup(func() {
		w.mu.Lock()
		w.timer.Stop()
		w.mu.Unlock()
		cancel(context.Canceled)
	})
	w.ctx = beforeDeadline(t, ctx)
	return w
}

func (w *Watchdog) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	// A Progress that raced the timer has moved the mark: count from it.
	if wait := w.limit - time.Since(w.at); wait > 0 {
		w.timer.Reset(wait)
		return
	}
	w.cancel(fmt.Errorf("no progress for %s since %s", w.limit, w.last))
}

// Context returns the context that ends on a stall, near the test
// binary's deadline, or when the test ends.
func (w *Watchdog) Context() context.Context { return w.ctx }

// Done is Context().Done().
func (w *Watchdog) Done() <-chan struct{} { return w.ctx.Done() }

// Progress records that the system moved: what says how, for the failure
// message of a later stall. A report after the context ended changes
// nothing.
func (w *Watchdog) Progress(what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ctx.Err() != nil {
		return
	}
	w.last, w.at = what, time.Now()
}

// Observe reports progress when state differs from the state it saw
// last: a test that polls passes what it read (a count, a list of
// statuses), and only a change counts as progress.
func (w *Watchdog) Observe(state string) {
	w.mu.Lock()
	changed := state != w.observed
	w.observed = state
	w.mu.Unlock()
	if changed {
		w.Progress(state)
	}
}

// Err says why the context ended, or returns nil while it has not: a
// stall names the last progress seen and how long ago it was.
func (w *Watchdog) Err() error {
	if w.ctx.Err() == nil {
		return nil
	}
	if cause := context.Cause(w.ctx); cause != nil && cause != w.ctx.Err() {
		return cause
	}
	if w.ctx.Err() == context.DeadlineExceeded {
		return fmt.Errorf("the test binary's -timeout is near (the last progress: %s)", w.lastSeen())
	}
	return w.ctx.Err()
}

func (w *Watchdog) lastSeen() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("%s, %s ago", w.last, time.Since(w.at).Round(time.Millisecond))
}
