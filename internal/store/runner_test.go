package store_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// runnerAgent adds an IDLE command agent on runner, named as a runner's
// agents are (RUNNER/AGENT). Until runners connect, nothing but the
// database makes one.
func runnerAgent(t *testing.T, s *store.Store, runner, name string) string {
	t.Helper()
	id := runner + "/" + name
	if err := store.ExecForTest(s, `INSERT INTO agents (id, name, agent_type, state, created_at, command, runner_id)
		VALUES ('`+id+`', '`+name+`', 'command', 'IDLE', 0, '/bin/true', '`+runner+`')`); err != nil {
		t.Fatalf("add agent %s: %v", id, err)
	}
	return id
}

// createRunner adds a runner whose token is token.
func createRunner(t *testing.T, s *store.Store, r models.Runner, token string) models.Runner {
	t.Helper()
	got, err := s.CreateRunner(context.Background(), r, models.RunnerTokenHash(token))
	if err != nil {
		t.Fatalf("create runner %s: %v", r.Name, err)
	}
	return got
}

func TestRunnerRegistry(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := storetest.Open(t, storetest.WithClock(clocktest.New(at)))
	ctx := context.Background()

	r1 := createRunner(t, s, models.Runner{Name: "r1", Labels: []string{"gpu", "linux"}, Capacity: 3}, "aqr_one")
	if r1.State != models.RunnerActive || !r1.CreatedAt.Equal(at) || r1.LastSeenAt != nil || r1.Agents == nil || len(r1.Agents) != 0 {
		t.Fatalf("created runner %+v", r1)
	}
	createRunner(t, s, models.Runner{Name: "r0"}, "aqr_zero")

	refused := []struct {
		name string
		r    models.Runner
		hash string
		code models.ErrorCode
		msg  string
	}{
		{"name taken", models.Runner{Name: "r1"}, models.RunnerTokenHash("aqr_other"), models.CodeConflict, `runner "r1" already exists`},
		{"bad name", models.Runner{Name: "R 1"}, models.RunnerTokenHash("aqr_x"), models.CodeInvalid, "name: runner name"},
		{"bad label", models.Runner{Name: "r2", Labels: []string{"GPU"}}, models.RunnerTokenHash("aqr_x"), models.CodeInvalid, "labels[0]"},
		{"bad capacity", models.Runner{Name: "r2", Capacity: -1}, models.RunnerTokenHash("aqr_x"), models.CodeInvalid, "capacity"},
		{"token not hashed", models.Runner{Name: "r2"}, "aqr_plain", models.CodeInvalid, "hex SHA-256"},
	}
	for _, tc := range refused {
		_, err := s.CreateRunner(ctx, tc.r, tc.hash)
		if models.ErrorCodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %s naming %q", tc.name, err, tc.code, tc.msg)
		}
	}

	a := runnerAgent(t, s, "r1", "codex-1")
	b := runnerAgent(t, s, "r1", "claude-1")
	storetest.Agent(t, s, "local")
	rs, err := s.ListRunners(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Name != "r0" || rs[1].Name != "r1" {
		t.Fatalf("runners %+v, want r0 and r1 by name", rs)
	}
	if !slices.Equal(rs[1].Agents, []string{b, a}) || !slices.Equal(rs[1].Labels, []string{"gpu", "linux"}) ||
		rs[1].Capacity != 3 || rs[0].Agents == nil || len(rs[0].Agents) != 0 || rs[0].Labels == nil {
		t.Fatalf("listed %+v", rs)
	}
	got, err := s.GetRunner(ctx, "r1")
	if err != nil || !slices.Equal(got.Agents, []string{b, a}) || got.State != models.RunnerActive {
		t.Fatalf("GetRunner(r1) = %+v, %v", got, err)
	}
	if _, err := s.GetRunner(ctx, "ghost"); models.ErrorCodeOf(err) != models.CodeNotFound || !strings.Contains(err.Error(), `runner "ghost" not found`) {
		t.Fatalf("GetRunner(ghost): %v", err)
	}
	if ag, err := s.GetAgent(ctx, a); err != nil || ag.RunnerID != "r1" {
		t.Fatalf("agent %s: %+v %v", a, ag, err)
	}
	if ag, err := s.GetAgent(ctx, "local"); err != nil || ag.RunnerID != "" {
		t.Fatalf("the daemon's own agent: %+v %v", ag, err)
	}

	byToken, err := s.RunnerByTokenHash(ctx, models.RunnerTokenHash("aqr_one"))
	if err != nil || byToken.Name != "r1" {
		t.Fatalf("RunnerByTokenHash(r1's) = %+v, %v", byToken, err)
	}
	wrong := models.RunnerTokenHash("aqr_wrong")
	if _, err := s.RunnerByTokenHash(ctx, wrong); models.ErrorCodeOf(err) != models.CodeNotFound || strings.Contains(err.Error(), wrong) {
		t.Fatalf("RunnerByTokenHash(wrong): %v", err)
	}

	drained, err := s.SetRunnerState(ctx, "r1", models.RunnerDraining)
	if err != nil || drained.State != models.RunnerDraining || !slices.Equal(drained.Agents, []string{b, a}) {
		t.Fatalf("drain: %+v %v", drained, err)
	}
	if again, err := s.SetRunnerState(ctx, "r1", models.RunnerDraining); err != nil || again.State != models.RunnerDraining {
		t.Fatalf("drain again: %+v %v", again, err)
	}
	if back, err := s.SetRunnerState(ctx, "r1", models.RunnerActive); err != nil || back.State != models.RunnerActive {
		t.Fatalf("resume: %+v %v", back, err)
	}
	if _, err := s.SetRunnerState(ctx, "ghost", models.RunnerDraining); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("drain ghost: %v", err)
	}
	if _, err := s.SetRunnerState(ctx, "r1", "GONE"); models.ErrorCodeOf(err) != models.CodeInvalid {
		t.Fatalf("unknown state: %v", err)
	}

	seen := at.Add(time.Minute)
	if err := s.TouchRunner(ctx, "r1", seen, "0.9.0\x1b[31m", "127.0.0.2:40000"); err != nil {
		t.Fatal(err)
	}
	got, err = s.GetRunner(ctx, "r1")
	if err != nil || got.LastSeenAt == nil || !got.LastSeenAt.Equal(seen) || got.Version != "0.9.0 [31m" || got.Address != "127.0.0.2:40000" {
		t.Fatalf("after a touch: %+v %v", got, err)
	}
	if err := s.TouchRunner(ctx, "ghost", seen, "", ""); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("touch ghost: %v", err)
	}
}

