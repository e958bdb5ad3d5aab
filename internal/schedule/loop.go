package schedule

import (
	"context"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock"
)

// Loop is how an engine that fires on schedules waits between passes.
type Loop struct {
	// Poll is the longest wait between two passes.
	Poll time.Duration
	// Clock reads the time and waits; nil: clock.Real.
	Clock clock.Clock
	// Wake makes the next pass start at once.
	Wake <-chan struct{}
	// Failed is told of a pass that failed while ctx was live.
	Failed func(error)
}

// Run makes passes until ctx ends: after each, it waits until the time
// the pass returned (the next scheduled time; zero when none) when that
// comes sooner than Poll, a wake-up, or Poll.
func (l Loop) Run(ctx context.Context, pass func(context.Context) (time.Time, error)) {
	clk := clock.Or(l.Clock)
	for {
		next, err := pass(ctx)
		if err != nil && ctx.Err() == nil && l.Failed != nil {
			l.Failed(err)
		}
		wait := l.Poll
		if !next.IsZero() {
			if d := next.Sub(clk.Now()); d < wait {
				wait = max(d, 0)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-l.Wake:
		case <-clk.After(wait):
		}
	}
}
