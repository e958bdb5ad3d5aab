package main

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// TestRunnersInTheDaemonsViews: a whole daemon shows its runners wherever
// it shows its state — `ctl status` (and its --json), the dashboard's
// overview and /metrics — each with whether it is connected, when it was
// last seen, its agents and its runs in progress: a runner driven over the
// real protocol holds a run of its agent, another was added and never
// connected.
func TestRunnersInTheDaemonsViews(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := startDaemon(t, filepath.Join(dir, "data"))
	addr := d.m.Addr()
	ctx := d.watch.Context()
	admin, err := api.NewClient("http://"+addr, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.CloseIdleConnections)
	if _, err := admin.CreateProject(ctx, models.ProjectSpec{ID: "plain"}.Project()); err != nil {
		t.Fatal(err)
	}
	build := newHandRunner(t, addr, "build-1")
	mustCtl(t, addr, "runner", "add", "laptop")
	id := taskIDs(t, mustCtl(t, addr, "task", "add", "--project", "plain", "--title", "Hand work"))[0]
	// Polled until the run is offered (each poll is held until there is
	// something for the runner or the hold ends).
	var asg models.RunnerAssignment
	for asg.RunID == 0 {
		poll, err := build.client.RunnerPoll(ctx)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if len(poll.Runs) > 0 {
			asg = poll.Runs[0]
		}
	}
	if asg.Task.ID != id || asg.Agent != "a" {
		t.Fatalf("offered %+v", asg)
	}

	status := mustCtl(t, addr, "status")
	for _, want := range []string{
		`(?m)^Runners \(2, 1 connected\):$`,
		`(?m)^  RUNNER +STATE +CONNECTED +LAST_SEEN +AGENTS +RUNS +VERSION$`,
		`(?m)^  build-1 +ACTIVE +yes +\d+s ago +1 +1 +hand$`,
		`(?m)^  laptop +ACTIVE +no +never +0 +0 +-$`,
		`(?m)^  build-1/a +command +\S+ +` + id + ` `,
	} {
		if !regexp.MustCompile(want).MatchString(status) {
			t.Errorf("ctl status lacks %s:\n%s", want, status)
		}
	}
	var o models.Overview
	if err := json.Unmarshal([]byte(mustCtl(t, addr, "--json", "status")), &o); err != nil {
		t.Fatal(err)
	}
	if len(o.Runners) != 2 || o.Runners[0].Name != "build-1" || !o.Runners[0].Connected || o.Runners[0].RunsInProgress != 1 ||
		o.Runners[1].Name != "laptop" || o.Runners[1].Connected {
		t.Errorf("ctl --json status runners: %+v", o.Runners)
	}
	if show := mustCtl(t, addr, "runner", "show", "build-1"); !strings.Contains(show, "Runs:       1 in progress") {
		t.Errorf("ctl runner show lacks its runs:\n%s", show)
	}

	page := get(t, "http://"+addr+"/ui/overview")
	for _, want := range []string{`<h2 id="h-runners">Runners</h2>`,
		"<td>build-1</td>\n<td>ACTIVE</td>\n<td>yes</td>\n",
		"<td>laptop</td>\n<td>ACTIVE</td>\n<td><strong>no</strong></td>\n<td><span class=\"muted\">never</span></td>",
		`<td class="num" title="build-1/a">1</td>` + "\n" + `<td class="num">1</td>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the overview lacks %q:\n%s", want, page)
		}
	}

	mfs := parseMetrics(t, get(t, "http://"+addr+"/metrics"))
	if got := samples(mfs, "agentqueued_runners", "connected"); got["true"] != 1 || got["false"] != 1 {
		t.Errorf("agentqueued_runners by connection: %v, want 1 connected and 1 not", got)
	}
	if got := samples(mfs, "agentqueued_runner_runs", "runner"); got["build-1"] != 1 || got["laptop"] != 0 {
		t.Errorf("agentqueued_runner_runs: %v, want build-1's one run", got)
	}
	seen := samples(mfs, "agentqueued_runner_last_seen_seconds", "runner")
	if s, ok := seen["build-1"]; !ok || s < 0 || len(seen) != 1 {
		t.Errorf("agentqueued_runner_last_seen_seconds: %v, want build-1's alone", seen)
	}
}

// get fetches url and returns its body, failing the test unless it
// answers 200.
func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v\n%s", url, resp.StatusCode, err, body)
	}
	return string(body)
}
