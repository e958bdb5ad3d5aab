package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

const hookColumns = `id, project_id, name, enabled, trigger, context_steps, prompt_template, llm_config,
	cooldown_seconds, max_tokens_per_run, schedule_from, created_at, updated_at, file_task`

func scanHook(row interface{ Scan(...any) error }) (models.Hook, error) {
	var (
		h                            models.Hook
		trigger, steps               string
		llm, fileTask                sql.NullString
		maxTokens                    sql.NullInt64
		from, created, updated, ebit int64
	)
	if err := row.Scan(&h.ID, &h.ProjectID, &h.Name, &ebit, &trigger, &steps, &h.PromptTemplate, &llm,
		&h.CooldownSeconds, &maxTokens, &from, &created, &updated, &fileTask); err != nil {
		return models.Hook{}, err
	}
	h.Enabled = ebit != 0
	if err := json.Unmarshal([]byte(trigger), &h.Trigger); err != nil {
		return models.Hook{}, fmt.Errorf("hook %s: stored trigger: %w", h.ID, err)
	}
	if err := json.Unmarshal([]byte(steps), &h.ContextSteps); err != nil {
		return models.Hook{}, fmt.Errorf("hook %s: stored context steps: %w", h.ID, err)
	}
	if h.ContextSteps == nil {
		h.ContextSteps = []models.HookStep{}
	}
	if llm.Valid {
		var c models.HookLLMConfig
		if err := json.Unmarshal([]byte(llm.String), &c); err != nil {
			return models.Hook{}, fmt.Errorf("hook %s: stored llm_config: %w", h.ID, err)
		}
		h.LLMConfig = &c
	}
	if fileTask.Valid {
		var t models.HookTask
		if err := json.Unmarshal([]byte(fileTask.String), &t); err != nil {
			return models.Hook{}, fmt.Errorf("hook %s: stored file_task: %w", h.ID, err)
		}
		h.FileTask = &t
	}
	if maxTokens.Valid {
		n := int(maxTokens.Int64)
		h.MaxTokensPerRun = &n
	}
	h.ScheduleFrom, h.CreatedAt, h.UpdatedAt = fromNanos(from), fromNanos(created), fromNanos(updated)
	return h, nil
}

// storedHook holds the stored forms of a hook's JSON and optional fields.
type storedHook struct {
	trigger, steps string
	llm, fileTask  sql.NullString
	maxTokens      sql.NullInt64
}

// hookArgs returns the stored forms of a hook's JSON and optional fields.
func hookArgs(h models.Hook) (storedHook, error) {
	var a storedHook
	b, err := json.Marshal(h.Trigger)
	if err != nil {
		return a, err
	}
	a.trigger = string(b)
	if h.ContextSteps == nil {
		h.ContextSteps = []models.HookStep{}
	}
	if b, err = json.Marshal(h.ContextSteps); err != nil {
		return a, err
	}
	a.steps = string(b)
	if h.LLMConfig != nil {
		if b, err = json.Marshal(h.LLMConfig); err != nil {
			return a, err
		}
		a.llm = sql.NullString{String: string(b), Valid: true}
	}
	if h.FileTask != nil {
		if b, err = json.Marshal(h.FileTask); err != nil {
			return a, err
		}
		a.fileTask = sql.NullString{String: string(b), Valid: true}
	}
	if h.MaxTokensPerRun != nil {
		a.maxTokens = sql.NullInt64{Int64: int64(*h.MaxTokensPerRun), Valid: true}
	}
	return a, nil
}

