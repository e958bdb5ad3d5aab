package orchestrator

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/repo"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
	"go.uber.org/goleak"
)

// fakeAdapter reads a tiny line format from its agents' output:
// "RESULT <summary>", "FAIL <message>", "RATE_LIMIT <RFC 3339 reset>".
type fakeAdapter struct{}

func (fakeAdapter) Type() string { return "claude" }

func (fakeAdapter) Invocation(rc agent.RunContext) (agent.Invocation, error) {
	return agent.Invocation{Argv: append([]string{rc.Agent.Command}, rc.Agent.Args...), Stdin: rc.Prompt}, nil
}

func (fakeAdapter) NewParser(agent.RunContext) agent.Parser { return fakeAdapter{} }

func (fakeAdapter) End(int) []agent.Event { return nil }

func (fakeAdapter) Line(line []byte) []agent.Event {
	kind, rest, _ := strings.Cut(string(line), " ")
	switch kind {
	case "RESULT":
		return []agent.Event{{Kind: agent.EventResult, Summary: rest}}
	case "FAIL":
		return []agent.Event{{Kind: agent.EventResult, IsError: true, Error: rest}}
	case "RATE_LIMIT":
		at, err := time.Parse(time.RFC3339, rest)
		if err != nil {
			return nil
		}
		return []agent.Event{{Kind: agent.EventRateLimit, ResetAt: &at}}
	}
	return nil
}

// scripts are fake agent executables, written once before tests run in
// parallel (writing an executable while another test forks fails exec with
// "text file busy").
var scripts = map[string]string{
	"ok":        `cat >/dev/null; echo "RESULT done"; exit 0`,
	"exit0":     `exit 0`,
	"boom":      `echo boom >&2; exit 2`,
	"quiet":     `exec sleep 300`,
	"ratelimit": `echo "RATE_LIMIT 2026-03-01T13:00:00Z"; exit 0`,
	// ratelimit-late reports a reset a day after the harness clock's start.
	"ratelimit-late": `echo "RATE_LIMIT 2026-03-02T12:00:00Z"; exit 0`,
	"write-file":     `echo "$AQ_TASK_ID" > "work-$AQ_TASK_ID.txt"; exit 0`,
	// hold waits until the test writes its exit code to the FIFO $RELEASE.
	"hold": `read code < "$RELEASE"; exit "$code"`,
	// dump-env writes its environment to the file $DUMP.
	"dump-env": `cat >/dev/null; env > "$DUMP"; echo "RESULT done"; exit 0`,
	// recording-git records each invocation in "calls" beside the path it
	// was run by (a per-test symlink), then runs git.
	"recording-git": `echo "$*" >> "$(dirname "$0")/calls"; exec git "$@"`,
}

var scriptDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "orch-scripts")
	if err != nil {
		panic(err)
	}
	scriptDir = dir
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			panic(err)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		// Every goroutine the tests started must have ended with them.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

type harness struct {
	t      *testing.T
	st     *store.Store
	dbPath string
	o      *Orchestrator
	clock  *clocktest.Fake
	rounds chan uint64
	starts chan models.Run
	ends   chan models.Run
	cancel context.CancelFunc
	done   chan error
	// tokens records each run's token as it starts (guarded by o.mu).
	tokens map[int64]string
}

func newHarness(t *testing.T, tweak func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, clock: clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)),
		rounds: make(chan uint64, 1000), starts: make(chan models.Run, 100), ends: make(chan models.Run, 100),
		tokens: map[int64]string{}}
	var o *Orchestrator
	h.dbPath = filepath.Join(t.TempDir(), "aq.db")
	st := storetest.OpenAt(t, h.dbPath, storetest.WithClock(h.clock), storetest.WithOnChange(func() {
		if o != nil {
			o.Wake()
		}
	}))
	ws, err := repo.New(repo.Config{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{SafetyTick: time.Hour, Logger: testLogger(t), RunDir: t.TempDir(), Clock: h.clock,
		StopGrace: 2 * time.Second, RetryBackoff: 30 * time.Second, MaxBackoff: 10 * time.Minute,
		OnRound: func(seq uint64) { h.rounds <- seq },
		OnRunStart: func(r models.Run) {
			h.o.mu.Lock()
			if ar, ok := h.o.runs[r.ID]; ok {
				h.tokens[r.ID] = ar.token
			}
			h.o.mu.Unlock()
			h.starts <- r
		},
		OnRunEnd: func(r models.Run, _ models.TransitionResult) { h.ends <- r }}
	if tweak != nil {
		tweak(&cfg)
	}
	o, err = New(cfg, st, ws, agent.NewRegistry(agent.Command{}, fakeAdapter{}))
	if err != nil {
		t.Fatal(err)
	}
	h.st, h.o = st, o
	if _, err := st.CreateProject(context.Background(), models.Project{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) start() {
	// The test may have changed the configuration, the workspaces or the
	// logger since New: the Lander gets them as they are now.
	h.o.landing = h.o.newLander()
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan error, 1)
	go func() { h.done <- h.o.Run(ctx) }()
	h.t.Cleanup(h.stop)
}

func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("Run: %v", err)
		}
	case <-time.After(progresstest.Stall()):
		h.t.Error("orchestrator did not stop")
	}
}

