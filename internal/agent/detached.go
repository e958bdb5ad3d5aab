package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentqueued/agentqueued/internal/proc"
)

// DefaultPoll is how often a detached process's output files and status
// are looked at when DetachedSpec.Poll is nil.
const DefaultPoll = 100 * time.Millisecond

// RunFiles are the files of a detached run (StartDetached): its standard
// input, the standard output and error its agent appends to, and the
// status its shim writes when the agent has ended.
type RunFiles struct {
	Stdin  string `json:"stdin"`
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	Status string `json:"status"`
}

// FilesIn returns the RunFiles of a detached run in directory dir.
func FilesIn(dir string) RunFiles {
	return RunFiles{Stdin: filepath.Join(dir, "stdin"), Stdout: filepath.Join(dir, "stdout"),
		Stderr: filepath.Join(dir, "stderr"), Status: filepath.Join(dir, "status")}
}

// Checkpoint is how far a detached run's output has been read: every line
// before these offsets was handed on and written to the log, which was
// then Log bytes long.
type Checkpoint struct {
	Stdout int64 `json:"stdout"`
	Stderr int64 `json:"stderr"`
	Log    int64 `json:"log"`
}

// ShimID names a detached run's shim across restarts of its starter: its
// pid and the start time /proc gives it (StartTime), which tells a pid
// reused by another process.
type ShimID struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// DetachedSpec is a run started detached (StartDetached) or taken up again
// (Attach).
type DetachedSpec struct {
	// Spec's Argv, Dir, Env, Stdin, LogPath, OnLine, OnStderrLine,
	// OnActivity and StderrTail mean what they mean for Start; Hold is
	// not supported.
	Spec
	// Shim is the command that runs RunShim with the arguments that
	// follow it: the starter's own binary in its shim mode.
	Shim []string
	// Files are the run's files; their directory is created.
	Files RunFiles
	// Poll returns when to look at the output files again; nil is every
	// DefaultPoll.
	Poll func() <-chan time.Time
	// OnCheckpoint is called, from the goroutine that calls OnLine, after
	// each line of standard output and each read of standard error was
	// handed on and logged.
	OnCheckpoint func(Checkpoint)
	// Replay is called by Attach with each line of standard output
	// before the checkpoint, before any OnLine: the parser's state is
	// rebuilt without handing the lines on again. Standard error before
	// the checkpoint goes through OnStderrLine and into the stderr tail.
	Replay func(line []byte)
}

// Status is what a shim writes when its agent has ended.
type Status struct {
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	Error    string `json:"error,omitempty"`
}

// ReadStatus reads a run's status file; ok is false when there is none
// yet.
func ReadStatus(path string) (st Status, ok bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Status{}, false, nil
	}
	if err != nil {
		return Status{}, false, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return Status{}, false, fmt.Errorf("status %s: %w", path, err)
	}
	return st, true, nil
}

// StartTime returns the start time of process pid, in clock ticks after
// boot (field 22 of /proc/PID/stat).
func StartTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: too short", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// ShimAlive reports whether the shim id names is still running: a live
// process with its pid and, where /proc tells it, its start time.
func ShimAlive(id ShimID) bool {
	if !Alive(id.PID) {
		return false
	}
	if id.Start == 0 {
		return true // started where /proc could not be read
	}
	st, err := StartTime(id.PID)
	return err == nil && st == id.Start
}

// Detached is an agent process that runs under a shim of its own,
// detached from its starter: its standard output and error go to files,
// which are read as they grow, and its shim, the leader of its process
// group and session, writes its end to a status file. Its starter may die
// and a new one take it up (Attach).
type Detached struct {
	spec DetachedSpec
	id   ShimID
	// waited is closed when the shim, a child of this process, was
	// reaped; nil for a shim taken up by Attach.
	waited chan struct{}
	log    *os.File
	tail   *tailBuffer
	done   chan struct{}
	result Result
	// kick asks the reader for a read now (Read).
	kick chan chan struct{}

	mu      sync.Mutex
	stopped bool
	cp      Checkpoint
}

