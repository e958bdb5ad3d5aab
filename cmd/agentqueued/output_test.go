package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

func TestCtlOutputEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	hostile := "fix \x1b[2J\x1b]0;pwned\x07 bug\tnow\r\nok"
	var out bytes.Buffer
	printTasks(&out, []models.Task{{ID: "bold-orbit", ProjectID: "web", Title: hostile, Status: models.StatusReady, CreatedAt: time.Now()}})
	printTaskDetail(&out, models.TaskDetail{Task: models.Task{ID: "bold-orbit", Title: hostile, Description: "line one\n\x1b[31mred\x1b[0m"}})
	got := out.String()
	for _, bad := range []string{"\x1b", "\x07", "\r"} {
		if strings.Contains(got, bad) {
			t.Fatalf("output carries %q:\n%s", bad, got)
		}
	}
	if !strings.Contains(got, `fix \x1b[2J\x1b]0;pwned\a bug\tnow\r\nok`) || !strings.Contains(got, `\x1b[31mred`) {
		t.Fatalf("escaped text missing:\n%s", got)
	}
	if clean("plain — text") != "plain — text" {
		t.Fatal("clean changed printable text")
	}
}

// TestTaskOutputSaysWhyATaskWaits: `ctl task list` has a WAITING column and
// `ctl task show` the reason.
func TestTaskOutputSaysWhyATaskWaits(t *testing.T) {
	t.Parallel()
	waiting := models.Task{ID: "bold-orbit", ProjectID: "web", Title: "t", Status: models.StatusReady,
		WaitingCode: models.WaitingSlots, WaitingReason: "all 2 slots of project web are busy"}
	running := models.Task{ID: "calm-river", ProjectID: "web", Title: "u", Status: models.StatusInProgress}
	var list, show bytes.Buffer
	printTasks(&list, []models.Task{waiting, running})
	printTask(&show, waiting)
	lines := strings.Split(strings.TrimSpace(list.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "WAITING") || !strings.Contains(lines[1], "slots_busy") ||
		!strings.Contains(lines[2], " - ") {
		t.Fatalf("task list:\n%s", list.String())
	}
	if !strings.Contains(show.String(), "Waiting:            all 2 slots of project web are busy (slots_busy)") {
		t.Fatalf("task show:\n%s", show.String())
	}
}

// TestTaskShowListsRuns: `ctl task show` lists each run with its CLI and
// version, session, tokens with cache reads and writes, cost, outcome and
// what went wrong on the CLI's side; `ctl agent list` and `show` the CLI
// version, with a warning below the known-good one.
func TestTaskShowListsRuns(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	end := start.Add(5 * time.Minute)
	cost := 0.0123
	d := models.TaskDetail{Task: models.Task{ID: "bold-orbit", ProjectID: "web", Title: "Write the page",
		Status: models.StatusFailed, CreatedAt: start, UpdatedAt: end},
		Runs: []models.Run{
			{ID: 7, TaskID: "bold-orbit", AgentID: "claude-1", Attempt: 1, Kind: models.RunWork, StartedAt: start, EndedAt: &end,
				Outcome: "failed", CLI: "claude", CLIVersion: "2.1.197", SessionID: "5b1d7e02-9c4a-4e8f-b3d6-7a2c1e0f9d44",
				CLIWarning: models.CLIVersionWarning("claude", "2.1.197"),
				Usage:      models.RunTokens{Input: 45, Output: 42, CacheRead: 1000, CacheWrite: 900}, CostUSD: &cost,
				DeniedTools: []string{"Write", "Edit"}, MCPNotReady: []string{"agentqueued (pending)"}},
			{ID: 8, TaskID: "bold-orbit", AgentID: "codex-1", Attempt: 2, Kind: models.RunWork, StartedAt: end,
				CLI: "codex", CLIVersion: "0.169.0", SessionID: "0199a213-81c0-7800-8aa1-bbab2a035a53",
				Usage: models.RunTokens{Input: 8000, Output: 300, CacheRead: 2000}},
		}}
	agents := []models.Agent{
		{ID: "claude-1", Name: "claude-1", AgentType: "claude", State: models.AgentIdle, CreatedAt: start, CLIVersion: "2.1.197",
			CLIWarning: models.CLIVersionWarning("claude", "2.1.197")},
		{ID: "codex-1", Name: "codex-1", AgentType: "codex", State: models.AgentBusy, CreatedAt: start, CLIVersion: "0.169.0"},
		{ID: "worker", Name: "worker", AgentType: "command", State: models.AgentIdle, CreatedAt: start},
	}
	var out bytes.Buffer
	printTaskDetail(&out, d)
	out.WriteString("\n--- ctl agent list\n")
	printAgents(&out, agents)
	out.WriteString("\n--- ctl agent show claude-1\n")
	printAgent(&out, agents[0])
	golden(t, "testdata/ctl-task-runs.golden", out.String())
}
