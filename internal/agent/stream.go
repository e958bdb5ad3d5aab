package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Helpers shared by the CLI adapters and their stream parsers.

// command is the agent's configured CLI path, else the CLI's name.
func command(rc RunContext, name string) string {
	if c := strings.TrimSpace(rc.Agent.Command); c != "" {
		return c
	}
	return name
}

// maxRecoverAttempts bounds the work spent on one line that is not a
// single JSON object.
const maxRecoverAttempts = 16

// maxMessageLen caps the text of one EventMessage.
const maxMessageLen = 1000

// fields is one JSON object of a stream line, decoded one level deep. Its
// accessors ignore values of an unexpected type: a CLI that changes the
// type of one field must not make the whole line unreadable.
type fields map[string]json.RawMessage

// str returns the string at key, "" if absent, null or not a string.
func (f fields) str(key string) string {
	var s string
	if json.Unmarshal(f[key], &s) != nil {
		return ""
	}
	return s
}

// num returns the number at key as a non-negative integer, 0 if absent or
// not a number.
func (f fields) num(key string) int64 {
	var v float64
	if json.Unmarshal(f[key], &v) != nil || v <= 0 || math.IsNaN(v) {
		return 0
	}
	if v >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

// flag returns the boolean at key, false if absent or not a boolean.
func (f fields) flag(key string) bool {
	var b bool
	return json.Unmarshal(f[key], &b) == nil && b
}

// obj returns the object at key, nil if absent or not an object.
func (f fields) obj(key string) fields {
	var o fields
	if json.Unmarshal(f[key], &o) != nil {
		return nil
	}
	return o
}

// list returns the array at key, nil if absent or not an array.
func (f fields) list(key string) []json.RawMessage {
	var l []json.RawMessage
	if json.Unmarshal(f[key], &l) != nil {
		return nil
	}
	return l
}

// has reports whether key is present with a value other than null.
func (f fields) has(key string) bool {
	v, ok := f[key]
	return ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

// strings returns the strings of the array at key, skipping other values.
func (f fields) strings(key string) []string {
	var out []string
	for _, raw := range f.list(key) {
		var s string
		if json.Unmarshal(raw, &s) == nil && strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
	}
	return out
}

// objects returns the JSON objects on one line of output. A line that is
// one object yields it. A line where the CLI glued two objects together, or
// injected one object into the middle of another (Claude Code bug #49640),
// yields the objects that still decode on their own, scanning at most
// maxRecoverAttempts candidates. Anything else yields none.
func objects(line []byte) []fields {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	if line[0] == '{' {
		var f fields
		if json.Unmarshal(line, &f) == nil {
			return []fields{f}
		}
	}
	var out []fields
	for i, attempts := 0, 0; i < len(line) && attempts < maxRecoverAttempts; attempts++ {
		j := bytes.IndexByte(line[i:], '{')
		if j < 0 {
			break
		}
		i += j
		dec := json.NewDecoder(bytes.NewReader(line[i:]))
		var f fields
		if dec.Decode(&f) == nil && f != nil {
			out = append(out, f)
			i += int(dec.InputOffset())
			continue
		}
		i++
	}
	return out
}

// short cuts s to maxMessageLen bytes on a rune boundary.
func short(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= maxMessageLen {
		return s
	}
	cut := maxMessageLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// addUsage returns the field-wise sum of a and b.
func addUsage(a, b models.TokenUsage) models.TokenUsage {
	return models.TokenUsage{Input: a.Input + b.Input, Output: a.Output + b.Output,
		CacheRead: a.CacheRead + b.CacheRead, CacheWrite: a.CacheWrite + b.CacheWrite}
}

// maxUsage returns the field-wise maximum of a and b.
func maxUsage(a, b models.TokenUsage) models.TokenUsage {
	return models.TokenUsage{Input: max(a.Input, b.Input), Output: max(a.Output, b.Output),
		CacheRead: max(a.CacheRead, b.CacheRead), CacheWrite: max(a.CacheWrite, b.CacheWrite)}
}

// coversUsage reports whether every field of a is at least b's.
func coversUsage(a, b models.TokenUsage) bool {
	return a.Input >= b.Input && a.Output >= b.Output && a.CacheRead >= b.CacheRead && a.CacheWrite >= b.CacheWrite
}

// subUsage returns a minus b, field by field.
func subUsage(a, b models.TokenUsage) models.TokenUsage {
	return models.TokenUsage{Input: a.Input - b.Input, Output: a.Output - b.Output,
		CacheRead: a.CacheRead - b.CacheRead, CacheWrite: a.CacheWrite - b.CacheWrite}
}

// sameUsage reports whether a and b count the same tokens.
func sameUsage(a, b models.TokenUsage) bool { return coversUsage(a, b) && coversUsage(b, a) }

// usageGate emits a run's cumulative usage only when it grows: the
// orchestrator records differences, which must never be negative.
type usageGate struct{ last models.TokenUsage }

// next returns the usage event for u (raised to what was already reported),
// or nil when nothing changed.
func (g *usageGate) next(u models.TokenUsage) []Event {
	u = maxUsage(u, g.last)
	if sameUsage(u, g.last) {
		return nil
	}
	g.last = u
	return []Event{{Kind: EventUsage, Usage: u}}
}

// sessionIDPattern is what a usable session id looks like: it is put back
// on the command line of the next attempt, so it must never look like a
// flag or carry anything but an id's characters.
var sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$`)

// validSessionID reports whether id may be passed to a CLI's resume flag.
func validSessionID(id string) bool { return sessionIDPattern.MatchString(id) }

// checkFlagValue rejects a value that a CLI would read as a flag or that
// spans lines.
func checkFlagValue(what, v string) error {
	if strings.HasPrefix(v, "-") || strings.ContainsAny(v, "\x00\n\r") {
		return fmt.Errorf("%s %q cannot be passed on the command line", what, v)
	}
	return nil
}

// cutShort is the result of a stream that ended without a terminal event.
func cutShort(exitCode int, detail string) Event {
	msg := fmt.Sprintf("the stream ended without a result (exit status %d)", exitCode)
	if detail = strings.TrimSpace(detail); detail != "" {
		msg += ": " + detail
	}
	return Event{Kind: EventResult, IsError: true, Error: msg}
}

// Rate limits and usage caps in the CLIs' words.

// capPhrases mark a plan's usage cap or exhausted quota; limitPhrases a
// (possibly transient) rate limit. Both are matched in lower case.
var (
	capPhrases = []string{"hit your usage limit", "hit your limit", "hit your session limit", "usage limit reached",
		"usage limit has been reached", "usage_limit_reached", "out of extra usage", "exceeded your current quota",
		"insufficient_quota"}
	limitPhrases = []string{"too many requests", "rate limit", "rate_limit", "rate-limit", "ratelimit"}
)

// limitInText reports whether text says the provider refuses work because
// of a rate limit or usage cap, and whether it is a cap.
func limitInText(text string) (limited, usageCap bool) {
	lower := strings.ToLower(text)
	for _, p := range capPhrases {
		if strings.Contains(lower, p) {
			return true, true
		}
	}
	for _, p := range limitPhrases {
		if strings.Contains(lower, p) {
			return true, false
		}
	}
	return false, false
}

// Reset times as the CLIs print them.
var (
	// "resets_at":1777936568 in a JSON error body (Codex backend).
	resetsAtJSON = regexp.MustCompile(`"resets_at"\s*:\s*(\d{9,13})`)
	// "resets_in_seconds":13872 in the same bodies.
	resetsInJSON = regexp.MustCompile(`"resets_in_seconds"\s*:\s*(\d{1,9})`)
	// "try again at 2026-07-05T20:19:00Z", "resets at …" with an RFC 3339 time.
	resetRFC3339 = regexp.MustCompile(`(?i)(?:again|resets?) at (\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2}))`)
	// "try again at Jul 5th, 2026 8:19 PM" (Codex), in the CLI's local time.
	resetDate = regexp.MustCompile(`(?i)again at ([A-Z][a-z]{2,8})\.? (\d{1,2})(?:st|nd|rd|th)?,? (\d{4}),? (\d{1,2}):(\d{2}) ?([AP]M)?`)
	// "try again at 8:19 PM": the next such time.
	resetClock = regexp.MustCompile(`(?i)again at (\d{1,2}):(\d{2}) ?([AP]M)?\b`)
	// "try again in 5 days 22 hours 11 minutes".
	resetIn   = regexp.MustCompile(`(?i)again in ((?:\d+ ?(?:days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b[ ,]*(?:and )?)+)`)
	resetPart = regexp.MustCompile(`(?i)(\d+) ?(d|h|m|s)`)
)

// resetFromText finds when a limit described by text ends; nil if the text
// does not say. now anchors relative times ("try again in 2 hours").
func resetFromText(text string, now time.Time) *time.Time {
	if m := resetsAtJSON.FindStringSubmatch(text); m != nil {
		if n, err := strconv.ParseInt(m[1], 10, 64); err == nil {
			return epochTime(n)
		}
	}
	if m := resetsInJSON.FindStringSubmatch(text); m != nil {
		if n, err := strconv.ParseInt(m[1], 10, 64); err == nil {
			t := now.Add(time.Duration(n) * time.Second)
			return &t
		}
	}
	if m := resetRFC3339.FindStringSubmatch(text); m != nil {
		s := strings.Replace(m[1], " ", "T", 1)
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00", "2006-01-02T15:04:05Z0700"} {
			if t, err := time.Parse(layout, s); err == nil {
				return &t
			}
		}
	}
	if m := resetDate.FindStringSubmatch(text); m != nil {
		if t, ok := dateIn(m[1:], now.Location()); ok {
			return &t
		}
	}
	if m := resetClock.FindStringSubmatch(text); m != nil {
		h, _ := strconv.Atoi(m[1])
		mi, _ := strconv.Atoi(m[2])
		if h, ok := hour12(h, m[3]); ok && mi < 60 {
			t := time.Date(now.Year(), now.Month(), now.Day(), h, mi, 0, 0, now.Location())
			if !t.After(now) {
				t = t.AddDate(0, 0, 1)
			}
			return &t
		}
	}
	if m := resetIn.FindStringSubmatch(text); m != nil {
		var d time.Duration
		for _, p := range resetPart.FindAllStringSubmatch(m[1], -1) {
			n, err := strconv.ParseInt(p[1], 10, 64)
			if err != nil || n > 1e6 {
				return nil
			}
			unit := map[string]time.Duration{"d": 24 * time.Hour, "h": time.Hour, "m": time.Minute, "s": time.Second}[strings.ToLower(p[2])]
			d += time.Duration(n) * unit
		}
		if d > 0 {
			t := now.Add(d)
			return &t
		}
	}
	return nil
}

// dateIn builds the time of month, day, year, hour, minute and AM/PM
// strings in loc.
func dateIn(m []string, loc *time.Location) (time.Time, bool) {
	month, err := time.Parse("Jan", strings.ToUpper(m[0][:1])+strings.ToLower(m[0][1:3]))
	if err != nil {
		return time.Time{}, false
	}
	day, _ := strconv.Atoi(m[1])
	year, _ := strconv.Atoi(m[2])
	h, _ := strconv.Atoi(m[3])
	mi, _ := strconv.Atoi(m[4])
	h, ok := hour12(h, m[5])
	if !ok || day < 1 || day > 31 || mi > 59 {
		return time.Time{}, false
	}
	return time.Date(year, month.Month(), day, h, mi, 0, 0, loc), true
}

// hour12 turns an hour with an optional AM/PM into 0-23.
func hour12(h int, ampm string) (int, bool) {
	switch strings.ToUpper(ampm) {
	case "":
		return h, h >= 0 && h < 24
	case "AM":
		return h % 12, h >= 1 && h <= 12
	default:
		return h%12 + 12, h >= 1 && h <= 12
	}
}

// epochTime turns Unix seconds into a time; values too large to be seconds
// are taken as milliseconds (one SDK documents milliseconds). Zero is no
// time.
func epochTime(n int64) *time.Time {
	if n <= 0 {
		return nil
	}
	var t time.Time
	if n > 1e11 {
		t = time.UnixMilli(n).UTC()
	} else {
		t = time.Unix(n, 0).UTC()
	}
	return &t
}
