package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

const questionColumns = `id, task_id, project_id, run_id, text, asked_at, answer, answered_by, answered_at, closed_at`

func scanQuestion(row scanner) (models.Question, error) {
	var (
		q        models.Question
		asked    int64
		answer   sql.NullString
		answered sql.NullInt64
		closed   sql.NullInt64
	)
	if err := row.Scan(&q.ID, &q.TaskID, &q.ProjectID, &q.RunID, &q.Text, &asked, &answer, &q.AnsweredBy, &answered,
		&closed); err != nil {
		return models.Question{}, err
	}
	q.AskedAt, q.Answer, q.AnsweredAt = fromNanos(asked), fromNullString(answer), fromNullNanos(answered)
	q.ClosedAt = fromNullNanos(closed)
	return q, nil
}

// AskQuestion records an agent's question and moves its task IN_PROGRESS →
// WAITING_INPUT (AGENT_QUESTION), with a notice in the outbox, in one
// transaction.
func (s *Store) AskQuestion(ctx context.Context, runID int64, text string) (models.Question, error) {
	if err := models.ValidateQuestionText("question", text); err != nil {
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
		a, err := x.run(change{taskID: r.TaskID, event: models.EventAgentQuestion, expectFrom: models.StatusInProgress,
			actor: r.AgentID, reason: text})
		if err != nil {
			return err
		}
		if a.duplicate {
			return models.Errorf(models.CodeConflict, "task %s is already waiting for an answer", r.TaskID)
		}
		res, err := x.ExecContext(ctx, `INSERT INTO questions (task_id, project_id, run_id, text, asked_at) VALUES (?,?,?,?,?)`,
			r.TaskID, r.ProjectID, runID, text, toNanos(x.now))
		if err != nil {
			return err
		}
		id, err := res.LastInsertId()
		if err != nil {
			return err
		}
		q = models.Question{ID: id, TaskID: r.TaskID, ProjectID: r.ProjectID, RunID: runID, Text: text, AskedAt: x.now}
		if err := s.enqueue(ctx, tx, fmt.Sprintf("question:%d", id), models.NewQuestionNotice(q)); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return models.Question{}, fmt.Errorf("ask question for run %d: %w", runID, err)
	}
	// The task's status changed: whoever watches commits (the daemon's
	// OnChange, a client following the task) hears of it like any other.
	s.changed()
	return q, nil
}

