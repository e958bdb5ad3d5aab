package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// A question's life: asked by a run (its task IN_PROGRESS → WAITING_INPUT),
// it stays open — listed, answerable — until it is answered, expires, or
// its task is taken away from it (cancelled, restarted, stopped: the
// question is closed). The run that asked may end meanwhile (the daemon
// restarted, the agent's CLI gave up on the call): the task then waits on
// in WAITING_INPUT without a run, and the answer makes it READY again
// (REPLY_REQUEUED). Every statement on the questions table is in this file.

const questionColumns = `id, task_id, project_id, run_id, text, asked_at, answer, answered_by, answered_at, closed_at,
	closed_reason, expires_at, timed_out_at, default_answer, abandoned_at`

func scanQuestion(row scanner) (models.Question, error) {
	var (
		q                 models.Question
		asked, expires    int64
		answer, def       sql.NullString
		answered, closed  sql.NullInt64
		expired, runEnded sql.NullInt64
	)
	if err := row.Scan(&q.ID, &q.TaskID, &q.ProjectID, &q.RunID, &q.Text, &asked, &answer, &q.AnsweredBy, &answered,
		&closed, &q.ClosedReason, &expires, &expired, &def, &runEnded); err != nil {
		return models.Question{}, err
	}
	q.AskedAt, q.Answer, q.AnsweredAt = fromNanos(asked), fromNullString(answer), fromNullNanos(answered)
	q.ClosedAt, q.ExpiresAt, q.ExpiredAt = fromNullNanos(closed), fromNanos(expires), fromNullNanos(expired)
	q.Default, q.RunEndedAt = fromNullString(def), fromNullNanos(runEnded)
	return q, nil
}

// qOpenQuestion is true for a question (a row of questions) still open.
const qOpenQuestion = `answer IS NULL AND timed_out_at IS NULL AND closed_at IS NULL`

// AskQuestion records an agent's question (see AskQuestionWith) with no
// default answer and the default input timeout.
func (s *Store) AskQuestion(ctx context.Context, runID int64, text string) (models.Question, error) {
	return s.AskQuestionWith(ctx, runID, models.Ask{Question: text}, models.DefaultInputTimeout)
}

// AskQuestionWith records an agent's question and moves its task
// IN_PROGRESS → WAITING_INPUT (AGENT_QUESTION), with a notice in the outbox,
// in one transaction. The question expires its project's input_timeout
// after now, or timeout when the project sets none.
func (s *Store) AskQuestionWith(ctx context.Context, runID int64, ask models.Ask, timeout time.Duration) (models.Question, error) {
	if err := ask.Validate(); err != nil {
		return models.Question{}, err
	}
	var q models.Question
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		x := s.newTxn(ctx, tx)
		r, current, err := currentRun(x, runID)
		if err != nil {
			return err
		}
		if !current {
			return models.Errorf(models.CodeConflict, "run %d is no longer its task's current run", runID)
		}
		settings, err := projectSettings(x, r.ProjectID)
		if err != nil {
			return err
		}
		a, err := x.run(change{taskID: r.TaskID, event: models.EventAgentQuestion, expectFrom: models.StatusInProgress,
			actor: r.AgentID, reason: ask.Question})
		if err != nil {
			return err
		}
		if a.duplicate {
			return models.Errorf(models.CodeConflict, "task %s is already waiting for an answer", r.TaskID)
		}
		expires := x.now.Add(settings.QuestionTimeout(timeout))
		res, err := x.ExecContext(ctx, `INSERT INTO questions (task_id, project_id, run_id, text, asked_at, expires_at,
			default_answer) VALUES (?,?,?,?,?,?,?)`, r.TaskID, r.ProjectID, runID, ask.Question, toNanos(x.now), toNanos(expires),
			nullString(ask.Default))
		if err != nil {
			return err
		}
		id, err := res.LastInsertId()
		if err != nil {
			return err
		}
		q = models.Question{ID: id, TaskID: r.TaskID, ProjectID: r.ProjectID, RunID: runID, Text: ask.Question, AskedAt: x.now,
			ExpiresAt: expires, Default: ask.Default}
		return s.enqueue(ctx, tx, fmt.Sprintf("question:%d", id), models.NewQuestionNotice(q))
	})
	if err != nil {
		return models.Question{}, fmt.Errorf("ask question for run %d: %w", runID, err)
	}
	// The task's status changed: whoever watches commits (the daemon's
	// OnChange, a client following the task) hears of it like any other.
	s.changed()
	return q, nil
}