func TestRemoveRunnerWaitsForItsAgentsRuns(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := context.Background()
	storetest.Project(t, s, "p")
	createRunner(t, s, models.Runner{Name: "r1"}, "aqr_one")
	createRunner(t, s, models.Runner{Name: "r2"}, "aqr_two")
	busy := runnerAgent(t, s, "r1", "claude-1")
	paused := runnerAgent(t, s, "r1", "codex-1")
	broken := runnerAgent(t, s, "r1", "aider-1")
	other := runnerAgent(t, s, "r2", "claude-1")
	storetest.Agent(t, s, "local")
	if err := store.ExecForTest(s, "UPDATE agents SET paused = 1, state = 'PAUSED' WHERE id = '"+paused+"';"+
		"UPDATE agents SET state = 'ERROR' WHERE id = '"+broken+"'"); err != nil {
		t.Fatal(err)
	}

	id := storetest.Task(t, s, "p", "t")
	run, _, err := s.ClaimTask(ctx, id, busy)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveRunner(ctx, "r1"); models.ErrorCodeOf(err) != models.CodeConflict ||
		!strings.Contains(err.Error(), "agent "+busy+" STARTING with task "+id) {
		t.Fatalf("removing a runner whose agent starts a run: %v", err)
	}
	if _, err := s.StartRun(ctx, run.ID, 1, "/work"); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordRunSession(ctx, run.ID, "session-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveRunner(ctx, "r1"); models.ErrorCodeOf(err) != models.CodeConflict ||
		!strings.Contains(err.Error(), "agent "+busy+" BUSY with task "+id) {
		t.Fatalf("removing a runner whose agent runs: %v", err)
	}
	if r, err := s.GetRunner(ctx, "r1"); err != nil || len(r.Agents) != 3 {
		t.Fatalf("a refused removal changed the runner: %+v %v", r, err)
	}
	if _, err := s.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentFailed,
		ExpectFrom: models.StatusInProgress, Outcome: "failed"}); err != nil {
		t.Fatal(err)
	}

	// Idle, paused and broken agents do not hold the runner.
	if err := s.RemoveRunner(ctx, "r1"); err != nil {
		t.Fatalf("removing a runner whose agents run nothing: %v", err)
	}
	for _, a := range []string{busy, paused, broken} {
		if _, err := s.GetAgent(ctx, a); models.ErrorCodeOf(err) != models.CodeNotFound {
			t.Errorf("agent %s of the removed runner: %v", a, err)
		}
	}
	for _, a := range []string{other, "local"} {
		if _, err := s.GetAgent(ctx, a); err != nil {
			t.Errorf("agent %s, not the removed runner's: %v", a, err)
		}
	}
	if _, err := s.GetRunner(ctx, "r1"); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("the removed runner: %v", err)
	}
	if _, err := s.RunnerByTokenHash(ctx, models.RunnerTokenHash("aqr_one")); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("the removed runner's token: %v", err)
	}
	if r, err := s.RunnerByTokenHash(ctx, models.RunnerTokenHash("aqr_two")); err != nil || r.Name != "r2" {
		t.Fatalf("the other runner's token: %+v %v", r, err)
	}
	kept, err := s.GetRun(ctx, run.ID)
	if err != nil || kept.AgentID != busy || kept.Outcome != "failed" {
		t.Fatalf("the run of the removed runner's agent: %+v %v", kept, err)
	}
	if sess, _, err := s.LastSession(ctx, id, busy); err != nil || sess != "" {
		t.Fatalf("the removed agent's session is still offered: %q %v", sess, err)
	}
	if err := s.RemoveRunner(ctx, "r1"); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("removing it again: %v", err)
	}
}

