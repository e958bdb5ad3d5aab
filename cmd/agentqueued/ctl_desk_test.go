package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// TestCtlDesk asks the real daemon what waits on a person: a project out
// of budget with READY work is listed with the command that ends its wait,
// a task cancelled on purpose (and the one blocked behind it) is not;
// --project keeps one project's items, an unknown project is an error
// naming it, and --json prints the desk.
func TestCtlDesk(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, t.TempDir())
	addr := d.m.Addr()
	mustCtl(t, addr, "project", "create", "web")
	mustCtl(t, addr, "project", "create", "docs", "--budget", "0")
	ids := taskIDs(t, mustCtl(t, addr, "task", "add", "--project", "web", "--title", "Not needed"))
	taskIDs(t, mustCtl(t, addr, "task", "add", "--project", "web", "--title", "Behind it", "--depends-on", ids[0]))
	taskIDs(t, mustCtl(t, addr, "task", "add", "--project", "docs", "--title", "Write the guide"))
	mustCtl(t, addr, "task", "cancel", ids[0], "--reason", "not needed", "--actor", "ann")

	tests := []struct {
		args []string
		want []string
		not  []string
	}{
		{[]string{"desk"}, []string{"Waiting on you (1):", "budget  docs", "→ agentqueued ctl project edit docs --budget-limit N"},
			[]string{ids[0]}},
		{[]string{"desk", "--project", "web"}, []string{"Waiting on you (0):\n  nothing\n"}, []string{"docs"}},
		{[]string{"status"}, []string{"Agents working: 0 · Waiting to land or verify: 0", "Waiting on you (1):", "budget  docs"},
			[]string{"budget  " + ids[0]}},
	}
	for _, tt := range tests {
		out := mustCtl(t, addr, tt.args...)
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("ctl %s lacks %q:\n%s", strings.Join(tt.args, " "), w, out)
			}
		}
		for _, n := range tt.not {
			if strings.Contains(out[strings.Index(out, "Waiting on you"):], n) {
				t.Errorf("ctl %s lists %q on the desk:\n%s", strings.Join(tt.args, " "), n, out)
			}
		}
	}
	var desk models.Desk
	if err := json.Unmarshal([]byte(mustCtl(t, addr, "--json", "desk", "--project", "docs")), &desk); err != nil ||
		len(desk.Items) != 1 || desk.Items[0].Kind != models.DeskBudget || desk.Items[0].ProjectID != "docs" {
		t.Errorf("ctl --json desk --project docs: %+v, %v", desk, err)
	}
	if r := runCtl(t, addr, nil, "desk", "--project", "nope"); r.code != 1 || !strings.Contains(r.stderr, "nope") {
		t.Errorf("ctl desk --project nope: exit %d, stderr %q; want 1 naming the project", r.code, r.stderr)
	}
}
