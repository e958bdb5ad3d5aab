package schedule

import (
	"context"
	"time"
)

// Loop is how an engine that fires on schedules waits between passes.
type Loop struct {
	// Poll is the longest wait between two passes.
	Poll time.Duration
	// Now and After are the clock.
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
	// Wake makes the next pass start at once.
	Wake <-chan struct{}
	// Failed is told of a pass that failed while ctx was live.
	Failed func(error)
}

// Run makes passes until ctx ends: after each, it waits until the time
// the pass returned (the next scheduled time; zero when none) when that
// comes sooner than Poll, a wake-up, or Poll.
func (l Loop) Run(ctx context.Context, pass func(context.Context) (time.Time, error)) {
	for {
		next, err := pass(ctx)
		if err != nil && ctx.Err() == nil && l.Failed != nil {
			l.Failed(err)
		}
		wait := l.Poll
		if !next.IsZero() {
			if d := next.Sub(l.Now()); d < wait {
				wait = max(d, 0)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-l.Wake:
		case <-l.After(wait):
		}
	}
}
