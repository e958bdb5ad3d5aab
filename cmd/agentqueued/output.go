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
// characters (escape sequences, tabs, newlines, carriage returns) are shown
// as Go escapes instead of acting on the terminal or breaking the table.
func clean(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if isControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func isControl(r rune) bool { return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' }

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