// A drained runner's agent is given no run, even by a scheduling round
// that read it as idle before the drain: the claim checks the runner.
func TestClaimRefusesADrainedRunnersAgent(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := context.Background()
	storetest.Project(t, s, "p")
	createRunner(t, s, models.Runner{Name: "r1"}, "aqr_one")
	agent := runnerAgent(t, s, "r1", "claude-1")
	id := storetest.Task(t, s, "p", "t")
	if _, err := s.SetRunnerState(ctx, "r1", models.RunnerDraining); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ClaimTask(ctx, id, agent); models.ErrorCodeOf(err) != models.CodeConflict ||
		!strings.Contains(err.Error(), "runner r1 is DRAINING") {
		t.Fatalf("claiming for a drained runner's agent: %v", err)
	}
	if task, err := s.GetTask(ctx, id); err != nil || task.Status != models.StatusReady {
		t.Fatalf("the task after the refused claim: %+v %v", task.Status, err)
	}
	if _, err := s.SetRunnerState(ctx, "r1", models.RunnerActive); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ClaimTask(ctx, id, agent); err != nil {
		t.Fatalf("claiming once the runner is active again: %v", err)
	}
}

// TestMigrationAddsRunners opens a database an older agentqueued left
// (schema 38): its agents are the daemon's own, no runner exists, and a
// runner can be added and given agents, whose runner must exist.
func TestMigrationAddsRunners(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "old.db")
	if err := store.MigrateForTest(path, 38); err != nil {
		t.Fatal(err)
	}
	if err := store.ExecAtForTest(path, `INSERT INTO agents (id, name, agent_type, state, created_at, command)
		VALUES ('a1', 'a1', 'command', 'IDLE', 0, '/bin/true')`); err != nil {
		t.Fatal(err)
	}
	s := storetest.OpenAt(t, path)
	ctx := context.Background()
	if a, err := s.GetAgent(ctx, "a1"); err != nil || a.RunnerID != "" {
		t.Fatalf("an agent of the old database: %+v %v", a, err)
	}
	if rs, err := s.ListRunners(ctx); err != nil || len(rs) != 0 {
		t.Fatalf("runners of the old database: %+v %v", rs, err)
	}
	createRunner(t, s, models.Runner{Name: "r1"}, "aqr_one")
	runnerAgent(t, s, "r1", "claude-1")
	if err := store.ExecForTest(s, "UPDATE agents SET runner_id = 'ghost' WHERE id = 'a1'"); err == nil ||
		!strings.Contains(err.Error(), "FOREIGN KEY") {
		t.Fatalf("an agent given a runner that does not exist: %v", err)
	}
	if err := store.ExecForTest(s, "UPDATE runners SET capacity = -1"); err == nil || !strings.Contains(err.Error(), "CHECK") {
		t.Fatalf("a negative capacity: %v", err)
	}
	if r, err := s.GetRunner(ctx, "r1"); err != nil || !slices.Equal(r.Agents, []string{"r1/claude-1"}) {
		t.Fatalf("runner after the migration: %+v %v", r, err)
	}
}
