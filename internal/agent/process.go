package agent

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentqueued/agentqueued/internal/proc"
)

// Defaults of process supervision.
const (
	DefaultStopGrace  = 10 * time.Second
	DefaultStderrTail = 4096
	maxLineBytes      = 4 << 20
	// maxStderrLine bounds a line handed to Spec.OnStderrLine.
	maxStderrLine = 8 << 10
)

// Spec is everything needed to start one run's process.
type Spec struct {
	// Argv is the program and its arguments.
	Argv []string
	// Dir is the working directory: the agent's checkout.
	Dir string
	// Env is the complete environment (see Environment).
	Env []string
	// Stdin is written to the process's standard input, which is then closed.
	Stdin string
	// LogPath receives everything the process prints; its directory is created.
	LogPath string
	// OnLine is called with each line of standard output, in order, from one
	// goroutine. It must not block for long.
	OnLine func(line []byte)
	// OnStderrLine is called with each line of standard error, in order,
	// from one goroutine (not OnLine's), a line cut to maxStderrLine
	// bytes; a last line without its newline comes when the pipe closes.
	// The line is valid only during the call. It must not block for long.
	OnStderrLine func(line []byte)
	// OnActivity is called whenever the process prints anything.
	OnActivity func()
	// StderrTail is how many bytes of stderr to keep; default DefaultStderrTail.
	StderrTail int
	// Hold starts the process held: it exists, in its own process group,
	// with the pid the program of Argv will have, but it executes Argv only
	// once Release is called. Until then it is a minimal gate (GateShell
	// reading one line from a pipe that only this Process can write to);
	// when the pipe closes without that line — Stop, or the death of the
	// process that started it — the gate exits with status GateExit and
	// Argv never runs. The daemon records the pid first, then releases it,
	// so no agent runs that the database does not know about.
	Hold bool
}

// The gate of a held process (Spec.Hold).
const (
	// GateShell runs the gate.
	GateShell = "/bin/sh"
	// GateExit is the exit status of a gate whose pipe closed before
	// Release: the program was never executed.
	GateExit = 111
)

// gateScript reads the go-ahead from fd 3 (at end of file, it exits with
// GateExit), closes it and replaces itself with the program (its path and
// arguments follow as "$@"). dash exports PWD on its own: unset it, so
// that the program's environment is exactly the Spec's.
const gateScript = `read -r go <&3 || exit 111; unset PWD; exec "$@" 3<&-`

// gateScriptPWD is gateScript for an environment that sets PWD itself.
const gateScriptPWD = `read -r go <&3 || exit 111; exec "$@" 3<&-`

// Result is how a process ended.
type Result struct {
	// ExitCode is the exit status, or -1 when a signal ended the process.
	ExitCode int
	// Signal names the signal that ended it, if any.
	Signal string
	// StderrTail is the end of what it wrote to stderr.
	StderrTail string
	// Stopped is true when Stop ended it.
	Stopped bool
}

// Process is a running agent subprocess in its own process group.
type Process struct {
	cmd *exec.Cmd
	// stdout and stderr are the read ends of the output pipes.
	stdout, stderr *os.File
	log            *os.File
	tail           *tailBuffer
	done           chan struct{}
	result         Result
	readers        sync.WaitGroup
	mu             sync.Mutex
	stopped        bool
	// gate is the write end of a held process's gate pipe, nil once
	// released or dropped (guarded by mu).
	gate *os.File
}

