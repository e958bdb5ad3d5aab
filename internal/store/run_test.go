package store_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

func openClocked(t testing.TB) (*store.Store, *clocktest.Fake) {
	t.Helper()
	clock := clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := storetest.Open(t, storetest.WithClock(clock))
	return s, clock
}

func agentState(t *testing.T, s *store.Store, id string) models.Agent {
	t.Helper()
	a, err := s.GetAgent(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestRunLifecycle(t *testing.T) {
	t.Parallel()
	s, _ := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "p")
	storetest.Agent(t, s, "a1")
	ids := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "a", Title: "A"}, models.BatchTask{LocalID: "b", Title: "B", Dependencies: storetest.Deps("a")})

	run, token, err := s.ClaimTask(ctx, ids["a"], "a1")
	if err != nil {
		t.Fatal(err)
	}
	if run.Attempt != 1 || len(token) != 64 {
		t.Fatalf("run %+v, token %q", run, token)
	}
	task, _ := s.GetTask(ctx, ids["a"])
	if task.Status != models.StatusAssigned || *task.AssignedAgentID != "a1" {
		t.Fatalf("task after claim: %+v", task)
	}
	if a := agentState(t, s, "a1"); a.State != models.AgentStarting || *a.CurrentTaskID != ids["a"] {
		t.Fatalf("agent after claim: %+v", a)
	}
	if got, err := s.RunByToken(ctx, token); err != nil || got.ID != run.ID {
		t.Fatalf("token lookup: %+v %v", got, err)
	}
	if _, err := s.RunByToken(ctx, "not-a-token"); models.ErrorCodeOf(err) != models.CodeUnauthorized {
		t.Fatalf("wrong token: %v", err)
	}
	if _, _, err := s.ClaimTask(ctx, ids["a"], "a1"); models.ErrorCodeOf(err) != models.CodeConflict {
		t.Fatalf("second claim: %v", err)
	}

	if res, err := s.StartRun(ctx, run.ID, 4242, "/work/a1/p"); err != nil || res.To != models.StatusInProgress {
		t.Fatalf("start: %+v %v", res, err)
	}
	if a := agentState(t, s, "a1"); a.State != models.AgentBusy || *a.PID != 4242 {
		t.Fatalf("agent after start: %+v", a)
	}
	res, err := s.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentCompleted, ExpectFrom: models.StatusInProgress, Outcome: "completed"})
	if err != nil || res.To != models.StatusVerifying {
		t.Fatalf("finish: %+v %v", res, err)
	}
	if a := agentState(t, s, "a1"); a.State != models.AgentIdle || a.CurrentTaskID != nil || a.PID != nil {
		t.Fatalf("agent after finish: %+v", a)
	}
	if _, err := s.RunByToken(ctx, token); models.ErrorCodeOf(err) != models.CodeUnauthorized {
		t.Fatalf("stale token accepted: %v", err)
	}
	if _, err := s.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentCompleted, Outcome: "completed"}); models.ErrorCodeOf(err) != models.CodeConflict {
		t.Fatalf("finishing an ended run: %v", err)
	}
	// A second attempt counts up.
	storetest.Apply(t, s, ids["a"], models.EventVerifyFailed, models.EventRetry)
	run2, _, err := s.ClaimTask(ctx, ids["a"], "a1")
	if err != nil || run2.Attempt != 2 {
		t.Fatalf("second attempt: %+v %v", run2, err)
	}
}

