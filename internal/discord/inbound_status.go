package discord

import (
	"context"
	"fmt"

	"github.com/agentqueued/agentqueued/internal/models"
)

// statusView reads what /status shows: agents, task counts, and what waits
// on a person (open questions, approvals, broken chains), from the
// daemon's overview (the one `ctl status` shows too).
func (b *Bot) statusView(ctx context.Context) (statusView, error) {
	o, err := b.svc.Overview(ctx)
	if err != nil {
		return statusView{}, err
	}
	v := statusView{Agents: o.Agents, Counts: o.Counts, Questions: o.Questions, Rules: o.Rules}
	for _, w := range o.Approvals {
		title := escape(cut(w.Task.Title, 80))
		what := fmt.Sprintf("🙋 `%s` %s needs your approval", w.Task.ID, title)
		if w.Waits == models.WaitPullRequest && w.Task.PRURL != nil {
			what = fmt.Sprintf("🔀 `%s` %s waits for its pull request: %s", w.Task.ID, title, *w.Task.PRURL)
		}
		v.Approvals = append(v.Approvals, waiting{Task: w.Task, Since: w.Since, What: what})
	}
	for _, w := range o.Broken {
		title := escape(cut(w.Task.Title, 80))
		what := fmt.Sprintf("⛔ `%s` %s is blocked", w.Task.ID, title)
		if w.Behind > 0 {
			what = fmt.Sprintf("⛓️ `%s` %s is blocked with %d task(s) behind it", w.Task.ID, title, w.Behind)
		}
		v.Broken = append(v.Broken, waiting{Task: w.Task, Since: w.Since, What: what})
	}
	return v, nil
}
