package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// landAgentScript commits one file on its task's branch and completes.
const landAgentScript = `#!/bin/sh
set -eu
echo "landed by $AQ_TASK_ID" > landed.txt
git add landed.txt
git -c user.name=agent -c user.email=agent@localhost -c commit.gpgsign=false commit -q -m "Landed work"
"$WORKER_BIN" agent complete --summary "wrote landed.txt"
`

// runLand runs "agentqueued land ARGS... --addr http://ADDR".
func runLand(addr string, args ...string) ctlResult {
	var stdout, stderr bytes.Buffer
	full := append(append([]string{"land"}, args...), "--addr", "http://"+addr)
	code := NewMain(full, &stdout, &stderr, envOf(nil)).Exec(context.Background())
	return ctlResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// TestLandFinishesALandingThatWaitedForLocalChanges runs the whole daemon
// on a LINK project whose repository has main checked out with an
// uncommitted change: the task's landing waits, visibly, without touching
// the user's files; `agentqueued land` says so while the change is there,
// and lands the work in the user's main and files once it is stashed.
func TestLandFinishesALandingThatWaitedForLocalChanges(t *testing.T) {
	t.Parallel()
	bin := agentqueuedBinary(t)
	dir := t.TempDir()
	user := filepath.Join(dir, "mine")
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", user, "-c", "user.name=t", "-c", "user.email=t@localhost",
			"-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if err := os.MkdirAll(user, 0o755); err != nil {
		t.Fatal(err)
	}
	git("init", "-q", "-b", "main")
	writeFile(t, user, "README", "mine\n")
	git("add", "README")
	git("commit", "-q", "-m", "mine")
	writeFile(t, user, "README", "mine, edited\n") // uncommitted
	head := git("rev-parse", "main")

	script := writeFile(t, dir, "agent.sh", landAgentScript)
	cfg := writeFile(t, dir, "config.yaml", `
agents:
  - name: worker
    type: command
    command: /bin/sh
    args: ["`+script+`"]
    env: {WORKER_BIN: "`+bin+`"}
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
	mustCtl(t, addr, "project", "create", "web", "--repo-path", user)
	if r := runLand(addr, "web"); r.code != 0 || r.stdout != "nothing waits to land in project web\n" {
		t.Fatalf("land with nothing waiting: exit %d, %q %s", r.code, r.stdout, r.stderr)
	}
	id := taskIDs(t, mustCtl(t, addr, "task", "add", "--project", "web", "--title", "Land it"))[0]
	var td models.TaskDetail
	for {
		if td, err = c.GetTask(ctx, id); err != nil {
			t.Fatal(err)
		}
		if td.Task.WaitingCode == models.WaitingLanding {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("waiting for the landing to wait: task %s is %s (%s)\n%s", id, td.Task.Status, td.Task.StatusReason, d.logs)
		}
	}
	if td.Task.Status != models.StatusVerifying || !strings.Contains(td.Task.WaitingReason, "local changes (README)") ||
		!strings.Contains(td.Task.WaitingReason, "agentqueued land web") {
		t.Fatalf("the waiting task: %s, %q", td.Task.Status, td.Task.WaitingReason)
	}
	if show := mustCtl(t, addr, "task", "show", id); !strings.Contains(show, "local changes (README)") {
		t.Fatalf("task show does not say why the landing waits:\n%s", show)
	}
	r := runLand(addr, "web")
	if r.code == 0 || !strings.Contains(r.stdout, "waiting  "+id) || !strings.Contains(r.stderr, "1 landing(s) still wait") {
		t.Fatalf("land with the change still there: exit %d, %q %s", r.code, r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(user, "README")); string(b) != "mine, edited\n" || git("rev-parse", "main") != head {
		t.Fatal("the user's change or main was touched")
	}

	git("stash", "-q")
	r = runLand(addr, "web")
	if r.code != 0 || !strings.Contains(r.stdout, "landed   "+id+" (COMPLETED)") || !strings.Contains(r.stdout, "merged into main") {
		t.Fatalf("land after the stash: exit %d, %q %s", r.code, r.stdout, r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(user, "landed.txt")); err != nil || string(b) != "landed by "+id+"\n" {
		t.Fatalf("landed.txt in the user's tree: %q %v", b, err)
	}
	if st := git("status", "--porcelain"); st != "" {
		t.Fatalf("the user's tree is not at main:\n%s", st)
	}
	if r := runLand(addr, "nope"); r.code == 0 || !strings.Contains(r.stderr, "not found") {
		t.Fatalf("land of an unknown project: exit %d, %s", r.code, r.stderr)
	}
}