func (h *harness) agent(id, typ, scriptName string, tweak func(*models.Agent)) {
	h.t.Helper()
	a := models.Agent{ID: id, AgentType: typ, AgentSettings: models.AgentSettings{Command: filepath.Join(scriptDir, scriptName)}}
	if tweak != nil {
		tweak(&a)
	}
	if _, err := h.st.RegisterAgent(context.Background(), a); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) tasks(ts ...models.BatchTask) map[string]string {
	h.t.Helper()
	res, err := h.st.CreateTasks(context.Background(), models.TaskBatch{ProjectID: "p", Tasks: ts})
	if err != nil {
		h.t.Fatal(err)
	}
	ids := map[string]string{}
	for _, r := range res {
		ids[r.LocalID] = r.TaskID
	}
	return ids
}

// settle waits for a round that started after this call: everything that
// happened before it has been seen by the loop.
func (h *harness) settle() {
	h.t.Helper()
	h.o.Wake()
	want := h.o.wakeSeq.Load()
	for {
		select {
		case seq := <-h.rounds:
			if seq >= want {
				return
			}
		case <-time.After(progresstest.Stall()):
			h.t.Fatal("no round")
		}
	}
}

func (h *harness) waitEnd() models.Run   { h.t.Helper(); return h.waitRun(h.ends, "ended") }
func (h *harness) waitStart() models.Run { h.t.Helper(); return h.waitRun(h.starts, "started") }

// waitRun receives the next run from a hook's channel; the bound (a stall
// limit) only turns a broken test into a failure instead of a hang.
func (h *harness) waitRun(ch chan models.Run, what string) models.Run {
	h.t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(progresstest.Stall()):
		h.t.Fatalf("no run %s", what)
	}
	return models.Run{}
}

func (h *harness) noRunStarts() {
	h.t.Helper()
	h.settle()
	select {
	case r := <-h.starts:
		h.t.Fatalf("unexpected run of task %s", r.TaskID)
	default:
	}
}

func (h *harness) task(id string) models.Task {
	h.t.Helper()
	t, err := h.st.GetTask(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return t
}

func (h *harness) events(id string) []string {
	h.t.Helper()
	d, err := h.st.GetTaskDetail(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range d.Events {
		out = append(out, string(e.Event))
	}
	return out
}

func TestCompletionStartsDependentWithoutTheSafetyTick(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil) // the safety tick is an hour on a clock that never moves
	h.agent("a1", "command", "exit0", nil)
	ids := h.tasks(models.BatchTask{LocalID: "up", Title: "up"}, models.BatchTask{LocalID: "down", Title: "down", Dependencies: []models.BatchDependency{{ID: "up"}}})
	h.start()
	first, second := h.waitEnd(), h.waitEnd()
	if first.TaskID != ids["up"] || second.TaskID != ids["down"] {
		t.Fatalf("ran %s then %s", first.TaskID, second.TaskID)
	}
	h.settle()
	for _, id := range ids {
		if got := h.task(id).Status; got != models.StatusCompleted {
			t.Fatalf("task %s is %s", id, got)
		}
	}
	want := []string{"DEPS_MET", "ASSIGNED", "AGENT_STARTED", "AGENT_COMPLETED", "VERIFY_PASSED"}
	if got := h.events(ids["down"]); !slices.Equal(got, want) {
		t.Fatalf("events %v", got)
	}
}

func TestFailuresRetryWithBackoffThenBlock(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.agent("a1", "command", "boom", nil)
	two := 2
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "flaky", MaxRetries: &two})["t"]
	h.start()
	h.waitStart()
	h.waitEnd()
	h.settle()
	if tk := h.task(id); tk.Status != models.StatusFailed || tk.StatusReason != "exit status 2: boom" {
		t.Fatalf("after the first run: %s %q", tk.Status, tk.StatusReason)
	}
	h.clock.Advance(29 * time.Second)
	h.noRunStarts()
	h.clock.Advance(time.Second) // 30 s: the first retry
	h.waitStart()
	h.waitEnd()
	h.settle()
	h.clock.Advance(59 * time.Second) // the second waits 60 s
	h.noRunStarts()
	h.clock.Advance(time.Second)
	h.waitStart()
	h.waitEnd()
	h.settle()
	tk := h.task(id)
	if tk.Status != models.StatusBlocked || tk.RetryCount != 2 || !strings.Contains(tk.StatusReason, "no retries left") {
		t.Fatalf("after the last run: %+v", tk)
	}
	prompt, err := os.ReadFile(filepath.Join(h.o.cfg.RunDir, id, "2.prompt"))
	if err != nil || !strings.Contains(string(prompt), "Earlier attempts failed") || !strings.Contains(string(prompt), "boom") {
		t.Fatalf("the retry's prompt lacks the failure: %q %v", prompt, err)
	}
}

