package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// gatedAgentScript prints, reports progress, and waits on a FIFO the test
// writes to once it has seen the run live; then it commits and completes.
const gatedAgentScript = `#!/bin/sh
set -eu
echo "starting $AQ_TASK_ID"
"$WORKER_BIN" agent progress "half way"
echo "waiting for the go"
read word < "$GATE"
echo "got $word"
echo "done" > done.txt
git add done.txt
git -c user.name=agent -c user.email=agent@localhost -c commit.gpgsign=false commit -q -m "Done"
"$WORKER_BIN" agent complete --summary "wrote done.txt"
`

// ctlRun is a ctl command running in the background.
type ctlRun struct {
	out  *syncBuffer
	done chan ctlResult
}

// startCtl runs ctl ARGS in the background; each write to its standard
// output is reported to onWrite.
func startCtl(ctx context.Context, addr string, onWrite func(), args ...string) *ctlRun {
	return startMainArgs(ctx, nil, onWrite, append([]string{"ctl", "--addr", "http://" + addr}, args...)...)
}

// startMainArgs runs the command line args (ctl and its flags first) with
// env in the background; each write to its standard output is reported
// to onWrite.
func startMainArgs(ctx context.Context, env map[string]string, onWrite func(), args ...string) *ctlRun {
	r := &ctlRun{out: &syncBuffer{onWrite: func([]byte) { onWrite() }}, done: make(chan ctlResult, 1)}
	go func() {
		var stderr syncBuffer
		code := NewMain(args, r.out, &stderr, envOf(env)).Exec(ctx)
		r.done <- ctlResult{stdout: r.out.String(), stderr: stderr.String(), code: code}
	}()
	return r
}

// TestCtlShowsARunLive drives the whole daemon with a command agent in a
// repository: `ctl task logs -f` prints the run's output and progress as
// they come and returns when the run ends; while it runs, `ctl status`
// shows what the agent is doing, `ctl task show` the task's branch and
// `ctl watch` the task; afterwards `ctl task result` the summary.
func TestCtlShowsARunLive(t *testing.T) {
	t.Parallel()
	bin := agentqueuedBinary(t)
	dir := t.TempDir()
	origin := filepath.Join(dir, "origin.git")
	bareOrigin(t, origin)
	gate := filepath.Join(dir, "gate")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	script := writeFile(t, dir, "agent.sh", gatedAgentScript)
	cfg := writeFile(t, dir, "config.yaml", `
agents:
  - name: worker
    type: command
    command: /bin/sh
    args: ["`+script+`"]
    env: {WORKER_BIN: "`+bin+`", GATE: "`+gate+`"}
`)
	d, err := startMain(t, nil, "run", "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, addr := d.watch.Context(), d.m.Addr()
	c, err := api.NewClient("http://"+addr, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateProject(ctx, models.ProjectSpec{ID: "web", Repo: &models.RepoConfig{SourceType: models.RepoClone, URL: origin}}.Project()); err != nil {
		t.Fatal(err)
	}
	id := taskIDs(t, mustCtl(t, addr, "task", "add", "--project", "web", "--title", "Write done"))[0]

	wrote := make(chan struct{}, 1)
	onWrite := func() {
		d.watch.Progress("ctl printed")
		select {
		case wrote <- struct{}{}:
		default:
		}
	}
	follow := startCtl(ctx, addr, onWrite, "task", "logs", id, "-f")
	waitOutput := func(r *ctlRun, what string, ok func(string) bool) {
		t.Helper()
		for !ok(r.out.String()) {
			select {
			case <-wrote:
			case res := <-r.done:
				r.done <- res
				if !ok(res.stdout) {
					t.Fatalf("ctl ended (exit %d) before %s:\n%s\nstderr: %s", res.code, what, res.stdout, res.stderr)
				}
				return
			case <-ctx.Done():
				t.Fatalf("waiting for %s: %v; output:\n%s\n%s", what, ctx.Err(), r.out.String(), d.logs)
			}
		}
	}
	waitOutput(follow, "the run's output and progress", func(s string) bool {
		return strings.Contains(s, "starting "+id+"\n[progress] half way\nwaiting for the go\n")
	})
	select {
	case res := <-follow.done:
		t.Fatalf("ctl task logs -f ended while the run goes on: %+v", res)
	default:
	}

	status := mustCtl(t, addr, "status")
	if !strings.Contains(status, id+"  IN_PROGRESS: Write done") || !strings.Contains(status, "web      ACTIVE") {
		t.Errorf("ctl status while the task runs:\n%s", status)
	}
	show := mustCtl(t, addr, "task", "show", id)
	if !strings.Contains(strings.Join(strings.Fields(show), " "), "Branch: aq/"+id+"-write-done PR:") {
		t.Errorf("ctl task show names no branch:\n%s", show)
	}
	list := mustCtl(t, addr, "task", "list", "--project", "web")
	if !strings.Contains(list, "AGENT") || !strings.Contains(list, "worker") || !strings.Contains(list, "REASON") {
		t.Errorf("ctl task list:\n%s", list)
	}
	// The second view comes from a change, not from the interval.
	watch := startCtl(ctx, addr, onWrite, "watch", "--project", "web", "--count", "2", "--interval", "5m")
	waitOutput(watch, "a view of ctl watch", func(s string) bool { return strings.Contains(s, "Unfinished tasks (1):") })
	if out := watch.out.String(); !strings.Contains(out, id) || !strings.Contains(out, "IN_PROGRESS") {
		t.Errorf("ctl watch's first view:\n%s", out)
	}

	f, err := os.OpenFile(gate, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "go")
	f.Close()
	var res ctlResult
	select {
	case res = <-follow.done:
	case <-ctx.Done():
		t.Fatalf("ctl task logs -f did not end with the run: %v\n%s\n%s", ctx.Err(), follow.out.String(), d.logs)
	}
	if res.code != 0 || !strings.HasSuffix(res.stdout, "waiting for the go\ngot go\n") {
		t.Fatalf("ctl task logs -f: exit %d\n%s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	select {
	case res := <-watch.done:
		if res.code != 0 || strings.Count(res.stdout, "agentqueued watch: project web") != 2 {
			t.Errorf("ctl watch --count 2: exit %d\n%s\nstderr: %s", res.code, res.stdout, res.stderr)
		}
	case <-ctx.Done():
		t.Fatalf("ctl watch showed no second view after a change: %v\n%s", ctx.Err(), watch.out.String())
	}
	if all := mustCtl(t, addr, "task", "logs", id); all != res.stdout {
		t.Errorf("ctl task logs after the run:\n%s\nwant what -f printed:\n%s", all, res.stdout)
	}
	for {
		seen, err := c.Changes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		td, err := c.GetTask(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if td.Task.Status == models.StatusCompleted {
			break
		}
		if td.Task.Status == models.StatusBlocked {
			t.Fatalf("task blocked: %s", td.Task.StatusReason)
		}
		if _, err := c.WaitForChange(ctx, seen.Seq, 0); err != nil {
			t.Fatal(err)
		}
	}
	if out := mustCtl(t, addr, "task", "result", id); !strings.Contains(out, "wrote done.txt") {
		t.Errorf("ctl task result:\n%s", out)
	}
}