func TestClaimRefusalsChangeNothing(t *testing.T) {
	t.Parallel()
	s, _ := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "p")
	storetest.Agent(t, s, "elsewhere", "other")
	storetest.Agent(t, s, "busy")
	ids := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "a", Title: "A"}, models.BatchTask{LocalID: "b", Title: "B"})
	if _, _, err := s.ClaimTask(ctx, ids["b"], "busy"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ agent, want string }{{"elsewhere", "does not work on project p"}, {"busy", "not IDLE"}, {"ghost", "not found"}} {
		if _, _, err := s.ClaimTask(ctx, ids["a"], tc.agent); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("claim by %s: %v, want %q", tc.agent, err, tc.want)
		}
	}
	if st := storetest.Status(t, s, ids["a"]); st != models.StatusReady {
		t.Fatalf("a refused claim left the task %s", st)
	}
	if a := agentState(t, s, "elsewhere"); a.State != models.AgentIdle {
		t.Fatalf("a refused claim left the agent %s", a.State)
	}
}

func TestConcurrentClaimsOneWinner(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "aq.db")
	s1, s2 := storetest.OpenAt(t, path), storetest.OpenAt(t, path)
	storetest.Project(t, s1, "p")
	storetest.Agent(t, s1, "a1")
	storetest.Agent(t, s1, "a2")
	id := storetest.Tasks(t, s1, "p", models.BatchTask{LocalID: "a", Title: "A"})["a"]
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, st := range []*store.Store{s1, s2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, errs[i] = st.ClaimTask(context.Background(), id, []string{"a1", "a2"}[i])
		}()
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("want exactly one winner: %v", errs)
	}
	idle := 0
	for _, a := range []string{"a1", "a2"} {
		if agentState(t, s1, a).State == models.AgentIdle {
			idle++
		}
	}
	if idle != 1 {
		t.Fatalf("%d idle agents after one claim, want 1", idle)
	}
}

func TestSchedulingState(t *testing.T) {
	t.Parallel()
	s, clock := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "p")
	storetest.Project(t, s, "q")
	storetest.Agent(t, s, "a1")
	storetest.Agent(t, s, "a2")
	storetest.Agent(t, s, "a3")
	var batch []models.BatchTask
	for i := range 5 {
		pr := 100 - i
		batch = append(batch, models.BatchTask{Title: "t", Priority: &pr})
	}
	storetest.Tasks(t, s, "p", batch...)
	old := storetest.Tasks(t, s, "q", models.BatchTask{LocalID: "old", Title: "old"}, models.BatchTask{LocalID: "new", Title: "new"})

	// An old run, outside the window.
	r0, _, _ := s.ClaimTask(ctx, old["old"], "a1")
	s.StartRun(ctx, r0.ID, 1, "")
	clock.Advance(time.Hour)
	s.FinishRun(ctx, models.RunEnd{RunID: r0.ID, Event: models.EventAgentCompleted, Outcome: "completed"})
	storetest.Apply(t, s, old["old"], models.EventVerifyPassed) // q completes in the window
	clock.Advance(48 * time.Hour)
	// A finished run of 10 minutes and an open one of 5, inside the window.
	r1, _, _ := s.ClaimTask(ctx, old["new"], "a1")
	s.StartRun(ctx, r1.ID, 1, "")
	clock.Advance(10 * time.Minute)
	s.FinishRun(ctx, models.RunEnd{RunID: r1.ID, Event: models.EventAgentFailed, Outcome: "failed", Error: "boom"})
	ready, _ := s.ListTasks(ctx, models.TaskFilter{ProjectID: "p", Statuses: []models.TaskStatus{models.StatusReady}})
	r2, _, _ := s.ClaimTask(ctx, ready[0].ID, "a2")
	s.StartRun(ctx, r2.ID, 2, "")
	clock.Advance(5 * time.Minute)
	if err := s.RecordTokenUsage(ctx, models.TokenUsage{ProjectID: "p", Input: 100, Output: 50}); err != nil {
		t.Fatal(err)
	}

	st, err := s.SchedulingState(ctx, clock.Now(), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	usage := map[string]models.ProjectUsage{}
	for _, p := range st.Projects {
		usage[p.Project.ID] = p
	}
	if got := usage["q"].AgentSeconds; got != 600 {
		t.Errorf("q agent-seconds %v, want 600 (the run outside the window excluded)", got)
	}
	if got := usage["p"].AgentSeconds; got != 300 {
		t.Errorf("p agent-seconds %v, want 300 (an open run counts up to now)", got)
	}
	if usage["q"].CompletedInWindow != 0 || usage["p"].Running != 1 || usage["q"].Running != 0 {
		t.Errorf("usage %+v", usage)
	}
	ready3, err := s.ReadyTasks(ctx, models.ReadyQuery{ProjectID: "p", Now: clock.Now(), Limit: 3})
	if err != nil || len(ready3) != 3 || ready3[0].Priority != 96 {
		t.Errorf("ready: %d tasks (%v); want the best 3 of p, priority 96 first", len(ready3), err)
	}
	if len(st.Running) != 1 || len(st.IdleAgents) != 2 || st.TokensInWindow != 150 {
		t.Errorf("running %d, idle %d, tokens %d", len(st.Running), len(st.IdleAgents), st.TokensInWindow)
	}
	// With a window reaching back to q's completion, it counts.
	st, _ = s.SchedulingState(ctx, clock.Now(), 72*time.Hour)
	for _, p := range st.Projects {
		if p.Project.ID == "q" && p.CompletedInWindow != 1 {
			t.Errorf("q completions in 72h: %d", p.CompletedInWindow)
		}
	}
}

