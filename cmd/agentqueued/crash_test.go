package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// crashAgentScript is the agents' program in the crash test: like
// demo-agent.sh, it commits a file named after its task and reports
// completion. The file records the attempt, so a task run again on a
// checkout that kept an earlier attempt's commit still has something to
// commit.
const crashAgentScript = `#!/bin/sh
set -eu
cat > /dev/null
echo "$AQ_TASK_ID attempt $AQ_ATTEMPT by $DEMO_AGENT" > "result-$AQ_TASK_ID.txt"
git add "result-$AQ_TASK_ID.txt"
git -c user.name="$DEMO_AGENT" -c user.email=agent@localhost -c commit.gpgsign=false \
  commit -q -m "Result of $AQ_TASK_ID"
"$DEMO_BIN" agent complete --summary "wrote result-$AQ_TASK_ID.txt"
`

const (
	crashTasks   = 120
	crashAgents  = 4
	crashKills   = 5
	crashMarkEnv = "CRASH_TEST_DIR" // marks every process the test causes
)

var listeningLine = regexp.MustCompile(`msg="agentqueued listening" addr=(\S+)`)

// crashDaemon is one life of the daemon under test.
type crashDaemon struct {
	cmd    *exec.Cmd
	addr   string
	exited chan struct{} // closed when the process has been waited for
	err    error         // Wait's error, once exited is closed
	log    *lockedBuffer
}

// lockedBuffer collects a daemon's stderr, reports its listening address,
// closes assigned at its first task assignment and wakes those awaiting a
// line (await).
type lockedBuffer struct {
	mu       sync.Mutex
	buf      bytes.Buffer
	partial  []byte
	addr     chan string
	assigned chan struct{}
	awaits   []lineAwait
}

// lineAwait is a wait for the next line holding text.
type lineAwait struct {
	text string
	seen chan struct{}
}

// await returns a channel closed when a line holding text is written
// after this call.
func (b *lockedBuffer) await(text string) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	a := lineAwait{text: text, seen: make(chan struct{})}
	b.awaits = append(b.awaits, a)
	return a.seen
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	b.partial = append(b.partial, p...)
	for {
		i := bytes.IndexByte(b.partial, '\n')
		if i < 0 {
			break
		}
		if m := listeningLine.FindSubmatch(b.partial[:i]); m != nil {
			select {
			case b.addr <- string(m[1]):
			default:
			}
		}
		if bytes.Contains(b.partial[:i], []byte(`msg="task assigned"`)) {
			select {
			case <-b.assigned:
			default:
				close(b.assigned)
			}
		}
		kept := b.awaits[:0]
		for _, a := range b.awaits {
			if bytes.Contains(b.partial[:i], []byte(a.text)) {
				close(a.seen)
			} else {
				kept = append(kept, a)
			}
		}
		b.awaits = kept
		b.partial = b.partial[i+1:]
	}
	return len(p), nil
}

// Len is the number of bytes written so far.
func (b *lockedBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startCrashDaemon starts the binary and waits for its listening line, as
// long as the watchdog sees progress (the daemon's log growing counts).
func startCrashDaemon(t *testing.T, bin, cfg, dataDir, mark string, w *progresstest.Watchdog) *crashDaemon {
	t.Helper()
	return startCrashDaemonAt(t, bin, cfg, dataDir, mark, "127.0.0.1:0", w)
}

// startCrashDaemonAt is startCrashDaemon listening on listen.
func startCrashDaemonAt(t *testing.T, bin, cfg, dataDir, mark, listen string, w *progresstest.Watchdog) *crashDaemon {
	t.Helper()
	d := &crashDaemon{exited: make(chan struct{}), log: &lockedBuffer{addr: make(chan string, 1), assigned: make(chan struct{})}}
	d.cmd = exec.Command(bin, "run", "--config", cfg, "--data-dir", dataDir, "--listen", listen)
	d.cmd.Env = append(os.Environ(), crashMarkEnv+"="+mark)
	d.cmd.Stdout, d.cmd.Stderr = io.Discard, d.log
	// Its own process group, so the test's clean-up can end the daemon
	// together with any git command it left behind.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		d.err = d.cmd.Wait()
		close(d.exited)
	}()
	for {
		select {
		case d.addr = <-d.log.addr:
			w.Progress("a daemon listening at " + d.addr)
			return d
		case <-d.exited:
			t.Fatalf("the daemon exited before listening (%v); a restart after SIGKILL must take over the lease at once:\n%s",
				d.err, d.log.String())
		case <-w.Done():
			d.cmd.Process.Kill()
			<-d.exited
			t.Fatalf("the daemon did not listen: %v\n%s", w.Err(), d.log.String())
		case <-time.After(time.Second): // a starting daemon's log is read as it grows
			w.Observe(fmt.Sprintf("a starting daemon's log at %d bytes", d.log.Len()))
		}
	}
}

