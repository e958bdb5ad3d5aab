package agent_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/progresstest"
)

// shimArg makes the test binary a shim (agent.RunShim).
const shimArg = "agent-shim"

// detachedStarterEnv makes the test binary a starter of a detached run
// (detachedStarter); its value is the run's directory.
const detachedStarterEnv = "AGENT_TEST_DETACHED_STARTER"

// detachedScript prints two lines and a line on stderr, waits for a line
// from the FIFO $HOLD, prints a line and a last one without its newline,
// and exits 5.
const detachedScript = `#!/bin/sh
read -r prompt
echo "one $prompt"
echo two
echo err1 >&2
read -r _ < "$HOLD"
echo three
printf four
exit 5
`

// testPoll looks at the files every millisecond: the tests wait on the
// results, not on the polls.
func testPoll() <-chan time.Time { return time.After(time.Millisecond) }

// shimCommand runs the test binary as a shim.
func shimCommand(t interface{ Fatal(...any) }) []string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe, shimArg}
}

// detachedSpec is the run of detachedScript in dir.
func detachedSpec(dir string, shim []string) agent.DetachedSpec {
	return agent.DetachedSpec{Spec: agent.Spec{Argv: []string{filepath.Join(dir, "agent.sh")}, Dir: dir,
		Env: []string{"PATH=" + os.Getenv("PATH"), "HOLD=" + filepath.Join(dir, "hold")}, Stdin: "hello\n",
		LogPath: filepath.Join(dir, "run.log")}, Shim: shim, Files: agent.FilesIn(filepath.Join(dir, "run")), Poll: testPoll}
}

// started is what detachedStarter prints.
type started struct {
	ID agent.ShimID
	At agent.Checkpoint
}

// detachedStarter starts detachedScript detached in dir, waits until its
// first output is read, prints its shim and checkpoint, and exits without
// waiting for it: a runner that dies while its agent works.
func detachedStarter(dir string) int {
	cps := make(chan agent.Checkpoint, 100)
	spec := detachedSpec(dir, shimCommand(fatalPrinter{}))
	spec.OnCheckpoint = func(cp agent.Checkpoint) { cps <- cp }
	d, err := agent.StartDetached(spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	want := int64(len("one hello\ntwo\n"))
	for cp := range cps {
		if cp.Stdout == want && cp.Stderr == int64(len("err1\n")) {
			out, _ := json.Marshal(started{ID: d.ID(), At: cp})
			fmt.Println(string(out))
			return 0
		}
	}
	return 1
}

type fatalPrinter struct{}

func (fatalPrinter) Fatal(args ...any) { fmt.Fprintln(os.Stderr, args...); os.Exit(1) }

// A detached run's starter dies while its agent works; another takes it
// up. Whether the agent is still running, ended while nobody watched, or
// was killed without a status, the new starter hands on only the output
// it had not (the earlier lines go to Replay), logs each line once, and
// gives the agent's real end.
func TestAttachTakesUpARunItsStarterLeft(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// away is what happens while no starter watches.
		away     func(t *testing.T, dir string, id agent.ShimID)
		release  bool // the FIFO is written after Attach
		exit     int
		signal   string
		lines    []string
		stderrIn string
	}{
		{name: "still running", release: true, exit: 5, lines: []string{"three", "four"}},
		{name: "ended while away", away: func(t *testing.T, dir string, id agent.ShimID) {
			release(t, dir)
			waitGone(t, id.PID)
		}, exit: 5, lines: []string{"three", "four"}},
		{name: "killed while away", away: func(t *testing.T, dir string, id agent.ShimID) {
			if err := syscall.Kill(-id.PID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			waitGone(t, id.PID)
		}, exit: -1, signal: "killed", stderrIn: "ended without its status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "agent.sh"), []byte(detachedScript), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(filepath.Join(dir, "hold"), 0o600); err != nil {
				t.Fatal(err)
			}
			exe, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(exe)
			cmd.Env = append(os.Environ(), detachedStarterEnv+"="+dir)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("starter: %v\n%s", err, stderr.String())
			}
			var s started
			if err := json.Unmarshal(out, &s); err != nil {
				t.Fatalf("starter printed %q: %v", out, err)
			}
			t.Cleanup(func() { syscall.Kill(-s.ID.PID, syscall.SIGKILL) }) //nolint:errcheck // clean-up
			if tc.away != nil {
				tc.away(t, dir, s.ID)
			} else if !agent.ShimAlive(s.ID) {
				t.Fatalf("the shim %+v died with its starter", s.ID)
			}
			// The earlier starter logged a line it did not record.
			f, err := os.OpenFile(filepath.Join(dir, "run.log"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString("unrecorded\n")
			f.Close()

			var mu sync.Mutex
			var replayed, lines, errLines []string
			spec := detachedSpec(dir, shimCommand(t))
			spec.Replay = func(l []byte) { mu.Lock(); replayed = append(replayed, string(l)); mu.Unlock() }
			spec.OnLine = func(l []byte) { mu.Lock(); lines = append(lines, string(l)); mu.Unlock() }
			spec.OnStderrLine = func(l []byte) { mu.Lock(); errLines = append(errLines, string(l)); mu.Unlock() }
			d, err := agent.Attach(spec, s.ID, s.At)
			if err != nil {
				t.Fatal(err)
			}
			if tc.release {
				release(t, dir)
			}
			res, err := d.Wait(progresstest.Context(t))
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tc.exit || res.Signal != tc.signal || !strings.Contains(res.StderrTail, tc.stderrIn) ||
				!strings.HasPrefix(res.StderrTail, "err1\n") {
				t.Errorf("result %+v, want exit %d signal %q", res, tc.exit, tc.signal)
			}
			mu.Lock()
			defer mu.Unlock()
			if strings.Join(replayed, "|") != "one hello|two" || strings.Join(lines, "|") != strings.Join(tc.lines, "|") ||
				strings.Join(errLines, "|") != "err1" {
				t.Errorf("replayed %q, handed on %q, stderr %q", replayed, lines, errLines)
			}
			log, err := os.ReadFile(filepath.Join(dir, "run.log"))
			if err != nil {
				t.Fatal(err)
			}
			// The two streams, interleaved as they were read.
			first := string(log[:s.At.Log])
			if !strings.Contains(first, "err1\n") || strings.Replace(first, "err1\n", "", 1) != "one hello\ntwo\n" {
				t.Errorf("the log before the restart: %q", first)
			}
			if rest := string(log[s.At.Log:]); rest != strings.Join(append(tc.lines, ""), "\n") && !(len(tc.lines) == 0 && rest == "") {
				t.Errorf("the log after the restart: %q", rest)
			}
			if cp := d.Checkpoint(); cp.Log != int64(len(log)) {
				t.Errorf("checkpoint %+v, log of %d bytes", cp, len(log))
			}
		})
	}
}

