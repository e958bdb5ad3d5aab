package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// A hello registers the runner's agents as RUNNER/NAME with what it says
// of them, records when and whence it came, and removes the agents it no
// longer announces unless they hold something.
func TestHelloRunnerRegistersItsAgents(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	s := storetest.Open(t, storetest.WithClock(clocktest.New(at)))
	ctx := context.Background()
	createRunner(t, s, models.Runner{Name: "r1"}, "aqr_one")
	createRunner(t, s, models.Runner{Name: "r2"}, "aqr_two")

	hello := models.RunnerHello{Version: "v9", Agents: []models.RunnerAgent{
		{Name: "claude-1", AgentType: "claude", MaxRuntime: models.Duration(time.Hour), Projects: []string{"p"}},
		{Name: "cmd", AgentType: "command"},
	}}
	ids, err := s.HelloRunner(ctx, "r1", hello, at, "127.0.0.2:4000")
	if err != nil || !slices.Equal(ids, []string{store.RunnerAgentID("r1", "claude-1"), "r1/cmd"}) {
		t.Fatalf("hello: %v, %v", ids, err)
	}
	a, err := s.GetAgent(ctx, "r1/claude-1")
	if err != nil || a.RunnerID != "r1" || a.AgentType != "claude" || a.MaxRuntime != models.Duration(time.Hour) ||
		!slices.Equal(a.Projects, []string{"p"}) || a.State != models.AgentIdle {
		t.Fatalf("agent %+v, %v", a, err)
	}
	r, err := s.GetRunner(ctx, "r1")
	if err != nil || r.Version != "v9" || r.Address != "127.0.0.2:4000" || r.LastSeenAt == nil || !r.LastSeenAt.Equal(at) ||
		!slices.Equal(r.Agents, []string{"r1/claude-1", "r1/cmd"}) {
		t.Fatalf("runner %+v, %v", r, err)
	}
	// Another runner's agent of the same name is its own.
	if ids, err := s.HelloRunner(ctx, "r2", hello, at, ""); err != nil || !slices.Equal(ids, []string{"r2/claude-1", "r2/cmd"}) {
		t.Fatalf("r2's hello: %v, %v", ids, err)
	}

	// r1/cmd holds a task: a hello without it keeps it; r1/claude-1 is
	// idle and goes.
	storetest.Project(t, s, "p")
	task := storetest.Task(t, s, "p", "work")
	if _, _, err := s.ClaimTask(ctx, task, "r1/cmd"); err != nil {
		t.Fatal(err)
	}
	ids, err = s.HelloRunner(ctx, "r1", models.RunnerHello{Version: "v10", Agents: []models.RunnerAgent{
		{Name: "codex-1", AgentType: "codex"}}}, at.Add(time.Minute), "")
	if err != nil || !slices.Equal(ids, []string{"r1/cmd", "r1/codex-1"}) {
		t.Fatalf("second hello: %v, %v", ids, err)
	}
	if _, err := s.GetAgent(ctx, "r1/claude-1"); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("the agent no longer announced: %v", err)
	}

	for _, tc := range []struct {
		name   string
		runner string
		hello  models.RunnerHello
		code   models.ErrorCode
		msg    string
	}{
		{"unknown runner", "r9", hello, models.CodeNotFound, "r9"},
		{"bad type", "r1", models.RunnerHello{Agents: []models.RunnerAgent{{Name: "x", AgentType: "vim"}}}, models.CodeInvalid,
			"agents[0].agent_type"},
		{"bad name", "r1", models.RunnerHello{Agents: []models.RunnerAgent{{Name: "a/b", AgentType: "command"}}}, models.CodeInvalid,
			"agents[0].name"},
		{"twice", "r1", models.RunnerHello{Agents: []models.RunnerAgent{{Name: "x", AgentType: "command"},
			{Name: "x", AgentType: "command"}}}, models.CodeInvalid, "listed twice"},
	} {
		_, err := s.HelloRunner(ctx, tc.runner, tc.hello, at, "")
		if models.ErrorCodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %s naming %q", tc.name, err, tc.code, tc.msg)
		}
	}
	// A refused hello changed nothing.
	if r, _ := s.GetRunner(ctx, "r1"); r.Version != "v10" || !slices.Equal(r.Agents, []string{"r1/cmd", "r1/codex-1"}) {
		t.Fatalf("after refused hellos: %+v", r)
	}
}

// An ACTIVE runner's idle agents are offered to the scheduler, a DRAINING
// runner's are not.
func TestDrainingRunnersAgentsAreNotScheduled(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := context.Background()
	createRunner(t, s, models.Runner{Name: "r1"}, "aqr_one")
	if _, err := s.HelloRunner(ctx, "r1", models.RunnerHello{Agents: []models.RunnerAgent{{Name: "a", AgentType: "command"}}},
		time.Now(), ""); err != nil {
		t.Fatal(err)
	}
	storetest.Agent(t, s, "local")
	idle := func() []string {
		t.Helper()
		st, err := s.SchedulingState(ctx, time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Agents) != 2 {
			t.Fatalf("%d agents, want 2", len(st.Agents))
		}
		var ids []string
		for _, a := range st.IdleAgents {
			ids = append(ids, a.ID)
		}
		return ids
	}
	if got := idle(); !slices.Equal(got, []string{"local", "r1/a"}) {
		t.Fatalf("idle agents with the runner active: %v", got)
	}
	if _, err := s.SetRunnerState(ctx, "r1", models.RunnerDraining); err != nil {
		t.Fatal(err)
	}
	if got := idle(); !slices.Equal(got, []string{"local"}) {
		t.Fatalf("idle agents with the runner draining: %v", got)
	}
}
