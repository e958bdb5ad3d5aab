package discord

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/models"
)

// TestStatusGolden renders /status against testdata/status.golden: the
// agents, the counts of what agents work on and what waits to land, and
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
	v := statusView{
		Agents: []models.Agent{
			{ID: "claude-1", AgentType: "claude", State: models.AgentIdle},
			{ID: "codex-1", AgentType: "codex", State: models.AgentBusy, CurrentTaskID: &task},
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