// projectSettings reads a project's settings in a transaction.
func projectSettings(x *txn, projectID string) (models.ProjectSettings, error) {
	var text string
	var out models.ProjectSettings
	if err := x.QueryRowContext(x.ctx, "SELECT settings FROM projects WHERE id = ?", projectID).Scan(&text); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return out, notFound("project", projectID)
		}
		return out, err
	}
	if err := decodeJSONColumn(text, &out); err != nil {
		return out, fmt.Errorf("project %s settings: %w", projectID, err)
	}
	return out, nil
}

// GetQuestion returns question id.
func (s *Store) GetQuestion(ctx context.Context, id int64) (models.Question, error) {
	q, err := scanQuestion(s.rdb.QueryRowContext(ctx, "SELECT "+questionColumns+" FROM questions WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return q, models.Errorf(models.CodeNotFound, "question %d not found", id)
	}
	if err != nil {
		return q, fmt.Errorf("read question %d: %w", id, err)
	}
	return q, nil
}

// readQuestion reads question id in a transaction.
func readQuestion(x *txn, id int64) (models.Question, error) {
	q, err := scanQuestion(x.QueryRowContext(x.ctx, "SELECT "+questionColumns+" FROM questions WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return q, models.Errorf(models.CodeNotFound, "question %d not found", id)
	}
	return q, err
}

// refuseClosed explains why question q takes no answer, or returns nil when
// it is open.
func refuseClosed(q models.Question) error {
	switch {
	case q.Answer != nil:
		return models.Errorf(models.CodeConflict, "question %d was already answered by %s at %s", q.ID, q.AnsweredBy,
			q.AnsweredAt.UTC().Format(time.RFC3339))
	case q.ExpiredAt != nil:
		return models.Errorf(models.CodeConflict, "question %d expired unanswered at %s; its project's on_expiry decided what "+
			"became of task %s (see `ctl task show %s`)", q.ID, q.ExpiredAt.UTC().Format(time.RFC3339), q.TaskID, q.TaskID)
	case q.ClosedAt != nil:
		why := q.ClosedReason
		if why == "" {
			why = "its task was cancelled"
		}
		return models.Errorf(models.CodeConflict, "question %d was closed: %s (task %s)", q.ID, why, q.TaskID)
	}
	return nil
}

// AnswerQuestion records a person's answer to an open question. A task
// still WAITING_INPUT goes on with it in the same transaction: its run, if
// it still waits, gets it (HUMAN_REPLIED → IN_PROGRESS); a task whose run
// ended while it waited runs again (REPLY_REQUEUED → READY), preferring the
// agent that asked so that its session resumes, the answer in its prompt.
// An answered, expired or closed question is refused, saying which.
func (s *Store) AnswerQuestion(ctx context.Context, id int64, answer, by string) (models.Question, error) {
	if err := models.ValidateQuestionText("answer", answer); err != nil {
		return models.Question{}, err
	}
	if err := models.CheckLine("answered_by", by, models.MaxActorLen); err != nil {
		return models.Question{}, err
	}
	var q models.Question
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		x := s.newTxn(ctx, tx)
		var err error
		if q, err = readQuestion(x, id); err != nil {
			return err
		}
		if err := refuseClosed(q); err != nil {
			return err
		}
		if _, err := x.ExecContext(ctx, "UPDATE questions SET answer = ?, answered_by = ?, answered_at = ? WHERE id = ?",
			answer, by, toNanos(x.now), id); err != nil {
			return err
		}
		q.Answer, q.AnsweredBy, q.AnsweredAt = &answer, by, &x.now
		return x.goOn(q, by, "answered question "+fmt.Sprint(id)+" by "+by)
	})
	if err != nil {
		return models.Question{}, fmt.Errorf("answer question %d: %w", id, err)
	}
	s.changed()
	return q, nil
}

