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
	if !strings.Contains(got, `fix \x1b[2J\x1b]0;pwned\a bug now ok`) || !strings.Contains(got, `\x1b[31mred`) {
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

// TestTaskOutputShowsWhatHappens: `ctl task list` has AGENT, UPDATED and
// REASON columns, with text made readable (a line break is a space, an
// escape sequence stays escaped); `ctl task show` the branch, the
// verification phase, the result, the pending plan and each run's agent,
// attempt, duration and tokens; `ctl task result` the result alone; a
// FAILED or PAUSED task what happens next and when: `ctl task list` in its
// NEXT column, `ctl task show` on its "Next" line.
func TestTaskOutputShowsWhatHappens(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	end := start.Add(4*time.Minute + 30*time.Second)
	resume := start.Add(time.Hour)
	agent, branch := "worker-1", "aq/bold-orbit-write-the-page"
	tasks := []models.Task{
		{ID: "bold-orbit", ProjectID: "web", Title: "Write the page", Status: models.StatusVerifying, Priority: 5,
			AssignedAgentID: &agent, StatusReason: "agent completed: the page\nand its test", UpdatedAt: end},
		{ID: "calm-river", ProjectID: "web", Title: "Two\nlines\tand \x1b[31mred", Status: models.StatusReady, Priority: 5,
			WaitingCode: models.WaitingSlots, WaitingReason: "all 2 slots of project web are busy", UpdatedAt: start},
		{ID: "dry-stone", ProjectID: "web", Title: "Long", Status: models.StatusFailed, UpdatedAt: start,
			RetryCount: 1, MaxRetries: 3, StatusReason: strings.Repeat("go test ./... failed; ", 10)},
		{ID: "eager-fox", ProjectID: "web", Title: "Rate limited", Status: models.StatusPaused, UpdatedAt: start,
			ResumeAfter: &resume, StatusReason: "rate limited until 2026-03-01T13:00:00Z"},
		{ID: "frail-leaf", ProjectID: "web", Title: "Out of retries", Status: models.StatusFailed, UpdatedAt: end,
			RetryCount: 3, MaxRetries: 3, StatusReason: "go vet failed"},
	}
	for i := range tasks {
		// What the service adds to a FAILED or PAUSED task it reads.
		tasks[i].SetNextEvent(time.Minute, 30*time.Minute)
	}
	d := models.TaskDetail{Task: tasks[0],
		Verification: &models.Verification{TaskID: "bold-orbit", Attempt: 2, Phase: models.PhaseChecks,
			VerificationNote: models.VerificationNote{Text: "running test command 1 of 2: go test ./..."}, UpdatedAt: end},
		Result: &models.Completion{Summary: "Wrote the page.\nAdded a test.", FilesChanged: []string{"page.go", "page_test.go"},
			Outputs: []byte(`{"pages":["home"]}`)},
		Plan: &models.Plan{ID: 3, TaskID: "bold-orbit", Source: "agent", Status: "pending", CreatedAt: end,
			Tasks: []models.BatchTask{{LocalID: "docs", Title: "Document the page"},
				{LocalID: "e2e", Title: "Test it end to end", Dependencies: []models.BatchDependency{{ID: "docs"}}}}},
		Runs: []models.Run{
			{ID: 7, TaskID: "bold-orbit", AgentID: "worker-1", Attempt: 1, Kind: models.RunWork, StartedAt: start, EndedAt: &end,
				Outcome: "failed", Usage: models.RunTokens{Input: 1200, Output: 340}},
			{ID: 9, TaskID: "bold-orbit", AgentID: "worker-1", Attempt: 2, Kind: models.RunWork, StartedAt: end,
				Usage: models.RunTokens{Input: 50}},
		}}
	d.Task.BranchName = &branch
	var out bytes.Buffer
	out.WriteString("--- ctl task list\n")
	printTasks(&out, tasks)
	out.WriteString("\n--- ctl task show bold-orbit\n")
	printTaskDetail(&out, d)
	for _, i := range []int{2, 3, 4} {
		out.WriteString("\n--- ctl task show " + tasks[i].ID + " (its first rows)\n")
		var show bytes.Buffer
		printTask(&show, tasks[i])
		out.WriteString(strings.Join(strings.SplitAfter(show.String(), "\n")[:6], ""))
	}
	golden(t, "testdata/ctl-task-show.golden", out.String())
}

// TestStatusOutput: `ctl status` shows the projects with their queues and
// how many of their tasks agents work on or wait to land, the agents (a
// runner's among them) and what each is doing, the counts of all
// projects, the runners (connected or not, last seen how long ago, their
// agents and runs in progress, their version; a name's control
// characters escaped), the desk as `ctl desk` prints it, the rules and
// the budget.
func TestStatusOutput(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	task := "bold-orbit"
	limit := int64(500000)
	rest := at.Add(time.Hour)
	remote := "calm-river"
	seen, long := at.Add(time.Hour-5*time.Second), at.Add(-2*24*time.Hour)
	o := models.Overview{
		Projects: []models.Project{{ID: "web", Status: models.ProjectActive, MaxConcurrentAgents: 2},
			{ID: "docs", Status: models.ProjectPaused, MaxConcurrentAgents: 1}},
		Agents: []models.Agent{
			{ID: "claude-1", AgentType: "claude", State: models.AgentBusy, CurrentTaskID: &task},
			{ID: "codex-1", AgentType: "codex", State: models.AgentPaused, RestUntil: &rest, RestReason: "rate limited"},
			{ID: "worker", AgentType: "command", State: models.AgentIdle, Paused: true},
			{ID: "build-1/sh", AgentType: "command", State: models.AgentBusy, CurrentTaskID: &remote},
		},
		Runners: []models.Runner{
			{Name: "build-1", State: models.RunnerActive, Connected: true, LastSeenAt: &seen, Version: "1.2.3",
				Agents: []string{"build-1/sh", "build-1/sh-2"}, RunsInProgress: 1},
			{Name: "gpu\x1b[2J", State: models.RunnerDraining, LastSeenAt: &long, Version: "1.0.0"},
			{Name: "laptop", State: models.RunnerActive},
		},
		Counts: map[string]map[models.TaskStatus]int{"web": {models.StatusReady: 2, models.StatusInProgress: 1,
			models.StatusCompleted: 5, models.StatusBlocked: 2}},
		ProjectActivity: map[string]models.Activity{"web": {AgentsWorking: 1, WaitingToLand: 2}},
		Activity:        models.Activity{AgentsWorking: 1, WaitingToLand: 2},
		Working: []models.Task{{ID: "bold-orbit", ProjectID: "web", Title: "Write the\npage", Status: models.StatusInProgress},
			{ID: "calm-river", ProjectID: "web", Title: "Run remotely", Status: models.StatusInProgress}},
		Desk:  deskItems(at),
		Rules: []models.Rule{{ID: "one-deploy"}},
		Budget: &models.BudgetReport{Window: models.Duration(5 * time.Hour), Since: at.Add(-5 * time.Hour),
			Global: models.GlobalBudget{Budget: &limit, TokensInWindow: 1200},
			Projects: []models.ProjectBudget{{ProjectID: "web", Status: models.ProjectActive, TokensInWindow: 1200, TotalTokensUsed: 9000},
				{ProjectID: "docs", Status: models.ProjectPaused}}},
	}
	var out bytes.Buffer
	printStatus(&out, at.Add(time.Hour), o)
	golden(t, "testdata/ctl-status.golden", out.String())
}

// deskItems are desk items of every kind, oldest first, the first with
// control characters in its text.
func deskItems(at time.Time) []models.DeskItem {
	exp := at.Add(3 * time.Hour)
	return []models.DeskItem{
		{Kind: models.DeskQuestion, ProjectID: "web", TaskID: "bold-orbit", Title: "Write the page", Since: at,
			What: "Which \x1b[31mdatabase\x1b[0m?\nPostgres or SQLite", QuestionID: 3, RunEnded: true, ExpiresAt: &exp,
			Action: models.DeskAction{Command: "agentqueued ctl question answer 3 ANSWER...", Button: "Answer", URL: "/ui/tasks/bold-orbit"}},
		{Kind: models.DeskHumanCheck, ProjectID: "web", TaskID: "calm-river", Title: "Add login", Since: at.Add(time.Minute),
			What:   "verify the change: approve or reject it",
			Action: models.DeskAction{Command: "agentqueued ctl task approve calm-river", Button: "Approve"}},
		{Kind: models.DeskPullRequest, ProjectID: "web", TaskID: "dry-stone", Title: "Bump deps", Since: at.Add(2 * time.Minute),
			What: "review and merge (or close) the pull request",
			Action: models.DeskAction{Command: "agentqueued ctl task approve dry-stone", Button: "Approve",
				URL: "https://github.com/acme/web/pull/7"}},
		{Kind: models.DeskLanding, ProjectID: "web", TaskID: "wide-sea", Title: "Lands", Since: at.Add(3 * time.Minute),
			What: "the checked-out default branch has local changes", Action: models.DeskAction{Command: "agentqueued land web"}},
		{Kind: models.DeskBlocked, ProjectID: "web", TaskID: "red-fox", Title: "Migrate", Since: at.Add(4 * time.Minute),
			What: "no retries left: " + strings.Repeat("tests fail ", 10), Behind: 1,
			Action: models.DeskAction{Command: "agentqueued ctl task restart red-fox", Button: "Restart"}},
		{Kind: models.DeskBudget, ProjectID: "docs", Title: "Docs", Since: at.Add(5 * time.Minute),
			What:   "used 120 of its budget of 100 tokens; 1 READY task(s) wait",
			Action: models.DeskAction{Command: "agentqueued ctl project edit docs --budget-limit N"}},
		{Kind: models.DeskAgent, AgentID: "codex-1", Title: "codex-1", Since: at.Add(-26 * time.Hour),
			What:   "set aside in ERROR after a run could not start: fix its command or checkout, then resume it",
			Action: models.DeskAction{Command: "agentqueued ctl agent resume codex-1", Button: "Resume"}},
	}
}

// TestDeskOutput: `ctl desk` prints one line per item — its age, kind,
// project/task (or agent, or project) and what it asks, cut, with control
// characters shown escaped and notes (tasks behind it, a question whose
// run ended, its expiry) — and the command that ends its wait on the next
// line, with a pull request's address; an empty desk says so.
func TestDeskOutput(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	printDesk(&out, at.Add(90*time.Minute), deskItems(at), true)
	out.WriteString("---\n")
	printDesk(&out, at, nil, false)
	got := out.String()
	if !strings.Contains(got, `\x1b[31mdatabase`) || strings.ContainsAny(got, "\x1b\r") {
		t.Errorf("control characters are not shown escaped:\n%s", got)
	}
	golden(t, "testdata/ctl-desk.golden", got)
}
