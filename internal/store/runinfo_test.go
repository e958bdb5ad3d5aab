package store_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// TestRunShowsItsCLIUsageCostAndDenials checks that what a run's CLI showed
// of itself is kept on the run, shown in the task's detail, and that the
// agent keeps the latest version with a warning below the known-good one.
func TestRunShowsItsCLIUsageCostAndDenials(t *testing.T) {
	t.Parallel()
	s, _ := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "p")
	if _, err := s.RegisterAgent(ctx, models.Agent{ID: "c1", AgentType: "claude"}); err != nil {
		t.Fatal(err)
	}
	ids := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "a", Title: "A"})
	run, _, err := s.ClaimTask(ctx, ids["a"], "c1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartRun(ctx, run.ID, 4242, "/work/c1/p"); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		do   func() error
	}{
		{"cli", func() error {
			return s.RecordRunCLI(ctx, run.ID, models.RunCLI{CLI: "claude", Version: "2.1.197",
				MCPNotReady: []string{"agentqueued (pending)"}})
		}},
		{"cli again without a version", func() error { return s.RecordRunCLI(ctx, run.ID, models.RunCLI{CLI: "claude"}) }},
		{"session", func() error { return s.RecordRunSession(ctx, run.ID, "5b1d7e02") }},
		{"usage", func() error {
			_, err := s.RecordRunUsage(ctx, run.ID, models.TokenUsage{Input: 45, Output: 42, CacheRead: 1000, CacheWrite: 900})
			return err
		}},
		{"result", func() error {
			cost := 0.0123
			return s.RecordRunResult(ctx, run.ID, &cost, []string{"Write", "Edit"})
		}},
		{"result without a cost keeps the cost", func() error { return s.RecordRunResult(ctx, run.ID, nil, []string{"Write", "Edit"}) }},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
	}
	d, err := s.GetTaskDetail(ctx, ids["a"])
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Runs) != 1 {
		t.Fatalf("runs in the detail: %+v", d.Runs)
	}
	got := d.Runs[0]
	want := models.RunTokens{Input: 45, Output: 42, CacheRead: 1000, CacheWrite: 900}
	if got.CLI != "claude" || got.CLIVersion != "2.1.197" || got.SessionID != "5b1d7e02" || got.Usage != want ||
		got.CostUSD == nil || *got.CostUSD != 0.0123 || !reflect.DeepEqual(got.DeniedTools, []string{"Write", "Edit"}) ||
		!reflect.DeepEqual(got.MCPNotReady, []string{"agentqueued (pending)"}) || got.CLIWarning == "" {
		t.Fatalf("run in the detail: %+v", got)
	}
	a := agentState(t, s, "c1")
	if a.CLIVersion != "2.1.197" || a.CLIWarning != "claude 2.1.197 is older than 2.1.221, the oldest version known to work well" {
		t.Fatalf("agent: version %q, warning %q", a.CLIVersion, a.CLIWarning)
	}
}

// TestAgentTokenTotals checks that an agent's total and session counts
// grow with its runs' usage, whether the CLI's stream or the agent RPC's
// usage tool reported it, and that the session count starts again at a
// session the agent has not had before.
func TestAgentTokenTotals(t *testing.T) {
	t.Parallel()
	s, _ := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "p")
	if _, err := s.RegisterAgent(ctx, models.Agent{ID: "c1", AgentType: "claude"}); err != nil {
		t.Fatal(err)
	}
	ids := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "a", Title: "A"})
	run, _, err := s.ClaimTask(ctx, ids["a"], "c1")
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name           string
		do             func() error
		total, session int64
	}{
		{"a session", func() error { return s.RecordRunSession(ctx, run.ID, "s1") }, 0, 0},
		{"the stream's usage", func() error {
			_, err := s.RecordRunUsage(ctx, run.ID, models.TokenUsage{Input: 100})
			return err
		}, 100, 100},
		{"the usage tool", func() error {
			return s.RecordTokenUsage(ctx, models.TokenUsage{ProjectID: "p", TaskID: ids["a"], AgentID: "c1", Input: 20, Output: 5})
		}, 125, 125},
		{"the same session again", func() error { return s.RecordRunSession(ctx, run.ID, "s1") }, 125, 125},
		{"a new session", func() error { return s.RecordRunSession(ctx, run.ID, "s2") }, 125, 0},
		{"usage in the new session", func() error {
			_, err := s.RecordRunUsage(ctx, run.ID, models.TokenUsage{Input: 130})
			return err
		}, 155, 30},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		a, err := s.GetAgent(ctx, "c1")
		if err != nil || a.TotalTokensUsed != st.total || a.SessionTokensUsed != st.session {
			t.Fatalf("after %s: total %d, session %d (%v); want %d, %d", st.name, a.TotalTokensUsed, a.SessionTokensUsed, err,
				st.total, st.session)
		}
	}
}