// kill crashes the daemon (SIGKILL) and reaps it: a dead but unreaped
// process would still look alive to the next daemon's lease check.
func (d *crashDaemon) kill(t *testing.T) {
	t.Helper()
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.exited
	var exitErr *exec.ExitError
	if !errors.As(d.err, &exitErr) || exitErr.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the daemon ended with %v before it was killed:\n%s", d.err, d.log.String())
	}
}

// markedProcesses returns the live processes the test caused: those whose
// environment carries the mark (the daemons, the agents and their
// children) and those working in or naming the test's directory, the mark
// (the daemons' git commands, which run with a scrubbed environment).
func markedProcesses(mark string) map[int]string {
	want := []byte("\x00" + crashMarkEnv + "=" + mark + "\x00")
	out := map[int]string{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		proc := "/proc/" + e.Name()
		if stat, err := os.ReadFile(proc + "/stat"); err != nil {
			continue
		} else if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
			continue
		}
		env, _ := os.ReadFile(proc + "/environ")
		cmdline, _ := os.ReadFile(proc + "/cmdline")
		cwd, _ := os.Readlink(proc + "/cwd")
		if bytes.Contains(append([]byte{0}, env...), want) || bytes.Contains(cmdline, []byte(mark)) ||
			cwd == mark || strings.HasPrefix(cwd, mark+"/") {
			out[pid] = strings.TrimSpace(string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		}
	}
	return out
}

// killMarked ends the process groups of marked processes (never the test's own).
func killMarked(procs map[int]string) {
	own := syscall.Getpgrp()
	for pid := range procs {
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid != own && pgid > 1 {
			syscall.Kill(-pgid, syscall.SIGKILL) //nolint:errcheck // it may have ended
		} else {
			syscall.Kill(pid, syscall.SIGKILL) //nolint:errcheck // it may have ended
		}
	}
}

// crashDAG is a random DAG of n tasks: each depends on 0-3 earlier tasks,
// about one edge in five not requiring success.
func crashDAG(r *rand.Rand, n int) []models.BatchTask {
	soft := false
	tasks := make([]models.BatchTask, n)
	for i := range tasks {
		tasks[i] = models.BatchTask{LocalID: fmt.Sprintf("t%d", i), Title: fmt.Sprintf("crash task %d", i)}
		if i == 0 {
			continue
		}
		ups := map[int]bool{}
		for range r.IntN(4) {
			ups[r.IntN(i)] = true
		}
		for _, u := range slices.Sorted(maps.Keys(ups)) {
			dep := models.BatchDependency{ID: fmt.Sprintf("t%d", u)}
			if r.IntN(5) == 0 {
				dep.RequiresSuccess = &soft
			}
			tasks[i].Dependencies = append(tasks[i].Dependencies, dep)
		}
	}
	return tasks
}

