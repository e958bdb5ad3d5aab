package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

func TestCtlPauseAgentsAndQuestions(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, t.TempDir())
	addr := d.m.Addr()
	mustCtl(t, addr, "agent", "add", "a1", "--type", "command", "--command", "/bin/true")
	out := mustCtl(t, addr, "agent", "pause", "a1")
	if !strings.Contains(out, "PAUSED") || !strings.Contains(out, "true") {
		t.Fatalf("agent pause:\n%s", out)
	}
	if out := mustCtl(t, addr, "--json", "agent", "resume", "a1"); !strings.Contains(out, `"paused": false`) && !strings.Contains(out, `"paused":false`) {
		t.Fatalf("agent resume --json:\n%s", out)
	}
	if out := mustCtl(t, addr, "question", "list"); strings.TrimSpace(out) != "ID  TASK  ASKED  QUESTION" {
		t.Fatalf("question list:\n%q", out)
	}
	r := runCtl(t, addr, nil, "question", "answer", "42", "use", "SQLite")
	if r.code != 1 || !strings.Contains(r.stderr, "question 42 not found") {
		t.Fatalf("answering a missing question: %+v", r)
	}
	if r := runCtl(t, addr, nil, "question", "answer", "x"); r.code != 2 {
		t.Fatalf("bad usage: %+v", r)
	}
	if r := runCtl(t, addr, nil, "agent", "pause", "ghost"); r.code != 1 || !strings.Contains(r.stderr, `agent "ghost" not found`) {
		t.Fatalf("pausing an unknown agent: %+v", r)
	}
}

func TestCtlRepeatableValuesKeepCommas(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, t.TempDir())
	addr := d.m.Addr()
	mustCtl(t, addr, "project", "create", "web")
	out := mustCtl(t, addr, "--json", "task", "add", "--project", "web", "--title", "t",
		"--test-command", "go test -run 'A,B' ./...", "--test-command", "make lint")
	id := strings.Split(strings.Split(out, `"task_id": "`)[1], `"`)[0]
	show := mustCtl(t, addr, "task", "show", id)
	if !strings.Contains(show, "go test -run 'A,B' ./...; make lint") {
		t.Fatalf("test commands:\n%s", show)
	}
	a := mustCtl(t, addr, "--json", "agent", "add", "a1", "--type", "command", "--command", "/bin/echo",
		"--arg", "x,y", "--env", "MODEL=small", "--idle-timeout", "5m")
	for _, want := range []string{`"x,y"`, `"MODEL": "********"`, `"idle_timeout": "5m0s"`} {
		if !strings.Contains(a, want) {
			t.Errorf("agent add --json lacks %s:\n%s", want, a)
		}
	}
}

func TestCtlShowsAnAgentsRest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := startDaemon(t, dir)
	addr := d.m.Addr()
	mustCtl(t, addr, "agent", "add", "a1", "--type", "command", "--command", "/bin/true")
	mustCtl(t, addr, "agent", "add", "a2", "--type", "command", "--command", "/bin/true")
	// The daemon's orchestrator stores a rest when a run is rate limited;
	// the listing reads it from the database.
	st := storetest.OpenAt(t, filepath.Join(dir, "agentqueued.db"))
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	if err := st.RestAgent(context.Background(), "a1", until, "rate limited during task bold-orbit: try later"); err != nil {
		t.Fatal(err)
	}
	stamp := until.Format(time.RFC3339)
	tests := []struct {
		args   []string
		want   []string
		refuse string
	}{
		{[]string{"agent", "list"}, []string{"resting until " + stamp + ": rate limited during task bold-orbit: try later",
			"command  IDLE"}, ""},
		{[]string{"agent", "show", "a1"}, []string{"State:", "PAUSED", "Resting until:    " + stamp,
			"Rest reason:      rate limited during task bold-orbit: try later"}, ""},
		{[]string{"--json", "agent", "show", "a1"}, []string{`"state": "PAUSED"`, `"rest_until": "` + stamp + `"`,
			`"rest_reason": "rate limited during task bold-orbit: try later"`}, ""},
		{[]string{"--json", "agent", "show", "a2"}, []string{`"state": "IDLE"`}, "rest_"},
	}
	for _, tc := range tests {
		out := mustCtl(t, addr, tc.args...)
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("ctl %s lacks %q:\n%s", strings.Join(tc.args, " "), w, out)
			}
		}
		if tc.refuse != "" && strings.Contains(out, tc.refuse) {
			t.Errorf("ctl %s shows %q:\n%s", strings.Join(tc.args, " "), tc.refuse, out)
		}
	}
	if out := mustCtl(t, addr, "agent", "resume", "a1"); strings.Contains(out, "resting") {
		t.Fatalf("resume left the rest:\n%s", out)
	}
}
