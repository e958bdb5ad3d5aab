package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// The outbox: notices written in the transaction of the change they tell
// of, delivered after commit (Discord), and read as task lifecycle events
// by the hooks engine after a named cursor (event_cursors). Every
// statement on the outbox table is in this file.

const (
	// qPendingOutbox skips a task's notices while an older one of the same
	// task waits for its retry: one task's notices keep their order.
	qPendingOutbox = `SELECT id, key, kind, project_id, task_id, payload, attempts, parts_done, created_at
		FROM outbox o WHERE delivered_at IS NULL AND next_attempt_at <= ?1 AND id > ?3
		AND (task_id = '' OR NOT EXISTS (SELECT 1 FROM outbox p INDEXED BY outbox_undelivered_task
			WHERE p.task_id = o.task_id AND p.delivered_at IS NULL AND p.id < o.id AND p.next_attempt_at > ?1))
		ORDER BY id LIMIT ?2`
	// qTaskEventsAfter reads the outbox after a cursor, with each task's kind.
	qTaskEventsAfter = `SELECT o.id, o.kind, o.project_id, o.task_id, o.payload, coalesce(t.kind, '')
		FROM outbox o LEFT JOIN tasks t ON t.id = o.task_id WHERE o.id > ? ORDER BY o.id LIMIT +?`
	// qOutboxHead is the id of the newest notice, 0 when there is none.
	qOutboxHead = "SELECT coalesce(max(id), 0) FROM outbox"
)

// enqueue writes a notice in the caller's transaction; a second notice
// with the same key is ignored.
func (s *Store) enqueue(ctx context.Context, tx *sql.Tx, key string, n models.Notice) error {
	payload, err := n.Encode()
	if err != nil {
		return fmt.Errorf("encode outbox %s: %w", key, err)
	}
	now := toNanos(s.now())
	_, err = s.txExec(ctx, tx, `INSERT INTO outbox (key, kind, project_id, task_id, payload, next_attempt_at, created_at)
		VALUES (?,?,?,?,?,?,?) ON CONFLICT (key) DO NOTHING`, key, n.Kind, n.ProjectID, n.TaskID, payload, now, now)
	return err
}

// Notify writes a notice to the outbox outside any status change (progress
// lines, for example); a second notice with the same key is ignored.
func (s *Store) Notify(ctx context.Context, key string, n models.Notice) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error { return s.enqueue(ctx, tx, key, n) })
	if err != nil {
		return fmt.Errorf("notify %s: %w", n.Kind, err)
	}
	return nil
}

// outboxHead returns the id of the newest notice in tx, 0 when there is none.
func outboxHead(ctx context.Context, tx *sql.Tx) (int64, error) {
	var id int64
	err := tx.QueryRowContext(ctx, qOutboxHead).Scan(&id)
	return id, err
}

// PendingOutbox returns up to limit undelivered messages that are due, oldest first.
func (s *Store) PendingOutbox(ctx context.Context, limit int) ([]models.OutboxMessage, error) {
	return s.PendingOutboxAfter(ctx, 0, limit)
}

// PendingOutboxAfter is PendingOutbox from the message after afterID on
// (the next page). What it returns is durable (see WaitDurable): a notice
// is posted only for a change a crash cannot undo.
func (s *Store) PendingOutboxAfter(ctx context.Context, afterID int64, limit int) ([]models.OutboxMessage, error) {
	rows, err := s.rdb.QueryContext(ctx, qPendingOutbox, toNanos(s.now()), limit, afterID)
	if err != nil {
		return nil, fmt.Errorf("list outbox: %w", err)
	}
	defer rows.Close()
	var out []models.OutboxMessage
	for rows.Next() {
		var (
			m       models.OutboxMessage
			created int64
		)
		if err := rows.Scan(&m.ID, &m.Key, &m.Kind, &m.ProjectID, &m.TaskID, &m.Payload, &m.Attempts, &m.PartsDone, &created); err != nil {
			return nil, fmt.Errorf("list outbox: %w", err)
		}
		m.CreatedAt = fromNanos(created)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list outbox: %w", err)
	}
	if err := s.WaitDurable(ctx); err != nil {
		return nil, fmt.Errorf("list outbox: %w", err)
	}
	return out, nil
}

// MarkOutboxDelivered records that message id was delivered.
func (s *Store) MarkOutboxDelivered(ctx context.Context, id int64) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE outbox SET delivered_at = ? WHERE id = ? AND delivered_at IS NULL", toNanos(s.now()), id)
		return err
	})
	if err != nil {
		return fmt.Errorf("mark outbox %d delivered: %w", id, err)
	}
	return nil
}

// MarkOutboxFailed records a failed delivery and when to try again.
func (s *Store) MarkOutboxFailed(ctx context.Context, id int64, retryAt time.Time, reason string) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE outbox SET attempts = attempts + 1, next_attempt_at = ?, last_error = ? WHERE id = ?",
			toNanos(retryAt), reason, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("mark outbox %d failed: %w", id, err)
	}
	return nil
}