// CreateHook stores a new hook; its schedule starts now.
func (s *Store) CreateHook(ctx context.Context, h models.Hook) (models.Hook, error) {
	if err := h.Validate(); err != nil {
		return models.Hook{}, err
	}
	now := s.now()
	h.CreatedAt, h.UpdatedAt, h.ScheduleFrom = now, now, now
	a, err := hookArgs(h)
	if err != nil {
		return models.Hook{}, fmt.Errorf("create hook %s: %w", h.ID, err)
	}
	err = s.withTx(ctx, func(tx *sql.Tx) error {
		var st string
		if err := tx.QueryRowContext(ctx, qProjectStatus, h.ProjectID).Scan(&st); errors.Is(err, sql.ErrNoRows) {
			return notFound("project", h.ProjectID)
		} else if err != nil {
			return err
		}
		before, err := anyEventHook(ctx, tx)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO hooks (`+hookColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
			h.ID, h.ProjectID, h.Name, h.Enabled, a.trigger, a.steps, h.PromptTemplate, a.llm, h.CooldownSeconds, a.maxTokens,
			toNanos(h.ScheduleFrom), toNanos(h.CreatedAt), toNanos(h.UpdatedAt), a.fileTask)
		if isUniqueViolation(err) {
			return models.Errorf(models.CodeConflict, "hook %q exists already: choose another id", h.ID)
		}
		if err != nil {
			return err
		}
		return startHookCursor(ctx, tx, before, h)
	})
	if err != nil {
		return models.Hook{}, fmt.Errorf("create hook %s: %w", h.ID, err)
	}
	return s.GetHook(ctx, h.ID)
}

// GetHook returns a hook.
func (s *Store) GetHook(ctx context.Context, id string) (models.Hook, error) {
	h, err := scanHook(s.rdb.QueryRowContext(ctx, "SELECT "+hookColumns+" FROM hooks WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return models.Hook{}, notFound("hook", id)
	}
	if err != nil {
		return models.Hook{}, fmt.Errorf("get hook %s: %w", id, err)
	}
	return h, nil
}

// ListHooks returns the hooks of a project, or of every project when
// projectID is empty, ordered by project and id.
func (s *Store) ListHooks(ctx context.Context, projectID string) ([]models.Hook, error) {
	rows, err := s.rdb.QueryContext(ctx, "SELECT "+hookColumns+` FROM hooks WHERE ?1 = '' OR project_id = ?1
		ORDER BY project_id, id`, projectID)
	if err != nil {
		return nil, fmt.Errorf("list hooks: %w", err)
	}
	defer rows.Close()
	var out []models.Hook
	for rows.Next() {
		h, err := scanHook(rows)
		if err != nil {
			return nil, fmt.Errorf("list hooks: %w", err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list hooks: %w", err)
	}
	return out, nil
}

// UpdateHook applies a patch to a hook and validates the result.
func (s *Store) UpdateHook(ctx context.Context, id string, p models.HookPatch) (models.Hook, error) {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		h, err := scanHook(tx.QueryRowContext(ctx, "SELECT "+hookColumns+" FROM hooks WHERE id = ?", id))
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("hook", id)
		}
		if err != nil {
			return err
		}
		before, err := anyEventHook(ctx, tx)
		if err != nil {
			return err
		}
		h = p.Apply(h, s.now())
		if err := h.Validate(); err != nil {
			return err
		}
		a, err := hookArgs(h)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE hooks SET name = ?, enabled = ?, trigger = ?, context_steps = ?,
			prompt_template = ?, llm_config = ?, file_task = ?, cooldown_seconds = ?, max_tokens_per_run = ?,
			schedule_from = ?, updated_at = ? WHERE id = ?`, h.Name, h.Enabled, a.trigger, a.steps, h.PromptTemplate,
			a.llm, a.fileTask, h.CooldownSeconds, a.maxTokens, toNanos(h.ScheduleFrom), toNanos(h.UpdatedAt), id)
		if err != nil {
			return err
		}
		return startHookCursor(ctx, tx, before, h)
	})
	if err != nil {
		return models.Hook{}, fmt.Errorf("update hook %s: %w", id, err)
	}
	return s.GetHook(ctx, id)
}

// qAnyEventHook is true when an enabled hook fires on task events.
const qAnyEventHook = `SELECT EXISTS (SELECT 1 FROM hooks WHERE enabled
	AND json_extract(CASE WHEN json_valid(trigger) THEN trigger ELSE '{}' END, '$.type') = 'event')`

// anyEventHook reports whether an enabled hook fires on task events.
func anyEventHook(ctx context.Context, tx *sql.Tx) (bool, error) {
	var found bool
	if err := tx.QueryRowContext(ctx, qAnyEventHook).Scan(&found); err != nil {
		return false, fmt.Errorf("look for event hooks: %w", err)
	}
	return found, nil
}

// startHookCursor moves the hooks' event cursor to the newest event when h,
// just written, is the first enabled hook to fire on events (before tells
// whether one was before the write). While there is none the hooks engine
// leaves the cursor where it is; moving it here makes the new hook see the
// events from now on, as it would had the engine moved it at every pass.
// An event hook made while another exists starts where the engine is.
func startHookCursor(ctx context.Context, tx *sql.Tx, before bool, h models.Hook) error {
	if before || !h.Enabled || h.Trigger.Type != models.TriggerEvent {
		return nil
	}
	if err := startEventCursor(ctx, tx, models.HookEventCursor); err != nil {
		return fmt.Errorf("start the hooks' event cursor: %w", err)
	}
	return nil
}

