package models

import (
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Cron schedules: the one reader of the five-field expressions that hook
// triggers and workflow schedules take.

// cronParser reads standard five-field expressions and descriptors.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Schedule returns a cron trigger's schedule and the location it is read in.
func (t HookTrigger) Schedule() (cron.Schedule, *time.Location, error) {
	return ParseCron(t.Expr, t.Timezone, "trigger.expr", "trigger.timezone")
}

// ParseCron reads a five-field cron expression (or a descriptor such as
// @daily) and the IANA time zone it is read in (empty is UTC); errors name
// exprKey or zoneKey.
func ParseCron(expr, timezone, exprKey, zoneKey string) (cron.Schedule, *time.Location, error) {
	loc := time.UTC
	if timezone != "" {
		l, err := time.LoadLocation(timezone)
		if err != nil {
			return nil, nil, Errorf(CodeInvalid, "%s: %s is not a known time zone", zoneKey, Quote(timezone))
		}
		loc = l
	}
	e := strings.TrimSpace(expr)
	switch {
	case strings.HasPrefix(e, "TZ=") || strings.HasPrefix(e, "CRON_TZ="):
		return nil, nil, Errorf(CodeInvalid, "%s: give the time zone in %s, not in the expression", exprKey, zoneKey)
	case strings.HasPrefix(e, "@every"):
		return nil, nil, Errorf(CodeInvalid, "%s: use a periodic schedule for a fixed interval, not @every", exprKey)
	}
	s, err := cronParser.Parse(e)
	if err != nil {
		return nil, nil, Errorf(CodeInvalid, "%s: %s is not a cron expression (minute hour day-of-month month day-of-week): %v", exprKey, Quote(expr), err)
	}
	return s, loc, nil
}
