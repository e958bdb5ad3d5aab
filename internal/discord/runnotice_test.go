package discord

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/service/servicetest"
)

// TestRunEndNoticesGolden: the thread's notice of a run's end (the task
// failed, paused or completed) says what the run's CLI showed of itself —
// its version, session, tokens with cache reads and writes, cost, denied
// tools, MCP servers not connected at start, a version below the
// known-good one — against testdata/run-notices.golden. A command agent's
// run, which reports none of it, adds no line.
func TestRunEndNoticesGolden(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := servicetest.New(t)
	st := k.Store
	b, err := New(Config{Token: "t", GuildID: "1", ControlChannelID: "2"}, &testService{Service: k.Service}, st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateProject(ctx, models.Project{ID: "web", Name: "Web"}); err != nil {
		t.Fatal(err)
	}
	for _, a := range []models.Agent{{ID: "claude-1", AgentType: "claude"}, {ID: "worker", AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "/bin/true"}}} {
		if _, err := st.RegisterAgent(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	res, err := st.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{
		{LocalID: "a", Title: "Write the page"}, {LocalID: "b", Title: "Tidy up"}}})
	if err != nil {
		t.Fatal(err)
	}
	a, bID := res[0].TaskID, res[1].TaskID
	// a: a claude run whose writes were denied, started before its MCP
	// server connected, by a CLI older than the known-good version.
	run, _, err := st.ClaimTask(ctx, a, "claude-1")
	if err != nil {
		t.Fatal(err)
	}
	cost := 0.0123
	steps := []error{
		func() error { _, err := st.StartRun(ctx, run.ID, 4242, "/work"); return err }(),
		st.RecordRunCLI(ctx, run.ID, models.RunCLI{CLI: "claude", Version: "2.1.197", MCPNotReady: []string{"agentqueued (pending)"}}),
		st.RecordRunSession(ctx, run.ID, "5b1d7e02-9c4a-4e8f-b3d6-7a2c1e0f9d44"),
		func() error {
			_, err := st.RecordRunUsage(ctx, run.ID, models.TokenUsage{Input: 45, Output: 42, CacheRead: 1000, CacheWrite: 900})
			return err
		}(),
		st.RecordRunResult(ctx, run.ID, &cost, []string{"Write", "mcp__agentqueued__progress"}),
		func() error {
			_, err := st.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentFailed, ExpectFrom: models.StatusInProgress,
				Outcome: "failed", Reason: "claude denied 1 tool call(s) (Write)"})
			return err
		}(),
	}
	// b: a command agent's run, which reports nothing of a CLI.
	run2, _, err := st.ClaimTask(ctx, bID, "worker")
	if err != nil {
		t.Fatal(err)
	}
	steps = append(steps,
		func() error { _, err := st.StartRun(ctx, run2.ID, 4343, "/work"); return err }(),
		func() error {
			_, err := st.FinishRun(ctx, models.RunEnd{RunID: run2.ID, Event: models.EventAgentFailed, ExpectFrom: models.StatusInProgress,
				Outcome: "failed", Reason: "exit status 1"})
			return err
		}())
	for i, err := range steps {
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	cases := []struct {
		kind models.NoticeKind
		n    notice
	}{
		{"task.failed", change(a, models.TransitionNotice{Title: "Write the page", Reason: "claude denied 1 tool call(s) (Write)"})},
		{"task.paused", change(a, models.TransitionNotice{Title: "Write the page", Reason: "rate limited"})},
		{"task.completed", change(a, models.TransitionNotice{Title: "Write the page", Actor: "claude-1"})},
		{"task.failed", change(bID, models.TransitionNotice{Title: "Tidy up", Reason: "exit status 1"})},
	}
	var out strings.Builder
	for _, k := range cases {
		parts, err := b.noticeParts(ctx, k.kind, k.n)
		if err != nil {
			t.Fatalf("%s: %v", k.kind, err)
		}
		fmt.Fprintf(&out, "== %s\n", k.kind)
		for _, p := range parts {
			where := "channel"
			if p.Thread {
				where = "thread"
			}
			fmt.Fprintf(&out, "[%s] %s\n", where, p.Content)
		}
	}
	golden(t, "testdata/run-notices.golden", strings.NewReplacer(a, "<task-a>", bID, "<task-b>").Replace(out.String()))
}
