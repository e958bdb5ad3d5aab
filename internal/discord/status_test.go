package discord

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/models"
)

// TestStatusGolden renders /status against testdata/status.golden: the
// agents (a runner's among them), the counts of what agents work on and
// what waits to land, the runners (how many are connected; each with its
// runs, draining or not, and when one away was last seen), and
// one desk item of every kind, oldest first, with text from others
// escaped; the items the bot has a button for (answer, approve, restart)
// name it and carry it under the message, the others show their command.
func TestStatusGolden(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	task := "bold-orbit"
	exp := at.Add(4 * time.Hour)
	item := func(n int, it models.DeskItem) models.DeskItem {
		it.Since = at.Add(time.Duration(n) * time.Minute)
		return it
	}
	seen := at.Add(-3 * time.Hour)
	v := statusView{
		Agents: []models.Agent{
			{ID: "claude-1", AgentType: "claude", State: models.AgentIdle},
			{ID: "codex-1", AgentType: "codex", State: models.AgentBusy, CurrentTaskID: &task},
			{ID: "build-1/sh", AgentType: "command", State: models.AgentBusy, CurrentTaskID: &task},
		},
		Runners: []models.Runner{
			{Name: "build-1", State: models.RunnerActive, Connected: true, RunsInProgress: 1, LastSeenAt: &at},
			{Name: "gpu", State: models.RunnerDraining, Connected: true, RunsInProgress: 2, LastSeenAt: &at},
			{Name: "laptop", State: models.RunnerActive, LastSeenAt: &seen},
			{Name: "new`box", State: models.RunnerActive},
		},
		Counts:   map[string]map[models.TaskStatus]int{"web": {models.StatusInProgress: 1, models.StatusVerifying: 2, models.StatusBlocked: 1}},
		Activity: models.Activity{AgentsWorking: 1, WaitingToLand: 2},
		Desk: []models.DeskItem{
			item(0, models.DeskItem{Kind: models.DeskQuestion, ProjectID: "web", TaskID: "calm-river", Title: "Pick a *database*",
				What: "Postgres or @everyone <SQLite>?", QuestionID: 3, RunEnded: true, ExpiresAt: &exp,
				Action: models.DeskAction{Command: "agentqueued ctl question answer 3 ANSWER...", Button: "Answer"}}),
			item(1, models.DeskItem{Kind: models.DeskHumanCheck, ProjectID: "web", TaskID: "dry-stone", Title: "Check by hand",
				What:   "verify the change: approve or reject it",
				Action: models.DeskAction{Command: "agentqueued ctl task approve dry-stone", Button: "Approve"}}),
			item(2, models.DeskItem{Kind: models.DeskApproval, ProjectID: "web", TaskID: "red-fox", Title: "Plan the work",
				What:   "approve or reject the change",
				Action: models.DeskAction{Command: "agentqueued ctl task approve red-fox", Button: "Approve"}}),
			item(3, models.DeskItem{Kind: models.DeskPullRequest, ProjectID: "web", TaskID: "tall-pine", Title: "Bump deps",
				What: "review and merge (or close) the pull request",
				Action: models.DeskAction{Command: "agentqueued ctl task approve tall-pine", Button: "Approve",
					URL: "https://github.com/acme/web/pull/7"}}),
			item(4, models.DeskItem{Kind: models.DeskLanding, ProjectID: "web", TaskID: "wide-sea", Title: "Lands",
				What:   "the checked-out default branch has local changes",
				Action: models.DeskAction{Command: "agentqueued land web"}}),
			item(5, models.DeskItem{Kind: models.DeskBlocked, ProjectID: "web", TaskID: "old-oak", Title: "Migrate `db`",
				What: "no retries left: tests fail", Behind: 2,
				Action: models.DeskAction{Command: "agentqueued ctl task restart old-oak", Button: "Restart"}}),
			item(6, models.DeskItem{Kind: models.DeskBudget, ProjectID: "docs", Title: "Docs",
				What:   "used 120 of its budget of 100 tokens; 1 READY task(s) wait",
				Action: models.DeskAction{Command: "agentqueued ctl project edit docs --budget-limit N"}}),
			item(7, models.DeskItem{Kind: models.DeskAgent, AgentID: "claude-1", Title: "claude-1",
				What:   "set aside in ERROR after a run could not start: fix its command or checkout, then resume it",
				Action: models.DeskAction{Command: "agentqueued ctl agent resume claude-1", Button: "Resume"}}),
		},
	}
	content, btns := renderStatus(v)
	golden(t, "testdata/status.golden", content+"\n--- buttons\n"+renderButtons(btns))

	empty, none := renderStatus(statusView{})
	if want := "**Waiting on you** (0)\nnothing 🎉"; len(none) != 0 || !strings.HasSuffix(empty, want) {
		t.Errorf("an empty /status: %q with %d button rows, want %q and none", empty, len(none), want)
	}
}

