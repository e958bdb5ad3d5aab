package schedule_test

import (
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/schedule"
)

// of returns the schedule of a hook trigger from anchor.
func of(t *testing.T, tr models.HookTrigger, anchor time.Time) *schedule.Times {
	t.Helper()
	if tr.Type == models.TriggerPeriodic {
		s, err := schedule.Every(time.Duration(tr.IntervalSeconds)*time.Second, anchor)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	sched, loc, err := tr.Schedule()
	if err != nil {
		t.Fatal(err)
	}
	return schedule.Cron(sched, loc, anchor)
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func TestScheduledTimes(t *testing.T) {
	t.Parallel()
	ny := "America/New_York"
	cases := []struct {
		name    string
		trigger models.HookTrigger
		anchor  string
		want    []string // successive times after the anchor, UTC
	}{
		{"periodic keeps its grid", models.HookTrigger{Type: models.TriggerPeriodic, IntervalSeconds: 5400},
			"2026-03-02T08:00:00Z", []string{"2026-03-02T09:30:00Z", "2026-03-02T11:00:00Z", "2026-03-02T12:30:00Z"}},
		{"cron in UTC", models.HookTrigger{Type: models.TriggerCron, Expr: "0 9 * * 1-5"},
			"2026-03-06T10:00:00Z", []string{"2026-03-09T09:00:00Z", "2026-03-10T09:00:00Z"}},
		{"daily time inside a spring-forward gap fires when the gap ends",
			models.HookTrigger{Type: models.TriggerCron, Expr: "30 2 * * *", Timezone: ny},
			"2026-03-07T12:00:00Z", []string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"}},
		{"half-hourly times inside the gap fire once, when it ends",
			models.HookTrigger{Type: models.TriggerCron, Expr: "*/30 * * * *", Timezone: ny},
			"2026-03-08T06:10:00Z", []string{"2026-03-08T06:30:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z"}},
		{"a repeated hour fires its wall time once",
			models.HookTrigger{Type: models.TriggerCron, Expr: "30 1 * * *", Timezone: ny},
			"2026-10-31T12:00:00Z", []string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		{"half-hourly across a fall-back: each wall time once",
			models.HookTrigger{Type: models.TriggerCron, Expr: "*/30 * * * *", Timezone: ny},
			"2026-11-01T04:50:00Z", []string{"2026-11-01T05:00:00Z", "2026-11-01T05:30:00Z", "2026-11-01T07:00:00Z", "2026-11-01T07:30:00Z"}},
		{"a minutely cron anchored in the repeated hour's second pass goes on after it",
			models.HookTrigger{Type: models.TriggerCron, Expr: "* * * * *", Timezone: ny},
			"2026-11-01T06:30:00Z", []string{"2026-11-01T07:00:00Z", "2026-11-01T07:01:00Z"}},
		{"an anchor inside the repeated hour moves on",
			models.HookTrigger{Type: models.TriggerCron, Expr: "30 1 * * *", Timezone: ny},
			"2026-11-01T06:15:00Z", []string{"2026-11-02T06:30:00Z"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			n := of(t, c.trigger, utc(c.anchor))
			at := utc(c.anchor)
			for i, w := range c.want {
				at = n.Next(at)
				if !at.Equal(utc(w)) {
					t.Fatalf("time %d: got %s, want %s", i, at.Format(time.RFC3339), w)
				}
			}
		})
	}
}

func TestDueFiresOnceForTheLatestMissedTime(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		trigger    models.HookTrigger
		anchor     string
		last       string
		now        string
		wantOK     bool
		wantAt     string
		wantMissed int
		wantNext   string
	}{
		{"not yet", models.HookTrigger{Type: models.TriggerPeriodic, IntervalSeconds: 3600},
			"2026-03-02T08:00:00Z", "", "2026-03-02T08:59:59Z", false, "", 0, "2026-03-02T09:00:00Z"},
		{"exactly due", models.HookTrigger{Type: models.TriggerPeriodic, IntervalSeconds: 3600},
			"2026-03-02T08:00:00Z", "", "2026-03-02T09:00:00Z", true, "2026-03-02T09:00:00Z", 0, ""},
		{"periodic after downtime", models.HookTrigger{Type: models.TriggerPeriodic, IntervalSeconds: 3600},
			"2026-03-02T08:00:00Z", "2026-03-02T09:00:00Z", "2026-03-02T14:30:00Z", true, "2026-03-02T14:00:00Z", 4, ""},
		{"fired already", models.HookTrigger{Type: models.TriggerPeriodic, IntervalSeconds: 3600},
			"2026-03-02T08:00:00Z", "2026-03-02T09:00:00Z", "2026-03-02T09:30:00Z", false, "", 0, "2026-03-02T10:00:00Z"},
		{"cron after three days down", models.HookTrigger{Type: models.TriggerCron, Expr: "0 9 * * *"},
			"2026-03-01T00:00:00Z", "2026-03-01T09:00:00Z", "2026-03-04T10:00:00Z", true, "2026-03-04T09:00:00Z", 2, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			n := of(t, c.trigger, utc(c.anchor))
			var last time.Time
			if c.last != "" {
				last = utc(c.last)
			}
			at, missed, next, ok := n.Due(last, utc(c.now))
			if ok != c.wantOK {
				t.Fatalf("due = %v, want %v", ok, c.wantOK)
			}
			if ok && (!at.Equal(utc(c.wantAt)) || missed != c.wantMissed) {
				t.Fatalf("due at %s with %d missed, want %s with %d", at.Format(time.RFC3339), missed, c.wantAt, c.wantMissed)
			}
			if !ok && !next.Equal(utc(c.wantNext)) {
				t.Fatalf("next %s, want %s", next.Format(time.RFC3339), c.wantNext)
			}
		})
	}
}

func TestNonPositiveIntervalsAreRefused(t *testing.T) {
	t.Parallel()
	big := int64(1 << 55)
	for _, d := range []time.Duration{0, -time.Second, time.Duration(big) * time.Second} {
		if _, err := schedule.Every(d, utc("2026-03-02T08:00:00Z")); err == nil {
			t.Errorf("interval %d accepted", d)
		}
	}
}
