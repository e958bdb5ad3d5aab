package orchestrator

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/repo"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// historyAge is how old the seeded history is: older than the scheduling
// window, as finished work mostly is.
const historyAge = 48 * time.Hour

// openBenchStore opens a store at path whose OnChange wakes *wake once it
// is set; the caller closes it.
func openBenchStore(b *testing.B, path string, clock *clocktest.Fake, wake *atomic.Pointer[Orchestrator]) *store.Store {
	b.Helper()
	st := storetest.OpenAt(b, path, storetest.WithClock(clock), storetest.WithOnChange(func() {
		if o := wake.Load(); o != nil {
			o.Wake()
		}
	}))
	return st
}

func benchCreate(b *testing.B, st *store.Store, batch models.TaskBatch) []models.BatchResult {
	b.Helper()
	res, err := st.CreateTasks(context.Background(), batch)
	if err != nil {
		b.Fatal(err)
	}
	return res
}

func benchApply(b *testing.B, st *store.Store, req models.TransitionRequest) {
	b.Helper()
	if _, err := st.ApplyEvent(context.Background(), req); err != nil {
		b.Fatal(err)
	}
}

// seedBlocked creates n BLOCKED tasks in project p by the cascade: a root
// task is blocked (READY -ASSIGNED-> ASSIGNED -TIMEOUT-> BLOCKED) and a
// batch of n-1 tasks that depend on it is created BLOCKED in one
// transaction. It returns the ids of the n-1 dependents.
func seedBlocked(b *testing.B, st *store.Store, p string, n int) []string {
	b.Helper()
	root := benchCreate(b, st, models.TaskBatch{ProjectID: p, Tasks: []models.BatchTask{{Title: "seed root"}}})[0].TaskID
	benchApply(b, st, models.TransitionRequest{TaskID: root, Event: models.EventAssigned, AgentID: "seeder", ExpectFrom: models.StatusReady})
	benchApply(b, st, models.TransitionRequest{TaskID: root, Event: models.EventTimeout, ExpectFrom: models.StatusAssigned,
		Reason: "seeded history"})
	batch := models.TaskBatch{ProjectID: p, Tasks: make([]models.BatchTask, n-1)}
	for i := range batch.Tasks {
		batch.Tasks[i] = models.BatchTask{Title: fmt.Sprintf("history %d", i), Dependencies: []models.BatchDependency{{ID: root}}}
	}
	var ids []string
	for _, r := range benchCreate(b, st, batch) {
		if r.Status != models.StatusBlocked {
			b.Fatalf("seeded task %s is %s", r.TaskID, r.Status)
		}
		ids = append(ids, r.TaskID)
	}
	return ids
}

// seedTerminal gives project p the history of n finished tasks, completed
// of them COMPLETED and the rest BLOCKED, in chunks of at most 10,000: the
// fast legal path for large histories, where a chunk is blocked by the
// cascade in one transaction and a task is skipped to COMPLETED with one
// commit (BLOCKED -ADMIN_SKIP-> COMPLETED).
func seedTerminal(b *testing.B, st *store.Store, p string, n, completed int) {
	b.Helper()
	for n > 0 {
		chunk := min(n, 10_000)
		share := min(completed, chunk*completed/n, chunk-1)
		for _, id := range seedBlocked(b, st, p, chunk)[:share] {
			benchApply(b, st, models.TransitionRequest{TaskID: id, Event: models.EventAdminSkip, ExpectFrom: models.StatusBlocked,
				Reason: "seeded history", Actor: "seeder"})
		}
		n, completed = n-chunk, completed-share
	}
}

// seedCompletedRuns completes n tasks of project p the agent's way: claimed
// by agentID, started, its run ended with AGENT_COMPLETED, VERIFY_PASSED
// (four commits and a run row each).
func seedCompletedRuns(b *testing.B, st *store.Store, p string, n int, agentID string) {
	b.Helper()
	ctx := context.Background()
	batch := models.TaskBatch{ProjectID: p, Tasks: make([]models.BatchTask, n)}
	for i := range batch.Tasks {
		batch.Tasks[i] = models.BatchTask{Title: fmt.Sprintf("done %d", i)}
	}
	for _, r := range benchCreate(b, st, batch) {
		run, _, err := st.ClaimTask(ctx, r.TaskID, agentID)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := st.StartRun(ctx, run.ID, 0, ""); err != nil {
			b.Fatal(err)
		}
		if _, err := st.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentCompleted,
			ExpectFrom: models.StatusInProgress, Outcome: "completed"}); err != nil {
			b.Fatal(err)
		}
		benchApply(b, st, models.TransitionRequest{TaskID: r.TaskID, Event: models.EventVerifyPassed,
			ExpectFrom: models.StatusVerifying, Actor: "system"})
	}
}

