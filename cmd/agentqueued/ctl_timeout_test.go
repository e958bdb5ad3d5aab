package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// TestCtlTaskTimeout gives tasks their own timeout with --timeout and with
// a batch entry's "timeout", shows it, and refuses one out of range naming
// the field.
func TestCtlTaskTimeout(t *testing.T) {
	t.Parallel()
	dm := startDaemon(t, t.TempDir())
	addr := dm.m.Addr()
	mustCtl(t, addr, "project", "create", "web")
	id := taskIDs(t, mustCtl(t, addr, "task", "add", "--project", "web", "--title", "A", "--timeout", "10m"))[0]
	if out := mustCtl(t, addr, "task", "show", id); !regexp.MustCompile(`(?m)^Timeout:\s+10m0s$`).MatchString(out) {
		t.Errorf("task show lacks the timeout:\n%s", out)
	}
	batch := writeFile(t, t.TempDir(), "batch.json", `{"project_id": "web", "tasks": [{"id": "b", "title": "B", "timeout": "90s"}]}`)
	b := taskIDs(t, mustCtl(t, addr, "task", "add", "--file", batch))[0]
	var d models.TaskDetail
	if err := json.Unmarshal([]byte(mustCtl(t, addr, "--json", "task", "show", b)), &d); err != nil {
		t.Fatal(err)
	}
	if d.Task.Timeout.Std().String() != "1m30s" {
		t.Errorf("batch entry's timeout %s, want 1m30s", d.Task.Timeout)
	}
	r := runCtl(t, addr, nil, "task", "add", "--project", "web", "--title", "C", "--timeout", "200h")
	if r.code == 0 || !strings.Contains(r.stderr, "timeout: must be 0 (none) or between 1s and 168h0m0s") {
		t.Errorf("a timeout out of range: exit %d, stderr %s", r.code, r.stderr)
	}
}