// TestStatusListsTheOldestItems: /status lists the oldest maxStatusDesk
// items of a longer desk, each with its button, and says how many more
// wait and where they are listed.
func TestStatusListsTheOldestItems(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var v statusView
	for i := range maxStatusDesk + 3 {
		id := fmt.Sprintf("task-%02d", i)
		v.Desk = append(v.Desk, models.DeskItem{Kind: models.DeskBlocked, ProjectID: "web", TaskID: id, Title: "Blocked",
			What: "blocked", Since: at.Add(time.Duration(i) * time.Minute),
			Action: models.DeskAction{Command: "agentqueued ctl task restart " + id, Button: "Restart"}})
	}
	text, rows := renderStatus(v)
	if !strings.Contains(text, "task-19") || strings.Contains(text, "task-20") ||
		!strings.Contains(text, "… and 3 more (`agentqueued ctl desk` lists them all)") {
		t.Errorf("a desk of %d items:\n%s", len(v.Desk), text)
	}
	n := 0
	for _, r := range rows {
		n += len(r.(discordgo.ActionsRow).Components)
	}
	if n != maxStatusDesk {
		t.Errorf("%d buttons, want %d", n, maxStatusDesk)
	}
}

// TestStatusListsTheFirstRunners: /status lists the first maxStatusRunners
// runners and says how many more there are and where they are listed;
// with the longest names and nothing else to say, the answer fits one
// message. Without runners it has no Runners part.
func TestStatusListsTheFirstRunners(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var v statusView
	for i := range maxStatusRunners + 3 {
		v.Runners = append(v.Runners, models.Runner{Name: fmt.Sprintf("%s-%02d", strings.Repeat("r", 61), i),
			State: models.RunnerDraining, LastSeenAt: &at, RunsInProgress: 1000})
	}
	text, _ := renderStatus(v)
	if !strings.Contains(text, "**Runners** (0 of 13 connected)") || !strings.Contains(text, "r-09`") ||
		strings.Contains(text, "r-10`") || !strings.Contains(text, "… and 3 more (`agentqueued ctl runner list`)") {
		t.Errorf("%d runners:\n%s", len(v.Runners), text)
	}
	if n := utf8.RuneCountInString(text); n > messageLimit {
		t.Errorf("/status of %d runners is %d characters, over Discord's %d", len(v.Runners), n, messageLimit)
	}
	if text, _ := renderStatus(statusView{}); strings.Contains(text, "Runners") {
		t.Errorf("/status without runners:\n%s", text)
	}
}

// TestStatusShowsRunners: /status, asked through the fake Discord, shows
// how many runners are connected and each with its runs in progress, and
// their agents among the agents; Discord takes the answer.
func TestStatusShowsRunners(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	ctx := context.Background()
	for _, name := range []string{"build-1", "laptop"} {
		if _, _, err := h.kit.Service.AddRunner(ctx, name, nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.kit.Service.RunnerHello(ctx, "build-1", models.RunnerHello{Version: "1.2.3",
		Agents: []models.RunnerAgent{{Name: "sh", AgentType: "command"}}}, "127.0.0.2:4000"); err != nil {
		t.Fatal(err)
	}
	h.hub.Seen("build-1", "1.2.3", "127.0.0.2:4000")
	if _, err := h.kit.Service.DrainRunner(ctx, "laptop"); err != nil {
		t.Fatal(err)
	}
	id := h.task("web", "Remote work")
	if _, _, err := h.st.ClaimTask(ctx, id, "build-1/sh"); err != nil {
		t.Fatal(err)
	}

	_, text := h.answer(h.command(alice, controlChannel, "status"), 1)
	for _, want := range []string{
		"🤖 `build-1/sh` (command) — STARTING, on `" + id + "`",
		"**Runners** (1 of 2 connected)\n🟢 `build-1` — 1 run\n🔴 `laptop` — 0 runs · draining · never connected\n**Tasks**",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/status lacks %q:\n%s", want, text)
		}
	}
	noRefusals(t, h)
}
