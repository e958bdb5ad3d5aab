package landing

import (
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/agent"
)

// TestLineTailKeepsTheLastLines: a failing check's output keeps its last
// lines within the limit, and always its last line.
func TestLineTailKeepsTheLastLines(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		max   int
		lines []string
		want  string
	}{
		{"nothing", 10, nil, ""},
		{"fits", 10, []string{"a", "b"}, "a\nb"},
		{"drops the oldest", 6, []string{"one", "two", "three"}, "three"},
		{"keeps the last line however long", 3, []string{"a", "a long line"}, "a long line"},
		{"exactly at the limit", 8, []string{"abc", "def"}, "abc\ndef"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tail := &lineTail{max: c.max}
			for _, l := range c.lines {
				tail.add([]byte(l))
			}
			if got := tail.String(); got != c.want {
				t.Fatalf("tail %q, want %q", got, c.want)
			}
		})
	}
}

// TestExitStatusAndChecksReason: the words of a check's end and of the
// checks' success.
func TestExitStatusAndChecksReason(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		res  agent.Result
		want string
	}{
		{agent.Result{ExitCode: 1}, "exit status 1"},
		{agent.Result{ExitCode: -1, Signal: "killed"}, "killed by signal killed"},
		{agent.Result{ExitCode: 2, StderrTail: "ignored"}, "exit status 2"},
	} {
		if got := exitStatus(c.res); got != c.want {
			t.Errorf("exitStatus(%+v) = %q, want %q", c.res, got, c.want)
		}
	}
	for _, c := range []struct {
		cmds []string
		want string
	}{
		{nil, "no test commands"},
		{[]string{"go test ./..."}, "1 test command(s) passed"},
		{[]string{"go vet ./...", "go test ./..."}, "2 test command(s) passed"},
	} {
		if got := checksReason(c.cmds); got != c.want {
			t.Errorf("checksReason(%q) = %q, want %q", strings.Join(c.cmds, "; "), got, c.want)
		}
	}
}
