package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// MaxDeskItems bounds the items a desk lists; Desk.Truncated says when more
// wait.
const MaxDeskItems = 500

// qDeskBlocked reads the BLOCKED tasks that root their block and that no
// person blocked on purpose (see deliberate), with the last event that
// blocked them (its event and actor) and the count of tasks blocked behind
// them, oldest first. The tasks behind are counted in one pass over the
// BLOCKED tasks, not once per root.
var qDeskBlocked = `WITH behind AS (SELECT cascade_root_id AS root, count(*) AS n FROM tasks
	WHERE status = 'BLOCKED' AND cascade_root_id <> '' AND (?1 = '' OR project_id = ?1) GROUP BY cascade_root_id)
	SELECT t.id, t.project_id, t.title, t.status_reason, t.updated_at, coalesce(b.n, 0)
	FROM tasks t LEFT JOIN task_events e ON e.id = (SELECT max(id) FROM task_events WHERE task_id = t.id)
	LEFT JOIN behind b ON b.root = t.id
	WHERE t.status = 'BLOCKED' AND t.cascade_root_id = '' AND (?1 = '' OR t.project_id = ?1)
	AND NOT ` + deliberate + `
	ORDER BY t.updated_at, t.id LIMIT ?2`

// deliberate is true for a task whose last event (e, a row of
// task_events) blocked it on purpose by a person: cancelled, stopped, its
// workflow run cancelled by a person (not stopped by the workflow or the
// system). Nothing waits on a person for it.
var deliberate = fmt.Sprintf(`(coalesce(e.event, '') IN ('%s', '%s')
	OR (coalesce(e.event, '') = '%s' AND coalesce(e.actor, '') NOT IN ('workflow', 'system', '')))`,
	models.EventAdminCancel, models.EventAdminStop, models.EventRunStopped)

// qDeskBudgets reads the active projects that have used their budget_limit
// and have READY work.
const qDeskBudgets = `SELECT p.id, p.name, p.total_tokens_used, p.budget_limit, p.updated_at,
	(SELECT count(*) FROM tasks t WHERE t.project_id = p.id AND t.status = 'READY')
	FROM projects p WHERE p.status = 'ACTIVE' AND p.budget_limit IS NOT NULL AND p.total_tokens_used >= p.budget_limit
	AND EXISTS (SELECT 1 FROM tasks t WHERE t.project_id = p.id AND t.status = 'READY') AND (?1 = '' OR p.id = ?1)`

// Desk returns everything that waits on a person, oldest first: open
// questions (whether or not the run that asked still waits), HUMAN
// verifications, work and plans awaiting approval, pull requests, landings
// held by local changes, the roots of blocked chains that no person
// cancelled or stopped on purpose, projects out of budget with READY work,
// and agents set aside in ERROR. Each item says what it is, since when,
// who asked, when it expires or escalates, and the action that ends it.
func (s *Store) Desk(ctx context.Context) (models.Desk, error) {
	return s.DeskFor(ctx, "")
}