// StartDetached starts spec's program under its shim, in a session and
// process group of its own, with standard input from Files.Stdin (written
// with Spec.Stdin) and its output appended to Files.Stdout and
// Files.Stderr. The caller must wait for it (Done, Wait or Stop).
func StartDetached(spec DetachedSpec) (*Detached, error) {
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return nil, errors.New("start agent process: empty command")
	}
	if len(spec.Shim) == 0 || spec.LogPath == "" || spec.Files.Stdout == "" {
		return nil, errors.New("start agent process: no shim, log or run files")
	}
	path, err := lookPath(spec.Argv[0], spec.Dir)
	if err != nil {
		return nil, fmt.Errorf("start agent process %s: %w", spec.Argv[0], err)
	}
	for _, f := range []string{spec.LogPath, spec.Files.Stdout} {
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			return nil, fmt.Errorf("start agent process: %w", err)
		}
	}
	if err := os.WriteFile(spec.Files.Stdin, []byte(spec.Stdin), 0o600); err != nil {
		return nil, fmt.Errorf("start agent process: %w", err)
	}
	_ = os.Remove(spec.Files.Status)
	var files [3]*os.File
	for i, open := range []func() (*os.File, error){
		func() (*os.File, error) { return os.Open(spec.Files.Stdin) },
		// Emptied: the offsets count from the start of this run.
		func() (*os.File, error) {
			return os.OpenFile(spec.Files.Stdout, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_TRUNC, 0o600)
		},
		func() (*os.File, error) {
			return os.OpenFile(spec.Files.Stderr, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_TRUNC, 0o600)
		},
	} {
		if files[i], err = open(); err != nil {
			closeAll(files[:i]...)
			return nil, fmt.Errorf("start agent process: %w", err)
		}
	}
	args := append(append(append([]string{}, spec.Shim[1:]...), "--status", spec.Files.Status, "--", path), spec.Argv[1:]...)
	cmd := exec.Command(spec.Shim[0], args...)
	cmd.Dir = spec.Dir
	cmd.Env = spec.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = files[0], files[1], files[2]
	// A session of its own: its group is its pid, and it outlives its
	// starter's terminal and group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	closeAll(files[:]...)
	if err != nil {
		return nil, fmt.Errorf("start agent process %s: %w", spec.Argv[0], err)
	}
	start, _ := StartTime(cmd.Process.Pid) // 0 where /proc cannot be read
	d := newDetached(spec, ShimID{PID: cmd.Process.Pid, Start: start})
	d.waited = make(chan struct{})
	go func() {
		_ = cmd.Wait() // the status file says how the agent ended
		close(d.waited)
	}()
	if err := d.openLog(0); err != nil {
		proc.KillGroup(d.id.PID) //nolint:errcheck // it must not run unwatched
		<-d.waited
		return nil, err
	}
	go d.follow(Checkpoint{}, false)
	return d, nil
}

// Attach takes up a detached run whose shim is id, reading its output
// from checkpoint at on. The log is cut back to at.Log, so that what is
// read again is logged once. A shim that is gone is fine: what its status
// file says is the result, and when it wrote none the agent counts as killed.
func Attach(spec DetachedSpec, id ShimID, at Checkpoint) (*Detached, error) {
	d := newDetached(spec, id)
	if err := d.openLog(at.Log); err != nil {
		return nil, err
	}
	go d.follow(at, true)
	return d, nil
}

func newDetached(spec DetachedSpec, id ShimID) *Detached {
	size := spec.StderrTail
	if size <= 0 {
		size = DefaultStderrTail
	}
	if spec.Poll == nil {
		spec.Poll = func() <-chan time.Time { return time.After(DefaultPoll) }
	}
	return &Detached{spec: spec, id: id, tail: &tailBuffer{max: size}, done: make(chan struct{}), kick: make(chan chan struct{})}
}

// openLog opens the log for appending, cut back to size when it is
// longer (an earlier starter logged lines it had not recorded).
func (d *Detached) openLog(size int64) error {
	if err := os.MkdirAll(filepath.Dir(d.spec.LogPath), 0o700); err != nil {
		return fmt.Errorf("agent log: %w", err)
	}
	f, err := os.OpenFile(d.spec.LogPath, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("agent log: %w", err)
	}
	if fi, err := f.Stat(); err == nil && fi.Size() > size {
		if err := f.Truncate(size); err != nil {
			f.Close()
			return fmt.Errorf("agent log: %w", err)
		}
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return fmt.Errorf("agent log: %w", err)
	}
	d.log = f
	return nil
}

// ID returns the run's shim.
func (d *Detached) ID() ShimID { return d.id }

// PID returns the shim's pid, which is also the process group of the run.
func (d *Detached) PID() int { return d.id.PID }

// Done is closed when the agent has ended and its output is read.
func (d *Detached) Done() <-chan struct{} { return d.done }

// Checkpoint returns how far the output has been read.
func (d *Detached) Checkpoint() Checkpoint {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cp
}