// Start starts the process described by spec. The caller must call Wait.
func Start(spec Spec) (*Process, error) {
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return nil, errors.New("start agent process: empty command")
	}
	if spec.LogPath == "" {
		return nil, errors.New("start agent process: no log path")
	}
	if err := os.MkdirAll(filepath.Dir(spec.LogPath), 0o700); err != nil {
		return nil, fmt.Errorf("start agent process: log directory: %w", err)
	}
	logf, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("start agent process: %w", err)
	}
	argv := spec.Argv
	var gateR, gateW *os.File
	if spec.Hold {
		// The program is executed by the gate, so it must be found now, as
		// exec.Command would find it: a missing or non-executable command
		// fails here, before any process exists.
		path, err := lookPath(spec.Argv[0], spec.Dir)
		if err != nil {
			logf.Close()
			return nil, fmt.Errorf("start agent process %s: %w", spec.Argv[0], err)
		}
		script := gateScript
		if envHas(spec.Env, "PWD") {
			script = gateScriptPWD
		}
		argv = append([]string{GateShell, "-c", script, "agentqueued-gate", path}, spec.Argv[1:]...)
		if gateR, gateW, err = os.Pipe(); err != nil {
			logf.Close()
			return nil, fmt.Errorf("start agent process: gate: %w", err)
		}
	}
	// A context that never ends: Stop ends the group, with a grace period.
	cmd := proc.Command(context.Background(), argv[0], argv[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = spec.Env
	if cmd.Env == nil {
		cmd.Env = []string{} // never the daemon's own environment
	}
	// Plain pipes, not exec's copying: the leader's exit is seen even when a
	// child it left behind still holds stdout open.
	var pipes [6]*os.File // stdin r/w, stdout r/w, stderr r/w
	for i := 0; i < len(pipes); i += 2 {
		if pipes[i], pipes[i+1], err = os.Pipe(); err != nil {
			closeAll(pipes[:i]...)
			closeAll(gateR, gateW)
			logf.Close()
			return nil, fmt.Errorf("start agent process: %w", err)
		}
	}
	stdinR, stdinW, stdout, stdoutW, stderr, stderrW := pipes[0], pipes[1], pipes[2], pipes[3], pipes[4], pipes[5]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdoutW, stderrW
	if gateR != nil {
		// fd 3 of the gate. The write end is close-on-exec (os.Pipe): no
		// other child of this process inherits it, so it closes when this
		// process dies.
		cmd.ExtraFiles = []*os.File{gateR}
	}
	err = cmd.Start()
	closeAll(stdinR, stdoutW, stderrW, gateR) // the child has its own copies
	if err != nil {
		closeAll(stdinW, stdout, stderr, gateW)
		logf.Close()
		return nil, fmt.Errorf("start agent process %s: %w", spec.Argv[0], err)
	}
	stdin := stdinW
	size := spec.StderrTail
	if size <= 0 {
		size = DefaultStderrTail
	}
	p := &Process{cmd: cmd, stdout: stdout, stderr: stderr, log: logf, tail: &tailBuffer{max: size}, done: make(chan struct{}),
		gate: gateW}
	activity := spec.OnActivity
	if activity == nil {
		activity = func() {}
	}
	var logMu sync.Mutex
	writeLog := func(b []byte) {
		logMu.Lock()
		logf.Write(b) //nolint:errcheck // a full disk must not stop the agent
		logMu.Unlock()
	}
	p.readers.Add(2)
	go func() {
		defer p.readers.Done()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), maxLineBytes)
		for sc.Scan() {
			line := sc.Bytes()
			writeLog(append(append([]byte{}, line...), '\n'))
			activity()
			if spec.OnLine != nil {
				spec.OnLine(line)
			}
		}
		io.Copy(io.Discard, stdout) //nolint:errcheck // drain after an over-long line
		stdout.Close()
	}()
	go func() {
		defer p.readers.Done()
		buf := make([]byte, 32<<10)
		lines := stderrLines{on: spec.OnStderrLine}
		for {
			n, err := stderr.Read(buf)
			if n > 0 {
				writeLog(buf[:n])
				p.tail.Write(buf[:n])
				lines.write(buf[:n])
				activity()
			}
			if err != nil {
				lines.flush()
				stderr.Close()
				return
			}
		}
	}()
	go func() {
		io.WriteString(stdin, spec.Stdin) //nolint:errcheck // the agent may not read its stdin
		stdin.Close()
	}()
	go p.wait()
	return p, nil
}

func (p *Process) wait() {
	err := p.cmd.Wait()
	p.dropGate()
	// The group may hold children that outlived the leader: end them, which
	// also closes their copies of the output pipes.
	proc.KillGroup(p.cmd.Process.Pid) //nolint:errcheck // usually already gone
	waitGroupGone(p.cmd.Process.Pid, groupGoneTimeout)
	// A child that left the group (setsid) may still hold the pipes open:
	// read what remains for a moment, then stop reading.
	drained := make(chan struct{})
	go func() { p.readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(outputDrain):
		p.stdout.Close()
		p.stderr.Close()
		<-drained
	}
	p.log.Close()
	r := Result{ExitCode: p.cmd.ProcessState.ExitCode(), StderrTail: p.tail.String()}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		r.Signal = ws.Signal().String()
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) && r.StderrTail == "" {
		r.StderrTail = err.Error()
	}
	p.mu.Lock()
	r.Stopped = p.stopped
	p.result = r
	p.mu.Unlock()
	close(p.done)
}