func TestUpsertAgentKeepsRuntimeState(t *testing.T) {
	t.Parallel()
	s, _ := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "p")
	storetest.Agent(t, s, "a1")
	id := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "a", Title: "A"})["a"]
	if _, _, err := s.ClaimTask(ctx, id, "a1"); err != nil {
		t.Fatal(err)
	}
	a, err := s.UpsertAgent(ctx, models.Agent{ID: "a1", AgentType: "command", AgentSettings: models.AgentSettings{Command: "/new/agent",
		Profile: models.Profile{Model: "opus", AllowedTools: []string{"Edit"}}}})
	if err != nil || a.Command != "/new/agent" || a.Profile.Model != "opus" || len(a.Profile.AllowedTools) != 1 || a.State != models.AgentStarting || *a.CurrentTaskID != id {
		t.Fatalf("upsert of a busy agent: %+v %v", a, err)
	}
	b, err := s.UpsertAgent(ctx, models.Agent{ID: "b1", AgentType: "command", AgentSettings: models.AgentSettings{Command: "x"}})
	if err != nil || b.State != models.AgentIdle {
		t.Fatalf("new agent: %+v %v", b, err)
	}
	if _, err := s.UpsertAgent(ctx, models.Agent{ID: "c1", AgentType: "command"}); models.ErrorCodeOf(err) != models.CodeInvalid {
		t.Fatalf("invalid agent: %v", err)
	}
}

func TestAgentHeartbeatTimeoutIsStored(t *testing.T) {
	t.Parallel()
	s, _ := openClocked(t)
	ctx := context.Background()
	hb := models.Duration(time.Minute)
	if _, err := s.RegisterAgent(ctx, models.Agent{ID: "r1", AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "x", HeartbeatTimeout: hb}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertAgent(ctx, models.Agent{ID: "u1", AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "x", HeartbeatTimeout: hb}}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"r1", "u1"} {
		if a, err := s.GetAgent(ctx, id); err != nil || a.HeartbeatTimeout != hb {
			t.Fatalf("agent %s: heartbeat_timeout %v, %v", id, a.HeartbeatTimeout, err)
		}
	}
	_, err := s.RegisterAgent(ctx, models.Agent{ID: "n1", AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "x", HeartbeatTimeout: -hb}})
	if models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), "heartbeat_timeout") {
		t.Fatalf("negative heartbeat_timeout: %v", err)
	}
}