// TestCrashRecovery runs the real binary on a 120-task DAG, kills it with
// SIGKILL at random moments, restarts it on the same data each time, and
// checks that the work ends exactly once: every task COMPLETED once, merged
// once, no agent or run left behind, no process left alive. It takes as
// long as the machine needs (about a minute and a half on two idle cores,
// several on busy ones) and fails only when nothing moves for the stall
// limit of internal/progresstest.
func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary and runs it through repeated crashes")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is needed")
	}
	bin := agentqueuedBinary(t)
	started := time.Now()
	watch := progresstest.New(t, "the start of the test")
	dir := t.TempDir()
	script := filepath.Join(dir, "crash-agent.sh")
	err := os.WriteFile(script, []byte(crashAgentScript), 0o755)
	if err != nil {
		t.Fatal(err)
	}
	origin := filepath.Join(dir, "origin.git")
	dataDir := filepath.Join(dir, "data")
	cfgPath := filepath.Join(dir, "agentqueued.yaml")
	var cfg strings.Builder
	cfg.WriteString("log:\n  level: info\nagents:\n")
	for i := range crashAgents {
		fmt.Fprintf(&cfg, "  - {name: a%d, type: command, command: %q, env: {DEMO_BIN: %q, DEMO_AGENT: a%d, %s: %q}}\n",
			i, script, bin, i, crashMarkEnv, dir)
	}
	cfg.WriteString("orchestrator: {retry_backoff: 100ms, max_backoff: 1s, stop_grace: 1s, start_timeout: 30s, safety_tick: 500ms}\n")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	var lives []*crashDaemon
	t.Cleanup(func() {
		for _, d := range lives {
			select {
			case <-d.exited:
			default:
				syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // clean-up after a failure
				<-d.exited
			}
		}
		if left := markedProcesses(dir); len(left) > 0 {
			killMarked(left)
		}
	})
	logs := func() string {
		var all strings.Builder
		for i, d := range lives {
			fmt.Fprintf(&all, "--- daemon life %d ---\n%s", i+1, d.log.String())
		}
		return all.String()
	}
	failf := func(format string, args ...any) {
		t.Helper()
		t.Fatalf(format+"\n%s", append(args, logs())...)
	}
	defer func() {
		if os.Getenv("AQ_TEST_LOG") != "" {
			t.Log(logs())
		}
	}()
	start := func() *crashDaemon {
		d := startCrashDaemon(t, bin, cfgPath, dataDir, dir, watch)
		lives = append(lives, d)
		return d
	}

	// AQ_CRASH_SEED replays another DAG and other crash moments.
	seed := uint64(20261122)
	if v := os.Getenv("AQ_CRASH_SEED"); v != "" {
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("AQ_CRASH_SEED: %v", err)
		}
	}
	r := rand.New(rand.NewPCG(seed, 7))
	ctx := watch.Context()

	// The first life: the project and the batch, then the first crash.
	d := start()
	client, err := api.NewClient("http://"+d.addr, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CreateProject(ctx, models.ProjectSpec{ID: "crash", MaxConcurrentAgents: crashAgents,
		Repo: &models.RepoConfig{SourceType: models.RepoInit, SourcePath: origin}}.Project()); err != nil {
		failf("create project: %v", err)
	}
	results, err := client.CreateTasks(ctx, models.TaskBatch{ProjectID: "crash", CreatedBy: "crash-test", Tasks: crashDAG(r, crashTasks)})
	if err != nil || len(results) != crashTasks {
		failf("create tasks: %d results, %v", len(results), err)
	}
	client.CloseIdleConnections()
	ids := make([]string, len(results))
	for i, res := range results {
		ids[i] = res.TaskID
	}

	// The crashes: each life is killed at a random moment after it
	// listens, once it has assigned a task (on a busy machine a life may
	// need longer than the moment drawn to get that far, and a crash with
	// no work in flight would test less).
	var delays []time.Duration
	for i := range crashKills {
		if i > 0 {
			d = start()
		}
		delay := time.Duration(100+r.IntN(701)) * time.Millisecond
		delays = append(delays, delay)
		moment := time.After(delay) // the crash moment, drawn at random
		assigned := d.log.assigned
		for moment != nil || assigned != nil {
			select {
			case <-moment:
				moment = nil
			case <-assigned:
				assigned = nil
			case <-d.exited:
				failf("daemon life %d exited by itself: %v", len(lives), d.err)
			case <-watch.Done():
				failf("daemon life %d assigned no task: %v", len(lives), watch.Err())
			}
		}
		d.kill(t)
	}

	// The last life runs everything to completion.
	d = start()
	client, err = api.NewClient("http://"+d.addr, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for {
		tasks, err := client.ListTasks(ctx, models.TaskFilter{ProjectID: "crash", Limit: 1000})
		if err != nil {
			failf("list tasks: %v (%v)", err, watch.Err())
		}
		// Any task that changed status is progress.
		done := 0
		counts := map[models.TaskStatus]int{}
		for _, tk := range tasks {
			counts[tk.Status]++
			switch tk.Status {
			case models.StatusCompleted:
				done++
			case models.StatusBlocked:
				failf("task %s is BLOCKED: %s", tk.ID, tk.StatusReason)
			}
		}
		if done == crashTasks {
			break
		}
		watch.Observe(fmt.Sprintf("tasks by status %v", counts))
		// An agent set aside (ERROR) takes no more work: say why at once
		// rather than at the deadline.
		agents, err := client.ListAgents(ctx)
		if err != nil {
			failf("list agents: %v (%v)", err, watch.Err())
		}
		for _, a := range agents {
			if a.State == models.AgentError {
				failf("agent %s is in ERROR with %d of %d tasks completed", a.ID, done, crashTasks)
			}
		}
		select {
		case <-ctx.Done():
			failf("%d of %d tasks completed: %v", done, crashTasks, watch.Err())
		case <-d.exited:
			failf("the last daemon life exited: %v", d.err)
		case <-time.After(100 * time.Millisecond): // polling an external process
		}
	}
	agents, err := client.ListAgents(ctx)
	if err != nil {
		failf("list agents: %v", err)
	}
	if len(agents) != crashAgents {
		failf("%d agents, want %d", len(agents), crashAgents)
	}
	for _, a := range agents {
		if a.State != models.AgentIdle || a.CurrentTaskID != nil {
			failf("agent %s is %s (task %v) with every task completed", a.ID, a.State, a.CurrentTaskID)
		}
	}
	client.CloseIdleConnections()

	// A clean shutdown.
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.exited:
		if d.err != nil {
			failf("the daemon's shutdown: %v", d.err)
		}
	case <-time.After(progresstest.Stall()):
		failf("the daemon did not stop on SIGTERM")
	}

	// Every restart took the dead daemon's lease over at once (a refused
	// restart fails in startCrashDaemon); the logs say how often.
	var takeovers, recovered int
	for _, l := range lives {
		takeovers += strings.Count(l.log.String(), "taking over the lease of a daemon that is gone")
		recovered += strings.Count(l.log.String(), `msg="recovered run"`)
	}

	// The database after the last shutdown.
	ctx = context.Background()
	st := storetest.OpenAt(t, filepath.Join(dataDir, "agentqueued.db"))
	var recoveries int
	for _, id := range ids {
		det, err := st.GetTaskDetail(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if det.Task.Status != models.StatusCompleted {
			t.Errorf("task %s is %s after the shutdown", id, det.Task.Status)
		}
		completed := 0
		for _, e := range det.Events {
			if e.To == models.StatusCompleted {
				completed++
			}
			if e.Event == models.EventRecovery {
				recoveries++
			}
		}
		if completed != 1 {
			t.Errorf("task %s has %d COMPLETED events", id, completed)
		}
	}
	if recoveries == 0 {
		t.Errorf("no RECOVERY event: no crash found a run in flight")
	}
	if open, err := st.OpenRuns(ctx); err != nil || len(open) != 0 {
		t.Errorf("open runs after the shutdown: %+v %v", open, err)
	}
	stAgents, err := st.ListAgents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range stAgents {
		if a.State != models.AgentIdle || a.PID != nil || a.CurrentTaskID != nil {
			t.Errorf("agent %s after the shutdown: %s, pid %v, task %v", a.ID, a.State, a.PID, a.CurrentTaskID)
		}
	}

	// Each task's work is merged into main exactly once.
	out, err := exec.Command("git", "--git-dir", origin, "log", "--format=%s", "main").Output()
	if err != nil {
		t.Fatalf("git log: %v", err)
	}
	merges := map[string]int{}
	for line := range strings.Lines(string(out)) {
		if rest, ok := strings.CutPrefix(line, "Merge "); ok {
			if id, _, ok := strings.Cut(rest, ":"); ok {
				merges[id]++
			}
		}
	}
	for _, id := range ids {
		if merges[id] != 1 {
			t.Errorf("task %s is merged into main %d times", id, merges[id])
		}
		delete(merges, id)
	}
	if len(merges) > 0 {
		t.Errorf("merges of unknown tasks: %v", merges)
	}
	files, err := exec.Command("git", "--git-dir", origin, "ls-tree", "--name-only", "main").Output()
	if err != nil {
		t.Fatalf("git ls-tree: %v", err)
	}
	for _, id := range ids {
		if !bytes.Contains(files, []byte("result-"+id+".txt\n")) {
			t.Errorf("main lacks result-%s.txt", id)
		}
	}

	// No process of the test is left: recovery ended the runs killed
	// daemons left behind, and the shutdown ended the last life's. The
	// process table is polled for processes already on their way out.
	left := markedProcesses(dir)
	for grace := time.Now().Add(progresstest.Stall()); len(left) > 0 && time.Now().Before(grace); left = markedProcesses(dir) {
		<-time.After(50 * time.Millisecond) // polling the process table
	}
	if len(left) > 0 {
		killMarked(left)
		t.Errorf("processes left behind after the shutdown (killed now): %v", left)
	}
	t.Logf("seed %d, %d tasks; killed after %v; %d runs recovered, %d RECOVERY events, %d lease takeovers; %s",
		seed, crashTasks, delays, recovered, recoveries, takeovers, time.Since(started).Round(time.Millisecond))
}