// Release lets a held process (Spec.Hold) execute its program. It does
// nothing for a process that was not held or is already released. An
// error means the gate could not be told (it has ended: stopped or
// killed); the process then never runs its program.
func (p *Process) Release() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gate == nil {
		return nil
	}
	// One write of less than PIPE_BUF bytes: the gate reads the whole line
	// or, if this process dies first, nothing.
	_, err := p.gate.Write([]byte("go\n"))
	p.gate.Close()
	p.gate = nil
	if err != nil {
		return fmt.Errorf("release agent process %d: %w", p.cmd.Process.Pid, err)
	}
	return nil
}

// dropGate closes a held process's gate without releasing it.
func (p *Process) dropGate() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gate != nil {
		p.gate.Close()
		p.gate = nil
	}
}

// lookPath finds the program name as exec.Command does: a name without a
// slash in the daemon's PATH, a path as it is (relative to dir, the
// process's working directory). It returns what the gate executes.
func lookPath(name, dir string) (string, error) {
	if strings.Contains(name, "/") {
		check := name
		if !filepath.IsAbs(check) && dir != "" {
			check = filepath.Join(dir, check)
		}
		if _, err := exec.LookPath(check); err != nil {
			return "", err
		}
		if strings.HasPrefix(name, "-") {
			name = "./" + name // not an option of the gate's exec
		}
		return name, nil
	}
	return exec.LookPath(name)
}

// envHas reports whether env (KEY=value entries) sets key.
func envHas(env []string, key string) bool {
	for _, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); ok && k == key {
			return true
		}
	}
	return false
}

// groupGoneTimeout bounds the wait for a killed process group to end, and
// outputDrain the wait for its output once it has.
const (
	groupGoneTimeout = 5 * time.Second
	outputDrain      = 2 * time.Second
)

// waitGroupGone waits until no live (non-zombie) process of group pgid is
// left, or timeout passes.
func waitGroupGone(pgid int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for groupAlive(pgid) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// groupAlive reports whether a live process is in group pgid. One
// kill(-pgid, 0) answers in the usual case: ESRCH, no process is in the
// group. Only when the kernel still knows a member (EPERM, or success) is
// /proc read, because a zombie — ended, not yet reaped by a parent that
// does not reap — still counts for kill but is not alive; where /proc
// cannot be read, the kernel's answer stands.
func groupAlive(pgid int) bool {
	if pgid <= 0 || !groupExists(pgid) {
		return false
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		return true
	}
	return len(groupMembers(pgid, 1)) > 0
}

// groupExists reports whether the kernel knows a process (alive or zombie)
// in group pgid.
func groupExists(pgid int) bool { return proc.GroupExists(pgid) }

// procScans counts the reads of the whole process table (groupMembers).
var procScans atomic.Int64

// groupMembers returns up to max (0: all) live processes /proc shows in
// group pgid; none where /proc cannot be read.
func groupMembers(pgid, max int) []int {
	procScans.Add(1)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid pgrp …"
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, err := strconv.Atoi(f[2]); err == nil && g == pgid && pid > 0 {
			if out = append(out, pid); max > 0 && len(out) >= max {
				return out
			}
		}
	}
	return out
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// PID returns the process id, which is also its process group id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed when the process has ended and its output is drained.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits for the process to end and returns how it ended.
func (p *Process) Wait(ctx context.Context) (Result, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.result, nil
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// Stop ends the process group: SIGTERM, then SIGKILL if it has not ended
// within grace. It returns once the process has ended.
func (p *Process) Stop(grace time.Duration) Result {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.dropGate() // a held process ends without running its program
	pgid := p.cmd.Process.Pid
	proc.TermGroup(pgid) //nolint:errcheck // it may have ended already
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		proc.KillGroup(pgid) //nolint:errcheck // it may have ended already
		<-p.done
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.result
}

// Alive reports whether a process with pid exists (for recovery after a
// restart of the daemon).
// A zombie (ended, not yet reaped by its parent) is not alive.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if !proc.Exists(pid) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist) // no /proc: trust kill
	}
	// "pid (comm) S …": the state follows the last ')'.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		switch b[i+2] {
		case 'Z', 'X':
			return false
		}
	}
	return true
}

