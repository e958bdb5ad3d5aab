package discord

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/models"
)

// messageLimit is Discord's limit on a message's content, in characters.
const messageLimit = 2000

// cut shortens s to at most n characters, marking the cut with "…".
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// escape keeps text from others (titles, agent output) from being read as
// markdown or mentions, and removes the credentials of any URL in it.
var escaper = strings.NewReplacer("\\", "\\\\", "*", "\\*", "_", "\\_", "~", "\\~", "`", "\\`", "|", "\\|",
	">", "\\>", "@", "@\u200b", "#", "\\#", "[", "\\[", "]", "\\]", "(", "\\(", ")", "\\)", "<", "\\<")

func escape(s string) string { return escaper.Replace(models.RedactURL(s)) }

// quote renders text from others as a block quote.
func quote(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return "> *(empty)*"
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = "> " + escape(l)
	}
	return strings.Join(lines, "\n")
}

// codeBlock renders text from others verbatim, but for the credentials of
// any URL in it.
func codeBlock(s string) string {
	return "```\n" + strings.ReplaceAll(strings.TrimRight(models.RedactURL(s), "\n"), "```", "ˋˋˋ") + "\n```"
}

// mention renders a Discord user.
func mention(userID string) string { return "<@" + userID + ">" }

// renderActor renders a recorded actor: Discord users as mentions.
func renderActor(a string) string {
	if id, ok := strings.CutPrefix(a, "discord:"); ok {
		return mention(id)
	}
	return "`" + strings.ReplaceAll(a, "`", "") + "`"
}

// split cuts a long text into parts under the message limit, at line ends
// where it can.
func split(s string, limit int) []string {
	var parts []string
	for utf8.RuneCountInString(s) > limit {
		r := []rune(s)
		head := string(r[:limit])
		if i := strings.LastIndex(head, "\n"); i > limit/2 {
			head = head[:i+1]
		}
		parts = append(parts, head)
		s = s[len(head):]
	}
	if s != "" || len(parts) == 0 {
		parts = append(parts, s)
	}
	return parts
}

func button(label string, style discordgo.ButtonStyle, id string) discordgo.MessageComponent {
	return discordgo.Button{Label: cut(label, 80), Style: style, CustomID: id}
}

func linkButton(label, url string) discordgo.MessageComponent {
	return discordgo.Button{Label: cut(label, 80), Style: discordgo.LinkButton, URL: url}
}

// buttons lays out buttons in rows of five (at most five rows).
func buttons(bs ...discordgo.MessageComponent) []discordgo.MessageComponent {
	var rows []discordgo.MessageComponent
	for len(bs) > 0 && len(rows) < 5 {
		n := min(5, len(bs))
		rows = append(rows, discordgo.ActionsRow{Components: bs[:n]})
		bs = bs[n:]
	}
	return rows
}

func statusIcon(s models.TaskStatus) string {
	switch s {
	case models.StatusDefined:
		return "⏳"
	case models.StatusReady:
		return "🟦"
	case models.StatusAssigned, models.StatusInProgress:
		return "▶️"
	case models.StatusWaitingInput:
		return "❓"
	case models.StatusPaused:
		return "⏸️"
	case models.StatusVerifying:
		return "🔎"
	case models.StatusAwaitingApproval:
		return "🙋"
	case models.StatusCompleted:
		return "✅"
	case models.StatusFailed:
		return "❌"
	case models.StatusBlocked:
		return "⛔"
	}
	return "•"
}

func eventVerb(e models.TaskEvent) string {
	switch e {
	case models.EventAdminRestart:
		return "Restarted"
	case models.EventAdminSkip:
		return "Skipped"
	case models.EventAdminStop:
		return "Stopped"
	case models.EventAdminCancel:
		return "Cancelled"
	}
	return string(e)
}

func renderTime(t time.Time) string { return fmt.Sprintf("<t:%d:f> (<t:%d:R>)", t.Unix(), t.Unix()) }

func renderProject(p models.Project) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** `%s` — %s\n", escape(p.Name), p.ID, p.Status)
	fmt.Fprintf(&b, "weight %g · up to %d agents · %d tokens used", p.CreditWeight, p.MaxConcurrentAgents, p.TotalTokensUsed)
	if p.BudgetLimit != nil {
		fmt.Fprintf(&b, " of %d", *p.BudgetLimit)
	}
	if p.Repo != nil && p.Repo.URL != "" {
		fmt.Fprintf(&b, "\nrepo: %s", escape(models.RedactURL(p.Repo.URL)))
	}
	if p.DiscordChannelID != nil {
		fmt.Fprintf(&b, "\nchannel: <#%s>", *p.DiscordChannelID)
	}
	return b.String()
}

