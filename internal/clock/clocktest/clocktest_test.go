package clocktest_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/progresstest"
)

var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fired reports whether ch has received.
func fired(ch <-chan time.Time) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestTimersFireWhenTheClockReachesThem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		wait  time.Duration
		moves []time.Duration // Advance calls
		fire  []bool          // whether it has fired after each
	}{
		{"zero fires at once", 0, nil, nil},
		{"negative fires at once", -time.Second, nil, nil},
		{"reached in one step", time.Minute, []time.Duration{time.Minute}, []bool{true}},
		{"reached in two steps", time.Minute, []time.Duration{30 * time.Second, 30 * time.Second}, []bool{false, true}},
		{"passed", time.Minute, []time.Duration{time.Hour}, []bool{true}},
		{"not reached", time.Minute, []time.Duration{59 * time.Second}, []bool{false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := clocktest.New(start)
			ch := c.After(tt.wait)
			if tt.wait <= 0 {
				if !fired(ch) {
					t.Fatal("After of no wait did not fire at once")
				}
				return
			}
			if fired(ch) {
				t.Fatal("fired before the clock moved")
			}
			for i, d := range tt.moves {
				c.Advance(d)
				if got := fired(ch); got != tt.fire[i] {
					t.Fatalf("after move %d: fired %v, want %v", i+1, got, tt.fire[i])
				}
			}
			if d := <-c.Armed(); d != tt.wait {
				t.Errorf("Armed() gave %s, want %s", d, tt.wait)
			}
		})
	}
}

func TestSetAndNow(t *testing.T) {
	t.Parallel()
	c := clocktest.New(start)
	if !c.Now().Equal(start) {
		t.Fatalf("Now() = %v, want %v", c.Now(), start)
	}
	ch := c.After(time.Hour)
	c.Set(start.Add(2 * time.Hour))
	if got := <-ch; !got.Equal(start.Add(2 * time.Hour)) {
		t.Errorf("timer received %v, want the time set", got)
	}
	c.Advance(time.Minute)
	if want := start.Add(2*time.Hour + time.Minute); !c.Now().Equal(want) {
		t.Errorf("Now() = %v, want %v", c.Now(), want)
	}
}

func TestFollowing(t *testing.T) {
	t.Parallel()
	c := clocktest.NewFollowing()
	before := time.Now()
	now := c.Now()
	if now.Before(before) {
		t.Fatalf("Now() = %v, before the real time %v", now, before)
	}
	c.Advance(-48 * time.Hour)
	if got := c.Now(); !got.Before(before.Add(-47 * time.Hour)) {
		t.Errorf("after Advance(-48h): Now() = %v, want about two days before %v", got, before)
	}
	c.Advance(48 * time.Hour)
	ch := c.After(time.Hour)
	if fired(ch) {
		t.Fatal("a timer of a following clock fired before the clock was moved")
	}
	c.Set(time.Now().Add(2 * time.Hour))
	if !fired(ch) {
		t.Error("Set past the timer did not fire it")
	}
}

func TestWaitTimer(t *testing.T) {
	t.Parallel()
	c := clocktest.New(start)
	waited := make(chan error, 1)
	go func() { waited <- c.WaitTimer(progresstest.Context(t), 3*time.Second) }()
	c.After(time.Second) // another duration does not count
	ch := c.After(3 * time.Second)
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	c.Advance(3 * time.Second)
	<-ch
	// Once fired, it is no longer waiting.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.WaitTimer(ctx, 3*time.Second); err == nil {
		t.Error("WaitTimer found a timer that had fired")
	}
}