// DeskFor returns the desk (see Desk) of project projectID: its items
// only, not the agents'. An empty projectID is every project's and the
// agents', as Desk; an unknown project is not_found.
func (s *Store) DeskFor(ctx context.Context, projectID string) (models.Desk, error) {
	fail := func(what string, err error) (models.Desk, error) {
		return models.Desk{}, fmt.Errorf("read the desk: %s: %w", what, err)
	}
	if projectID != "" {
		if _, err := s.GetProject(ctx, projectID); err != nil {
			return models.Desk{}, fmt.Errorf("read the desk: %w", err)
		}
	}
	projects, err := s.ListProjects(ctx)
	if err != nil {
		return fail("projects", err)
	}
	settings := map[string]models.ProjectSettings{}
	for _, p := range projects {
		settings[p.ID] = p.Settings
	}
	var items []models.DeskItem
	add := func(it models.DeskItem) {
		if projectID != "" && it.ProjectID != projectID {
			return
		}
		if after := settings[it.ProjectID].EscalateAfter; after > 0 {
			at := it.Since.Add(after.Std())
			it.EscalatesAt = &at
		}
		items = append(items, it)
	}

	questions, err := s.OpenQuestions(ctx)
	if err != nil {
		return fail("questions", err)
	}
	for _, q := range questions {
		t, err := s.GetTask(ctx, q.TaskID)
		if err != nil {
			continue // deleted meanwhile
		}
		run, err := s.GetRun(ctx, q.RunID)
		asker := ""
		if err == nil {
			asker = run.AgentID
		}
		exp := q.ExpiresAt
		add(models.DeskItem{Key: fmt.Sprintf("question:%d", q.ID), Kind: models.DeskQuestion, ProjectID: q.ProjectID,
			TaskID: q.TaskID, Title: t.Title, What: q.Text, Since: q.AskedAt, AskedBy: asker, ExpiresAt: &exp,
			QuestionID: q.ID, RunEnded: q.RunEndedAt != nil,
			Action: models.DeskAction{Command: fmt.Sprintf("agentqueued ctl question answer %d ANSWER...", q.ID),
				Button: "Answer", URL: taskPage(q.TaskID)}})
	}

	vs, err := s.Verifications(ctx, models.PhaseHuman, models.PhaseLanding)
	if err != nil {
		return fail("verifications", err)
	}
	landing := map[string]bool{}
	for _, v := range vs {
		t, err := s.GetTask(ctx, v.TaskID)
		if err != nil {
			continue
		}
		switch {
		case v.Phase == models.PhaseLanding:
			landing[t.ID] = true
			add(models.DeskItem{Key: fmt.Sprintf("landing:%s:%d", t.ID, v.Attempt), Kind: models.DeskLanding,
				ProjectID: t.ProjectID, TaskID: t.ID, Title: t.Title, What: cmp.Or(t.WaitingReason, "its change waits to land"),
				Since: v.UpdatedAt, AskedBy: "system",
				Action: models.DeskAction{Command: "agentqueued land " + t.ProjectID, URL: taskPage(t.ID)}})
		case t.Status == models.StatusVerifying:
			add(models.DeskItem{Key: fmt.Sprintf("human:%s:%d", t.ID, v.Attempt), Kind: models.DeskHumanCheck,
				ProjectID: t.ProjectID, TaskID: t.ID, Title: t.Title, What: "verify the change: approve or reject it",
				Since: v.UpdatedAt, AskedBy: "system",
				Action: models.DeskAction{Command: "agentqueued ctl task approve " + t.ID, Button: "Approve", URL: taskPage(t.ID)}})
		}
	}

	awaiting, err := s.ListTasks(ctx, models.TaskFilter{ProjectID: projectID,
		Statuses: []models.TaskStatus{models.StatusAwaitingApproval}, Limit: MaxDeskItems})
	if err != nil {
		return fail("tasks awaiting approval", err)
	}
	for _, t := range awaiting {
		if landing[t.ID] {
			continue
		}
		it := models.DeskItem{Key: fmt.Sprintf("approval:%s:%d", t.ID, t.UpdatedAt.UnixNano()), Kind: models.DeskApproval,
			ProjectID: t.ProjectID, TaskID: t.ID, Title: t.Title, What: cmp.Or(t.StatusReason, "approve or reject the change"),
			Since: t.UpdatedAt, AskedBy: "system",
			Action: models.DeskAction{Command: "agentqueued ctl task approve " + t.ID, Button: "Approve", URL: taskPage(t.ID)}}
		if t.PRURL != nil {
			it.Key, it.Kind = "pull_request:"+*t.PRURL, models.DeskPullRequest
			it.What = "review and merge (or close) the pull request"
			it.Action = models.DeskAction{Command: "agentqueued ctl task approve " + t.ID, Button: "Approve", URL: *t.PRURL}
		}
		add(it)
	}

	rows, err := s.rdb.QueryContext(ctx, qDeskBlocked, projectID, MaxDeskItems)
	if err != nil {
		return fail("blocked tasks", err)
	}
	for rows.Next() {
		var (
			it      models.DeskItem
			reason  string
			updated int64
		)
		if err := rows.Scan(&it.TaskID, &it.ProjectID, &it.Title, &reason, &updated, &it.Behind); err != nil {
			rows.Close()
			return fail("blocked tasks", err)
		}
		it.Kind, it.Since, it.What, it.AskedBy = models.DeskBlocked, fromNanos(updated), cmp.Or(reason, "blocked"), "system"
		it.Key = fmt.Sprintf("blocked:%s:%d", it.TaskID, updated)
		it.Action = models.DeskAction{Command: "agentqueued ctl task restart " + it.TaskID, Button: "Restart",
			URL: taskPage(it.TaskID)}
		add(it)
	}
	if err := rows.Close(); err != nil {
		return fail("blocked tasks", err)
	}
	if err := rows.Err(); err != nil {
		return fail("blocked tasks", err)
	}

	brows, err := s.rdb.QueryContext(ctx, qDeskBudgets, projectID)
	if err != nil {
		return fail("budgets", err)
	}
	for brows.Next() {
		var (
			id, name    string
			used, limit int64
			updated     int64
			ready       int
		)
		if err := brows.Scan(&id, &name, &used, &limit, &updated, &ready); err != nil {
			brows.Close()
			return fail("budgets", err)
		}
		add(models.DeskItem{Key: "budget:" + id, Kind: models.DeskBudget, ProjectID: id, Title: cmp.Or(name, id),
			What:  fmt.Sprintf("used %d of its budget of %d tokens; %d READY task(s) wait", used, limit, ready),
			Since: fromNanos(updated), AskedBy: "system",
			Action: models.DeskAction{Command: fmt.Sprintf("agentqueued ctl project edit %s --budget-limit N", id)}})
	}
	if err := brows.Close(); err != nil {
		return fail("budgets", err)
	}

	agents, err := s.ListAgents(ctx)
	if err != nil {
		return fail("agents", err)
	}
	for _, a := range agents {
		if a.State != models.AgentError {
			continue
		}
		since := a.CreatedAt
		if a.LastHeartbeat != nil {
			since = *a.LastHeartbeat
		}
		add(models.DeskItem{Key: "agent:" + a.ID, Kind: models.DeskAgent, AgentID: a.ID, Title: cmp.Or(a.Name, a.ID),
			What:  "set aside in ERROR after a run could not start: fix its command or checkout, then resume it",
			Since: since, AskedBy: "system",
			Action: models.DeskAction{Command: "agentqueued ctl agent resume " + a.ID, Button: "Resume"}})
	}

	slices.SortStableFunc(items, func(a, b models.DeskItem) int {
		return cmp.Or(a.Since.Compare(b.Since), strings.Compare(a.Key, b.Key))
	})
	d := models.Desk{Items: items}
	if len(d.Items) > MaxDeskItems {
		d.Items, d.Truncated = d.Items[:MaxDeskItems], true
	}
	if d.Items == nil {
		d.Items = []models.DeskItem{}
	}
	return d, nil
}