// release writes the line the script waits for.
func release(t *testing.T, dir string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "hold"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("go\n")
	f.Close()
}

// A detached run hands on its lines as Start's pipes do — a last line
// without its newline included — keeps its stderr tail, and ends with its
// exit status; its shim is its process group's leader and is known by its
// start time, not its pid alone.
func TestStartDetachedRunsUnderItsShim(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var mu sync.Mutex
	var lines, errLines []string
	var last agent.Checkpoint
	spec := agent.DetachedSpec{Spec: agent.Spec{Argv: []string{script(t, "stderr-lines")}, Dir: dir,
		Env: []string{"PATH=" + os.Getenv("PATH")}, LogPath: filepath.Join(dir, "log"),
		OnLine:       func(l []byte) { mu.Lock(); lines = append(lines, string(l)); mu.Unlock() },
		OnStderrLine: func(l []byte) { mu.Lock(); errLines = append(errLines, fmt.Sprintf("%.5s:%d", l, len(l))); mu.Unlock() }},
		Shim: shimCommand(t), Files: agent.FilesIn(filepath.Join(dir, "run")), Poll: testPoll,
		OnCheckpoint: func(cp agent.Checkpoint) { mu.Lock(); last = cp; mu.Unlock() }}
	d, err := agent.StartDetached(spec)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := agent.StartTime(d.PID()); err != nil || st != d.ID().Start {
		t.Errorf("start time %d %v, shim %+v", st, err, d.ID())
	}
	if agent.ShimAlive(agent.ShimID{PID: d.PID(), Start: d.ID().Start + 1}) {
		t.Error("a shim with another start time counts as alive")
	}
	res, err := d.Wait(progresstest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || res.Signal != "" || !strings.HasSuffix(res.StderrTail, "\nlast") {
		t.Errorf("result %+v", res)
	}
	if agent.ShimAlive(d.ID()) {
		t.Error("the shim is alive after its run ended")
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(lines, "|") != "out" || strings.Join(errLines, "|") != "one:3|two:3|xxxxx:8192|last:4" {
		t.Errorf("stdout %q, stderr %q", lines, errLines)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "log"))
	out, _ := os.ReadFile(spec.Files.Stdout)
	errs, _ := os.ReadFile(spec.Files.Stderr)
	if last != (agent.Checkpoint{Stdout: int64(len(out)), Stderr: int64(len(errs)), Log: int64(len(log))}) ||
		len(log) != len(out)+len(errs) {
		t.Errorf("last checkpoint %+v: stdout %d, stderr %d, log %d bytes", last, len(out), len(errs), len(log))
	}
	if st, ok, err := agent.ReadStatus(spec.Files.Status); !ok || err != nil || st.ExitCode != 0 {
		t.Errorf("status %+v %v %v", st, ok, err)
	}
}

// Stop ends a detached run's whole group with SIGTERM, the shim outliving
// it to write the status; one that ignores SIGTERM is killed after the
// grace period, shim and all.
func TestStopEndsADetachedRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		script, signal string
	}{
		{"polite", "terminated"},
		{"ignores-term", "killed"},
	} {
		t.Run(tc.script, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			pids := make(chan string, 1)
			d, err := agent.StartDetached(agent.DetachedSpec{Spec: agent.Spec{Argv: []string{script(t, tc.script)}, Dir: dir,
				Env: []string{"PATH=" + os.Getenv("PATH")}, LogPath: filepath.Join(dir, "log"),
				OnLine: func(l []byte) { pids <- string(l) }},
				Shim: shimCommand(t), Files: agent.FilesIn(filepath.Join(dir, "run")), Poll: testPoll})
			if err != nil {
				t.Fatal(err)
			}
			var child string
			select {
			case child = <-pids:
			case <-progresstest.Context(t).Done():
				t.Fatal("no output")
			}
			grace := time.Hour
			if tc.signal == "killed" {
				grace = 50 * time.Millisecond
			}
			res := d.Stop(grace)
			if !res.Stopped || res.Signal != tc.signal {
				t.Errorf("result %+v, want stopped by %s", res, tc.signal)
			}
			var pid int
			fmt.Sscan(child, &pid)
			if agent.Alive(pid) || agent.Alive(d.PID()) {
				t.Errorf("after Stop: child %d alive %v, shim alive %v", pid, agent.Alive(pid), agent.Alive(d.PID()))
			}
		})
	}
}

