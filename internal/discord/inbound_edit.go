package discord

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

func (b *Bot) taskEdit(ctx context.Context, c call) reply {
	var p models.TaskPatch
	if v := c.opts.str("title"); v != "" {
		p.Title = &v
	}
	if c.opts.has("description") {
		v := c.opts.str("description")
		p.Description = &v
	}
	if n, ok := c.opts.int("priority"); ok {
		v := int(n)
		p.Priority = &v
	}
	if c.opts.has("test_commands") {
		v := splitCommands(c.opts.str("test_commands"))
		p.TestCommands = &v
	}
	if v := c.opts.str("verification"); v != "" {
		vt := models.VerificationType(v)
		p.VerificationType = &vt
	}
	if v, ok := c.opts.bool("requires_approval"); ok {
		p.RequiresApproval = &v
	}
	if err := routingPatch(c.opts, &p); err != nil {
		return b.errorReply("task edit", err)
	}
	t, err := b.svc.EditTask(ctx, c.opts.str(optTask), p)
	if err != nil {
		return b.errorReply("task edit", err)
	}
	return text(fmt.Sprintf("✏️ `%s` changed by %s (%s).", t.ID, mention(c.user), strings.Join(p.Fields(), ", ")))
}

// routingPatch reads /task edit's agent_type, timeout, expected_count, kind
// and metadata into p; "-" clears agent_type, kind and metadata.
func routingPatch(o options, p *models.TaskPatch) error {
	cleared := func(name string) (string, bool) {
		v := strings.TrimSpace(o.str(name))
		if v == clearValue {
			return "", true
		}
		return v, o.has(name)
	}
	if v, ok := cleared("agent_type"); ok {
		p.AgentType = &v
	}
	if o.has("timeout") {
		v := strings.TrimSpace(o.str("timeout"))
		d, err := time.ParseDuration(v)
		if err != nil {
			return models.Errorf(models.CodeInvalid, "timeout: %s is not a duration such as 90m or 2h (0: no cap of its own)", models.Quote(v))
		}
		td := models.Duration(d)
		p.Timeout = &td
	}
	if n, ok := o.int("expected_count"); ok {
		v := int(n)
		p.ExpectedCount = &v
	}
	if v, ok := cleared("kind"); ok {
		p.Kind = &v
	}
	if v, ok := cleared("metadata"); ok {
		m := map[string]string{}
		for _, pair := range splitCommands(v) {
			k, val, found := strings.Cut(pair, "=")
			if !found || strings.TrimSpace(k) == "" {
				return models.Errorf(models.CodeInvalid, "metadata: %s is not key=value", models.Quote(pair))
			}
			m[strings.TrimSpace(k)] = strings.TrimSpace(val)
		}
		p.Metadata = &m
	}
	return nil
}

func (b *Bot) taskDeps(ctx context.Context, c call) reply {
	soft, _ := c.opts.bool("soft")
	var ch models.DependencyChange
	for _, id := range splitIDs(c.opts.str("add")) {
		required := !soft
		ch.Add = append(ch.Add, models.BatchDependency{ID: id, RequiresSuccess: &required})
	}
	ch.Remove = splitIDs(c.opts.str("remove"))
	if len(ch.Add) == 0 && len(ch.Remove) == 0 {
		return ephemeral("⚠️ add or remove: name at least one task id.")
	}
	d, err := b.svc.ChangeDependencies(ctx, c.opts.str(optTask), ch)
	if err != nil {
		return b.errorReply("task deps", err)
	}
	var deps []string
	for _, e := range d.Dependencies {
		deps = append(deps, "`"+e.Upstream+"`")
	}
	if len(deps) == 0 {
		deps = []string{"nothing"}
	}
	return text(fmt.Sprintf("🔗 `%s` (%s) now waits for %s.", d.Task.ID, d.Task.Status, strings.Join(deps, ", ")))
}

func (b *Bot) taskDelete(ctx context.Context, c call) reply {
	return b.deleteTask(ctx, c.opts.str(optTask), c.user)
}

func (b *Bot) deleteTask(ctx context.Context, id, user string) reply {
	if err := b.svc.DeleteTask(ctx, id); err != nil {
		return b.errorReply("task delete", err)
	}
	return text(fmt.Sprintf("🗑️ Task `%s` deleted by %s.", id, mention(user)))
}

func (b *Bot) agentRemove(ctx context.Context, c call) reply {
	return b.removeAgent(ctx, c.opts.str(optAgent), c.user)
}

func (b *Bot) removeAgent(ctx context.Context, id, user string) reply {
	if err := b.svc.RemoveAgent(ctx, id); err != nil {
		return b.errorReply("agent remove", err)
	}
	return text(fmt.Sprintf("🗑️ Agent `%s` removed by %s. An agent from the configuration file comes back at the next start unless it is removed there too.", id, mention(user)))
}

func (b *Bot) taskDiff(ctx context.Context, c call) reply {
	return b.diffReply(ctx, c.opts.str(optTask))
}

// diffReply shows the changes of a task's branch: inline when short,
// attached as a file otherwise.
func (b *Bot) diffReply(ctx context.Context, taskID string) reply {
	d, err := b.svc.TaskDiff(ctx, taskID)
	if err != nil {
		return b.errorReply("task diff", err)
	}
	if strings.TrimSpace(d) == "" {
		return ephemeral(fmt.Sprintf("`%s` has no changes.", taskID))
	}
	if len(d) <= 1800 {
		return text(fmt.Sprintf("Changes of `%s`:\n```diff\n%s\n```", taskID, strings.ReplaceAll(d, "```", "ˋˋˋ")))
	}
	return reply{Content: fmt.Sprintf("Changes of `%s` (attached).", taskID),
		File: &attachment{Name: taskID + ".diff", Body: d}}
}

func renderBudget(r models.BudgetReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**Token usage in the last %s**\n", r.Window)
	global := "unlimited"
	if r.Global.Budget != nil {
		global = fmt.Sprintf("%d", *r.Global.Budget)
	}
	fmt.Fprintf(&b, "all projects: %d of %s", r.Global.TokensInWindow, global)
	if r.Global.Exhausted {
		b.WriteString(" — **exhausted**")
	}
	for _, p := range r.Projects {
		limit := "unlimited"
		if p.BudgetLimit != nil {
			limit = fmt.Sprintf("%d", *p.BudgetLimit)
		}
		fmt.Fprintf(&b, "\n`%s`: %d in window · %d in all of %s", p.ProjectID, p.TokensInWindow, p.TotalTokensUsed, limit)
		if p.Exhausted {
			b.WriteString(" — **exhausted**")
		}
	}
	return b.String()
}