// benchAgentScript holds a task whose title contains "bench-hold" until
// the benchmark writes an exit code to the FIFO $RELEASE; any other task
// ends at once. The prompt's first line is "# Task <id>: <title>".
const benchAgentScript = `#!/bin/sh
read -r line
case "$line" in
*bench-hold*) read -r code < "$RELEASE"; exit "$code" ;;
esac
exit 0
`

// BenchmarkCompleteToDependentStart measures, with 10,000 tasks of history
// in the database, the time from an upstream agent's completion (it has
// reported complete through the service and its process is exiting) to the
// start of its dependent's agent process: the end of the run recorded,
// delivery, the promotion, the wake-up, a scheduling round, the claim, the
// workspace and the process start. Real processes, the real clock, and a
// safety tick of an hour: only wake-ups drive the loop.
func BenchmarkCompleteToDependentStart(b *testing.B) {
	ctx := context.Background()
	clock := clocktest.NewFollowing() // the store's clock: real time, shifted back while history is seeded
	var orch atomic.Pointer[Orchestrator]
	dir := b.TempDir()
	st := openBenchStore(b, filepath.Join(dir, "aq.db"), clock, &orch)
	defer st.Close()
	script := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(script, []byte(benchAgentScript), 0o755); err != nil {
		b.Fatal(err)
	}
	fifo := filepath.Join(dir, "release")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		b.Fatal(err)
	}
	if _, err := st.CreateProject(ctx, models.Project{ID: "p"}); err != nil {
		b.Fatal(err)
	}
	for _, id := range []string{"a1", "a2"} {
		if _, err := st.RegisterAgent(ctx, models.Agent{ID: id, AgentType: "command",
			AgentSettings: models.AgentSettings{Command: script, Env: map[string]string{"RELEASE": fifo}}}); err != nil {
			b.Fatal(err)
		}
	}

	setup := time.Now()
	clock.Advance(-historyAge) // the store writes history in the past
	seedCompletedRuns(b, st, "p", 1_000, "a1")
	seedTerminal(b, st, "p", 9_000, 8_000)
	clock.Advance(historyAge)
	b.Logf("seeded 9,000 COMPLETED (1,000 with runs) and 1,000 BLOCKED tasks in %s", time.Since(setup).Round(time.Millisecond))

	starts, ends := make(chan models.Run, 16), make(chan models.Run, 16)
	ws, err := repo.New(repo.Config{BaseDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	var logger *slog.Logger
	if os.Getenv("AQ_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	var rounds atomic.Int64
	o, err := New(Config{SafetyTick: time.Hour, RunDir: b.TempDir(), StopGrace: time.Second, Logger: logger,
		OnRound:    func(uint64) { rounds.Add(1) },
		OnRunStart: func(r models.Run) { starts <- r },
		OnRunEnd:   func(r models.Run, _ models.TransitionResult) { ends <- r }},
		st, ws, agent.NewRegistry(agent.Command{}))
	if err != nil {
		b.Fatal(err)
	}
	orch.Store(o)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- o.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	wait := func(ch chan models.Run, what string) models.Run {
		select {
		case r := <-ch:
			return r
		case <-time.After(progresstest.Stall()):
			b.Fatalf("no %s within the stall limit %s", what, progresstest.Stall())
		}
		return models.Run{}
	}

	var samples []time.Duration
	var pairRounds int64
	// steps: exit to the run's end recorded, to the upstream COMPLETED (end
	// of run and delivery committed), to the dependent claimed (wake-up,
	// round, claim), to its process started and recorded, to the hook.
	stepNames := []string{"process exit → run end recorded", "→ upstream COMPLETED", "→ dependent claimed",
		"→ process started and recorded", "→ OnRunStart"}
	steps := make([][]time.Duration, len(stepNames))
	var pairs []string
	for b.Loop() {
		b.StopTimer()
		before := rounds.Load()
		ids := benchCreate(b, st, models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{
			{LocalID: "up", Title: "bench-hold upstream"},
			{LocalID: "down", Title: "dependent", Dependencies: []models.BatchDependency{{ID: "up"}}}}})
		up := wait(starts, "upstream start")
		if up.TaskID != ids[0].TaskID {
			b.Fatalf("started %s, want the upstream %s", up.TaskID, ids[0].TaskID)
		}
		if err := o.Complete(ctx, up, models.Completion{Summary: "done"}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		// The write returns once the agent has read its exit code: from
		// here on it is exiting.
		if err := os.WriteFile(fifo, []byte("0\n"), 0o600); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		down := wait(starts, "dependent start")
		t1 := time.Now()
		b.StopTimer()
		samples = append(samples, t1.Sub(t0))
		// The store records with real time here: the run's end, the
		// upstream's COMPLETED, the dependent's ASSIGNED and AGENT_STARTED
		// split the latency into steps.
		marks := []time.Time{t0, runEnd(b, st, up.ID), eventAt(b, st, ids[0].TaskID, models.EventVerifyPassed),
			eventAt(b, st, ids[1].TaskID, models.EventAssigned), eventAt(b, st, ids[1].TaskID, models.EventAgentStarted), t1}
		for i := range steps {
			steps[i] = append(steps[i], marks[i+1].Sub(marks[i]))
		}
		pairs = append(pairs, ids[0].TaskID, ids[1].TaskID)
		if down.TaskID != ids[1].TaskID {
			b.Fatalf("started %s, want the dependent %s", down.TaskID, ids[1].TaskID)
		}
		wait(ends, "run end")
		wait(ends, "run end")
		pairRounds += rounds.Load() - before
		b.StartTimer()
	}
	b.StopTimer()
	for _, id := range pairs {
		if t, err := st.GetTask(ctx, id); err != nil || t.Status != models.StatusCompleted {
			b.Fatalf("task %s: %s %q %v", id, t.Status, t.StatusReason, err)
		}
	}
	b.ReportMetric(percentile(samples, 0.50), "p50-ms")
	b.ReportMetric(percentile(samples, 0.99), "p99-ms")
	// Rounds per task, counted from the pair's creation until both runs
	// have ended (the last wake-ups may fall into the next pair's count).
	b.ReportMetric(float64(pairRounds)/float64(2*len(samples)), "rounds/task")
	var medians []string
	for i, name := range stepNames {
		medians = append(medians, fmt.Sprintf("%s %.2f ms", name, percentile(steps[i], 0.50)))
	}
	b.Logf("median steps: %s", strings.Join(medians, ", "))
}

// runEnd returns when run id ended.
func runEnd(b *testing.B, st *store.Store, id int64) time.Time {
	b.Helper()
	r, err := st.GetRun(context.Background(), id)
	if err != nil || r.EndedAt == nil {
		b.Fatalf("run %d: %+v %v", id, r, err)
	}
	return *r.EndedAt
}

// eventAt returns when task id last had event ev.
func eventAt(b *testing.B, st *store.Store, id string, ev models.TaskEvent) time.Time {
	b.Helper()
	d, err := st.GetTaskDetail(context.Background(), id)
	if err != nil {
		b.Fatal(err)
	}
	for i := len(d.Events) - 1; i >= 0; i-- {
		if d.Events[i].Event == ev {
			return d.Events[i].CreatedAt
		}
	}
	b.Fatalf("task %s has no %s event: %+v", id, ev, d.Events)
	return time.Time{}
}

// percentile returns the q-quantile of samples in milliseconds (0 for none).
func percentile(samples []time.Duration, q float64) float64 {
	if len(samples) == 0 {
		return 0
	}
	sorted := slices.Sorted(slices.Values(samples))
	return float64(sorted[min(int(q*float64(len(sorted))), len(sorted)-1)]) / float64(time.Millisecond)
}

// memDir returns a directory for a benchmark's database on tmpfs
// (/dev/shm) when there is one, else a temporary directory: seeding a large
// history commits once per task, and on tmpfs a commit's fsync is free. The
// measured operation only reads, from the page cache either way.
func memDir(b *testing.B) string {
	b.Helper()
	if fi, err := os.Stat("/dev/shm"); err != nil || !fi.IsDir() {
		return b.TempDir()
	}
	dir, err := os.MkdirTemp("/dev/shm", "aq-bench")
	if err != nil {
		return b.TempDir()
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// BenchmarkSchedulingRound measures one scheduling round as the loop runs
// it: the store's SchedulingState read, then Schedule (the dispatch of its
// assignments is not included). The database holds 1,000 READY tasks over
// 20 projects, 50 idle agents, and a history of finished tasks (70%
// COMPLETED, 30% BLOCKED, older than the window) of 10,000, then 100,000
// tasks: the round's cost must not grow with it. The last case reads the
// 100,000-task database with the window moved over the history, so that its
// 70,000 completions are counted.
func BenchmarkSchedulingRound(b *testing.B) {
	const projects, readyPerProject, agents = 20, 50, 50
	ctx := context.Background()
	clock := clocktest.NewFollowing() // the store's clock: real time, shifted back while history is seeded
	st := openBenchStore(b, filepath.Join(memDir(b), "aq.db"), clock, &atomic.Pointer[Orchestrator]{})
	defer st.Close()
	// grow makes the database hold the READY tasks, the agents and a
	// history of terminal tasks; the cases share it and only add history.
	terminal := 0
	grow := func(b *testing.B, to int) {
		b.Helper()
		start := time.Now()
		if terminal == 0 {
			for i := range projects {
				p := fmt.Sprintf("p%02d", i)
				if _, err := st.CreateProject(ctx, models.Project{ID: p, MaxConcurrentAgents: 3}); err != nil {
					b.Fatal(err)
				}
				batch := models.TaskBatch{ProjectID: p}
				for j := range readyPerProject {
					prio := j % 5
					batch.Tasks = append(batch.Tasks, models.BatchTask{Title: fmt.Sprintf("ready %d", j), Priority: &prio})
				}
				benchCreate(b, st, batch)
			}
			for i := range agents {
				if _, err := st.RegisterAgent(ctx, models.Agent{ID: fmt.Sprintf("a%02d", i), AgentType: "command",
					AgentSettings: models.AgentSettings{Command: "/bin/true"}}); err != nil {
					b.Fatal(err)
				}
			}
		}
		if to <= terminal {
			return
		}
		clock.Advance(-historyAge) // the store writes history in the past
		per := (to - terminal) / projects
		for i := range projects {
			seedTerminal(b, st, fmt.Sprintf("p%02d", i), per, per*7/10)
		}
		clock.Advance(historyAge)
		b.Logf("seeded %d more finished tasks (%d in all) in %s", to-terminal, to, time.Since(start).Round(time.Millisecond))
		terminal = to
	}
	round := func(b *testing.B, at func() time.Time) {
		o := &Orchestrator{cfg: Config{}}
		o.cfg.applyDefaults()
		var completed int
		var read, sched time.Duration
		for b.Loop() {
			t0 := time.Now()
			now := at()
			s, err := st.SchedulingState(ctx, now, o.cfg.Window)
			if err != nil {
				b.Fatal(err)
			}
			snap := o.snapshot(s)
			for _, p := range s.Projects {
				ts, err := st.ReadyTasks(ctx, models.ReadyQuery{ProjectID: p.Project.ID, Now: now, Limit: o.cfg.ReadyPerProject})
				if err != nil {
					b.Fatal(err)
				}
				for _, t := range ts {
					snap.Ready = append(snap.Ready, taskInfo(t))
				}
			}
			t1 := time.Now()
			as := Schedule(snap, SchedulerConfig{Quantum: o.cfg.Quantum})
			read, sched = read+t1.Sub(t0), sched+time.Since(t1)
			if len(snap.Ready) != projects*readyPerProject || len(s.IdleAgents) != agents || len(as) != agents {
				b.Fatalf("%d READY, %d idle agents, %d assignments", len(snap.Ready), len(s.IdleAgents), len(as))
			}
			completed = 0
			for _, p := range s.Projects {
				completed += p.CompletedInWindow
			}
		}
		ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(b.N) }
		b.ReportMetric(ms(read), "read-ms/op")
		b.ReportMetric(ms(sched), "schedule-ms/op")
		b.ReportMetric(float64(completed), "completed-in-window")
	}
	b.Run("terminal=10k", func(b *testing.B) {
		grow(b, 10_000)
		round(b, time.Now)
	})
	b.Run("terminal=100k", func(b *testing.B) {
		grow(b, 100_000)
		round(b, time.Now)
	})
	b.Run("terminal=100k/history-in-window", func(b *testing.B) {
		grow(b, 100_000)
		// The window ends an hour after the history was written.
		round(b, func() time.Time { return time.Now().Add(-historyAge + time.Hour) })
	})
}