// IsRunOf reports whether process pid is a run of task taskID: its
// environment carries AQ_TASK_ID=taskID. After a crash a recorded pid may
// have been reused by an unrelated process, which must not be killed.
// Without /proc nothing can be confirmed and the answer is false.
func IsRunOf(pid int, taskID string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return false
	}
	want := []byte("AQ_TASK_ID=" + taskID)
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		if bytes.Equal(kv, want) {
			return true
		}
	}
	return false
}

// KillGroup ends a process group left by an earlier life of the daemon.
func KillGroup(pgid int) error { return proc.KillGroup(pgid) }

// EndLeftover ends what is left of a run of task taskID whose process
// group is pgid (its recorded pid) once nothing supervises it any more, as
// after a restart of the daemon. Only a run of that task is touched: when
// the recorded process or any live process of its group carries
// AQ_TASK_ID=taskID in its environment (a pid reused by an unrelated
// process does not), the group is killed with SIGKILL and EndLeftover waits
// up to wait until none of it is alive: a process still finishing a system
// call could otherwise write into the run's checkout after its next user
// took it. found reports whether anything of the run was alive. An error
// means some of it still was when wait ran out; its checkout must not be
// reused yet. Where /proc cannot be read nothing can be confirmed and
// nothing is done.
//
// The pid comes from the database, not from a process this daemon
// started: it may be another daemon's run now (the process of a run of the
// same task, started by a daemon that took the database over). fence,
// when not nil, is called immediately before the first signal, after the
// process table was read; an error from it (the lease is lost) leaves
// every process alive and is returned as is, with found true.
func EndLeftover(pgid int, taskID string, wait time.Duration, fence func() error) (found bool, err error) {
	if pgid <= 0 {
		return false, nil
	}
	ours := Alive(pgid) && IsRunOf(pgid, taskID)
	if !ours && groupExists(pgid) {
		for _, pid := range groupMembers(pgid, 0) {
			if ours = IsRunOf(pid, taskID); ours {
				break
			}
		}
	}
	if !ours {
		return false, nil
	}
	if fence != nil {
		if err := fence(); err != nil {
			return true, err
		}
	}
	// The group, and the recorded process itself should it have left the
	// group.
	if err := KillGroup(pgid); err != nil {
		return true, err
	}
	proc.Kill(pgid) //nolint:errcheck // usually gone with its group
	gone := func() bool { return !groupAlive(pgid) && !(Alive(pgid) && IsRunOf(pgid, taskID)) }
	deadline := time.Now().Add(wait)
	for !gone() {
		if !time.Now().Before(deadline) {
			return true, fmt.Errorf("end process group %d of task %s: still alive after SIGKILL and %s", pgid, taskID, wait)
		}
		time.Sleep(5 * time.Millisecond) // polling the process table
	}
	return true, nil
}

// stderrLines splits standard error into lines for Spec.OnStderrLine,
// each cut to maxStderrLine bytes (the rest of a longer line is dropped).
type stderrLines struct {
	on   func(line []byte)
	line []byte
	cut  bool // the current line is over maxStderrLine
}

func (s *stderrLines) write(b []byte) {
	if s.on == nil {
		return
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		part := b
		if i >= 0 {
			part = b[:i]
		}
		if room := maxStderrLine - len(s.line); len(part) > room {
			part, s.cut = part[:room], true
		}
		s.line = append(s.line, part...)
		if i < 0 {
			return
		}
		s.emit()
		b = b[i+1:]
	}
}

// flush hands on a last line that had no newline.
func (s *stderrLines) flush() {
	if s.on != nil && (len(s.line) > 0 || s.cut) {
		s.emit()
	}
}

func (s *stderrLines) emit() {
	s.on(bytes.TrimSuffix(s.line, []byte("\r")))
	s.line, s.cut = s.line[:0], false
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(b []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