// taskPage is the dashboard's page of a task, relative to the daemon's
// address.
func taskPage(id string) string { return "/ui/tasks/" + id }

// MarkAndNotify queues m's notice (and its webhook delivery) under m.Key
// unless it was queued before (a desk mark records it, in the same
// transaction), and reports whether it queued it: each escalation and
// digest is sent once, across restarts and whatever the outbox keeps.
func (s *Store) MarkAndNotify(ctx context.Context, m models.DeskSend) (bool, error) {
	var sent bool
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		now := toNanos(s.now())
		res, err := tx.ExecContext(ctx, `INSERT INTO desk_marks (key, project_id, kind, at) VALUES (?,?,?,?)
			ON CONFLICT (key) DO NOTHING`, m.Key, m.ProjectID, m.Kind, now)
		if err != nil {
			return err
		}
		if rows, err := res.RowsAffected(); err != nil || rows == 0 {
			return err
		}
		sent = true
		if m.Webhook != "" {
			if _, err := tx.ExecContext(ctx, `INSERT INTO desk_webhooks (key, webhook, payload, next_attempt_at, created_at)
				VALUES (?,?,?,?,?)`, m.Key, m.Webhook, string(m.WebhookBody), now, now); err != nil {
				return err
			}
		}
		return s.enqueue(ctx, tx, m.Key, m.Notice)
	})
	if err != nil {
		return false, fmt.Errorf("mark and notify %s: %w", m.Key, err)
	}
	return sent, nil
}

