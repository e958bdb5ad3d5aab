package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/agentqueued/agentqueued/internal/progresstest"
)

// The commands of the README's "Your first real task", as the README
// writes them: the test checks that the README has each one and runs it
// (~ is the user's home, <task-id> the id task add printed). The install
// (go install from the clone, Go's bin directory on PATH) is done the way
// the README's lines do it: the binary built with go build, on the PATH
// of the user's commands.
const (
	firstDayInstall = `go install ./cmd/agentqueued`
	firstDayPath    = `export PATH="$(go env GOPATH)/bin:$PATH"`
	firstDayInit    = `agentqueued init`
	firstDayDoctor  = `agentqueued doctor --config ~/.config/agentqueued/config.yaml`
	firstDayRun     = `agentqueued run --config ~/.config/agentqueued/config.yaml`
	firstDayAgent   = `agentqueued ctl agent add notes --type command --command ~/bin/notes-agent`
	firstDayAdd     = `agentqueued ctl task add --project mine --title "Write down the first day"`
	firstDayWatch   = `agentqueued ctl watch --project mine`
	firstDayLogs    = `agentqueued ctl task logs <task-id> -f`
	firstDayShow    = `agentqueued ctl task show <task-id>`
	// firstDayScript starts the here-document that writes the command
	// agent; the test takes the script from the README.
	firstDayScript = `cat > ~/bin/notes-agent <<'EOF'`
)

// firstDaySection returns the README's "Your first real task" section.
func firstDaySection(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Your first real task\n")
	if !ok {
		t.Fatal(`README.md has no section "## Your first real task"`)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	return section
}

// hereDocument returns the lines of section after the line start up to
// the line EOF.
func hereDocument(t *testing.T, section, start string) string {
	t.Helper()
	_, rest, ok := strings.Cut(section, start+"\n")
	if !ok {
		t.Fatalf("the README's first task has no line %q", start)
	}
	body, _, ok := strings.Cut(rest, "\nEOF\n")
	if !ok {
		t.Fatalf("the README's here-document %q has no EOF line", start)
	}
	return body + "\n"
}

// shellWords splits a README command line into arguments: words apart
// by spaces, "..." one word, ~/ the home directory, <task-id> the task.
func shellWords(line, home, taskID string) []string {
	var words []string
	for _, m := range regexp.MustCompile(`"[^"]*"|\S+`).FindAllString(line, -1) {
		m = strings.Trim(m, `"`)
		if strings.HasPrefix(m, "~/") {
			m = home + m[1:]
		}
		words = append(words, strings.ReplaceAll(m, "<task-id>", taskID))
	}
	return words
}

// firstDayUser is a new user's machine: a home, a PATH with agentqueued
// (where `go install` puts it), git and sh and no agent CLI, and their
// repository with main checked out.
type firstDayUser struct {
	bin, home, repo string
	path            string
	watch           *progresstest.Watchdog
}

// env is the user's environment plus extra.
func (u *firstDayUser) env(extra ...string) []string {
	return append([]string{"HOME=" + u.home, "PATH=" + u.path}, extra...)
}

// command returns the README's line as a command of the user's, run in
// dir with env, its output reported as progress.
func (u *firstDayUser) command(line, taskID, dir string, env []string) (*exec.Cmd, *progressWriter, *progressWriter) {
	words := shellWords(line, u.home, taskID)
	if words[0] != "agentqueued" {
		panic("not an agentqueued command: " + line)
	}
	cmd := exec.Command(u.bin, words[1:]...)
	cmd.Dir, cmd.Env = dir, env
	stdout, stderr := &progressWriter{watch: u.watch}, &progressWriter{watch: u.watch}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	return cmd, stdout, stderr
}

// run runs the README's line to its end and returns its standard output;
// it fails the test unless the command exits 0.
func (u *firstDayUser) run(t *testing.T, line, taskID, dir, stdin string, env []string) string {
	t.Helper()
	cmd, stdout, stderr := u.command(line, taskID, dir, env)
	cmd.Stdin = strings.NewReader(stdin)
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v\n%s%s", line, err, stdout, stderr)
		}
	case <-u.watch.Done():
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s: %v\n%s%s", line, u.watch.Err(), stdout, stderr)
	}
	return stdout.String()
}