// goOn moves the task of question q, just answered, on with its answer:
// HUMAN_REPLIED when the run that asked still waits, REPLY_REQUEUED when it
// has ended. A task that has moved on keeps the answer for its next run.
func (x *txn) goOn(q models.Question, actor, reason string) error {
	t, err := getTask(x.ctx, x, q.TaskID)
	if err != nil {
		return err
	}
	switch t.Status {
	case models.StatusWaitingInput:
		var open int
		if err := x.QueryRowContext(x.ctx, "SELECT count(*) FROM task_runs WHERE id = ? AND ended_at IS NULL", q.RunID).Scan(&open); err != nil {
			return err
		}
		if open == 1 {
			_, err := x.run(change{taskID: q.TaskID, event: models.EventHumanReplied, expectFrom: models.StatusWaitingInput,
				actor: actor, reason: reason})
			return err
		}
		var agentID string
		if err := x.QueryRowContext(x.ctx, "SELECT agent_id FROM task_runs WHERE id = ?", q.RunID).Scan(&agentID); err != nil &&
			!errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if _, err := x.run(change{taskID: q.TaskID, event: models.EventReplyRequeued, expectFrom: models.StatusWaitingInput,
			actor: actor, reason: reason + "; the run that asked had ended: the task runs again with the answer"}); err != nil {
			return err
		}
		_, err := x.ExecContext(x.ctx, "UPDATE tasks SET prefer_agent_id = ? WHERE id = ?", agentID, q.TaskID)
		return err
	case models.StatusPaused:
		// A question of an earlier version, whose abandonment paused the
		// task for want of it: resume at the next round.
		cause, err := pausedByQuestion(x, q)
		if err != nil || !cause {
			return err
		}
		_, err = x.ExecContext(x.ctx, "UPDATE tasks SET resume_after = ? WHERE id = ? AND status = 'PAUSED' AND resume_after > ?",
			toNanos(x.now), q.TaskID, toNanos(x.now))
		return err
	}
	return nil
}