// DeleteHook deletes a hook with its runs; the token ledger keeps what
// they used.
func (s *Store) DeleteHook(ctx context.Context, id string) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM hooks WHERE id = ?", id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound("hook", id)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete hook %s: %w", id, err)
	}
	return nil
}

// ClaimHookRun records a firing of a hook in one transaction: nothing when
// the key fired before or too many runs are running; a skipped run when the
// hook is disabled, its project is over its token budget or the hook is in
// its cooldown (derived from its last run that was not skipped); otherwise
// a running run.
func (s *Store) ClaimHookRun(ctx context.Context, c models.HookClaim) (models.HookClaimResult, error) {
	var out models.HookClaimResult
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		h, err := scanHook(tx.QueryRowContext(ctx, "SELECT "+hookColumns+" FROM hooks WHERE id = ?", c.HookID))
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("hook", c.HookID)
		}
		if err != nil {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM hook_runs WHERE hook_id = ? AND fire_key = ?",
			h.ID, c.FireKey).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			out.Duplicate = true
			return nil
		}
		now := s.now()
		skip, err := s.hookSkipReason(ctx, tx, h, c, now)
		if err != nil {
			return err
		}
		if skip == "" && c.MaxRunning > 0 {
			if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM hook_runs WHERE status = 'running'").Scan(&n); err != nil {
				return err
			}
			if n >= c.MaxRunning {
				out.Busy = true
				return nil
			}
		}
		var seq int64
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM hook_runs WHERE hook_id = ?", h.ID).Scan(&seq); err != nil {
			return err
		}
		r := models.HookRun{ID: fmt.Sprintf("%s.%d", h.ID, seq+1), HookID: h.ID, ProjectID: h.ProjectID,
			TriggerReason: c.TriggerReason, TriggerDetail: c.TriggerDetail, Status: models.HookRunRunning, FireKey: c.FireKey, ScheduledAt: c.ScheduledAt,
			StartedAt: now}
		if c.Event != nil {
			b, err := json.Marshal(c.Event)
			if err != nil {
				return err
			}
			r.EventData = ptr(string(b))
		}
		if skip != "" {
			r.Status, r.SkippedReason, r.CompletedAt = models.HookRunSkipped, &skip, &now
		}
		for {
			_, err = tx.ExecContext(ctx, `INSERT INTO hook_runs (id, hook_id, project_id, trigger_reason, status,
				event_data, skipped_reason, started_at, completed_at, fire_key, scheduled_at, trigger_detail)
				VALUES (?,?,?,?,?,?,?,?,?,?,?,?)`,
				r.ID, r.HookID, r.ProjectID, r.TriggerReason, r.Status, nullString(r.EventData), nullString(r.SkippedReason),
				toNanos(r.StartedAt), nullNanos(r.CompletedAt), r.FireKey, nullNanos(r.ScheduledAt), r.TriggerDetail)
			if !isUniqueViolation(err) {
				break
			}
			// A deleted hook's runs went with it; a run id taken by a
			// hook of the same id before then moves the number on.
			seq++
			r.ID = fmt.Sprintf("%s.%d", h.ID, seq+1)
		}
		if err != nil {
			return err
		}
		out.Run = r
		return nil
	})
	if err != nil {
		return models.HookClaimResult{}, fmt.Errorf("claim run of hook %s (%s): %w", c.HookID, c.FireKey, err)
	}
	return out, nil
}

// hookSkipReason says why a firing is recorded as skipped, or "".
func (s *Store) hookSkipReason(ctx context.Context, tx *sql.Tx, h models.Hook, c models.HookClaim, now time.Time) (string, error) {
	if !h.Enabled && !c.Manual {
		return "the hook is disabled", nil
	}
	var (
		used  int64
		limit sql.NullInt64
	)
	if err := tx.QueryRowContext(ctx, "SELECT total_tokens_used, budget_limit FROM projects WHERE id = ?",
		h.ProjectID).Scan(&used, &limit); err != nil {
		return "", err
	}
	if limit.Valid && used >= limit.Int64 {
		return fmt.Sprintf("project %s is over its token budget (%d of %d tokens used)", h.ProjectID, used, limit.Int64), nil
	}
	if c.GlobalBudget != nil {
		var all int64
		if err := tx.QueryRowContext(ctx, qTokensInWindow, toNanos(c.WindowStart)).Scan(&all); err != nil {
			return "", err
		}
		if all >= *c.GlobalBudget {
			return fmt.Sprintf("the global token budget is spent (%d of %d tokens since %s)", all, *c.GlobalBudget,
				c.WindowStart.UTC().Format(time.RFC3339)), nil
		}
	}
	if c.Manual || h.CooldownSeconds == 0 {
		return "", nil
	}
	// A scheduled firing is compared by scheduled times, so that how soon
	// after its time each firing was noticed does not matter.
	var lastStart, lastSched sql.NullInt64
	if err := tx.QueryRowContext(ctx, qLastHookRun, h.ID).Scan(&lastStart, &lastSched); errors.Is(err, sql.ErrNoRows) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	at, last := now, fromNanos(lastStart.Int64)
	if c.ScheduledAt != nil {
		at = *c.ScheduledAt
		if lastSched.Valid {
			last = fromNanos(lastSched.Int64)
		}
	}
	if until := last.Add(time.Duration(h.CooldownSeconds) * time.Second); at.Before(until) {
		return fmt.Sprintf("cooldown: the last run started at %s; the next may start at %s",
			fromNanos(lastStart.Int64).Format(time.RFC3339), until.Format(time.RFC3339)), nil
	}
	return "", nil
}