// TestFirstDayOnYourOwnRepository walks the README's "Your first real
// task" with the built binary, as a new user would, on a real Go
// repository (a go.mod and a test) that has its default branch checked
// out: init in the repository finds the test command and writes the
// configuration, doctor checks it, the daemon starts from it, a command
// agent (the README's script) is registered, a task is added, watched and
// followed, verified by the detected `go test ./...` on the merged work,
// and its work lands in the user's main and files: the checked-out branch
// advances in place and the working tree stays clean; doctor then vouches
// for the running daemon, which SIGTERM stops. The only departures from
// the README: the daemon listens on a free port (--listen 127.0.0.1:0)
// that ctl finds in $AGENTQUEUED_ADDR, doctor's first look for a running
// daemon is pointed at a closed port, and the user's Go build cache is
// the machine's (a Go user's is warm).
func TestFirstDayOnYourOwnRepository(t *testing.T) {
	if testing.Short() {
		t.Skip("the first day's walk builds and runs the binary: skipped with -short")
	}
	t.Parallel()
	section := firstDaySection(t)
	for _, line := range []string{firstDayInstall, firstDayPath, firstDayInit, firstDayDoctor, firstDayRun, firstDayAgent, firstDayAdd, firstDayWatch,
		firstDayLogs, firstDayShow, firstDayScript} {
		if !strings.Contains(section, "\n"+line) {
			t.Errorf("the README's first task does not run %q", line)
		}
	}
	script := hereDocument(t, section, firstDayScript)
	if t.Failed() {
		t.FailNow()
	}

	bin := agentqueuedBinary(t)
	u := &firstDayUser{bin: bin, home: t.TempDir(), watch: progresstest.New(t, "the first day's start")}
	u.repo = filepath.Join(u.home, "src", "mine")
	goBin, system := filepath.Join(u.home, "go", "bin"), filepath.Join(u.home, "system")
	for _, dir := range []string{u.repo, goBin, system, filepath.Join(u.home, "bin")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(bin, filepath.Join(goBin, "agentqueued")); err != nil {
		t.Fatal(err)
	}
	for _, prog := range []string{"git", "sh", "go"} {
		p, err := exec.LookPath(prog)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p, filepath.Join(system, prog)); err != nil {
			t.Fatal(err)
		}
	}
	u.path = goBin + ":" + system // no claude, codex, cursor-agent or aider: the no-account path
	if out, err := exec.Command("go", "env", "GOCACHE").Output(); err == nil && strings.TrimSpace(string(out)) != "" {
		if err := os.MkdirAll(filepath.Join(u.home, ".cache"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(strings.TrimSpace(string(out)), filepath.Join(u.home, ".cache", "go-build")); err != nil {
			t.Fatal(err)
		}
	}
	gitCmd(t, u.repo, "init", "-q", "-b", "main")
	writeFile(t, u.repo, "README.md", "mine\n")
	writeFile(t, u.repo, "go.mod", "module example.com/mine\n\ngo 1.22\n")
	writeFile(t, u.repo, "notes_test.go", firstDayGoTest)
	gitCmd(t, u.repo, "add", "README.md", "go.mod", "notes_test.go")
	gitCmd(t, u.repo, "commit", "-q", "-m", "mine")
	before := gitCmd(t, u.repo, "rev-parse", "main")
	cfg := filepath.Join(u.home, ".config", "agentqueued", "config.yaml")

	// init, answering its question.
	out := u.run(t, firstDayInit, "", u.repo, "y\n", u.env())
	for _, want := range []string{"repository: " + u.repo + " (branch main)", "project:    mine (LINK)",
		"your own repository: each agent works in a git worktree of it", "tests:      go test ./... (found go.mod;",
		"agents:     none of claude, codex, cursor-agent, aider on PATH", "\nlisten:     127.0.0.1:", "wrote " + cfg} {
		if !strings.Contains(out, want) {
			t.Errorf("init's output lacks %q:\n%s", want, out)
		}
	}
	if fi, err := os.Stat(cfg); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the configuration init wrote: %v, %v", fi, err)
	}

	// doctor: no error, the repository found.
	out = u.run(t, firstDayDoctor, "", u.home, "", u.env("AGENTQUEUED_ADDR=http://127.0.0.1:1"))
	for _, want := range []string{"ok      config: " + cfg + " loads", "ok      project mine: LINK " + u.repo + " (main)",
		"warning agents: none in the configuration", ", 0 errors\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor's output lacks %q:\n%s", want, out)
		}
	}

	// The daemon, from the written configuration.
	daemon := exec.Command(bin, append(shellWords(firstDayRun, u.home, "")[1:], "--listen", "127.0.0.1:0")...)
	daemon.Dir, daemon.Env = u.home, u.env()
	daemonLog := &lockedBuffer{addr: make(chan string, 1), assigned: make(chan struct{})}
	daemon.Stdout, daemon.Stderr = io.Discard, io.MultiWriter(daemonLog, &progressWriter{watch: u.watch})
	daemon.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stopped := startProcess(t, daemon)
	var addr string
	select {
	case addr = <-daemonLog.addr:
	case err := <-stopped:
		t.Fatalf("the daemon stopped before it listened: %v\n%s", err, daemonLog)
	case <-u.watch.Done():
		t.Fatalf("the daemon did not listen: %v\n%s", u.watch.Err(), daemonLog)
	}
	ctlEnv := u.env("AGENTQUEUED_ADDR=http://" + addr)

	// The README's command agent.
	writeFile(t, filepath.Join(u.home, "bin"), "notes-agent", script)
	if err := os.Chmod(filepath.Join(u.home, "bin", "notes-agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	u.run(t, firstDayAgent, "", u.home, "", ctlEnv)

	// Watch in a terminal of its own until the task has completed.
	watchOut := &lockedBuffer{addr: make(chan string, 1), assigned: make(chan struct{})}
	completed := watchOut.await("mine: completed 1")
	watcher, _, _ := u.command(firstDayWatch, "", u.home, ctlEnv)
	watcher.Stdout = io.MultiWriter(watchOut, &progressWriter{watch: u.watch})
	watcherDone := startProcess(t, watcher)

	out = u.run(t, firstDayAdd, "", u.home, "", ctlEnv)
	ids := taskIDs(t, out)
	if len(ids) != 1 {
		t.Fatalf("task add:\n%s", out)
	}
	id := ids[0]
	logs := u.run(t, firstDayLogs, id, u.home, "", ctlEnv)
	if !strings.Contains(logs, "[progress] noting: Write down the first day") {
		t.Errorf("task logs -f does not show the run's progress:\n%s", logs)
	}
	select {
	case <-completed:
	case err := <-watcherDone:
		t.Fatalf("watch ended: %v\n%s", err, watchOut)
	case <-u.watch.Done():
		t.Fatalf("the task did not complete: %v\nwatch:\n%s\ndaemon:\n%s", u.watch.Err(), watchOut, daemonLog)
	}
	if err := watcher.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := <-watcherDone; err != nil {
		t.Errorf("watch after ^C: %v", err)
	}

	// It landed: main advanced in place, the file is in the user's tree,
	// nothing else changed.
	show := u.run(t, firstDayShow, id, u.home, "", ctlEnv)
	for _, re := range []string{`(?m)^Status:\s+COMPLETED$`, `(?m)^Branch:\s+aq/` + regexp.QuoteMeta(id) + `-\S+$`,
		`(?m)^Reason:\s+1 test command\(s\) passed; merged into main$`} {
		if !regexp.MustCompile(re).MatchString(show) {
			t.Errorf("task show does not match %s:\n%s", re, show)
		}
	}
	if b, err := os.ReadFile(filepath.Join(u.repo, "NOTES.md")); err != nil || string(b) != "- Write down the first day\n" {
		t.Errorf("NOTES.md in the user's tree: %q, %v", b, err)
	}
	if head := gitCmd(t, u.repo, "symbolic-ref", "HEAD"); head != "refs/heads/main" {
		t.Errorf("HEAD is %s", head)
	}
	if got := gitCmd(t, u.repo, "log", "-1", "--format=%s", "main"); got != "Merge "+id+": Write down the first day" {
		t.Errorf("main's last commit: %q", got)
	}
	if err := exec.Command("git", "-C", u.repo, "merge-base", "--is-ancestor", before, "main").Run(); err != nil {
		t.Errorf("main did not advance from the user's commit: %v", err)
	}
	if st := gitCmd(t, u.repo, "status", "--porcelain"); st != "" {
		t.Errorf("the user's tree is not at main:\n%s", st)
	}
	// The detected test command ran on the merged work, NOTES.md included.
	checks, _ := filepath.Glob(filepath.Join(u.home, ".local", "share", "agentqueued", "runs", id, "*.check-1.log"))
	if len(checks) != 1 {
		t.Fatalf("the check's log: %q", checks)
	}
	if b, err := os.ReadFile(checks[0]); err != nil || !strings.Contains(string(b), "ok  \texample.com/mine") {
		t.Errorf("the check's log does not show go test passing: %q, %v", b, err)
	}

	// doctor vouches for the running daemon: it serves this configuration.
	out = u.run(t, firstDayDoctor, "", u.home, "", ctlEnv)
	if want := "ok      daemon: running at http://" + addr + " (1 projects, 0 hooks)"; !strings.Contains(out, want) {
		t.Errorf("doctor with the daemon running lacks %q:\n%s", want, out)
	}

	// SIGTERM, as a service manager sends, stops the daemon cleanly.
	if err := daemon.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-stopped; err != nil || !strings.Contains(daemonLog.String(), `msg="agentqueued stopped"`) {
		t.Errorf("the daemon after SIGTERM: %v\n%s", err, daemonLog)
	}
}

// firstDayGoTest is the test of the user's Go repository: it checks the
// notes the task's agent writes.
const firstDayGoTest = `package mine

import (
	"os"
	"strings"
	"testing"
)

func TestNotes(t *testing.T) {
	b, err := os.ReadFile("NOTES.md")
	if os.IsNotExist(err) {
		t.Skip("no notes yet")
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if !strings.HasPrefix(line, "- ") {
			t.Errorf("%q is not a list item", line)
		}
	}
}
`

// startProcess starts cmd and returns a channel that gets its Wait's
// error; a process still running when the test ends is killed, with its
// process group when it leads one.
func startProcess(t *testing.T, cmd *exec.Cmd) <-chan error {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done, waited := make(chan error, 1), make(chan struct{})
	go func() {
		err := cmd.Wait()
		close(waited)
		done <- err
	}()
	t.Cleanup(func() {
		select {
		case <-waited:
		default:
			if cmd.SysProcAttr != nil && cmd.SysProcAttr.Setpgid {
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
			cmd.Process.Kill()
			<-waited
		}
	})
	return done
}