// MarkOutboxPart records that the first parts messages of a notice made of
// several were delivered.
func (s *Store) MarkOutboxPart(ctx context.Context, id int64, parts int) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE outbox SET parts_done = max(parts_done, ?) WHERE id = ?", parts, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("mark outbox %d part %d: %w", id, parts, err)
	}
	return nil
}

// GiveUpOutbox ends the delivery of a notice that cannot be delivered,
// keeping why.
func (s *Store) GiveUpOutbox(ctx context.Context, id int64, reason string) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		now := toNanos(s.now())
		_, err := tx.ExecContext(ctx, `UPDATE outbox SET delivered_at = ?, given_up_at = ?, last_error = ?, attempts = attempts + 1
			WHERE id = ? AND delivered_at IS NULL`, now, now, reason, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("give up outbox %d: %w", id, err)
	}
	return nil
}

// EventCursor returns how far the consumer name has read the task events.
// A consumer new to this database starts at the newest event: it sees only
// what happens from now on.
func (s *Store) EventCursor(ctx context.Context, name string) (int64, error) {
	var id int64
	// A cursor that exists is read without a write transaction: the
	// hooks engine reads it on every pass.
	err := s.rdb.QueryRowContext(ctx, "SELECT last_id FROM event_cursors WHERE name = ?", name).Scan(&id)
	if err == nil {
		return id, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("event cursor %s: %w", name, err)
	}
	err = s.withTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, "SELECT last_id FROM event_cursors WHERE name = ?", name).Scan(&id)
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if id, err = outboxHead(ctx, tx); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "INSERT INTO event_cursors (name, last_id) VALUES (?, ?)", name, id)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("event cursor %s: %w", name, err)
	}
	return id, nil
}

// startEventCursor moves the consumer name's event cursor to the newest
// event, in tx; a cursor already further stays where it is.
func startEventCursor(ctx context.Context, tx *sql.Tx, name string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO event_cursors (name, last_id) VALUES (?1, (`+qOutboxHead+`))
		ON CONFLICT (name) DO UPDATE SET last_id = max(last_id, excluded.last_id)`, name)
	return err
}

// SetEventCursor records that the consumer name has handled every event up
// to id. The cursor never moves back.
func (s *Store) SetEventCursor(ctx context.Context, name string, id int64) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		_, err := s.txExec(ctx, tx, `INSERT INTO event_cursors (name, last_id) VALUES (?1, ?2)
			ON CONFLICT (name) DO UPDATE SET last_id = max(last_id, ?2)`, name, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("set event cursor %s: %w", name, err)
	}
	return nil
}

// TaskEventsAfter returns the task lifecycle events written after the
// event afterID, oldest first: every notable status change and broken
// chain, as the outbox recorded it in the change's transaction (outbox ids
// grow in commit order: one connection writes). A PR_MERGED or PR_CLOSED
// change is also a pr.merged or pr.closed event of the same id. It returns
// the id of the last row read, so a caller moves past rows that are not
// events too.
func (s *Store) TaskEventsAfter(ctx context.Context, afterID int64, limit int) ([]models.HookEvent, int64, error) {
	rows, err := s.rdb.QueryContext(ctx, qTaskEventsAfter, afterID, limit)
	if err != nil {
		return nil, afterID, fmt.Errorf("read task events: %w", err)
	}
	defer rows.Close()
	var out []models.HookEvent
	last := afterID
	for rows.Next() {
		var (
			id                           int64
			kind                         models.NoticeKind
			project, task, payload, tkin string
		)
		if err := rows.Scan(&id, &kind, &project, &task, &payload, &tkin); err != nil {
			return nil, afterID, fmt.Errorf("read task events: %w", err)
		}
		last = id
		if !kind.TaskEvent() {
			continue
		}
		dn, err := models.DecodeNotice(kind, payload)
		if err != nil {
			s.log.Warn("task event with an unreadable payload skipped", "outbox_id", id, "err", err)
			continue
		}
		n := dn.Payload.(models.TransitionNotice)
		e := models.HookEvent{ID: id, Type: string(kind), TaskID: task, ProjectID: project, Title: n.Title, Kind: tkin,
			From: string(n.From), To: string(n.To), Event: string(n.Event), Reason: n.Reason, Actor: n.Actor, Blocked: n.Blocked}
		out = append(out, e)
		switch {
		case kind == models.NoticeTaskCompleted && n.Event == models.EventPRMerged:
			e.Type = "pr.merged"
			out = append(out, e)
		case kind == models.NoticeTaskBlocked && n.Event == models.EventPRClosed:
			e.Type = "pr.closed"
			out = append(out, e)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, afterID, fmt.Errorf("read task events: %w", err)
	}
	return out, last, nil
}
