package discord

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/models"
)

// statusView reads what /status shows: agents, runners, task counts, what
// the agents work on, and the desk of what waits on a person, from the
// daemon's overview (the one `ctl status` and the dashboard show too).
func (b *Bot) statusView(ctx context.Context) (statusView, error) {
	o, err := b.svc.Overview(ctx)
	if err != nil {
		return statusView{}, err
	}
	return statusView{Agents: o.Agents, Runners: o.Runners, Counts: o.Counts, Activity: o.Activity, Desk: o.Desk,
		DeskTruncated: o.DeskTruncated, Rules: o.Rules}, nil
}

// maxDeskButtons caps the buttons under /status: Discord takes five rows
// of five.
const maxDeskButtons = 25

// deskButton is the bot's button that ends a desk item's wait, the same
// one its notice carries, and its label; ok is false when the bot has
// none for the item (a landing, a budget, an agent in ERROR): its command
// is shown instead.
func deskButton(it models.DeskItem) (btn discordgo.MessageComponent, label string, ok bool) {
	switch it.Kind {
	case models.DeskQuestion:
		if it.QuestionID == 0 || it.TaskID == "" {
			return nil, "", false
		}
		label = fmt.Sprintf("Answer #%d", it.QuestionID)
		return button(label, discordgo.PrimaryButton, customID("answer", strconv.FormatInt(it.QuestionID, 10), it.TaskID)), label, true
	case models.DeskHumanCheck, models.DeskApproval, models.DeskPullRequest:
		if it.TaskID == "" {
			return nil, "", false
		}
		label = "Approve " + it.TaskID
		return button(label, discordgo.SuccessButton, customID("approve", it.TaskID)), label, true
	case models.DeskBlocked:
		if it.TaskID == "" {
			return nil, "", false
		}
		label = "Restart " + it.TaskID
		return button(label, discordgo.PrimaryButton, customID("event", string(models.EventAdminRestart), it.TaskID,
			string(models.StatusBlocked))), label, true
	}
	return nil, "", false
}

// deskIcons mark each kind of desk item.
var deskIcons = map[models.DeskKind]string{
	models.DeskQuestion:    "❓",
	models.DeskHumanCheck:  "🔎",
	models.DeskApproval:    "🙋",
	models.DeskPullRequest: "🔀",
	models.DeskLanding:     "📦",
	models.DeskBlocked:     "⛔",
	models.DeskBudget:      "💸",
	models.DeskAgent:       "🤖",
}

// renderDeskItem is one line of the desk: what it is, whose, what it
// asks (escaped), since when, when it expires, and its action: the label
// of its button under the message, or its command.
func renderDeskItem(it models.DeskItem, buttonLabel string) string {
	var b strings.Builder
	icon := deskIcons[it.Kind]
	if it.Kind == models.DeskBlocked && it.Behind > 0 {
		icon = "⛓️"
	}
	b.WriteString(icon + " ")
	switch {
	case it.TaskID != "":
		fmt.Fprintf(&b, "`%s/%s` %s", deskCode(it.ProjectID), deskCode(it.TaskID), escape(models.CleanLine(it.Title, 80)))
	case it.AgentID != "":
		fmt.Fprintf(&b, "agent `%s`", deskCode(it.AgentID))
	default:
		fmt.Fprintf(&b, "project `%s`", deskCode(it.ProjectID))
	}
	b.WriteString(" — " + escape(models.CleanLine(it.What, 150)))
	if it.Kind == models.DeskQuestion && it.QuestionID != 0 {
		fmt.Fprintf(&b, " (#%d)", it.QuestionID)
	}
	if it.Behind > 0 {
		fmt.Fprintf(&b, " · %d task(s) behind it", it.Behind)
	}
	if it.RunEnded {
		b.WriteString(" · its run ended, the answer starts a new one")
	}
	fmt.Fprintf(&b, " · since <t:%d:R>", it.Since.Unix())
	if it.ExpiresAt != nil {
		fmt.Fprintf(&b, " · expires <t:%d:R>", it.ExpiresAt.Unix())
	}
	if it.Kind == models.DeskPullRequest && strings.HasPrefix(it.Action.URL, "https://") {
		b.WriteString(" · <" + models.RedactURL(it.Action.URL) + ">")
	}
	if buttonLabel != "" {
		b.WriteString(" → **" + strings.ReplaceAll(models.CleanLine(buttonLabel, 80), "*", "") + "**")
	} else if it.Action.Command != "" {
		b.WriteString(" → `" + deskCode(it.Action.Command) + "`")
	}
	return b.String()
}

// deskCode makes text fit a code span: one line, no backticks.
func deskCode(s string) string { return strings.ReplaceAll(models.CleanLine(s, 200), "`", "'") }
