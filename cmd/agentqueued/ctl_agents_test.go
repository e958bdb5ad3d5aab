package main

import (
	"strings"
	"testing"
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