func renderTaskDetail(d models.TaskDetail) string {
	t := d.Task
	var b strings.Builder
	fmt.Fprintf(&b, "%s **%s** `%s` — %s\n", statusIcon(t.Status), escape(t.Title), t.ID, t.Status)
	fmt.Fprintf(&b, "project `%s` · priority %d · %s · attempt %d of %d", t.ProjectID, t.Priority, t.VerificationType, t.RetryCount+1, t.MaxRetries+1)
	if t.RequiresApproval {
		b.WriteString(" · needs approval")
	}
	if t.AssignedAgentID != nil {
		fmt.Fprintf(&b, " · agent `%s`", *t.AssignedAgentID)
	}
	if t.StatusReason != "" {
		// Redacted before it is cut: a cut URL would no longer be seen as one.
		fmt.Fprintf(&b, "\nreason: %s", escape(cut(models.RedactURL(t.StatusReason), 300)))
	}
	if t.WaitingReason != "" && t.Status == models.StatusReady {
		fmt.Fprintf(&b, "\nwaiting: %s", escape(cut(t.WaitingReason, 200)))
	}
	switch {
	case t.NextEvent != "" && t.NextEventAt != nil:
		// What the daemon does next by itself (a retry, a block, a
		// resume): the sentence in UTC, and the time in the reader's zone.
		fmt.Fprintf(&b, "\nnext: %s — %s", escape(cut(models.RedactURL(t.NextEventReason), 300)), renderTime(*t.NextEventAt))
	case t.ResumeAfter != nil && t.Status == models.StatusPaused:
		fmt.Fprintf(&b, "\nresumes %s", renderTime(*t.ResumeAfter))
	}
	if t.PRURL != nil {
		fmt.Fprintf(&b, "\npull request: %s", *t.PRURL)
	}
	if t.ExpectedCount > 0 || t.SuccessCount > 0 || t.FailureCount > 0 {
		fmt.Fprintf(&b, "\nitems: %d succeeded, %d failed of %d expected", t.SuccessCount, t.FailureCount, t.ExpectedCount)
	}
	if d.Verification != nil {
		fmt.Fprintf(&b, "\nverification: %s", d.Verification.Phase)
		if detail := d.Verification.Detail(); detail != "" {
			fmt.Fprintf(&b, " — %s", escape(cut(models.RedactURL(detail), 200)))
		}
	}
	if len(d.Dependencies) > 0 {
		var deps []string
		for _, e := range d.Dependencies {
			deps = append(deps, fmt.Sprintf("`%s` (%s)", e.Upstream, strings.ToLower(string(e.Resolution))))
		}
		fmt.Fprintf(&b, "\nwaits for: %s", strings.Join(deps, ", "))
	}
	if len(d.Dependents) > 0 {
		var deps []string
		for _, e := range d.Dependents {
			deps = append(deps, "`"+e.Downstream+"`")
		}
		fmt.Fprintf(&b, "\nneeded by: %s", strings.Join(deps, ", "))
	}
	if t.Description != "" {
		fmt.Fprintf(&b, "\n%s", quote(cut(t.Description, 800)))
	}
	if n := len(d.Events); n > 0 {
		b.WriteString("\nlast events:")
		for _, e := range d.Events[max(0, n-5):] {
			fmt.Fprintf(&b, "\n· %s %s → %s", e.Event, e.From, e.To)
			if e.Actor != "" {
				fmt.Fprintf(&b, " by %s", renderActor(e.Actor))
			}
		}
	}
	return b.String()
}

func renderResult(t models.Task, c models.Completion) string {
	return fmt.Sprintf("📋 Result of `%s` %s\n", t.ID, escape(t.Title)) + renderResultBody(c)
}

// maxRestReason bounds a rest's reason in the agent listing.
const maxRestReason = 120