func ptr[T any](v T) *T { return &v }

// SaveHookRun records what a running run has gathered and sent so far:
// its context results, prompt, answer and actions.
func (s *Store) SaveHookRun(ctx context.Context, r models.HookRun) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE hook_runs SET context_results = ?, prompt_sent = ?, llm_response = ?,
			actions_taken = ? WHERE id = ? AND status = 'running'`, nullString(r.ContextResults), nullString(r.PromptSent),
			nullString(r.LLMResponse), nullString(r.ActionsTaken), r.ID)
		return err
	})
	if err != nil {
		return fmt.Errorf("save hook run %s: %w", r.ID, err)
	}
	return nil
}

// FinishHookRun ends a running run as completed, failed or skipped, with
// everything it recorded. A run that is no longer running (closed at a
// restart, or its hook deleted) is left alone: the answer says so.
func (s *Store) FinishHookRun(ctx context.Context, r models.HookRun) (bool, error) {
	if !r.Status.Final() {
		return false, fmt.Errorf("finish hook run %s: status %q is not final", r.ID, r.Status)
	}
	var done bool
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE hook_runs SET status = ?, context_results = ?, prompt_sent = ?,
			llm_response = ?, actions_taken = ?, skipped_reason = ?, error = ?, completed_at = ?
			WHERE id = ? AND status = 'running'`, r.Status, nullString(r.ContextResults), nullString(r.PromptSent),
			nullString(r.LLMResponse), nullString(r.ActionsTaken), nullString(r.SkippedReason), r.Error,
			toNanos(s.now()), r.ID)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		done = n == 1
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("finish hook run %s: %w", r.ID, err)
	}
	return done, nil
}

// RecordHookUsage books the tokens of one LLM call of a hook run: in the
// ledger against the run's project, in the project's total and in the
// run's count, in one transaction.
func (s *Store) RecordHookUsage(ctx context.Context, r models.HookRun, u models.TokenUsage) error {
	u.ProjectID, u.HookRunID = r.ProjectID, r.ID
	if u.Input < 0 || u.Output < 0 || u.CacheRead < 0 || u.CacheWrite < 0 {
		return models.Errorf(models.CodeInvalid, "token usage: counts must not be negative")
	}
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		if err := s.recordTokenUsageTx(ctx, tx, u); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE hook_runs SET tokens_used = tokens_used + ? WHERE id = ?", u.Total(), r.ID)
		return err
	})
	if err != nil {
		return fmt.Errorf("record tokens of hook run %s: %w", r.ID, err)
	}
	return nil
}

const hookRunColumns = `id, hook_id, project_id, trigger_reason, status, fire_key, scheduled_at, event_data,
	context_results, prompt_sent, llm_response, actions_taken, skipped_reason, error, tokens_used, started_at, completed_at,
	trigger_detail`

func scanHookRun(row interface{ Scan(...any) error }) (models.HookRun, error) {
	var (
		r                                          models.HookRun
		scheduled, completed                       sql.NullInt64
		event, ctxRes, prompt, resp, acts, skipped sql.NullString
		started                                    int64
	)
	if err := row.Scan(&r.ID, &r.HookID, &r.ProjectID, &r.TriggerReason, &r.Status, &r.FireKey, &scheduled, &event,
		&ctxRes, &prompt, &resp, &acts, &skipped, &r.Error, &r.TokensUsed, &started, &completed, &r.TriggerDetail); err != nil {
		return models.HookRun{}, err
	}
	r.ScheduledAt, r.CompletedAt, r.StartedAt = fromNullNanos(scheduled), fromNullNanos(completed), fromNanos(started)
	r.EventData, r.ContextResults, r.PromptSent = fromNullString(event), fromNullString(ctxRes), fromNullString(prompt)
	r.LLMResponse, r.ActionsTaken, r.SkippedReason = fromNullString(resp), fromNullString(acts), fromNullString(skipped)
	return r, nil
}

