package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// approvalAgentScript keeps its prompt, commits one file on its task's
// branch and completes. Each attempt writes its own line, so a second
// attempt has a change to commit too.
const approvalAgentScript = `#!/bin/sh
set -eu
cat > "$PROMPT_DIR/prompt-$AQ_ATTEMPT"
echo "attempt $AQ_ATTEMPT of $AQ_TASK_ID" > gated.txt
git add gated.txt
git -c user.name=agent -c user.email=agent@localhost -c commit.gpgsign=false commit -q -m "Gated work"
"$WORKER_BIN" agent complete --summary "wrote gated.txt"
`

// TestApprovalWithoutGitHubThroughCtlAndTheAPI runs the whole daemon
// without GitHub: a task that requires approval in a project whose
// pr_mode is never waits in AWAITING_APPROVAL, its diff is shown by ctl
// and the API from the real repository, ctl's rejection sends it back to
// the agent with the feedback, and ctl's approval merges it. Creating
// such a task in a project without a repository is refused with the
// reason.
func TestApprovalWithoutGitHubThroughCtlAndTheAPI(t *testing.T) {
	t.Parallel()
	bin := agentqueuedBinary(t)
	dir := t.TempDir()
	origin := filepath.Join(dir, "origin.git")
	bareOrigin(t, origin)
	script := writeFile(t, dir, "agent.sh", approvalAgentScript)
	cfg := writeFile(t, dir, "config.yaml", `
agents:
  - name: worker
    type: command
    command: /bin/sh
    args: ["`+script+`"]
    env: {WORKER_BIN: "`+bin+`", PROMPT_DIR: "`+dir+`"}
`)
	changed := make(chan struct{}, 1)
	d, err := startMainWith(t, func(m *Main) {
		m.OnChange = func() {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}, "run", "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := d.watch.Context()
	addr := d.m.Addr()
	c, err := api.NewClient("http://"+addr, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateProject(ctx, models.ProjectSpec{ID: "web", Settings: models.ProjectSettings{PRMode: models.PRNever},
		Repo: &models.RepoConfig{SourceType: models.RepoClone, URL: origin}}.Project()); err != nil {
		t.Fatal(err)
	}
	mustCtl(t, addr, "project", "create", "notes")
	if r := runCtl(t, addr, nil, "task", "add", "--project", "notes", "--title", "Gated", "--requires-approval"); r.code == 0 ||
		!strings.Contains(r.stderr, `requires_approval: project "notes" has no repository`) {
		t.Fatalf("a task requiring approval in a project without a repository: exit %d, %s", r.code, r.stderr)
	}
	id := taskIDs(t, mustCtl(t, addr, "task", "add", "--project", "web", "--title", "Gated", "--requires-approval"))[0]
	// waitTask waits for the task to satisfy ok, looking after every
	// committed change.
	waitTask := func(what string, ok func(models.TaskDetail) bool) models.TaskDetail {
		t.Helper()
		for {
			td, err := c.GetTask(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if ok(td) {
				return td
			}
			select {
			case <-changed:
			case <-ctx.Done():
				t.Fatalf("waiting for %s: task %s is %s (%s)\n%s", what, id, td.Task.Status, td.Task.StatusReason, d.logs)
			}
		}
	}
	attempt := func(n int) func(models.TaskDetail) bool {
		return func(td models.TaskDetail) bool {
			runs := 0
			for _, e := range td.Events {
				if e.Event == models.EventAgentStarted {
					runs++
				}
			}
			return td.Task.Status == models.StatusAwaitingApproval && runs == n
		}
	}
	onMain := func() string {
		out, err := exec.Command("git", "--git-dir", origin, "show", "main:gated.txt").CombinedOutput()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	waitTask("the first attempt to await approval", attempt(1))
	if got := onMain(); got != "" {
		t.Fatalf("work awaiting approval is on main: %q", got)
	}
	diff := mustCtl(t, addr, "task", "diff", id)
	if !strings.Contains(diff, "+++ b/gated.txt") || !strings.Contains(diff, "+attempt 1 of "+id) {
		t.Fatalf("ctl task diff:\n%s", diff)
	}
	if got, err := c.TaskDiff(ctx, id); err != nil || got != diff {
		t.Fatalf("the API's diff: %q, %v; ctl printed:\n%s", got, err, diff)
	}
	if r := runCtl(t, addr, nil, "task", "diff", "no-such-task"); r.code == 0 || !strings.Contains(r.stderr, "not found") {
		t.Fatalf("diff of a task that does not exist: exit %d, %s", r.code, r.stderr)
	}

	mustCtl(t, addr, "task", "reject", id, "--feedback", "say which attempt", "--actor", "ana")
	waitTask("the second attempt to await approval", attempt(2))
	if got := onMain(); got != "" {
		t.Fatalf("rejected work is on main: %q", got)
	}
	if second := mustCtl(t, addr, "task", "diff", id); !strings.Contains(second, "+attempt 2 of "+id) {
		t.Fatalf("diff of the second attempt:\n%s", second)
	}
	if prompt, err := os.ReadFile(filepath.Join(dir, "prompt-2")); err != nil || !strings.Contains(string(prompt), "ana: say which attempt") {
		t.Fatalf("the second attempt's prompt lacks the feedback (%v):\n%s", err, prompt)
	}

	out := mustCtl(t, addr, "task", "approve", id, "--actor", "ana", "--feedback", "good")
	if !strings.Contains(out, "COMPLETED") {
		t.Fatalf("ctl task approve:\n%s", out)
	}
	if got := onMain(); got != "attempt 2 of "+id {
		t.Fatalf("main gated.txt after the approval = %q", got)
	}
	td := waitTask("the completion", func(td models.TaskDetail) bool { return td.Task.Status == models.StatusCompleted })
	var rejected bool
	for _, e := range td.Events {
		rejected = rejected || e.Event == models.EventAdminRestart && e.Actor == "ana" && strings.Contains(e.Reason, "say which attempt")
	}
	if !rejected {
		t.Fatalf("no rejection with the feedback in the audit log: %+v", td.Events)
	}
	// Landed, its branch deleted: the diff is what its merge brought to main.
	landed := mustCtl(t, addr, "task", "diff", id)
	if !strings.Contains(landed, "+++ b/gated.txt") || !strings.Contains(landed, "+attempt 2 of "+id) {
		t.Fatalf("ctl task diff of the landed task:\n%s", landed)
	}
}
