package web

import (
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// funcs are the functions every template may call.
var funcs = template.FuncMap{
	"statusText": http.StatusText,
	// statusClass is the CSS class of a task status ("status s-READY").
	"statusClass": func(s models.TaskStatus) string { return "status s-" + string(s) },
	"ago":         ago,
	"elapsed":     elapsed,
	"until":       until,
	"when":        when,
	"count":       count,
	"deref":       deref,
	"derefInt64":  func(p *int64) int64 { return derefInt64(p) },
	"percent":     percent,
	"add":         func(a, b int) int { return a + b },
}

// ago says how long ago t was relative to now, roughly ("3m ago").
func ago(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return roughDuration(now.Sub(t)) + " ago"
}

// until says how long from now until t, roughly ("in 2m00s"), or "due" once
// t has come; "" without a time.
func until(now time.Time, t *time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	if !t.After(now) {
		return "due"
	}
	return "in " + roughDuration(t.Sub(now))
}

// elapsed is the time since t until now, roughly ("1h12m").
func elapsed(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return roughDuration(now.Sub(t))
}

// roughDuration writes d to the second below a minute, to the minute
// below a day, else in days and hours.
func roughDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

// when is a time in UTC to the second.
func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// count writes n with thousands separated ("1,234,567").
func count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// deref is *p, or "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func derefInt64(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// percent is part of whole in whole percent, rounded down and capped at
// 100; 0 when whole is 0. A hair is added before rounding down: part*100/
// whole is not exact in floating point, and the whole of a sum (675.0077
// of 675.0077) came out 99.99999999999999, shown as 99%.
func percent(part, whole float64) int {
	if whole <= 0 {
		return 0
	}
	return int(min(100, part*100/whole+1e-9))
}