// AnswerQuestion records a human's answer. A task still WAITING_INPUT
// returns to IN_PROGRESS (HUMAN_REPLIED) in the same transaction; for a task
// that has moved on (paused after the question timed out) the answer is kept
// for its next attempt. Answering again is refused, naming who answered.
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
		q, err = scanQuestion(x.QueryRowContext(ctx, "SELECT "+questionColumns+" FROM questions WHERE id = ?", id))
		if errors.Is(err, sql.ErrNoRows) {
			return models.Errorf(models.CodeNotFound, "question %d not found", id)
		}
		if err != nil {
			return err
		}
		if q.Answer != nil {
			return models.Errorf(models.CodeConflict, "question %d was already answered by %s", id, q.AnsweredBy)
		}
		if q.ClosedAt != nil {
			return models.Errorf(models.CodeConflict, "question %d was closed: task %s was cancelled", id, q.TaskID)
		}
		if _, err := x.ExecContext(ctx, "UPDATE questions SET answer = ?, answered_by = ?, answered_at = ? WHERE id = ?",
			answer, by, toNanos(x.now), id); err != nil {
			return err
		}
		q.Answer, q.AnsweredBy, q.AnsweredAt = &answer, by, &x.now
		t, err := getTask(ctx, x, q.TaskID)
		if err != nil {
			return err
		}
		var open int
		if err := x.QueryRowContext(ctx, "SELECT count(*) FROM task_runs WHERE id = ? AND ended_at IS NULL", q.RunID).Scan(&open); err != nil {
			return err
		}
		// Only the run that asked, still waiting, goes on with the answer;
		// otherwise it is kept for the task's next run.
		if t.Status == models.StatusPaused {
			// Paused for want of this answer (not for a rate limit or
			// another question): resume at the next round.
			cause, err := pausedByQuestion(x, q)
			if err != nil {
				return err
			}
			if cause {
				if _, err := x.ExecContext(ctx, "UPDATE tasks SET resume_after = ? WHERE id = ? AND status = 'PAUSED' AND resume_after > ?",
					toNanos(x.now), q.TaskID, toNanos(x.now)); err != nil {
					return err
				}
			}
		}
		if t.Status == models.StatusWaitingInput && open == 1 {
			if _, err := x.run(change{taskID: q.TaskID, event: models.EventHumanReplied, expectFrom: models.StatusWaitingInput,
				actor: by, reason: "answered question " + fmt.Sprint(id)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return models.Question{}, fmt.Errorf("answer question %d: %w", id, err)
	}
	s.changed()
	return q, nil
}

// pausedByQuestion reports whether the task's present pause is the one
// question q caused: its latest event is the INPUT_TIMEOUT that gave up
// waiting for q (written in the same transaction as q's timed_out_at).
// An answer to an old question must not end a pause for a rate limit or
// for another question.
func pausedByQuestion(x *txn, q models.Question) (bool, error) {
	var (
		event    string
		at, qOut sql.NullInt64
	)
	err := x.QueryRowContext(x.ctx, "SELECT event, created_at FROM task_events WHERE task_id = ? ORDER BY id DESC LIMIT 1",
		q.TaskID).Scan(&event, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var qGone sql.NullInt64
	if err := x.QueryRowContext(x.ctx, "SELECT timed_out_at, abandoned_at FROM questions WHERE id = ?", q.ID).
		Scan(&qOut, &qGone); err != nil {
		return false, err
	}
	same := func(v sql.NullInt64) bool { return v.Valid && at.Valid && at.Int64 == v.Int64 }
	return models.TaskEvent(event) == models.EventInputTimeout && (same(qOut) || same(qGone)), nil
}

// AbandonQuestion records that the agent's CLI gave up waiting for the
// answer to question id (its call was cancelled, or its connection
// closed): the task WAITING_INPUT → PAUSED (INPUT_TIMEOUT, with that
// reason) until resumeAfter, and the question stays open — listed, and
// answerable, its answer ending this pause at once and reaching the next
// run's prompt. A question answered, closed or timed out meanwhile, or a
// run no longer current, changes nothing (a duplicate).
func (s *Store) AbandonQuestion(ctx context.Context, id int64, resumeAfter time.Time) (models.TransitionResult, error) {
	var out models.TransitionResult
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		x := s.newTxn(ctx, tx)
		var timedOut sql.NullInt64
		q, err := scanQuestion(withExtra{x.QueryRowContext(ctx, "SELECT "+questionColumns+", timed_out_at FROM questions WHERE id = ?", id),
			[]any{&timedOut}})
		if errors.Is(err, sql.ErrNoRows) {
			return models.Errorf(models.CodeNotFound, "question %d not found", id)
		}
		if err != nil {
			return err
		}
		t, err := getTask(ctx, x, q.TaskID)
		if err != nil {
			return err
		}
		_, current, err := currentRun(x, q.RunID)
		if err != nil && models.ErrorCodeOf(err) == models.CodeInternal {
			return err
		}
		if q.Answer != nil || q.ClosedAt != nil || timedOut.Valid || t.Status != models.StatusWaitingInput || !current {
			out = models.TransitionResult{Task: t, From: t.Status, To: t.Status, Duplicate: true}
			return nil
		}
		if _, err := x.ExecContext(ctx, "UPDATE questions SET abandoned_at = ? WHERE id = ?", toNanos(x.now), id); err != nil {
			return err
		}
		reason := fmt.Sprintf("the agent gave up waiting for the answer to question %d; the question stays open, "+
			"and its answer resumes the task", id)
		a, err := x.run(change{taskID: q.TaskID, event: models.EventInputTimeout, expectFrom: models.StatusWaitingInput,
			actor: "system", reason: reason, resumeAfter: &resumeAfter})
		if err != nil {
			return err
		}
		out = models.TransitionResult{Task: a.task, From: a.from, To: a.task.Status, Duplicate: a.duplicate}
		if !a.duplicate {
			return s.notify(ctx, tx, a, nil, models.EventInputTimeout, "the agent gave up waiting; the question stays open", "system")
		}
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("abandon question %d: %w", id, err)
	}
	s.changed()
	return out, nil
}

// TimeOutQuestion gives up waiting for an answer: the task WAITING_INPUT →
// PAUSED (INPUT_TIMEOUT) until resumeAfter; a later answer is still kept.
func (s *Store) TimeOutQuestion(ctx context.Context, id int64, resumeAfter time.Time) (models.TransitionResult, error) {
	var out models.TransitionResult
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		x := s.newTxn(ctx, tx)
		q, err := scanQuestion(x.QueryRowContext(ctx, "SELECT "+questionColumns+" FROM questions WHERE id = ?", id))
		if errors.Is(err, sql.ErrNoRows) {
			return models.Errorf(models.CodeNotFound, "question %d not found", id)
		}
		if err != nil {
			return err
		}
		if _, err := x.ExecContext(ctx, "UPDATE questions SET timed_out_at = ? WHERE id = ?", toNanos(x.now), id); err != nil {
			return err
		}
		t, err := getTask(ctx, x, q.TaskID)
		if err != nil {
			return err
		}
		var current bool
		if q.Answer == nil {
			if _, cur, err := currentRun(x, q.RunID); err == nil {
				current = cur
			} else if models.ErrorCodeOf(err) == models.CodeInternal {
				return err
			}
		}
		if t.Status != models.StatusWaitingInput || !current {
			out = models.TransitionResult{Task: t, From: t.Status, To: t.Status, Duplicate: true}
			return nil // a stale question: marked, nothing else to do
		}
		a, err := x.run(change{taskID: q.TaskID, event: models.EventInputTimeout, expectFrom: models.StatusWaitingInput,
			actor: "system", reason: fmt.Sprintf("no answer to question %d", id), resumeAfter: &resumeAfter})
		if err != nil {
			return err
		}
		out = models.TransitionResult{Task: a.task, From: a.from, To: a.task.Status, Duplicate: a.duplicate}
		if !a.duplicate {
			return s.notify(ctx, tx, a, nil, models.EventInputTimeout, "no answer in time", "system")
		}
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("time out question %d: %w", id, err)
	}
	s.changed()
	return out, nil
}

// OpenQuestions returns unanswered questions whose task still waits for
// them, oldest first.
func (s *Store) OpenQuestions(ctx context.Context) ([]models.Question, error) {
	qs, err := queryAll(ctx, s.rdb, scanQuestion, `SELECT `+questionColumns+` FROM questions
		WHERE answer IS NULL AND timed_out_at IS NULL AND closed_at IS NULL ORDER BY asked_at, id`)
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
