package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
)

// TestCtlShowsArchivedTask: the daemon's pruner archives a finished task
// once its window has passed; `ctl task show` still shows it and says it
// is archived, `ctl task list --archived` lists it and the plain list
// does not.
func TestCtlShowsArchivedTask(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.yaml", "retention:\n  archive_tasks: 1d\n  interval: 1h\n")
	fake := clocktest.New(time.Now())
	d, err := startMainWith(t, func(m *Main) { m.retentionClock = fake },
		"run", "--data-dir", dir+"/data", "--listen", "127.0.0.1:0", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := d.m.Addr()
	mustCtl(t, addr, "project", "create", "web")
	var res api.BatchResponse
	if err := json.Unmarshal([]byte(mustCtl(t, addr, "--json", "task", "add", "--project", "web", "--title", "Old news")), &res); err != nil ||
		len(res.Results) != 1 {
		t.Fatalf("task add: %v %+v", err, res)
	}
	id := res.Results[0].TaskID
	mustCtl(t, addr, "task", "cancel", id, "--reason", "stale")
	ctx := progresstest.Context(t)
	if err := fake.WaitTimer(ctx, time.Hour); err != nil { // the first pass, at start, is over
		t.Fatal(err)
	}
	fake.Advance(49 * time.Hour)
	if err := fake.WaitTimer(ctx, time.Hour); err != nil { // the pass the advance started is over
		t.Fatal(err)
	}

	show := mustCtl(t, addr, "task", "show", id)
	if !regexp.MustCompile(`(?m)^Archived:\s+\S+.*read-only`).MatchString(show) ||
		!regexp.MustCompile(`(?m)^Status:\s+BLOCKED`).MatchString(show) || !strings.Contains(show, "cancelled by") {
		t.Errorf("task show of an archived task:\n%s", show)
	}
	var detail models.TaskDetail
	if err := json.Unmarshal([]byte(mustCtl(t, addr, "--json", "task", "show", id)), &detail); err != nil || detail.ArchivedAt == nil {
		t.Errorf("task show --json: archived_at %v (%v)", detail.ArchivedAt, err)
	}
	if list := mustCtl(t, addr, "task", "list", "--archived"); !strings.Contains(list, id) {
		t.Errorf("task list --archived lacks %s:\n%s", id, list)
	}
	if list := mustCtl(t, addr, "task", "list", "--project", "web"); strings.Contains(list, id) {
		t.Errorf("task list still shows archived %s:\n%s", id, list)
	}
}