func TestBackoffSchedule(t *testing.T) {
	t.Parallel()
	o := &Orchestrator{cfg: Config{RetryBackoff: 30 * time.Second, MaxBackoff: 5 * time.Minute}}
	var got []time.Duration
	for i := range 6 {
		got = append(got, o.Backoff(i))
	}
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute}
	if !slices.Equal(got, want) {
		t.Fatalf("backoff %v, want %v", got, want)
	}
}

func TestRateLimitPausesUntilTheReportedReset(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.agent("a1", "claude", "ratelimit", nil)
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "t"})["t"]
	h.start()
	h.waitStart()
	h.waitEnd()
	h.settle()
	tk := h.task(id)
	reset := time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC)
	if tk.Status != models.StatusPaused || tk.ResumeAfter == nil || !tk.ResumeAfter.Equal(reset) || tk.RetryCount != 0 {
		t.Fatalf("after the rate limit: %+v", tk)
	}
	h.clock.Advance(59 * time.Minute)
	h.noRunStarts()
	h.clock.Advance(time.Minute)
	if r := h.waitStart(); r.TaskID != id || r.Attempt != 2 {
		t.Fatalf("resumed run %+v", r)
	}
}

// TestTimeouts checks that a run a time limit ends fails like a failed
// run: TIMEOUT_FAILED, a retry after the backoff while retries remain, and
// MAX_RETRIES once none do.
func TestTimeouts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		agent   func(*models.Agent)
		timeout time.Duration // the task's own
		retries int
		advance time.Duration
		reason  string
	}{
		{"idle", func(a *models.Agent) { a.IdleTimeout = models.Duration(time.Minute) }, 0, 2, time.Minute, "no output and no report for 1m0s"},
		{"wall clock", func(a *models.Agent) { a.MaxRuntime = models.Duration(2 * time.Minute) }, 0, 2, 2 * time.Minute, "ran longer than 2m0s"},
		{"idle without retries", func(a *models.Agent) { a.IdleTimeout = models.Duration(time.Minute) }, 0, 0, time.Minute, "no output and no report for 1m0s"},
		{"task timeout under max_runtime", func(a *models.Agent) { a.MaxRuntime = models.Duration(time.Hour) }, 10 * time.Minute, 0,
			10 * time.Minute, "ran longer than the task's timeout of 10m0s"},
		{"max_runtime under task timeout", func(a *models.Agent) { a.MaxRuntime = models.Duration(2 * time.Minute) }, time.Hour, 0,
			2 * time.Minute, "ran longer than 2m0s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, nil)
			h.agent("a1", "command", "quiet", tc.agent)
			id := h.tasks(models.BatchTask{LocalID: "t", Title: "t", Timeout: models.Duration(tc.timeout), MaxRetries: &tc.retries})["t"]
			h.start()
			h.waitStart()
			h.settle()
			h.clock.Advance(tc.advance - time.Second)
			h.settle()
			if st := h.task(id).Status; st != models.StatusInProgress {
				t.Fatalf("ended early: %s", st)
			}
			h.clock.Advance(time.Second)
			h.waitEnd()
			h.settle()
			if ev := h.events(id); !slices.Contains(ev, string(models.EventTimeoutFailed)) {
				t.Fatalf("events %v lack TIMEOUT_FAILED", ev)
			}
			if a, _ := h.st.GetAgent(context.Background(), "a1"); a.State != models.AgentIdle {
				t.Fatalf("agent %s after the timeout", a.State)
			}
			tk := h.task(id)
			if tc.retries == 0 {
				if tk.Status != models.StatusBlocked || !strings.Contains(tk.StatusReason, tc.reason) {
					t.Fatalf("after the timeout with no retries: %s %q", tk.Status, tk.StatusReason)
				}
				return
			}
			if tk.Status != models.StatusFailed || tk.StatusReason != tc.reason {
				t.Fatalf("after the timeout: %s %q", tk.Status, tk.StatusReason)
			}
			h.clock.Advance(30 * time.Second) // the first retry's backoff
			if r := h.waitStart(); r.TaskID != id || r.Attempt != 2 {
				t.Fatalf("retried run %+v", r)
			}
		})
	}
}