// PendingWebhooks returns up to limit webhook deliveries due at now, oldest
// first, and when the next one not yet due is (nil: none). What it returns
// is durable (see WaitDurable).
func (s *Store) PendingWebhooks(ctx context.Context, now time.Time, limit int) ([]models.WebhookDelivery, *time.Time, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT key, webhook, payload, attempts FROM desk_webhooks INDEXED BY desk_webhooks_due
		WHERE delivered_at IS NULL AND given_up_at IS NULL AND next_attempt_at <= ? ORDER BY next_attempt_at, key LIMIT ?`,
		toNanos(now), limit)
	if err != nil {
		return nil, nil, fmt.Errorf("read webhook deliveries: %w", err)
	}
	var out []models.WebhookDelivery
	for rows.Next() {
		var d models.WebhookDelivery
		if err := rows.Scan(&d.Key, &d.Webhook, &d.Payload, &d.Attempts); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("read webhook deliveries: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Close(); err != nil {
		return nil, nil, fmt.Errorf("read webhook deliveries: %w", err)
	}
	var next sql.NullInt64
	if err := s.rdb.QueryRowContext(ctx, `SELECT min(next_attempt_at) FROM desk_webhooks INDEXED BY desk_webhooks_due
		WHERE delivered_at IS NULL AND given_up_at IS NULL AND next_attempt_at > ?`, toNanos(now)).Scan(&next); err != nil {
		return nil, nil, fmt.Errorf("read the next webhook delivery: %w", err)
	}
	if err := s.WaitDurable(ctx); err != nil {
		return nil, nil, fmt.Errorf("read webhook deliveries: %w", err)
	}
	return out, fromNullNanos(next), nil
}

// WebhookDelivered records the outcome of one attempt of the delivery
// key: delivered (err ""), failed and tried again at retryAt, or given up
// (retryAt nil).
func (s *Store) WebhookDelivered(ctx context.Context, key, errText string, retryAt *time.Time) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		now := toNanos(s.now())
		var err error
		switch {
		case errText == "":
			_, err = tx.ExecContext(ctx, "UPDATE desk_webhooks SET attempts = attempts + 1, delivered_at = ? WHERE key = ?", now, key)
		case retryAt != nil:
			_, err = tx.ExecContext(ctx, `UPDATE desk_webhooks SET attempts = attempts + 1, next_attempt_at = ?, last_error = ?
				WHERE key = ?`, toNanos(*retryAt), errText, key)
		default:
			_, err = tx.ExecContext(ctx, `UPDATE desk_webhooks SET attempts = attempts + 1, given_up_at = ?, last_error = ?
				WHERE key = ?`, now, errText, key)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("record webhook delivery %s: %w", key, err)
	}
	return nil
}

// LastDeskMark returns when the last mark of kind for project projectID
// was written, and false when there is none.
func (s *Store) LastDeskMark(ctx context.Context, projectID, kind string) (time.Time, bool, error) {
	var at sql.NullInt64
	if err := s.rdb.QueryRowContext(ctx, "SELECT max(at) FROM desk_marks WHERE project_id = ? AND kind = ?", projectID, kind).
		Scan(&at); err != nil {
		return time.Time{}, false, fmt.Errorf("last %s mark of project %s: %w", kind, projectID, err)
	}
	if !at.Valid {
		return time.Time{}, false, nil
	}
	return fromNanos(at.Int64), true, nil
}
