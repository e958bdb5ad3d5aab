package schedule

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// maxWallSteps bounds the wall times looked at for one next time.
const maxWallSteps = 2 * 60

// maxCatchUpSteps bounds the walk over missed scheduled times after
// downtime (a minute-level cron missed for a year is about half a million).
const maxCatchUpSteps = 1_000_000

// Times is a schedule: every interval from an anchor, or the times of a
// cron expression on its zone's wall clock.
type Times struct {
	anchor time.Time
	every  time.Duration
	next   func(time.Time) time.Time
}

// Every returns the periodic schedule anchor + k·every (k ≥ 1).
func Every(every time.Duration, anchor time.Time) (*Times, error) {
	if every <= 0 {
		return nil, fmt.Errorf("schedule: the interval %s is not positive", every)
	}
	return &Times{anchor: anchor, every: every, next: func(after time.Time) time.Time {
		if after.Before(anchor) {
			return anchor.Add(every)
		}
		k := after.Sub(anchor)/every + 1
		return anchor.Add(k * every)
	}}, nil
}

// Cron returns the times of a cron schedule read in loc, after anchor.
// Each wall-clock time fires once: when a daylight-saving change repeats
// an hour, its times fire in the first pass only (Go places a repeated
// wall time at its first instant); when it skips an hour, the times
// inside the gap fire once, when the gap ends.
func Cron(sched cron.Schedule, loc *time.Location, anchor time.Time) *Times {
	return &Times{anchor: anchor, next: func(after time.Time) time.Time {
		// The expression is read on the wall clock of its zone: the
		// schedule walks wall times (in a zone without daylight saving)
		// and each is placed in the real zone.
		wall := wallClock(after.In(loc))
		// Wall times of a repeated hour's first pass come before an
		// instant of its second: walk past them (at most an hour of
		// minutes) to the first that comes after.
		for range maxWallSteps {
			w := sched.Next(wall)
			if w.IsZero() {
				return w
			}
			at := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), 0, 0, loc)
			if !wallClock(at).Equal(w) {
				// A wall time inside a spring-forward gap fires when the
				// gap ends.
				_, at = at.ZoneBounds()
			}
			if at.After(after) {
				return at.UTC()
			}
			wall = w
		}
		return time.Time{}
	}}
}

// Next returns the first scheduled time after t (zero when there is none).
func (n *Times) Next(t time.Time) time.Time { return n.next(t) }

// wallClock is t's wall-clock reading as a UTC time.
func wallClock(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// Due returns the scheduled time to fire at now, given the last one fired
// (zero when none): the latest scheduled time not after now, with how many
// earlier ones it stands for (missed while the daemon was down), or ok
// false with the next time when none is due. After downtime a schedule
// fires once, for its latest missed time.
func (n *Times) Due(last, now time.Time) (at time.Time, missed int, next time.Time, ok bool) {
	from := n.anchor
	if last.After(from) {
		from = last
	}
	t := n.next(from)
	if t.IsZero() || t.After(now) {
		return time.Time{}, 0, t, false
	}
	if n.every > 0 {
		k := now.Sub(t) / n.every
		return t.Add(k * n.every), int(k), time.Time{}, true
	}
	for i := 0; i < maxCatchUpSteps; i++ {
		u := n.next(t)
		if u.IsZero() || u.After(now) {
			break
		}
		t = u
		missed++
	}
	return t, missed, time.Time{}, true
}
