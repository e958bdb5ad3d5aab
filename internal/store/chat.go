package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentqueued/agentqueued/internal/models"
)

// TaskThread returns the chat thread of a task, if one was saved.
func (s *Store) TaskThread(ctx context.Context, taskID string) (models.ChatThread, bool, error) {
	var (
		t       models.ChatThread
		created int64
	)
	err := s.rdb.QueryRowContext(ctx, "SELECT task_id, channel_id, thread_id, created_at FROM chat_threads WHERE task_id = ?",
		taskID).Scan(&t.TaskID, &t.ChannelID, &t.ThreadID, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return models.ChatThread{}, false, nil
	}
	if err != nil {
		return models.ChatThread{}, false, fmt.Errorf("thread of task %s: %w", taskID, err)
	}
	t.CreatedAt = fromNanos(created)
	return t, true, nil
}

// ThreadTask returns the task whose thread threadID is, if any.
func (s *Store) ThreadTask(ctx context.Context, threadID string) (string, bool, error) {
	var id string
	err := s.rdb.QueryRowContext(ctx, "SELECT task_id FROM chat_threads WHERE thread_id = ?", threadID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("task of thread %s: %w", threadID, err)
	}
	return id, true, nil
}

// SaveTaskThread records a task's chat thread. A task keeps its first
// thread: saving another for the same task returns the one stored.
func (s *Store) SaveTaskThread(ctx context.Context, t models.ChatThread) (models.ChatThread, error) {
	if t.TaskID == "" || t.ChannelID == "" || t.ThreadID == "" {
		return models.ChatThread{}, models.Errorf(models.CodeInvalid, "chat thread: task_id, channel_id and thread_id are required")
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = s.now()
	}
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO chat_threads (task_id, channel_id, thread_id, created_at) VALUES (?,?,?,?)
			ON CONFLICT (task_id) DO NOTHING`, t.TaskID, t.ChannelID, t.ThreadID, toNanos(t.CreatedAt))
		return err
	})
	if err != nil {
		return models.ChatThread{}, fmt.Errorf("save thread of task %s: %w", t.TaskID, err)
	}
	stored, _, err := s.TaskThread(ctx, t.TaskID)
	return stored, err
}

// ForgetTaskThread drops a task's thread (deleted in chat), so that the
// next notice opens a new one.
func (s *Store) ForgetTaskThread(ctx context.Context, taskID, threadID string) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "DELETE FROM chat_threads WHERE task_id = ? AND thread_id = ?", taskID, threadID)
		return err
	})
	if err != nil {
		return fmt.Errorf("forget thread of task %s: %w", taskID, err)
	}
	return nil
}

// TaskCounts returns how many tasks each project has in each status.
func (s *Store) TaskCounts(ctx context.Context) (map[string]map[models.TaskStatus]int, error) {
	rows, err := s.rdb.QueryContext(ctx, "SELECT project_id, status, count(*) FROM tasks GROUP BY project_id, status")
	if err != nil {
		return nil, fmt.Errorf("count tasks: %w", err)
	}
	defer rows.Close()
	out := map[string]map[models.TaskStatus]int{}
	for rows.Next() {
		var (
			p  string
			st models.TaskStatus
			n  int
		)
		if err := rows.Scan(&p, &st, &n); err != nil {
			return nil, fmt.Errorf("count tasks: %w", err)
		}
		if out[p] == nil {
			out[p] = map[models.TaskStatus]int{}
		}
		out[p][st] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count tasks: %w", err)
	}
	return out, nil
}
