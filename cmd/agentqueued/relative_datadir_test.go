package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentqueued/agentqueued/internal/progresstest"
)

// TestRelativeDataDirRunsATask: a daemon started with a relative
// --data-dir (from its working directory) gives its agents absolute
// paths (AQ_SOCKET, the prompt file, the checkout), so a command agent
// (the README's) reports and its task completes, where it used to end
// BLOCKED.
func TestRelativeDataDirRunsATask(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary: skipped with -short")
	}
	t.Parallel()
	script := hereDocument(t, firstDaySection(t), firstDayScript)
	bin := agentqueuedBinary(t)
	watch := progresstest.New(t, "a task under a relative data directory")
	home := t.TempDir()
	repo := filepath.Join(home, "src", "mine")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, repo, "init", "-q", "-b", "main")
	writeFile(t, repo, "README.md", "mine\n")
	gitCmd(t, repo, "add", "README.md")
	gitCmd(t, repo, "commit", "-q", "-m", "mine")
	agent := writeFile(t, home, "notes-agent", script)
	if err := os.Chmod(agent, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, home, "config.yaml", "projects:\n  - id: mine\n    repo: {path: "+repo+"}\n"+
		"agents:\n  - name: notes\n    type: command\n    command: "+agent+"\n")
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}

	daemon := exec.Command(bin, "run", "--config", cfg, "--data-dir", "data", "--listen", "127.0.0.1:0")
	daemon.Dir, daemon.Env = home, env
	daemonLog := &lockedBuffer{addr: make(chan string, 1), assigned: make(chan struct{})}
	daemon.Stdout, daemon.Stderr = io.Discard, io.MultiWriter(daemonLog, &progressWriter{watch: watch})
	daemon.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stopped := startProcess(t, daemon)
	var addr string
	select {
	case addr = <-daemonLog.addr:
	case err := <-stopped:
		t.Fatalf("the daemon stopped before it listened: %v\n%s", err, daemonLog)
	case <-watch.Done():
		t.Fatalf("the daemon did not listen: %v\n%s", watch.Err(), daemonLog)
	}
	if want := "data_dir=" + filepath.Join(home, "data"); !strings.Contains(daemonLog.String(), want) {
		t.Errorf("the daemon's log lacks %q:\n%s", want, daemonLog)
	}
	ctl := func(args ...string) *exec.Cmd {
		cmd := exec.Command(bin, append([]string{"ctl"}, args...)...)
		cmd.Dir, cmd.Env = home, append(env, "AGENTQUEUED_ADDR=http://"+addr)
		return cmd
	}

	watchOut := &lockedBuffer{addr: make(chan string, 1), assigned: make(chan struct{})}
	completed, blocked := watchOut.await("mine: completed 1"), watchOut.await("blocked 1")
	watcher := ctl("watch", "--project", "mine")
	watcher.Stdout = io.MultiWriter(watchOut, &progressWriter{watch: watch})
	watcherDone := startProcess(t, watcher)
	out, err := ctl("task", "add", "--project", "mine", "--title", "Write down the day").CombinedOutput()
	if err != nil {
		t.Fatalf("task add: %v\n%s", err, out)
	}
	select {
	case <-completed:
	case <-blocked:
		t.Fatalf("the task is BLOCKED:\n%s\ndaemon:\n%s", watchOut, daemonLog)
	case err := <-watcherDone:
		t.Fatalf("watch ended: %v\n%s", err, watchOut)
	case <-watch.Done():
		t.Fatalf("the task did not complete: %v\nwatch:\n%s\ndaemon:\n%s", watch.Err(), watchOut, daemonLog)
	}
	if err := watcher.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	<-watcherDone
	if _, err := os.Stat(filepath.Join(home, "data", "agentqueued.db")); err != nil {
		t.Errorf("the database is not in the relative data directory: %v", err)
	}
	if err := daemon.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-stopped; err != nil {
		t.Errorf("the daemon after SIGTERM: %v\n%s", err, daemonLog)
	}
}