// GetHookRun returns one hook run.
func (s *Store) GetHookRun(ctx context.Context, id string) (models.HookRun, error) {
	r, err := scanHookRun(s.rdb.QueryRowContext(ctx, "SELECT "+hookRunColumns+" FROM hook_runs WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return models.HookRun{}, notFound("hook run", id)
	}
	if err != nil {
		return models.HookRun{}, fmt.Errorf("get hook run %s: %w", id, err)
	}
	return r, nil
}

// ListHookRuns returns hook runs, newest first, at most f.Limit (default
// DefaultListLimit, at most MaxListLimit).
func (s *Store) ListHookRuns(ctx context.Context, f models.HookRunFilter) ([]models.HookRun, error) {
	return s.ListHookRunsAfter(ctx, f, "")
}

// ListHookRunsAfter lists hook runs like ListHookRuns, continuing after
// the run afterID in that order (keyset paging; empty: from the newest).
// An afterID that names no run is invalid.
func (s *Store) ListHookRunsAfter(ctx context.Context, f models.HookRunFilter, afterID string) ([]models.HookRun, error) {
	switch {
	case f.Limit <= 0:
		f.Limit = DefaultListLimit
	case f.Limit > MaxListLimit:
		f.Limit = MaxListLimit
	}
	var afterRow, afterStarted int64
	if afterID != "" {
		err := s.rdb.QueryRowContext(ctx, qHookRunCursor, afterID).Scan(&afterRow, &afterStarted)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, models.Errorf(models.CodeInvalid, "after: no hook run %q to continue after", afterID)
		}
		if err != nil {
			return nil, fmt.Errorf("list hook runs: %w", err)
		}
	}
	rows, err := s.rdb.QueryContext(ctx, qListHookRuns, f.HookID, f.ProjectID, f.Status, f.Limit, afterRow, afterStarted)
	if err != nil {
		return nil, fmt.Errorf("list hook runs: %w", err)
	}
	defer rows.Close()
	var out []models.HookRun
	for rows.Next() {
		r, err := scanHookRun(rows)
		if err != nil {
			return nil, fmt.Errorf("list hook runs: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list hook runs: %w", err)
	}
	return out, nil
}

// LastScheduledFirings returns, for every hook that fired on a schedule,
// the latest scheduled time it fired for (run or skipped).
func (s *Store) LastScheduledFirings(ctx context.Context) (map[string]time.Time, error) {
	rows, err := s.rdb.QueryContext(ctx, qLastScheduledFirings)
	if err != nil {
		return nil, fmt.Errorf("last scheduled firings: %w", err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var (
			id string
			at int64
		)
		if err := rows.Scan(&id, &at); err != nil {
			return nil, fmt.Errorf("last scheduled firings: %w", err)
		}
		out[id] = fromNanos(at)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("last scheduled firings: %w", err)
	}
	return out, nil
}

// FailRunningHookRuns closes hook runs left running by an earlier life of
// the daemon as failed, and returns how many there were.
func (s *Store) FailRunningHookRuns(ctx context.Context) (int64, error) {
	var n int64
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE hook_runs SET status = 'failed', completed_at = ?,
			error = 'the daemon stopped during the run' WHERE status = 'running'`, toNanos(s.now()))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("fail running hook runs: %w", err)
	}
	return n, nil
}

// AddTaskFeedback records feedback on a task of project projectID for its
// next attempt.
func (s *Store) AddTaskFeedback(ctx context.Context, projectID, taskID string, f models.Feedback) error {
	if strings.TrimSpace(f.Text) == "" {
		return models.Errorf(models.CodeInvalid, "feedback: text is required")
	}
	if err := f.Validate(); err != nil {
		return err
	}
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		var p string
		err := tx.QueryRowContext(ctx, "SELECT project_id FROM tasks WHERE id = ?", taskID).Scan(&p)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && p != projectID) {
			return notFound("task", taskID)
		}
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "INSERT INTO task_feedback (task_id, source, verdict, text, created_at) VALUES (?,?,?,?,?)",
			taskID, f.Source, f.Verdict, f.Text, toNanos(s.now()))
		return err
	})
	if err != nil {
		return fmt.Errorf("add feedback to task %s: %w", taskID, err)
	}
	return nil
}
