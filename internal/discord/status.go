package discord

import (
	"context"
	"fmt"

	"github.com/agentqueued/agentqueued/internal/models"
)

// statusView reads what /status shows: agents, task counts, and what waits
// on a person (open questions, approvals, broken chains).
func (b *Bot) statusView(ctx context.Context) (statusView, error) {
	var v statusView
	var err error
	if v.Agents, err = b.svc.ListAgents(ctx); err != nil {
		return v, err
	}
	if v.Counts, err = b.svc.TaskCounts(ctx); err != nil {
		return v, err
	}
	if v.Questions, err = b.svc.OpenQuestions(ctx); err != nil {
		return v, err
	}
	rules, err := b.svc.Rules(ctx)
	if err != nil {
		return v, err
	}
	v.Rules = rules.Rules
	human, err := b.svc.Verifications(ctx, models.PhaseHuman)
	if err != nil {
		return v, err
	}
	for _, h := range human {
		d, err := b.svc.GetTaskDetail(ctx, h.TaskID)
		if err != nil || d.Task.Status != models.StatusVerifying {
			continue
		}
		v.Approvals = append(v.Approvals, waiting{Task: d.Task, Since: h.UpdatedAt,
			What: fmt.Sprintf("🙋 `%s` %s needs your approval", d.Task.ID, escape(cut(d.Task.Title, 80)))})
	}
	awaiting, err := b.svc.ListTasks(ctx, models.TaskFilter{Statuses: []models.TaskStatus{models.StatusAwaitingApproval}, Limit: 100})
	if err != nil {
		return v, err
	}
	for _, t := range awaiting {
		what := fmt.Sprintf("🙋 `%s` %s needs your approval", t.ID, escape(cut(t.Title, 80)))
		if t.PRURL != nil {
			what = fmt.Sprintf("🔀 `%s` %s waits for its pull request: %s", t.ID, escape(cut(t.Title, 80)), *t.PRURL)
		}
		v.Approvals = append(v.Approvals, waiting{Task: t, Since: t.UpdatedAt, What: what})
	}
	blocked, err := b.svc.ListTasks(ctx, models.TaskFilter{Statuses: []models.TaskStatus{models.StatusBlocked}, Limit: 1000})
	if err != nil {
		return v, err
	}
	behind := map[string]int{}
	for _, t := range blocked {
		if t.CascadeRootID != "" {
			behind[t.CascadeRootID]++
		}
	}
	for _, t := range blocked {
		if t.CascadeRootID != "" {
			continue
		}
		what := fmt.Sprintf("⛔ `%s` %s is blocked", t.ID, escape(cut(t.Title, 80)))
		if n := behind[t.ID]; n > 0 {
			what = fmt.Sprintf("⛓️ `%s` %s is blocked with %d task(s) behind it", t.ID, escape(cut(t.Title, 80)), n)
		}
		v.Broken = append(v.Broken, waiting{Task: t, Since: t.UpdatedAt, What: what})
	}
	return v, nil
}
