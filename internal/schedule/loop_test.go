package schedule_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/schedule"
)

func TestLoopWaitsForTheSoonerOfTheNextTimeAndThePoll(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
	clk := clocktest.New(now)
	wake := make(chan struct{}, 1)
	var failed []error
	nexts := []time.Time{now.Add(5 * time.Second), {}, now.Add(-time.Minute), now.Add(time.Hour)}
	passes := 0
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		schedule.Loop{Poll: time.Minute, Clock: clk, Wake: wake,
			Failed: func(err error) { failed = append(failed, err) }}.Run(ctx, func(context.Context) (time.Time, error) {
			next := nexts[passes]
			passes++
			if passes == 2 {
				return next, errors.New("boom")
			}
			return next, nil
		})
	}()
	for i, want := range []time.Duration{5 * time.Second, time.Minute, 0, time.Minute} {
		if got := <-clk.Armed(); got != want {
			t.Fatalf("wait %d: %s, want %s", i, got, want)
		}
		switch i {
		case 0:
			wake <- struct{}{} // a wake-up starts the next pass at once
		case 1:
			clk.Advance(want)
		}
		// A wait of 0 ends by itself.
	}
	cancel()
	<-done
	if passes != 4 || len(failed) != 1 {
		t.Fatalf("%d passes, %d failures", passes, len(failed))
	}
}