func TestPausedAgentTakesNoNewTask(t *testing.T) {
	t.Parallel()
	s, clock := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "p")
	storetest.Agent(t, s, "a1")
	id := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "a", Title: "A"})["a"]
	if a, err := s.SetAgentPaused(ctx, "a1", true); err != nil || !a.Paused {
		t.Fatalf("pause: %+v %v", a, err)
	}
	st, _ := s.SchedulingState(ctx, clock.Now(), time.Hour)
	if len(st.IdleAgents) != 0 {
		t.Fatalf("a paused agent is offered: %+v", st.IdleAgents)
	}
	if _, _, err := s.ClaimTask(ctx, id, "a1"); err == nil || !strings.Contains(err.Error(), "paused") {
		t.Fatalf("claim by a paused agent: %v", err)
	}
	if _, err := s.SetAgentPaused(ctx, "a1", false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ClaimTask(ctx, id, "a1"); err != nil {
		t.Fatalf("claim after resume: %v", err)
	}
	if _, err := s.SetAgentPaused(ctx, "ghost", true); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("unknown agent: %v", err)
	}
}

// TestFinishRunSavesTheResultWithTheEnd: a run's result and the start of
// its verification are written in the transaction that ends the run.
func TestFinishRunSavesTheResultWithTheEnd(t *testing.T) {
	t.Parallel()
	s, _ := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "p")
	storetest.Agent(t, s, "a1", "p")
	id := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "a", Title: "a"})["a"]
	run, _, err := s.ClaimTask(ctx, id, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartRun(ctx, run.ID, 1, "/w"); err != nil {
		t.Fatal(err)
	}
	before := s.Commits()
	res, err := s.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentCompleted,
		ExpectFrom: models.StatusInProgress, Outcome: "completed", Result: &models.Completion{Summary: "done"},
		Verification: &models.Verification{TaskID: id, Attempt: run.Attempt, Phase: models.PhaseChecks, Source: "/w"}})
	if err != nil {
		t.Fatal(err)
	}
	if n := s.Commits() - before; n != 1 || res.To != models.StatusVerifying {
		t.Fatalf("the run's end took %d commits and left the task %s; want 1, VERIFYING", n, res.To)
	}
	got, saved, err := s.TaskResult(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := s.Verifications(ctx, models.PhaseChecks)
	if err != nil {
		t.Fatal(err)
	}
	if !saved || got.Summary != "done" || len(vs) != 1 || vs[0].Source != "/w" {
		t.Fatalf("result %v (saved %v), verifications %v; want the result and one verification from /w", got, saved, vs)
	}
}

// TestClaimAndStartSignalAStateChange: a claim and a run's start tell
// OnStateChange (views show the task ASSIGNED, then IN_PROGRESS, at once)
// and not OnChange, the orchestrator's wake-up, which they make no work
// for.
func TestClaimAndStartSignalAStateChange(t *testing.T) {
	t.Parallel()
	var wakes, states atomic.Int64
	s := storetest.Open(t, storetest.WithOnChange(func() { wakes.Add(1) }), storetest.WithOnStateChange(func() { states.Add(1) }))
	ctx := context.Background()
	storetest.Project(t, s, "web")
	storetest.Agent(t, s, "a")
	ids := storetest.Tasks(t, s, "web", models.BatchTask{LocalID: "q", Title: "Work"})
	var run models.Run
	tests := []struct {
		name string
		do   func() error
	}{
		{"claim", func() (err error) { run, _, err = s.ClaimTask(ctx, ids["q"], "a"); return err }},
		{"start", func() error { _, err := s.StartRun(ctx, run.ID, 1, ""); return err }},
	}
	for _, tt := range tests {
		w, st := wakes.Load(), states.Load()
		if err := tt.do(); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := states.Load() - st; got != 1 {
			t.Errorf("%s signalled %d state changes, want 1", tt.name, got)
		}
		if got := wakes.Load() - w; got != 0 {
			t.Errorf("%s woke the orchestrator %d times, want 0", tt.name, got)
		}
	}
}