// Read returns once what the output files hold now has been read and
// handed on (or the run is over): what the agent printed before it made
// a call is handed on before the call.
func (d *Detached) Read() {
	asked := make(chan struct{})
	select {
	case d.kick <- asked:
		select {
		case <-asked:
		case <-d.done:
		}
	case <-d.done:
	}
}

// Wait waits for the agent to end and returns how it ended.
func (d *Detached) Wait(ctx context.Context) (Result, error) {
	select {
	case <-d.done:
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.result, nil
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// Stop ends the run's process group: SIGTERM, then SIGKILL if it has not
// ended within grace. It returns once the run has ended.
func (d *Detached) Stop(grace time.Duration) Result {
	d.mu.Lock()
	d.stopped = true
	d.mu.Unlock()
	proc.TermGroup(d.id.PID) //nolint:errcheck // it may have ended already
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-d.done:
	case <-t.C:
		proc.KillGroup(d.id.PID) //nolint:errcheck // it may have ended already
		<-d.done
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.result
}

// shimGone reports whether the shim has ended.
func (d *Detached) shimGone() bool {
	if d.waited != nil {
		select {
		case <-d.waited:
			return true
		default:
			return false
		}
	}
	return !ShimAlive(d.id)
}

// follow reads the output files from at until the shim has ended, then
// what is left, and sets the result. replay hands the lines before at to
// Spec.Replay first (Attach).
func (d *Detached) follow(at Checkpoint, replay bool) {
	defer close(d.done)
	defer d.log.Close()
	activity := d.spec.OnActivity
	if activity == nil {
		activity = func() {}
	}
	out := &lineTail{path: d.spec.Files.Stdout, off: at.Stdout}
	errs := &chunkTail{path: d.spec.Files.Stderr, off: at.Stderr}
	lines := stderrLines{on: d.spec.OnStderrLine}
	logSize := at.Log
	if replay {
		out.replay(d.spec.Replay)
		errs.replay(func(b []byte) { d.tail.Write(b); lines.write(b) })
	}
	d.mu.Lock()
	d.cp = Checkpoint{Stdout: out.off, Stderr: errs.off, Log: logSize}
	d.mu.Unlock()
	checkpoint := func() {
		cp := Checkpoint{Stdout: out.off, Stderr: errs.off, Log: logSize}
		d.mu.Lock()
		d.cp = cp
		d.mu.Unlock()
		if d.spec.OnCheckpoint != nil {
			d.spec.OnCheckpoint(cp)
		}
	}
	write := func(b []byte) {
		n, _ := d.log.Write(b) // a full disk must not stop the agent
		logSize += int64(n)
	}
	onLine := func(line []byte) {
		write(append(append([]byte{}, line...), '\n'))
		activity()
		if d.spec.OnLine != nil {
			d.spec.OnLine(line)
		}
		checkpoint()
	}
	onErr := func(b []byte) {
		write(b)
		d.tail.Write(b)
		lines.write(b)
		activity()
		checkpoint()
	}
	read := func(last bool) {
		errs.read(onErr)
		out.read(onLine, last)
	}
	var asked chan struct{} // a Read waiting for this round
	for {
		// The end is looked at before the last reads: what the agent
		// wrote before its shim ended is in the files by then.
		ended := d.shimGone()
		if !ended {
			if _, ok, _ := ReadStatus(d.spec.Files.Status); ok {
				ended = true
			}
		}
		read(ended)
		if asked != nil {
			close(asked)
			asked = nil
		}
		if ended {
			break
		}
		select {
		case <-d.spec.Poll():
		case asked = <-d.kick:
		}
	}
	lines.flush()
	// What the agent left in its group goes with it, as for Start.
	proc.KillGroup(d.id.PID) //nolint:errcheck // usually already gone
	waitGroupGone(d.id.PID, groupGoneTimeout)
	r := Result{ExitCode: -1, Signal: "killed"}
	st, ok, err := ReadStatus(d.spec.Files.Status)
	switch {
	case ok:
		r.ExitCode, r.Signal = st.ExitCode, st.Signal
	case err != nil:
		r.StderrTail = err.Error()
	}
	switch tail := d.tail.String(); {
	case ok && tail == "":
		r.StderrTail = st.Error
	case ok || err != nil:
		r.StderrTail = tail + r.StderrTail
	default:
		r.StderrTail = tail + "the agent's shim ended without its status"
	}
	d.mu.Lock()
	r.Stopped = d.stopped
	d.result = r
	d.mu.Unlock()
}

// lineTail reads a growing file line by line from an offset.
type lineTail struct {
	path    string
	off     int64  // the offset after the last line handed on
	partial []byte // read past off, without a newline yet
	skip    bool   // the current line is over maxLineBytes: dropped
}

// read hands on the complete lines added since the last read; last hands
// on a final line without its newline too.
func (t *lineTail) read(on func(line []byte), last bool) {
	f, err := os.Open(t.path)
	if err != nil {
		return
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	pos := t.off + int64(len(t.partial))
	for {
		n, err := f.ReadAt(buf, pos)
		if n > 0 {
			pos += int64(n)
			t.feed(buf[:n], on)
		}
		if err != nil || n == 0 {
			break
		}
	}
	if last && (len(t.partial) > 0 || t.skip) {
		t.off += int64(len(t.partial))
		if !t.skip {
			on(t.partial)
		}
		t.partial, t.skip = nil, false
	}
}

func (t *lineTail) feed(b []byte, on func(line []byte)) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			t.partial = append(t.partial, b...)
			if len(t.partial) > maxLineBytes {
				// Dropped, as the pipe reader drops what follows an
				// over-long line: the offset counts it as read.
				t.off += int64(len(t.partial))
				t.partial, t.skip = t.partial[:0], true
			}
			return
		}
		line := append(t.partial, b[:i]...)
		t.off += int64(len(line)) + 1
		if !t.skip && len(line) <= maxLineBytes {
			on(bytes.TrimSuffix(line, []byte("\r")))
		}
		t.partial, t.skip = t.partial[:0], false
		b = b[i+1:]
	}
}

