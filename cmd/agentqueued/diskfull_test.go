package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
)

// TestAFullDiskKeepsTheDaemonUp runs the real binary with its data
// directory on a small tmpfs of its own (a private mount namespace, made
// with unshare), fills that file system and frees it again. A full disk
// outlasting the lease's ttl made the daemon exit and stay down, and
// clients got a bare 500. Now writes fail whole with "disk full" (503),
// reads and /healthz go on (unhealthy, saying why), the daemon stays up
// for many ttls, and it takes writes again by itself once space is freed.
func TestAFullDiskKeepsTheDaemonUp(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the binary on a file system it fills")
	}
	if out, err := exec.Command("unshare", "-m", "true").CombinedOutput(); err != nil {
		msg := fmt.Sprintf("a private mount namespace is needed (unshare -m, as root): %v %s", err, out)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	bin := agentqueuedBinary(t)
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, dir, "agentqueued.yaml", "log:\n  level: debug\nlease:\n  ttl: 1s\n")
	// unshare and sh exec what follows: the daemon keeps the pid.
	const mount = `set -e; mount -t tmpfs -o size=16m,mode=0700 tmpfs "$1"; shift; exec "$@"`
	watch := progresstest.New(t, "the start")
	d := &crashDaemon{exited: make(chan struct{}), log: &lockedBuffer{addr: make(chan string, 1), assigned: make(chan struct{})}}
	d.cmd = exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", mount, "sh", mnt,
		bin, "run", "--config", cfg, "--data-dir", filepath.Join(mnt, "data"), "--listen", "127.0.0.1:0")
	d.cmd.Stdout, d.cmd.Stderr = io.Discard, d.log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.err = d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		select {
		case <-d.exited:
		default:
			syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // clean-up after a failure
			<-d.exited
		}
	})
	select {
	case d.addr = <-d.log.addr:
	case <-d.exited:
		t.Fatalf("the daemon exited: %v\n%s", d.err, d.log.String())
	case <-watch.Done():
		t.Fatalf("the daemon did not listen: %v\n%s", watch.Err(), d.log.String())
	}
	ctx := watch.Context()
	c, err := api.NewClient("http://"+d.addr, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateProject(ctx, models.ProjectSpec{ID: "web"}.Project()); err != nil {
		t.Fatal(err)
	}
	batch := models.TaskBatch{ProjectID: "web"}
	for i := range 3000 {
		batch.Tasks = append(batch.Tasks, models.BatchTask{Title: fmt.Sprintf("task %d of a batch big enough to need new space on the disk", i)})
	}

	// Fill the daemon's file system, seen through its own root.
	filler := fmt.Sprintf("/proc/%d/root%s/filler", d.cmd.Process.Pid, mnt)
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	f.Close()
	watch.Progress("the disk filled")
	renewals := strings.Count(d.log.String(), "lease")

	_, err = c.CreateTasks(ctx, batch)
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("a batch on a full disk: %v", err)
	}
	if _, err := c.Health(ctx); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("/healthz on a full disk: %v", err)
	}
	if tasks, err := c.ListTasks(ctx, models.TaskFilter{ProjectID: "web"}); err != nil || len(tasks) != 0 {
		t.Fatalf("reads on a full disk: %d tasks (a half-written batch?), %v", len(tasks), err)
	}
	// The daemon stays up across many renewals (three a ttl) of a full disk.
	for strings.Count(d.log.String(), "lease")-renewals < 12 {
		select {
		case <-d.exited:
			t.Fatalf("the daemon exited on a full disk: %v\n%s", d.err, d.log.String())
		case <-watch.Done():
			t.Fatalf("no lease renewals: %v\n%s", watch.Err(), d.log.String())
		case <-time.After(50 * time.Millisecond): // polling the daemon's log
		}
	}

	// Space returns: writes go on by themselves.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	watch.Progress("the disk freed")
	if _, err := c.CreateTasks(ctx, batch); err != nil {
		t.Fatalf("the batch once space returned: %v", err)
	}
	if _, err := c.Health(ctx); err != nil {
		t.Fatalf("/healthz once space returned: %v", err)
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.exited:
		if d.err != nil {
			t.Fatalf("the daemon's shutdown: %v\n%s", d.err, d.log.String())
		}
	case <-watch.Done():
		t.Fatalf("the daemon did not stop: %v", watch.Err())
	}
	if !strings.Contains(d.log.String(), "DISK FULL") {
		t.Errorf("the full disk was not logged:\n%s", d.log.String())
	}
}
