package models

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits on text, counted in characters (runes, as Discord counts message
// lengths), and on list lengths. docs/semantics.md ("Limits") lists every
// field with its class and cap.
const (
	// MaxIDLen caps project, agent, hook, repo, profile, workflow and
	// step ids (ValidID); MaxTaskIDLen caps task ids (ValidTaskID).
	MaxIDLen     = 64
	MaxTaskIDLen = 80
	// MaxSnowflakeLen caps a Discord id: 1 to 20 decimal digits.
	MaxSnowflakeLen = 20
	// MaxNameLen caps the names of projects, agents and hooks.
	MaxNameLen = 200
	// MaxTitleLen caps a task's title (one line).
	MaxTitleLen = 300
	// MaxKindLen caps a task's kind and the kinds rules and dedupe
	// strategies match.
	MaxKindLen = 100
	// MaxActorLen caps who did something: an event's actor, a task's
	// created_by, a question's answered_by, a feedback's source, a run's
	// triggered_by, a plan's source.
	MaxActorLen = 200
	// MaxReasonLen caps the reason a person gives for an event.
	MaxReasonLen = 1000
	// MaxDescriptionLen caps long texts: task and workflow descriptions,
	// completion summaries, feedback, system prompt suffixes.
	MaxDescriptionLen = 200_000
	// MaxMessageLen caps questions, answers and agents' messages.
	MaxMessageLen = 16_000
	// MaxMetadataEntries caps a task's metadata; MaxMetadataKeyLen a key
	// (also a rule's or dedupe strategy's field); MaxMetadataLen a value.
	MaxMetadataEntries = 64
	MaxMetadataKeyLen  = 100
	MaxMetadataLen     = 4096
	// MaxListEntries caps lists given by people: acceptance criteria,
	// test commands, hook commands, agent args and allowed tools.
	MaxListEntries = 100
	// MaxCriterionLen caps one acceptance criterion.
	MaxCriterionLen = 4096
	// MaxTestCommandLen caps one test command (a shell script; several
	// lines allowed).
	MaxTestCommandLen = 10_000
	// MaxCommandLen caps a command line run without a shell (a hook
	// command, a run_command step) and one argument of an agent.
	MaxCommandLen = 4096
	// MaxPathLen caps a file system path or an executable.
	MaxPathLen = 4096
	// MaxURLLen caps a URL.
	MaxURLLen = 2048
	// MaxEnvEntries caps an environment given to agents or MCP servers;
	// MaxEnvKeyLen a variable's name and MaxEnvValueLen its value.
	MaxEnvEntries  = 100
	MaxEnvKeyLen   = 256
	MaxEnvValueLen = 32_768
	// MaxSecretLen caps an API key.
	MaxSecretLen = 4096
	// MaxShortLen caps short settings: a model name, a cron expression, a
	// time zone, a status set, a label.
	MaxShortLen = 200
	// MaxLocalIDLen caps a batch entry's local id and the ids its
	// dependencies name.
	MaxLocalIDLen = 100
	// MaxDependencies caps the dependencies of one batch entry.
	MaxDependencies = 1000
	// MaxBatchSize caps the tasks of one batch.
	MaxBatchSize = 50_000
)

// Text classes. A single-line field takes printable text only; a
// multi-line field takes line breaks and tabs as well. Both refuse
// invalid UTF-8.
//
// Refused in every text field: the C0 controls U+0000–U+001F (NUL, ESC,
// …) other than those a multi-line field allows, DEL (U+007F) and the C1
// controls U+0080–U+009F. A single-line field also refuses tab, line feed,
// carriage return and the Unicode line and paragraph separators (U+2028,
// U+2029). A multi-line field allows tab and line feed, and carriage
// return only before a line feed (a Windows line end).

// CheckLine checks a single-line field: valid UTF-8, printable characters
// only, at most max characters (no cap when max is 0). The error names
// field.
func CheckLine(field, s string, max int) error { return checkText(field, s, max, false) }

// CheckText checks a multi-line field: valid UTF-8, printable characters,
// line breaks and tabs only, at most max characters (no cap when max is
// 0). The error names field.
func CheckText(field, s string, max int) error { return checkText(field, s, max, true) }

func checkText(field, s string, max int, multiline bool) error {
	if !utf8.ValidString(s) {
		return Errorf(CodeInvalid, "%s: not valid UTF-8 text", field)
	}
	n := 0
	for i, r := range s {
		n++
		if !allowed(r, multiline) && !(multiline && r == '\r' && strings.HasPrefix(s[i+1:], "\n")) {
			if multiline {
				return Errorf(CodeInvalid, "%s: control character %s at character %d is not allowed "+
					"(text takes printable characters, line breaks and tabs)", field, runeName(r), n)
			}
			return Errorf(CodeInvalid, "%s: control character %s at character %d is not allowed "+
				"(one line of printable text)", field, runeName(r), n)
		}
	}
	if max > 0 && n > max {
		return Errorf(CodeInvalid, "%s: at most %d characters (got %d)", field, max, n)
	}
	return nil
}

// allowed reports whether r may appear in a text field of the class.
func allowed(r rune, multiline bool) bool {
	switch {
	case r == '\n' || r == '\t':
		return multiline
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return false
	case r == '\u2028' || r == '\u2029':
		return multiline
	}
	return true
}

// runeName names a character for messages: "U+0000 (NUL)".
func runeName(r rune) string {
	names := map[rune]string{0: "NUL", '\t': "tab", '\n': "line feed", '\r': "carriage return", 0x1b: "ESC",
		0x7f: "DEL", '\u2028': "line separator", '\u2029': "paragraph separator"}
	if name, ok := names[r]; ok {
		return fmt.Sprintf("U+%04X (%s)", r, name)
	}
	return fmt.Sprintf("U+%04X", r)
}

// CleanLine returns s made fit for a single-line field: invalid UTF-8 and
// control characters become spaces, runs of white space one space, the
// ends trimmed, and the result cut to max characters (the last one "…"
// when cut; no cap when max is 0). For text the daemon composes from
// untrusted sources (an agent's outputs, a command's output), which is
// cleaned rather than refused.
func CleanLine(s string, max int) string {
	s = strings.Join(strings.Fields(strings.Map(func(r rune) rune {
		if !allowed(r, false) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))), " ")
	return cutRunes(s, max)
}

// CleanText returns s made fit for a multi-line field: invalid UTF-8
// becomes U+FFFD, control characters other than line feeds and tabs are
// dropped (a carriage return before a line feed included), and the result
// is cut to max characters (the last one "…" when cut; no cap when max is
// 0).
func CleanText(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if !allowed(r, true) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	return cutRunes(s, max)
}

// cutRunes cuts s to at most max characters, the last one "…" when cut.
func cutRunes(s string, max int) string {
	if max <= 0 || utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}

// Quote returns s quoted for a message, as %q does, cut to its first 64
// characters (the last one "…") when longer: an error never echoes a huge
// value.
func Quote(s string) string { return strconv.Quote(cutRunes(s, 64)) }

// checkList checks a list field: at most maxEntries entries, each checked
// by check with its name "field[i]".
func checkList(field string, vs []string, maxEntries int, check func(name, v string) error) error {
	if len(vs) > maxEntries {
		return Errorf(CodeInvalid, "%s: at most %d entries (got %d)", field, maxEntries, len(vs))
	}
	for i, v := range vs {
		if err := check(fmt.Sprintf("%s[%d]", field, i), v); err != nil {
			return err
		}
	}
	return nil
}

// snowflakePattern matches a Discord id.
var snowflakePattern = regexp.MustCompile(`^[0-9]{1,20}$`)

// ValidSnowflake reports whether s is a Discord id: 1 to 20 decimal digits
// that fit in 64 bits.
func ValidSnowflake(s string) bool {
	if !snowflakePattern.MatchString(s) {
		return false
	}
	if len(s) < MaxSnowflakeLen {
		return true
	}
	return s <= "18446744073709551615" // the largest uint64, also 20 digits
}