func renderAgents(as []models.Agent) string {
	var lines []string
	for _, a := range as {
		l := fmt.Sprintf("🤖 `%s` (%s) — %s", a.ID, a.AgentType, a.State)
		if a.Paused {
			l += ", paused"
		}
		if a.RestUntil != nil {
			l += ", resting until " + renderTime(*a.RestUntil) + ": " + escape(models.CleanLine(a.RestReason, maxRestReason))
		}
		if a.CurrentTaskID != nil {
			l += fmt.Sprintf(", on `%s`", *a.CurrentTaskID)
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}

// renderRun is one line on a run for the task's thread: its CLI and
// version, session, tokens (cache reads and writes apart), the cost the CLI
// reported, and what went wrong on the CLI's side. A run that reported
// none of these (a command agent's) has no line.
func renderRun(r models.Run) string {
	u := r.Usage
	if r.CLIVersion == "" && r.SessionID == "" && u == (models.RunTokens{}) && r.CostUSD == nil && len(r.DeniedTools) == 0 &&
		len(r.MCPNotReady) == 0 {
		return ""
	}
	cli := r.CLI
	if r.CLIVersion != "" {
		cli += " " + r.CLIVersion
	}
	// Inside a code span nothing is markdown: only its backticks must go.
	code := func(s string) string { return "`" + strings.ReplaceAll(models.CleanLine(s, 200), "`", "'") + "`" }
	parts := []string{fmt.Sprintf("🤖 Run %d (%s, %s): %s", r.ID, r.Kind, code(r.AgentID), escape(cli))}
	if r.SessionID != "" {
		parts = append(parts, "session "+code(r.SessionID))
	}
	parts = append(parts, fmt.Sprintf("tokens %d in, %d out, %d cache read, %d cache write", u.Input, u.Output, u.CacheRead,
		u.CacheWrite))
	if r.CostUSD != nil {
		parts = append(parts, fmt.Sprintf("$%.4f", *r.CostUSD))
	}
	line := strings.Join(parts, " · ")
	if len(r.DeniedTools) > 0 {
		tools := make([]string, len(r.DeniedTools))
		for i, t := range r.DeniedTools {
			tools[i] = code(t)
		}
		line += "\n⚠️ Denied tools: " + strings.Join(tools, ", ")
	}
	if len(r.MCPNotReady) > 0 {
		line += "\n⚠️ MCP servers not connected at start: " + escape(strings.Join(r.MCPNotReady, ", "))
	}
	if r.CLIWarning != "" {
		line += "\n⚠️ " + escape(r.CLIWarning)
	}
	return line
}

// statusView is what /status shows.
type statusView struct {
	// Agents are the daemon's agents and its runners'.
	Agents []models.Agent
	// Runners are the runners, by name, each with whether it is
	// connected and its runs in progress.
	Runners []models.Runner
	Counts  map[string]map[models.TaskStatus]int
	// Activity counts the tasks agents work on and those that wait to
	// land or be verified.
	Activity models.Activity
	// Desk is what waits on a person, oldest first; DeskTruncated says
	// more waits.
	Desk          []models.DeskItem
	DeskTruncated bool
	// Rules are the scheduling rules in force.
	Rules []models.Rule
}

// maxStatusRules caps the rules /status lists.
const maxStatusRules = 10

// maxStatusRunners caps the runners /status lists, one short line each.
const maxStatusRunners = 10

// maxStatusDesk caps the desk items /status lists, oldest first, so that
// the answer stays one message a phone shows whole; it is below
// maxDeskButtons, so that each item listed has its button.
const maxStatusDesk = 20

// renderStatus renders /status: its text — the agents, the runners when
// there are any (renderRunners), the task counts, the rules and the
// oldest maxStatusDesk items of the desk — and the buttons that end the
// items' waits where the bot has one (the others show their command).
func renderStatus(v statusView) (string, []discordgo.MessageComponent) {
	var b strings.Builder
	b.WriteString("**Agents**\n")
	if len(v.Agents) == 0 {
		b.WriteString("none\n")
	} else {
		b.WriteString(renderAgents(v.Agents) + "\n")
	}
	fmt.Fprintf(&b, "🛠️ agents working **%d** · 📦 waiting to land or verify **%d**\n", v.Activity.AgentsWorking,
		v.Activity.WaitingToLand)
	if len(v.Runners) > 0 {
		b.WriteString(renderRunners(v.Runners))
	}
	b.WriteString("**Tasks**\n")
	projects := make([]string, 0, len(v.Counts))
	for p := range v.Counts {
		projects = append(projects, p)
	}
	sort.Strings(projects)
	if len(projects) == 0 {
		b.WriteString("none\n")
	}
	for _, p := range projects {
		var parts []string
		for _, st := range models.TaskStatuses {
			if n := v.Counts[p][st]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", strings.ToLower(string(st)), n))
			}
		}
		fmt.Fprintf(&b, "`%s`: %s\n", p, strings.Join(parts, " · "))
	}
	if len(v.Rules) > 0 {
		b.WriteString("**Rules**\n")
		for i, r := range v.Rules {
			if i == maxStatusRules {
				fmt.Fprintf(&b, "… and %d more (`agentqueued ctl rule list`)\n", len(v.Rules)-i)
				break
			}
			name := ""
			if r.ID != "" {
				name = "`" + escape(cut(r.ID, 60)) + "` "
			}
			fmt.Fprintf(&b, "📏 %s%s\n", name, escape(cut(r.Summary(), 200)))
		}
	}
	more := ""
	if v.DeskTruncated {
		more = "+"
	}
	fmt.Fprintf(&b, "**Waiting on you** (%d%s)\n", len(v.Desk), more)
	if len(v.Desk) == 0 {
		b.WriteString("nothing 🎉")
	}
	var btns []discordgo.MessageComponent
	for i, it := range v.Desk {
		if i == maxStatusDesk {
			fmt.Fprintf(&b, "… and %d more (`agentqueued ctl desk` lists them all)\n", len(v.Desk)-i)
			break
		}
		label := ""
		if len(btns) < maxDeskButtons {
			if btn, l, ok := deskButton(it); ok {
				btns, label = append(btns, btn), l
			}
		}
		b.WriteString(renderDeskItem(it, label) + "\n")
	}
	if v.DeskTruncated && len(v.Desk) <= maxStatusDesk {
		b.WriteString("… and more wait than the desk lists\n")
	}
	return strings.TrimRight(b.String(), "\n"), buttons(btns...)
}

// renderRunners is /status's part on the runners: how many of them are
// connected, then the first maxStatusRunners by name, each with its runs
// in progress, whether it is draining and, when it is not connected,
// when it was last seen.
func renderRunners(rs []models.Runner) string {
	var b strings.Builder
	connected := 0
	for _, r := range rs {
		if r.Connected {
			connected++
		}
	}
	fmt.Fprintf(&b, "**Runners** (%d of %d connected)\n", connected, len(rs))
	for i, r := range rs {
		if i == maxStatusRunners {
			fmt.Fprintf(&b, "… and %d more (`agentqueued ctl runner list`)\n", len(rs)-i)
			break
		}
		icon := "🟢"
		if !r.Connected {
			icon = "🔴"
		}
		runs := "runs"
		if r.RunsInProgress == 1 {
			runs = "run"
		}
		fmt.Fprintf(&b, "%s `%s` — %d %s", icon, deskCode(r.Name), r.RunsInProgress, runs)
		if r.State == models.RunnerDraining {
			b.WriteString(" · draining")
		}
		switch {
		case r.Connected:
		case r.LastSeenAt != nil:
			fmt.Fprintf(&b, " · last seen <t:%d:R>", r.LastSeenAt.Unix())
		default:
			b.WriteString(" · never connected")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func renderResultBody(c models.Completion) string {
	out := quote(c.Summary)
	if len(c.FilesChanged) > 0 {
		files := c.FilesChanged
		more := ""
		if len(files) > 20 {
			files, more = files[:20], fmt.Sprintf(" and %d more", len(c.FilesChanged)-20)
		}
		out += "\nfiles: `" + strings.Join(files, "`, `") + "`" + more
	}
	return out
}

// attachment is a text file sent with a message.
type attachment struct {
	Name string
	Body string
}

func (a *attachment) file() *discordgo.File {
	return &discordgo.File{Name: a.Name, ContentType: "text/plain; charset=utf-8", Reader: strings.NewReader(a.Body)}
}

// tokenInURL matches the secret part of interaction and webhook URLs.
var tokenInURL = regexp.MustCompile(`((?:interactions|webhooks)/\d+)/[A-Za-z0-9_.\-]+`)

// redactURL removes interaction and webhook tokens from a text (an error
// naming a request's URL) before it is logged or stored.
func redactURL(s string) string { return tokenInURL.ReplaceAllString(s, "$1/<token>") }

// fit makes content fit one message: a longer text is cut, and attached
// whole unless a file goes with it already.
func fit(content string, file *attachment) (string, *attachment) {
	if len([]rune(content)) <= messageLimit {
		return content, file
	}
	if file == nil {
		file = &attachment{Name: "message.txt", Body: content}
	}
	return cut(content, messageLimit-40) + "\n*(full text attached)*", file
}

// customID builds a component's custom id: "aq|action|arg…". Arguments
// are ids (checked before they get here); the whole stays within Discord's
// 100 characters.
func customID(action string, args ...string) string {
	id := strings.Join(append([]string{"aq", action}, args...), "|")
	if len(id) > 100 {
		panic(fmt.Sprintf("custom id %q is longer than 100 characters", id))
	}
	return id
}

// parseCustomID splits a custom id built by customID.
func parseCustomID(id string) (string, []string, error) {
	parts := strings.Split(id, "|")
	if len(parts) < 2 || parts[0] != "aq" {
		return "", nil, fmt.Errorf("unknown component %q", id)
	}
	return parts[1], parts[2:], nil
}
