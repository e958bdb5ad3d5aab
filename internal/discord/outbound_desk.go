package discord

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file renders the desk's notices: an item escalated after it waited
// its project's escalate_after, and a project's digest of what waits.

// deskEscalationParts re-posts a desk item that waited too long, to the
// project's escalation channel (else its own), mentioning the escalation
// role; a question keeps its Answer button.
func (b *Bot) deskEscalationParts(_ context.Context, n notice) ([]part, error) {
	e, err := payloadOf[models.DeskEscalationNotice](n)
	if err != nil {
		return nil, err
	}
	var head strings.Builder
	if e.Role != "" {
		head.WriteString("<@&" + e.Role + "> ")
	}
	fmt.Fprintf(&head, "⏰ **Waiting on you for %s** — %s\n%s", waitedFor(e.Waited.Std()), deskWhose(e.Item),
		deskLine(e.Item))
	p := part{Channel: e.Channel, Content: head.String(), Flags: discordgo.MessageFlagsSuppressEmbeds}
	if e.Role != "" {
		p.Roles = []string{e.Role}
	}
	if it := e.Item; it.Kind == models.DeskQuestion && it.QuestionID != 0 {
		p.Components = buttons(button("Answer", discordgo.PrimaryButton,
			customID("answer", strconv.FormatInt(it.QuestionID, 10), it.TaskID)))
	}
	return []part{p}, nil
}

// deskDigestParts sums up what waits on a person in a project.
func (b *Bot) deskDigestParts(_ context.Context, n notice) ([]part, error) {
	d, err := payloadOf[models.DeskDigestNotice](n)
	if err != nil {
		return nil, err
	}
	things := "thing waits"
	if d.Count != 1 {
		things = "things wait"
	}
	var s strings.Builder
	fmt.Fprintf(&s, "📋 **%d %s on you**, the oldest for %s", d.Count, things, waitedFor(d.At.Sub(d.Oldest)))
	for _, it := range d.Items {
		fmt.Fprintf(&s, "\n• %s (%s) — %s", deskWhose(it), waitedFor(d.At.Sub(it.Since)), escape(cut(it.What, 200)))
	}
	if more := d.Count - len(d.Items); more > 0 {
		fmt.Fprintf(&s, "\n…and %d more: `/status` lists them all", more)
	}
	return []part{{Content: s.String(), Flags: discordgo.MessageFlagsSuppressEmbeds}}, nil
}

// deskWhose names a desk item's task (or project, or agent) for a line.
func deskWhose(it models.DeskItem) string {
	title := escape(cut(it.Title, 120))
	switch {
	case it.TaskID != "":
		return fmt.Sprintf("`%s` %s", it.TaskID, title)
	case it.AgentID != "":
		return fmt.Sprintf("agent `%s`", it.AgentID)
	}
	return fmt.Sprintf("project `%s`", it.ProjectID)
}

// deskLine says what a desk item waits for and how to end it.
func deskLine(it models.DeskItem) string {
	line := quote(cut(it.What, 1500))
	if it.ExpiresAt != nil {
		line += fmt.Sprintf("\nExpires <t:%d:R>.", it.ExpiresAt.Unix())
	}
	return line + "\n`" + strings.ReplaceAll(it.Action.Command, "`", "'") + "`"
}

// waitedFor is a wait as a short duration ("3h", "45m", "2d").
func waitedFor(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return strconv.Itoa(int(d/(24*time.Hour))) + "d"
	case d >= time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	case d >= time.Minute:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	}
	return strconv.Itoa(int(max(d, 0)/time.Second)) + "s"
}
