package schedule_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/schedule"
)

func TestLoopWaitsForTheSoonerOfTheNextTimeAndThePoll(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
	waits := make(chan time.Duration, 10)
	fire := make(chan time.Time)
	wake := make(chan struct{}, 1)
	var failed []error
	nexts := []time.Time{now.Add(5 * time.Second), {}, now.Add(-time.Minute), now.Add(time.Hour)}
	passes := 0
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		schedule.Loop{Poll: time.Minute, Now: func() time.Time { return now }, Wake: wake,
			After:  func(d time.Duration) <-chan time.Time { waits <- d; return fire },
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
		if got := <-waits; got != want {
			t.Fatalf("wait %d: %s, want %s", i, got, want)
		}
		if i == 0 {
			wake <- struct{}{} // a wake-up starts the next pass at once
		} else if i < 3 {
			fire <- now
		}
	}
	cancel()
	<-done
	if passes != 4 || len(failed) != 1 {
		t.Fatalf("%d passes, %d failures", passes, len(failed))
	}
}