// Read hands on what the agent has printed so far before it returns,
// without waiting for a poll: a runner reads the output before it relays
// the agent's call.
func TestReadHandsOnTheOutputAtOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prog := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho first\necho ready > \"$READY\"\nread -r _ < \"$HOLD\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ready", "hold"} {
		if err := syscall.Mkfifo(filepath.Join(dir, f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var polling atomic.Bool // no poll until the end: only Read reads
	var mu sync.Mutex
	var lines []string
	d, err := agent.StartDetached(agent.DetachedSpec{Spec: agent.Spec{Argv: []string{prog}, Dir: dir,
		Env:     []string{"PATH=" + os.Getenv("PATH"), "READY=" + filepath.Join(dir, "ready"), "HOLD=" + filepath.Join(dir, "hold")},
		LogPath: filepath.Join(dir, "log"), OnLine: func(l []byte) { mu.Lock(); lines = append(lines, string(l)); mu.Unlock() }},
		Shim: shimCommand(t), Files: agent.FilesIn(filepath.Join(dir, "run")),
		Poll: func() <-chan time.Time {
			if polling.Load() {
				return testPoll()
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(filepath.Join(dir, "ready")); err != nil { // the agent has printed its line
		t.Fatal(err)
	}
	d.Read()
	mu.Lock()
	got := strings.Join(lines, "|")
	mu.Unlock()
	if got != "first" {
		t.Errorf("after Read: %q, want the agent's line", got)
	}
	polling.Store(true)
	release(t, dir)
	d.Read() // the reader polls again
	if res, err := d.Wait(progresstest.Context(t)); err != nil || res.ExitCode != 0 {
		t.Errorf("result %+v %v", res, err)
	}
}

// A detached run started on the files of an earlier one (the same task
// and attempt) reads only its own output, and its log holds only that.
func TestStartDetachedEmptiesTheFilesOfAnEarlierRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prog := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho \"run $RUN\"\necho \"err $RUN\" >&2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, run := range []string{"1", "2"} {
		var mu sync.Mutex
		var lines []string
		d, err := agent.StartDetached(agent.DetachedSpec{Spec: agent.Spec{Argv: []string{prog}, Dir: dir,
			Env: []string{"PATH=" + os.Getenv("PATH"), "RUN=" + run}, LogPath: filepath.Join(dir, "log"),
			OnLine: func(l []byte) { mu.Lock(); lines = append(lines, string(l)); mu.Unlock() }},
			Shim: shimCommand(t), Files: agent.FilesIn(filepath.Join(dir, "run")), Poll: testPoll})
		if err != nil {
			t.Fatal(err)
		}
		res, err := d.Wait(progresstest.Context(t))
		if err != nil || res.StderrTail != "err "+run+"\n" {
			t.Errorf("run %s: %+v %v", run, res, err)
		}
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		mu.Lock()
		if strings.Join(lines, "|") != "run "+run || len(log) != len("run 1\nerr 1\n") {
			t.Errorf("run %s: lines %q, log %q", run, lines, log)
		}
		mu.Unlock()
	}
}