// TestHeartbeatTimeout checks that an agent held to heartbeats is ended
// by TIMEOUT_FAILED when it makes no report over the agent RPC for its
// heartbeat_timeout, and that any report resets the count.
func TestHeartbeatTimeout(t *testing.T) {
	t.Parallel()
	const hb = time.Minute
	tests := []struct {
		name string
		// report is made over the RPC one second before the limit, or not at all.
		report func(ctx context.Context, o *Orchestrator, run models.Run) error
	}{
		{name: "no report"},
		{name: "a heartbeat resets it", report: func(ctx context.Context, o *Orchestrator, run models.Run) error {
			return o.Heartbeat(ctx, run)
		}},
		{name: "a progress report counts", report: func(ctx context.Context, o *Orchestrator, run models.Run) error {
			return o.Progress(ctx, run, models.TaskProgress{Message: "half way"})
		}},
		{name: "a usage report counts", report: func(ctx context.Context, o *Orchestrator, run models.Run) error {
			return o.Usage(ctx, run, models.TokenUsage{Input: 1})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			h := newHarness(t, nil)
			h.agent("a1", "command", "quiet", func(a *models.Agent) { a.HeartbeatTimeout = models.Duration(hb) })
			id := h.tasks(models.BatchTask{LocalID: "t", Title: "t"})["t"]
			h.start()
			run := h.waitStart()
			h.settle()
			h.clock.Advance(hb - time.Second)
			h.settle()
			if st := h.task(id).Status; st != models.StatusInProgress {
				t.Fatalf("ended early: %s", st)
			}
			if tc.report != nil {
				if err := tc.report(ctx, h.o, run); err != nil {
					t.Fatal(err)
				}
				h.clock.Advance(time.Second)
				h.settle()
				if st := h.task(id).Status; st != models.StatusInProgress {
					t.Fatalf("ended despite the report: %s", st)
				}
				h.clock.Advance(hb - 2*time.Second)
				h.settle()
				if st := h.task(id).Status; st != models.StatusInProgress {
					t.Fatalf("ended before a heartbeat_timeout from the report: %s", st)
				}
			}
			h.clock.Advance(time.Second)
			h.waitEnd()
			h.settle()
			tk := h.task(id)
			if tk.Status != models.StatusFailed || tk.StatusReason != "no heartbeat for 1m0s" {
				t.Fatalf("after the heartbeat timeout: %s %q", tk.Status, tk.StatusReason)
			}
		})
	}
}

func TestStopKillsTheRunAndBlocksTheTask(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.agent("a1", "command", "quiet", nil)
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "t"})["t"]
	h.start()
	h.waitStart()
	run, _ := h.st.OpenRuns(context.Background())
	if len(run) != 1 || run[0].PID == nil {
		t.Fatalf("open runs %+v", run)
	}
	pid := *run[0].PID
	if _, err := h.o.StopTask(context.Background(), id, "wrong approach", "alice"); err != nil {
		t.Fatal(err)
	}
	h.waitEnd()
	if agent.Alive(pid) {
		t.Fatalf("process %d survived the stop", pid)
	}
	tk := h.task(id)
	if tk.Status != models.StatusBlocked || tk.StatusReason != "wrong approach" {
		t.Fatalf("after stop: %s %q", tk.Status, tk.StatusReason)
	}
	if a, _ := h.st.GetAgent(context.Background(), "a1"); a.State != models.AgentIdle {
		t.Fatalf("agent %s after stop", a.State)
	}
}

