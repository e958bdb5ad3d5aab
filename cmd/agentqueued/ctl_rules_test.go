package main

import (
	"strings"
	"testing"
)

func TestCtlRulesSurviveARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeFile(t, t.TempDir(), "agentqueued.yaml", `rules:
  - {id: from-config, type: Concurrency, matcher: {kind: deploy}, max_concurrency: 1}
`)
	d := startDaemon(t, dir, "--config", cfg)
	addr := d.m.Addr()
	if out := mustCtl(t, addr, "rule", "list"); !strings.Contains(out, "from-config") || !strings.Contains(out, "configuration file") {
		t.Fatalf("rules from the configuration:\n%s", out)
	}

	files := t.TempDir()
	for _, tc := range []struct {
		name, content string
		code          int
		msg           string
	}{
		{"not a list", "rules: 3\n", 1, "want a list of rules"},
		{"an unknown key", "- {type: Capacity, matcher: {kind: ingest}, max_capacity: 10, cap: 2}\n", 1, `rules[0]: rule: unknown key "cap"`},
		{"refused by the daemon", "- {id: bad, type: Capacity, matcher: {kind: ingest}}\n", 1, "rules[0] (bad): max_capacity: must be at least 1"},
	} {
		r := runCtl(t, addr, nil, "rule", "set", "--file", writeFile(t, files, strings.ReplaceAll(tc.name, " ", "-")+".yaml", tc.content))
		if r.code != tc.code || !strings.Contains(r.stderr, tc.msg) {
			t.Errorf("%s: exit %d, stderr %q; want %d with %q", tc.name, r.code, r.stderr, tc.code, tc.msg)
		}
	}
	if r := runCtl(t, addr, nil, "rule", "set"); r.code != 2 || !strings.Contains(r.stderr, "--file is required") {
		t.Errorf("rule set without --file: %+v", r)
	}

	out := mustCtl(t, addr, "rule", "set", "--actor", "ops", "--file", writeFile(t, files, "rules.yaml", `rules:
  - id: ingest-cap
    type: Capacity
    matcher: {kind: ingest, status: Running, fields: [source]}
    max_capacity: 100
`))
	for _, want := range []string{"rules replaced: 1 in force", "ingest-cap", "Capacity", "100", "at most 100 items of remaining work of kind ingest per source", "by ops"} {
		if !strings.Contains(out, want) {
			t.Errorf("rule set output lacks %q:\n%s", want, out)
		}
	}
	mustCtl(t, addr, "project", "create", "web")
	r := runCtl(t, addr, nil, "task", "add", "--project", "web", "--title", "t", "--kind", "ingest")
	if r.code != 1 || !strings.Contains(r.stderr, "expected_count: required") || !strings.Contains(r.stderr, "ingest-cap") {
		t.Errorf("a task without expected_count under the Capacity rule: %+v", r)
	}
	r = runCtl(t, addr, nil, "task", "add", "--project", "web", "--title", "t", "--kind", "ingest", "--expected-count", "101")
	if r.code != 1 || !strings.Contains(r.stderr, "expected_count: 101 exceeds max_capacity 100") {
		t.Errorf("a task larger than the capacity: %+v", r)
	}
	out = mustCtl(t, addr, "--json", "task", "add", "--project", "web", "--title", "t", "--kind", "ingest", "--expected-count", "100")
	id := strings.Split(strings.Split(out, `"task_id": "`)[1], `"`)[0]
	if show := mustCtl(t, addr, "task", "show", id); !strings.Contains(show, "0 succeeded, 0 failed of 100 expected") {
		t.Errorf("task show:\n%s", show)
	}
	if err := d.m.Close(); err != nil {
		t.Fatal(err)
	}

	// The same configuration again: the rules set through the API stay.
	d = startDaemon(t, dir, "--config", cfg)
	out = mustCtl(t, d.m.Addr(), "--json", "rule", "list")
	if !strings.Contains(out, `"ingest-cap"`) || strings.Contains(out, "from-config") || !strings.Contains(out, `"source": "api"`) {
		t.Fatalf("after a restart:\n%s", out)
	}
}
