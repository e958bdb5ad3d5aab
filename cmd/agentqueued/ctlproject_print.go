package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds ctl's printers of projects.

func printProjects(w io.Writer, ps []models.Project) {
	tw := table(w)
	row(tw, "ID", "NAME", "STATUS", "WEIGHT", "MAX_AGENTS", "TOKENS", "BUDGET", "REPO")
	for _, p := range ps {
		row(tw, p.ID, p.Name, string(p.Status), strconv.FormatFloat(p.CreditWeight, 'g', -1, 64),
			strconv.Itoa(p.MaxConcurrentAgents), strconv.FormatInt(p.TotalTokensUsed, 10), itoa(p.BudgetLimit), repoSummary(p.Repo))
	}
	tw.Flush()
}

func printProject(w io.Writer, p models.Project) {
	tw := table(w)
	row(tw, "ID:", p.ID)
	row(tw, "Name:", p.Name)
	row(tw, "Status:", string(p.Status))
	row(tw, "Credit weight:", strconv.FormatFloat(p.CreditWeight, 'g', -1, 64))
	row(tw, "Max agents:", strconv.Itoa(p.MaxConcurrentAgents))
	row(tw, "Tokens used:", strconv.FormatInt(p.TotalTokensUsed, 10))
	row(tw, "Budget:", itoa(p.BudgetLimit))
	row(tw, "Discord channel:", str(p.DiscordChannelID))
	row(tw, "Repo:", repoSummary(p.Repo))
	settings := settingRows(p.Settings)
	if len(settings) == 0 {
		row(tw, "Settings:", "(defaults)")
	} else {
		// The heading says how many are set (an empty value would print as
		// "-"), the settings follow it, one a row.
		row(tw, "Settings:", fmt.Sprintf("%d set, the others default", len(settings)))
	}
	for _, kv := range settings {
		row(tw, "  "+kv[0]+":", kv[1])
	}
	row(tw, "Created:", when(p.CreatedAt))
	row(tw, "Updated:", when(p.UpdatedAt))
	tw.Flush()
}
