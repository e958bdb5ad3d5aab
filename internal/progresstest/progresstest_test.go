package progresstest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestWatchdogWaitsAsLongAsProgressComes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := NewWithLimit(t, "the start", time.Minute)
		for i := range 10 { // ten minutes in all, never a minute without progress
			time.Sleep(50 * time.Second)
			synctest.Wait()
			if err := w.Err(); err != nil {
				t.Fatalf("after %d steps: %v", i, err)
			}
			w.Progress("a step")
		}
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if w.Err() != nil {
			t.Fatal("ended before a whole minute without progress")
		}
		time.Sleep(2 * time.Second)
		<-w.Done()
		err := w.Err()
		if err == nil || !strings.Contains(err.Error(), "no progress for 1m0s since a step") {
			t.Fatalf("Err after a stall: %v", err)
		}
		w.Progress("too late")
		if !strings.Contains(w.Err().Error(), "since a step") {
			t.Fatalf("a report after the stall changed the answer: %v", w.Err())
		}
	})
}

func TestObserveCountsOnlyChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := NewWithLimit(t, "the start", time.Minute)
		w.Observe("1 of 3 done")
		time.Sleep(40 * time.Second)
		w.Observe("1 of 3 done") // the same state: no progress
		time.Sleep(30 * time.Second)
		<-w.Done()
		if err := w.Err(); err == nil || !strings.Contains(err.Error(), "since 1 of 3 done") {
			t.Fatalf("Err: %v", err)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		w := NewWithLimit(t, "the start", time.Minute)
		w.Observe("1 of 3 done")
		time.Sleep(40 * time.Second)
		w.Observe("2 of 3 done")
		time.Sleep(40 * time.Second)
		synctest.Wait()
		if err := w.Err(); err != nil {
			t.Fatalf("a changed state did not count: %v", err)
		}
	})
}

func TestContextEndsAfterOneStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t.Setenv(StallEnv, "90s")
		ctx := Context(t)
		start := time.Now()
		<-ctx.Done()
		if got := time.Since(start); got != 90*time.Second {
			t.Fatalf("ended after %s, want AQ_TEST_STALL's 90s", got)
		}
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err %v", ctx.Err())
		}
	})
}

func TestStallReadsTheEnvironment(t *testing.T) {
	for _, c := range []struct {
		env  string
		want time.Duration
	}{{"", DefaultStall}, {"5m", 5 * time.Minute}, {"soon", DefaultStall}, {"-1s", DefaultStall}} {
		t.Setenv(StallEnv, c.env)
		if got := Stall(); got != c.want {
			t.Errorf("AQ_TEST_STALL=%q: %s, want %s", c.env, got, c.want)
		}
	}
}

func TestWatchdogEndsBeforeTheBinaryDeadline(t *testing.T) {
	w := NewWithLimit(fakeDeadline{t, time.Now().Add(deadlineMargin + 10*time.Millisecond)}, "the start", time.Hour)
	<-w.Done()
	if err := w.Err(); err == nil || !strings.Contains(err.Error(), "-timeout is near (the last progress: the start") {
		t.Fatalf("Err: %v", err)
	}
}

// fakeDeadline is a test whose binary's deadline is near.
type fakeDeadline struct {
	*testing.T
	end time.Time
}

func (f fakeDeadline) Deadline() (time.Time, bool) { return f.end, true }