func TestShutdownRequeuesAndRecoveryRepairs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.agent("a1", "command", "quiet", nil)
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "t"})["t"]
	h.start()
	h.waitStart()
	h.stop()
	if st := h.task(id).Status; st != models.StatusReady {
		t.Fatalf("after shutdown the task is %s", st)
	}
	if open, _ := h.st.OpenRuns(context.Background()); len(open) != 0 {
		t.Fatalf("open runs after shutdown: %+v", open)
	}

	// A crash: the run is left open with a live process.
	run, _, err := h.st.ClaimTask(context.Background(), id, "a1")
	if err != nil {
		t.Fatal(err)
	}
	// sleep itself, not a script that execs it: recovery must not read
	// the process's environment in the middle of a second exec.
	proc, err := agent.Start(agent.Spec{Argv: []string{"sleep", "300"}, LogPath: filepath.Join(t.TempDir(), "l"),
		Env: []string{"AQ_TASK_ID=" + id}}) // as a real run carries it
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Stop(time.Second)
	if _, err := h.st.StartRun(context.Background(), run.ID, proc.PID(), ""); err != nil {
		t.Fatal(err)
	}
	h.start() // recovery, then the task runs again on the freed agent
	r := h.waitStart()
	if r.TaskID != id || r.Attempt != 3 {
		t.Fatalf("after recovery ran %+v", r)
	}
	if res, err := proc.Wait(context.Background()); err != nil || res.Signal != "killed" {
		t.Fatalf("leftover process: %+v %v", res, err)
	}
	if ev := h.events(id); !slices.Contains(ev, "RECOVERY") {
		t.Fatalf("events %v", ev)
	}
}

func TestDeliversToTheRepository(t *testing.T) {
	t.Parallel()
	origin := filepath.Join(t.TempDir(), "origin.git")
	h := newHarness(t, nil)
	if _, err := h.st.CreateProject(context.Background(), models.Project{ID: "web",
		Repo: &models.RepoConfig{SourceType: models.RepoInit, SourcePath: origin}}); err != nil {
		t.Fatal(err)
	}
	h.agent("a1", "command", "write-file", nil)
	res, err := h.st.CreateTasks(context.Background(), models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{{Title: "write"}}})
	if err != nil {
		t.Fatal(err)
	}
	h.start()
	h.waitEnd()
	h.settle()
	id := res[0].TaskID
	if st := h.task(id).Status; st != models.StatusCompleted {
		t.Fatalf("task %s: %s %q", id, st, h.task(id).StatusReason)
	}
	out, err := gitShow(origin, "main:work-"+id+".txt")
	if err != nil || strings.TrimSpace(out) != id {
		t.Fatalf("origin main: %q %v", out, err)
	}
	// The run recorded the task's branch and its agent's repository.
	tk := h.task(id)
	if want := repo.BranchName(tk); tk.BranchName == nil || *tk.BranchName != want {
		t.Fatalf("branch_name %v, want %s", tk.BranchName, want)
	}
	p, err := h.st.GetProject(context.Background(), "web")
	if err != nil || p.Repo == nil || p.Repo.ID == "" {
		t.Fatalf("project %+v %v", p, err)
	}
	if a, _ := h.st.GetAgent(context.Background(), "a1"); a.RepoID == nil || *a.RepoID != p.Repo.ID {
		t.Fatalf("agent repo_id %v, want %s", a.RepoID, p.Repo.ID)
	}
}

func gitShow(dir, obj string) (string, error) {
	cmd := exec.Command("git", "--git-dir", dir, "show", obj)
	b, err := cmd.CombinedOutput()
	return string(b), err
}

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("AQ_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func TestStartFailureSetsTheAgentAsideAndRequeues(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.agent("a-broken", "command", "exit0", func(a *models.Agent) { a.Command = filepath.Join(t.TempDir(), "missing") })
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "t"})["t"]
	h.start()
	h.waitEnd()
	h.settle()
	tk := h.task(id)
	if tk.Status != models.StatusReady || !strings.Contains(tk.StatusReason, "start process") || tk.RetryCount != 0 {
		t.Fatalf("after the start failure: %s %q retries %d", tk.Status, tk.StatusReason, tk.RetryCount)
	}
	if a, _ := h.st.GetAgent(context.Background(), "a-broken"); a.State != models.AgentError {
		t.Fatalf("the broken agent is %s", a.State)
	}
	h.noRunStarts() // nobody takes it again in a loop
	h.agent("a-good", "command", "exit0", nil)
	if r := h.waitEnd(); r.AgentID != "a-good" || r.TaskID != id {
		t.Fatalf("then ran %+v", r)
	}
	if _, err := h.st.SetAgentPaused(context.Background(), "a-broken", false); err != nil {
		t.Fatal(err)
	}
	if a, _ := h.st.GetAgent(context.Background(), "a-broken"); a.State != models.AgentIdle {
		t.Fatalf("resume left the agent %s", a.State)
	}
}

