package hooks

import (
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// maxCatchUpSteps bounds the walk over missed scheduled times after
// downtime (a minute-level cron missed for a year is about half a million).
const maxCatchUpSteps = 1_000_000

// nextTimes computes the scheduled times of a periodic or cron trigger.
type nextTimes struct {
	trigger models.HookTrigger
	anchor  time.Time
	next    func(time.Time) time.Time
}

// newNextTimes returns the schedule of a scheduled trigger counting from
// anchor. Periodic times are anchor + k·interval. Cron times are the
// expression's in its time zone, each wall-clock time once: when a
// daylight-saving change repeats an hour, its times fire in the first
// pass only; when it skips an hour, robfig/cron moves the times inside the
// gap to the first instant after it.
func newNextTimes(t models.HookTrigger, anchor time.Time) (*nextTimes, error) {
	n := &nextTimes{trigger: t, anchor: anchor}
	switch t.Type {
	case models.TriggerPeriodic:
		every := time.Duration(t.IntervalSeconds) * time.Second
		n.next = func(after time.Time) time.Time {
			if after.Before(anchor) {
				return anchor.Add(every)
			}
			k := after.Sub(anchor)/every + 1
			return anchor.Add(k * every)
		}
	case models.TriggerCron:
		sched, loc, err := t.Schedule()
		if err != nil {
			return nil, err
		}
		n.next = func(after time.Time) time.Time {
			local := after.In(loc)
			next := sched.Next(local)
			// A repeated wall-clock time (the hour a fall-back repeats)
			// fired already.
			for i := 0; i < 4 && !next.IsZero() && sameWallMinute(next, local); i++ {
				next = sched.Next(next)
			}
			return next.UTC()
		}
	default:
		return nil, models.Errorf(models.CodeInvalid, "trigger.type: %q is not scheduled", t.Type)
	}
	return n, nil
}

func sameWallMinute(a, b time.Time) bool {
	ay, am, ad := a.Date()
	by, bm, bd := b.Date()
	return ay == by && am == bm && ad == bd && a.Hour() == b.Hour() && a.Minute() == b.Minute()
}

// due returns the scheduled time to fire at now, given the last one fired
// (zero when none): the latest scheduled time not after now, with how many
// earlier ones it stands for (missed while the daemon was down), or ok
// false with the next time when none is due. After downtime a schedule
// fires once, for its latest missed time.
func (n *nextTimes) due(last, now time.Time) (at time.Time, missed int, next time.Time, ok bool) {
	from := n.anchor
	if last.After(from) {
		from = last
	}
	t := n.next(from)
	if t.IsZero() || t.After(now) {
		return time.Time{}, 0, t, false
	}
	if n.trigger.Type == models.TriggerPeriodic {
		every := time.Duration(n.trigger.IntervalSeconds) * time.Second
		k := now.Sub(t) / every
		return t.Add(k * every), int(k), time.Time{}, true
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