// pausedByQuestion reports whether the task's present pause is the one
// question q caused in an earlier version: its latest event is the
// INPUT_TIMEOUT written with q's abandonment.
func pausedByQuestion(x *txn, q models.Question) (bool, error) {
	var (
		event string
		at    sql.NullInt64
		gone  sql.NullInt64
	)
	err := x.QueryRowContext(x.ctx, "SELECT event, created_at FROM task_events WHERE task_id = ? ORDER BY id DESC LIMIT 1",
		q.TaskID).Scan(&event, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := x.QueryRowContext(x.ctx, "SELECT abandoned_at FROM questions WHERE id = ?", q.ID).Scan(&gone); err != nil {
		return false, err
	}
	return models.TaskEvent(event) == models.EventInputTimeout && gone.Valid && at.Valid && at.Int64 == gone.Int64, nil
}

// qCloseQuestions closes a task's open questions (now, task, reason).
const qCloseQuestions = `UPDATE questions SET closed_at = ?1, closed_reason = ?3
	WHERE task_id = ?2 AND ` + qOpenQuestion

// closeQuestions closes the open questions of a task taken away from them
// by event (a cancel, a restart, a stop): nobody waits for their answer.
func (x *txn) closeQuestions(taskID string, event models.TaskEvent) error {
	why := "the task left WAITING_INPUT by " + string(event)
	switch event {
	case models.EventAdminCancel:
		why = "its task was cancelled"
	case models.EventAdminRestart:
		why = "its task was restarted"
	case models.EventRunStopped:
		why = "its workflow run was stopped"
	}
	_, err := x.ExecContext(x.ctx, qCloseQuestions, toNanos(x.now), taskID, why)
	return err
}

// runEndedWaiting records that the run runID ended while its task waited
// for the answer to one of its questions: the questions stay open.
func (x *txn) runEndedWaiting(runID int64) error {
	_, err := x.ExecContext(x.ctx, `UPDATE questions SET abandoned_at = ? WHERE run_id = ? AND abandoned_at IS NULL AND `+
		qOpenQuestion, toNanos(x.now), runID)
	return err
}

// ExpireQuestion ends the wait for question id, whose expiry has passed,
// as its project's on_expiry says, in one transaction (see
// models.QuestionExpiry): the question is marked expired and its task
// paused (INPUT_TIMEOUT, until the input timeout has passed once more),
// failed (TIMEOUT_FAILED) or given the agent's default answer; every
// expiry uses one of the task's retries, and one that finds none left
// blocks the task (MAX_RETRIES). A question answered, expired or closed
// meanwhile, or not yet due, changes nothing (Outcome ExpiryNone).
func (s *Store) ExpireQuestion(ctx context.Context, id int64) (models.QuestionExpiry, error) {
	var out models.QuestionExpiry
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		x := s.newTxn(ctx, tx)
		q, err := readQuestion(x, id)
		if err != nil {
			return err
		}
		out.Question = q
		if !q.Open() || x.now.Before(q.ExpiresAt) {
			return nil
		}
		if _, err := x.ExecContext(ctx, "UPDATE questions SET timed_out_at = ? WHERE id = ?", toNanos(x.now), id); err != nil {
			return err
		}
		out.Question.ExpiredAt = &x.now
		t, err := getTask(ctx, x, q.TaskID)
		if err != nil {
			return err
		}
		if t.Status != models.StatusWaitingInput {
			return nil // a stale question of an earlier version: marked, nothing else to do
		}
		var open int
		if err := x.QueryRowContext(ctx, "SELECT count(*) FROM task_runs WHERE id = ? AND ended_at IS NULL", q.RunID).Scan(&open); err != nil {
			return err
		}
		settings, err := projectSettings(x, q.ProjectID)
		if err != nil {
			return err
		}
		waited := q.ExpiresAt.Sub(q.AskedAt).Round(time.Second)
		base := fmt.Sprintf("question %d was not answered within %s", id, waited)
		if t.RetryCount >= t.MaxRetries {
			// Every expiry uses a retry: none is left.
			out.Outcome, out.RunWaits = models.ExpiryBlocked, false
			reason := fmt.Sprintf("%s and the task has no retry left (%d of %d used): a person must decide", base,
				t.RetryCount, t.MaxRetries)
			return x.expired(&out, change{taskID: t.ID, event: models.EventMaxRetries, expectFrom: models.StatusWaitingInput,
				actor: "system", reason: reason}, open == 1)
		}
		onExpiry := settings.OnExpiry
		if onExpiry == models.OnExpiryDefault && q.Default == nil {
			onExpiry, base = models.OnExpiryPause, base+" and the agent proposed no default answer"
		}
		switch onExpiry {
		case models.OnExpiryFail:
			out.Outcome = models.ExpiryFailed
			return x.expired(&out, change{taskID: t.ID, event: models.EventTimeoutFailed, expectFrom: models.StatusWaitingInput,
				actor: "system", reason: base + " (on_expiry: fail)"}, open == 1)
		case models.OnExpiryDefault:
			// The default answers the question: counted as an expiry (one
			// retry used), then the task goes on as after any answer.
			out.Outcome, out.Answer = models.ExpiryAnswered, *q.Default
			if _, err := x.ExecContext(ctx, "UPDATE questions SET answer = ?, answered_by = ?, answered_at = ? WHERE id = ?",
				*q.Default, models.DefaultAnswerActor, toNanos(x.now), id); err != nil {
				return err
			}
			if _, err := x.ExecContext(ctx, "UPDATE tasks SET retry_count = retry_count + 1 WHERE id = ?", t.ID); err != nil {
				return err
			}
			out.Question.Answer, out.Question.AnsweredBy, out.Question.AnsweredAt = q.Default, models.DefaultAnswerActor, &x.now
			out.RunWaits = open == 1
			if err := x.goOn(out.Question, "system", base+"; answered with the agent's default (on_expiry: default)"); err != nil {
				return err
			}
			out.Task, err = getTask(ctx, x, t.ID)
			return err
		default:
			out.Outcome = models.ExpiryPaused
			at := x.now.Add(waited)
			return x.expired(&out, change{taskID: t.ID, event: models.EventInputTimeout, expectFrom: models.StatusWaitingInput,
				actor: "system", reason: fmt.Sprintf("%s (on_expiry: pause): it runs again without the answer at %s", base,
					at.UTC().Format(time.RFC3339)), resumeAfter: &at, countsRetry: true}, open == 1)
		}
	})
	if err != nil {
		return models.QuestionExpiry{}, fmt.Errorf("expire question %d: %w", id, err)
	}
	if out.Outcome != models.ExpiryNone {
		s.changed()
	}
	return out, nil
}

