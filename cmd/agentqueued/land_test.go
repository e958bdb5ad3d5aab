package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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

// noLandWatch is a configuration under which the daemon does not land a
// waiting landing by itself during a test: its tree is checked once an
// hour, so that `land` is what lands it.
const noLandWatch = `
verification:
  land_poll_interval: 1h
`

// linked is a running daemon with a LINK project web on the user's
// repository, whose main is checked out with an uncommitted change of
// README; its agent commits landed.txt on the task's branch.
type linked struct {
	t       *testing.T
	d       *daemon
	addr    string
	user    string
	c       *api.Client
	changed chan struct{}
	head    string
}

// startLinked starts the daemon with config (agents are added to it) and
// creates the project web linked to the user's repository.
func startLinked(t *testing.T, config string) *linked {
	t.Helper()
	bin := agentqueuedBinary(t)
	dir := t.TempDir()
	l := &linked{t: t, user: filepath.Join(dir, "mine"), changed: make(chan struct{}, 1)}
	if err := os.MkdirAll(l.user, 0o755); err != nil {
		t.Fatal(err)
	}
	l.git("init", "-q", "-b", "main")
	writeFile(t, l.user, "README", "mine\n")
	l.git("add", "README")
	l.git("commit", "-q", "-m", "mine")
	writeFile(t, l.user, "README", "mine, edited\n") // uncommitted
	l.head = l.git("rev-parse", "main")

	script := writeFile(t, dir, "agent.sh", landAgentScript)
	cfg := writeFile(t, dir, "config.yaml", config+`
agents:
  - name: worker
    type: command
    command: /bin/sh
    args: ["`+script+`"]
    env: {WORKER_BIN: "`+bin+`"}
`)
	d, err := startMainWith(t, func(m *Main) {
		m.OnChange = func() {
			select {
			case l.changed <- struct{}{}:
			default:
			}
		}
	}, "run", "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	l.d, l.addr = d, d.m.Addr()
	if l.c, err = api.NewClient("http://"+l.addr, "", nil); err != nil {
		t.Fatal(err)
	}
	mustCtl(t, l.addr, "project", "create", "web", "--repo-path", l.user)
	return l
}

// git runs git in the user's repository.
func (l *linked) git(args ...string) string {
	l.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", l.user, "-c", "user.name=t", "-c", "user.email=t@localhost",
		"-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		l.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// logged returns a channel closed once the daemon has logged a line
// containing substr.
func (l *linked) logged(substr string) <-chan struct{} {
	ch := make(chan struct{})
	var once sync.Once
	seen := func() { once.Do(func() { close(ch) }) }
	b := l.d.logs
	b.mu.Lock()
	defer b.mu.Unlock()
	prev := b.onWrite
	b.onWrite = func(p []byte) {
		if prev != nil {
			prev(p)
		}
		if bytes.Contains(p, []byte(substr)) {
			seen()
		}
	}
	if strings.Contains(b.buf.String(), substr) {
		seen()
	}
	return ch
}

// waitTask waits, on the daemon's progress, until cond holds for the task.
func (l *linked) waitTask(id, what string, cond func(models.Task) bool) models.Task {
	l.t.Helper()
	ctx := l.d.watch.Context()
	for {
		td, err := l.c.GetTask(ctx, id)
		if err != nil {
			l.t.Fatal(err)
		}
		if cond(td.Task) {
			return td.Task
		}
		select {
		case <-l.changed:
		case <-ctx.Done():
			l.t.Fatalf("waiting for %s: task %s is %s (%s)\n%s", what, id, td.Task.Status, td.Task.StatusReason, l.d.logs)
		}
	}
}

// waitingTask adds a task to web and waits until its landing waits for
// the user's change of README.
func (l *linked) waitingTask() string {
	l.t.Helper()
	id := taskIDs(l.t, mustCtl(l.t, l.addr, "task", "add", "--project", "web", "--title", "Land it"))[0]
	tk := l.waitTask(id, "the landing to wait", func(tk models.Task) bool { return tk.WaitingCode == models.WaitingLanding })
	if tk.Status != models.StatusVerifying || !strings.Contains(tk.WaitingReason, "local changes (README)") ||
		!strings.Contains(tk.WaitingReason, "agentqueued land web") {
		l.t.Fatalf("the waiting task: %s, %q", tk.Status, tk.WaitingReason)
	}
	return id
}

// TestLandFinishesALandingThatWaitedForLocalChanges runs the whole daemon
// on a LINK project whose repository has main checked out with an
// uncommitted change: the task's landing waits, visibly, without touching
// the user's files; `agentqueued land` says so while the change is there,
// and lands the work in the user's main and files once it is stashed.
func TestLandFinishesALandingThatWaitedForLocalChanges(t *testing.T) {
	t.Parallel()
	l := startLinked(t, noLandWatch)
	if r := runLand(l.addr, "web"); r.code != 0 || r.stdout != "nothing waits to land in project web\n" {
		t.Fatalf("land with nothing waiting: exit %d, %q %s", r.code, r.stdout, r.stderr)
	}
	id := l.waitingTask()
	if show := mustCtl(t, l.addr, "task", "show", id); !strings.Contains(show, "local changes (README)") {
		t.Fatalf("task show does not say why the landing waits:\n%s", show)
	}
	r := runLand(l.addr, "web")
	if r.code == 0 || !strings.Contains(r.stdout, "waiting  "+id) || !strings.Contains(r.stderr, "1 landing(s) still wait") {
		t.Fatalf("land with the change still there: exit %d, %q %s", r.code, r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(l.user, "README")); string(b) != "mine, edited\n" || l.git("rev-parse", "main") != l.head {
		t.Fatal("the user's change or main was touched")
	}

	l.git("stash", "-q")
	r = runLand(l.addr, "web")
	if r.code != 0 || !strings.Contains(r.stdout, "landed   "+id+" (COMPLETED)") || !strings.Contains(r.stdout, "merged into main") {
		t.Fatalf("land after the stash: exit %d, %q %s", r.code, r.stdout, r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(l.user, "landed.txt")); err != nil || string(b) != "landed by "+id+"\n" {
		t.Fatalf("landed.txt in the user's tree: %q %v", b, err)
	}
	if st := l.git("status", "--porcelain"); st != "" {
		t.Fatalf("the user's tree is not at main:\n%s", st)
	}
	if r := runLand(l.addr, "nope"); r.code == 0 || !strings.Contains(r.stderr, "not found") {
		t.Fatalf("land of an unknown project: exit %d, %s", r.code, r.stderr)
	}
}

// TestLandFailsWhenTheMergeNowConflicts: while a landing waits for the
// user's local change, the user commits it together with a landed.txt of
// their own, which the task's branch also writes. `agentqueued land`
// merges again, the merge conflicts: it exits 1, names the task, the file
// and what comes next, and nothing of the user's is touched; the task
// failed its verification (VERIFY_FAILED) with the file for its next
// attempt.
func TestLandFailsWhenTheMergeNowConflicts(t *testing.T) {
	t.Parallel()
	l := startLinked(t, noLandWatch)
	id := l.waitingTask()
	writeFile(t, l.user, "landed.txt", "the user's own\n")
	l.git("add", "-A")
	l.git("commit", "-q", "-m", "my README and landed.txt")
	head := l.git("rev-parse", "main")

	r := runLand(l.addr, "web")
	want := "conflict " + id + " (FAILED): main moved: landed.txt conflict; the task runs again with the conflict to resolve\n"
	if r.code != 1 || r.stdout != want || !strings.Contains(r.stderr, "1 landing(s) failed") ||
		!strings.Contains(r.stderr, "agentqueued ctl task show "+id) {
		t.Fatalf("land with a conflicting merge: exit %d, %q %s", r.code, r.stdout, r.stderr)
	}
	if l.git("rev-parse", "main") != head || l.git("status", "--porcelain") != "" {
		t.Fatal("the user's main or tree changed")
	}
	if b, _ := os.ReadFile(filepath.Join(l.user, "landed.txt")); string(b) != "the user's own\n" {
		t.Fatalf("landed.txt is %q", b)
	}
	ev := mustCtl(t, l.addr, "task", "show", id)
	if !strings.Contains(ev, "VERIFY_FAILED") || !strings.Contains(ev, "conflicts in landed.txt") {
		t.Fatalf("the task does not show the failed verification:\n%s", ev)
	}
	r = runLand(l.addr, "web", "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"failed": []`) {
		t.Fatalf("land with nothing waiting, in JSON: exit %d, %q %s", r.code, r.stdout, r.stderr)
	}
}

// TestWaitingLandingLandsByItselfOnceTheTreeIsClean runs the whole daemon
// with its default configuration: a landing waits for the user's
// uncommitted change of README, and once the user stashes it the daemon
// lands the work by itself, without `land`: the task completes, main
// advanced in place with the files, and the stash is intact.
func TestWaitingLandingLandsByItselfOnceTheTreeIsClean(t *testing.T) {
	t.Parallel()
	l := startLinked(t, "")
	id := l.waitingTask()
	if l.git("rev-parse", "main") != l.head {
		t.Fatal("the user's main moved while it had local changes")
	}
	landed := l.logged("waiting landing landed")
	// Meanwhile the landing waits on the user: ctl status and ctl desk
	// list it, with the command that lands it.
	for _, cmd := range [][]string{{"status"}, {"desk"}} {
		if out := mustCtl(t, l.addr, cmd...); !strings.Contains(out, id) || !strings.Contains(out, "landing") ||
			!strings.Contains(out, "agentqueued land web") {
			t.Fatalf("ctl %s does not list the waiting landing:\n%s", cmd[0], out)
		}
	}
	l.git("stash", "-q")
	stashed := time.Now()
	tk := l.waitTask(id, "the landing to land by itself", func(tk models.Task) bool { return tk.Status == models.StatusCompleted })
	// The daemon checks every 2s (verification.land_poll_interval): the
	// time is reported, not asserted (the wait is bounded by progress).
	t.Logf("landed %s after the stash", time.Since(stashed).Round(time.Millisecond))
	if tk.WaitingCode != "" || !strings.Contains(tk.StatusReason, "merged into main") {
		t.Fatalf("the landed task: %q %q", tk.WaitingCode, tk.StatusReason)
	}
	if b, err := os.ReadFile(filepath.Join(l.user, "landed.txt")); err != nil || string(b) != "landed by "+id+"\n" {
		t.Fatalf("landed.txt in the user's tree: %q %v", b, err)
	}
	if st := l.git("status", "--porcelain", "--untracked-files=no"); st != "" {
		t.Fatalf("the user's tree is not at main:\n%s", st)
	}
	l.git("stash", "pop", "-q")
	if b, _ := os.ReadFile(filepath.Join(l.user, "README")); string(b) != "mine, edited\n" {
		t.Fatalf("the user's change after stash pop: %q", b)
	}
	select {
	case <-landed:
	case <-l.d.watch.Done():
		t.Fatalf("the daemon did not log what it landed:\n%s", l.d.logs)
	}
}