// TestAgentTypeRoutesTasks checks the round end to end: a task routed to
// an agent type waits, saying so, while only agents of other types exist,
// and starts on the first agent of its type.
func TestAgentTypeRoutesTasks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.agent("a1", "command", "exit0", nil)
	ids := h.tasks(models.BatchTask{LocalID: "typed", Title: "t", AgentType: "claude"},
		models.BatchTask{LocalID: "any", Title: "u"})
	h.start()
	if r := h.waitStart(); r.TaskID != ids["any"] || r.AgentID != "a1" {
		t.Fatalf("started %+v, want the untyped task on a1", r)
	}
	h.waitEnd()
	h.settle()
	h.settle() // a round with a1 idle again
	tk := h.task(ids["typed"])
	if tk.Status != models.StatusReady || tk.WaitingCode != models.WaitingAgentType ||
		tk.WaitingReason != "no agent of type claude works on project p" {
		t.Fatalf("the typed task: %s %q %q", tk.Status, tk.WaitingCode, tk.WaitingReason)
	}
	h.agent("a2", "claude", "exit0", nil)
	if r := h.waitStart(); r.TaskID != ids["typed"] || r.AgentID != "a2" {
		t.Fatalf("started %+v, want the typed task on a2", r)
	}
}

// TestEditedAgentTypeLetsTheTaskStart: a task routed to a type no agent
// has waits, its dependent with it; an edit of its agent type lets it start
// at once, and its dependent after it.
func TestEditedAgentTypeLetsTheTaskStart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.agent("a1", "command", "exit0", nil)
	ids := h.tasks(models.BatchTask{LocalID: "typed", Title: "t", AgentType: "claude"},
		models.BatchTask{LocalID: "after", Title: "u", Dependencies: []models.BatchDependency{{ID: "typed"}}})
	h.start()
	h.noRunStarts()
	if tk := h.task(ids["typed"]); tk.WaitingCode != models.WaitingAgentType {
		t.Fatalf("the typed task waits for %q (%s)", tk.WaitingReason, tk.WaitingCode)
	}
	anyType := ""
	if _, err := h.st.EditTask(context.Background(), ids["typed"], models.TaskPatch{AgentType: &anyType}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{ids["typed"], ids["after"]} {
		if r := h.waitStart(); r.TaskID != want || r.AgentID != "a1" {
			t.Fatalf("started %+v, want %s on a1", r, want)
		}
	}
}

func TestWorkspaceFailureCoolsTheProjectNotTheAgent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	if _, err := h.st.CreateProject(context.Background(), models.Project{ID: "broken",
		Repo: &models.RepoConfig{SourceType: models.RepoClone, URL: filepath.Join(t.TempDir(), "missing.git")}}); err != nil {
		t.Fatal(err)
	}
	h.agent("a1", "command", "exit0", nil)
	res, err := h.st.CreateTasks(context.Background(), models.TaskBatch{ProjectID: "broken", Tasks: []models.BatchTask{{Title: "t"}}})
	if err != nil {
		t.Fatal(err)
	}
	id := res[0].TaskID
	h.start()
	h.waitEnd()
	h.settle()
	tk := h.task(id)
	if tk.Status != models.StatusReady || !strings.Contains(tk.StatusReason, "prepare workspace: ") || strings.Contains(tk.StatusReason, "internal error") {
		t.Fatalf("after the failure: %s %q", tk.Status, tk.StatusReason)
	}
	if tk.WaitingCode != models.WaitingProjectPaused || !strings.Contains(tk.WaitingReason, "held back until 2026-03-01T12:00:30Z") {
		t.Fatalf("waiting %q %q; want the project held back", tk.WaitingCode, tk.WaitingReason)
	}
	if a, _ := h.st.GetAgent(context.Background(), "a1"); a.State != models.AgentIdle {
		t.Fatalf("the agent was blamed: %s", a.State)
	}
	select {
	case r := <-h.ends:
		t.Fatalf("retried at once: %+v", r)
	default:
	}
	h.clock.Advance(30 * time.Second) // the project's cooldown
	if r := h.waitEnd(); r.TaskID != id || r.Attempt != 2 {
		t.Fatalf("after the cooldown: %+v", r)
	}
}