// expired applies the change an expiry decided, with its notice, and
// records in out whether the run that asked is to be ended (live is
// whether it still runs).
func (x *txn) expired(out *models.QuestionExpiry, c change, live bool) error {
	a, err := x.run(c)
	if err != nil {
		return err
	}
	out.Task, out.EndRun = a.task, live
	if a.duplicate {
		return nil
	}
	return x.s.notify(x.ctx, x.tx, a, x.blocked, c.event, c.reason, c.actor)
}

// DueQuestions returns up to limit open questions whose expiry has passed
// at now, soonest first, and the expiry of the next open question not yet
// due (nil when there is none).
func (s *Store) DueQuestions(ctx context.Context, now time.Time, limit int) ([]models.Question, *time.Time, error) {
	due, err := queryAll(ctx, s.rdb, scanQuestion, `SELECT `+questionColumns+` FROM questions INDEXED BY questions_expiry
		WHERE `+qOpenQuestion+` AND expires_at <= ? ORDER BY expires_at, id LIMIT ?`, toNanos(now), limit)
	if err != nil {
		return nil, nil, fmt.Errorf("read due questions: %w", err)
	}
	var next sql.NullInt64
	if err := s.rdb.QueryRowContext(ctx, `SELECT min(expires_at) FROM questions INDEXED BY questions_expiry
		WHERE `+qOpenQuestion+` AND expires_at > ?`, toNanos(now)).Scan(&next); err != nil {
		return nil, nil, fmt.Errorf("read next question expiry: %w", err)
	}
	return due, fromNullNanos(next), nil
}

// OpenQuestions returns the questions waiting for an answer (whether or
// not the run that asked still runs), oldest first.
func (s *Store) OpenQuestions(ctx context.Context) ([]models.Question, error) {
	qs, err := queryAll(ctx, s.rdb, scanQuestion, `SELECT `+questionColumns+` FROM questions
		WHERE `+qOpenQuestion+` ORDER BY asked_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list open questions: %w", err)
	}
	return qs, nil
}

// TaskQuestions returns every question of a task, oldest first.
func (s *Store) TaskQuestions(ctx context.Context, taskID string) ([]models.Question, error) {
	qs, err := queryAll(ctx, s.rdb, scanQuestion, "SELECT "+questionColumns+" FROM questions WHERE task_id = +? ORDER BY id", taskID)
	if err != nil {
		return nil, fmt.Errorf("list questions of task %s: %w", taskID, err)
	}
	return qs, nil
}
