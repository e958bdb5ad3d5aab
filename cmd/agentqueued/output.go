package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds what ctl's printers share: tables and rows, cleaning
// text for the terminal, times, repositories and blocks of text. Each
// area's printers sit beside its commands, in ctl<area>_print.go.

// table returns a writer that aligns tab-separated columns; call Flush.
func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// row writes one tab-separated line of cleaned cells.
func row(w io.Writer, cols ...string) {
	for i, c := range cols {
		if c == "" {
			c = "-"
		}
		cols[i] = clean(c)
	}
	fmt.Fprintln(w, strings.Join(cols, "\t"))
}

// clean makes text from the API safe to print on a terminal: control
// characters (escape sequences, tabs, newlines, carriage returns, the C1
// range such as U+009B, bidirectional overrides and isolates) and bytes
// that are not UTF-8 are shown as Go escapes (`\x1b`, `\u202e`, `\x9b`)
// instead of acting on the terminal, reordering the text or breaking the
// table. Other text (accents, CJK, emoji) is kept as is.
func clean(s string) string { return escapeText(s, false) }

// terminalText is clean for whole texts (a diff, a log, a printer's
// output): it keeps line breaks and tabs (and a carriage return that ends a
// line, before its line feed) and escapes everything else clean does,
// including a lone carriage return, which would let the rest of a line
// overwrite its start.
func terminalText(s string) string { return escapeText(s, true) }

// escapeText escapes what clean escapes; with layout it keeps "\n", "\t"
// and "\r\n".
func escapeText(s string, layout bool) string {
	safe := func(i int, r rune, size int) bool {
		switch {
		case r == utf8.RuneError && size == 1:
			return false
		case layout && (r == '\n' || r == '\t'):
			return true
		case layout && r == '\r':
			return strings.HasPrefix(s[i+size:], "\n")
		}
		return !isControl(r)
	}
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !safe(i, r, size) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case safe(i, r, size):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

// isControl reports whether r acts on a terminal or on the order text is
// shown in: C0 and C1 controls and DEL, the line and paragraph separators,
// and the bidirectional embeddings, overrides (U+202A–U+202E) and isolates
// (U+2066–U+2069).
func isControl(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' ||
		('\u202a' <= r && r <= '\u202e') || ('\u2066' <= r && r <= '\u2069')
}

// jsonText makes JSON from json.Marshal safe to print on a terminal: the
// encoder escapes C0 controls but writes DEL, the C1 range and the
// bidirectional controls as they are. Each of those is a character inside
// a string (JSON's own syntax is ASCII), so its \uXXXX escape keeps the
// JSON's meaning.
func jsonText(data []byte) []byte {
	unsafe := func(r rune) bool { return r >= 0x7f && isControl(r) } // the encoder escaped C0 already
	if !bytes.ContainsFunc(data, unsafe) {
		return data
	}
	var b bytes.Buffer
	b.Grow(len(data) + 16)
	for len(data) > 0 {
		r, size := utf8.DecodeRune(data)
		if unsafe(r) {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			b.Write(data[:size])
		}
		data = data[size:]
	}
	return b.Bytes()
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func whenPtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return when(*t)
}

// repoSummary says where a project's repository is, without the
// credentials a URL stored by an older daemon may hold.
func repoSummary(r *models.RepoConfig) string {
	if r == nil {
		return ""
	}
	where := models.RedactURL(r.URL)
	if where == "" {
		where = r.SourcePath
	}
	s := string(r.SourceType)
	if where != "" {
		s += " " + where
	}
	return s + " (" + r.DefaultBranch + ")"
}

// repoKind says in plain words what a repository's source type (LINK,
// CLONE, INIT) means for the user: where agents work and where their work
// lands.
func repoKind(r *models.RepoConfig) string {
	switch r.SourceType {
	case models.RepoLink:
		if r.InPlace {
			return "your own repository, used in place: agents work in it one at a time, each on its task's branch " +
				"aq/<task>, and verified work is merged into your " + r.DefaultBranch
		}
		return "your own repository: each agent works in a git worktree of it, on the task's branch aq/<task>, " +
			"and verified work is merged into your " + r.DefaultBranch + " (CLONE would clone a URL instead, INIT start an empty repository)"
	case models.RepoClone:
		return "cloned from the URL: each agent works in its own clone in the data directory, and verified work is pushed to its " +
			r.DefaultBranch
	case models.RepoInit:
		return "a new repository the daemon made in the data directory: agents work in clones of it, and verified work lands in its " +
			r.DefaultBranch
	}
	return string(r.SourceType)
}

// readable makes text fit one table cell: line breaks and tabs become a
// space, runs of spaces one, other control characters are escaped (as
// clean does), and the result is cut to max characters ("…" last; no cap
// when max is 0).
func readable(s string, max int) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\n' || r == '\r' || r == '\t' }), " ")
	s = clean(s)
	if r := []rune(s); max > 0 && len(r) > max {
		s = string(r[:max-1]) + "…"
	}
	return s
}

// printBlock prints a titled block of text, indented, one cleaned line at a time.
func printBlock(w io.Writer, title, text string) {
	if text == "" {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", title)
	for line := range strings.SplitSeq(strings.TrimRight(text, "\n"), "\n") {
		fmt.Fprintln(w, "  "+clean(line))
	}
}

// indentJSON indents a JSON text for reading; other text is returned as is.
func indentJSON(s string) string {
	var b bytes.Buffer
	if json.Indent(&b, []byte(s), "", "  ") != nil {
		return s
	}
	return b.String()
}