// replay hands the complete lines before off to on, without moving.
func (t *lineTail) replay(on func(line []byte)) {
	if on == nil || t.off == 0 {
		return
	}
	f, err := os.Open(t.path)
	if err != nil {
		return
	}
	defer f.Close()
	r := &lineTail{}
	r.feedAll(io.NewSectionReader(f, 0, t.off), on)
}

func (t *lineTail) feedAll(r io.Reader, on func(line []byte)) {
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			t.feed(buf[:n], on)
		}
		if err != nil {
			return
		}
	}
}

// chunkTail reads a growing file from an offset, as it comes.
type chunkTail struct {
	path string
	off  int64
}

func (t *chunkTail) read(on func(b []byte)) {
	f, err := os.Open(t.path)
	if err != nil {
		return
	}
	defer f.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := f.ReadAt(buf, t.off)
		if n > 0 {
			t.off += int64(n)
			on(buf[:n])
		}
		if err != nil || n == 0 {
			return
		}
	}
}

// replay hands what is before off to on.
func (t *chunkTail) replay(on func(b []byte)) {
	if t.off == 0 {
		return
	}
	f, err := os.Open(t.path)
	if err != nil {
		return
	}
	defer f.Close()
	buf := make([]byte, 32<<10)
	r := io.NewSectionReader(f, 0, t.off)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			on(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// RunShim is the shim of a detached run (StartDetached), run by the
// starter's binary in its shim mode with the arguments
// `--status FILE -- PROGRAM ARGS...`: it runs the program with its own
// standard input, output, error, directory and environment, in its
// process group, waits for it, and writes how it ended to FILE (a new
// file renamed into place). SIGTERM, SIGINT and SIGHUP reach the program
// through its group; the shim outlives them to write the status. It
// returns the shim's exit code.
func RunShim(args []string) int {
	if len(args) < 4 || args[0] != "--status" || args[2] != "--" || args[3] == "" {
		fmt.Fprintln(os.Stderr, "agentqueued shim: usage: --status FILE -- PROGRAM [ARGS...]")
		return 2
	}
	status, argv := args[1], args[3:]
	// Caught, not ignored: the program starts with the default handlers.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		for range sigs { // the group's signal reached the program too
		}
	}()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	var st Status
	if err := cmd.Start(); err != nil {
		st = Status{ExitCode: -1, Error: err.Error()}
		fmt.Fprintln(os.Stderr, err)
	} else {
		err := cmd.Wait()
		st.ExitCode = cmd.ProcessState.ExitCode()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			st.Signal = ws.Signal().String()
		}
		var exitErr *exec.ExitError
		if err != nil && !errors.As(err, &exitErr) {
			st.Error = err.Error()
		}
	}
	data, _ := json.Marshal(st)
	tmp := status + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "agentqueued shim:", err)
		return 1
	}
	if err := os.Rename(tmp, status); err != nil {
		fmt.Fprintln(os.Stderr, "agentqueued shim:", err)
		return 1
	}
	return 0
}
