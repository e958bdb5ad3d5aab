package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

const pullRequestColumns = `task_id, project_id, owner, repo, number, url, branch, state, etag, reviews_etag,
	last_review_id, next_check_at, created_at, updated_at`

func scanPullRequest(r scanner) (models.PullRequest, error) {
	var (
		pr                 models.PullRequest
		next, created, upd int64
	)
	err := r.Scan(&pr.TaskID, &pr.ProjectID, &pr.Owner, &pr.Repo, &pr.Number, &pr.URL, &pr.Branch, &pr.State, &pr.ETag,
		&pr.ReviewsETag, &pr.LastReviewID, &next, &created, &upd)
	pr.NextCheckAt, pr.CreatedAt, pr.UpdatedAt = fromNanos(next), fromNanos(created), fromNanos(upd)
	return pr, err
}

// SavePullRequest records the pull request a task lands through (replacing
// the one of an earlier attempt) and sets the task's pr_url, in one
// transaction.
func (s *Store) SavePullRequest(ctx context.Context, pr models.PullRequest) (models.PullRequest, error) {
	if pr.TaskID == "" || pr.Owner == "" || pr.Repo == "" || pr.Number <= 0 || pr.URL == "" {
		return models.PullRequest{}, models.Errorf(models.CodeInvalid, "pull request: task_id, owner, repo, number and url are required")
	}
	// GitHub's owner and repository names are case-insensitive: webhooks
	// carry the canonical case, a project URL whatever was typed.
	pr.Owner, pr.Repo = strings.ToLower(pr.Owner), strings.ToLower(pr.Repo)
	now := s.now()
	if pr.State == "" {
		pr.State = models.PROpen
	}
	if pr.NextCheckAt.IsZero() {
		pr.NextCheckAt = now
	}
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		var project string
		if err := tx.QueryRowContext(ctx, "SELECT project_id FROM tasks WHERE id = ?", pr.TaskID).Scan(&project); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return notFound("task", pr.TaskID)
			}
			return err
		}
		pr.ProjectID = project
		// Another task's row for the same number (a reused number cannot
		// happen on GitHub; a stale row of a deleted repo can) gives way.
		if _, err := tx.ExecContext(ctx, "DELETE FROM pull_requests WHERE owner = ? AND repo = ? AND number = ? AND task_id <> ?",
			pr.Owner, pr.Repo, pr.Number, pr.TaskID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO pull_requests (`+pullRequestColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)
			ON CONFLICT (task_id) DO UPDATE SET owner = excluded.owner, repo = excluded.repo, number = excluded.number,
				url = excluded.url, branch = excluded.branch, state = excluded.state,
				etag = CASE WHEN number = excluded.number THEN etag ELSE '' END,
				reviews_etag = CASE WHEN number = excluded.number THEN reviews_etag ELSE '' END,
				last_review_id = CASE WHEN number = excluded.number THEN last_review_id ELSE 0 END,
				next_check_at = excluded.next_check_at, updated_at = excluded.updated_at`,
			pr.TaskID, pr.ProjectID, pr.Owner, pr.Repo, pr.Number, pr.URL, pr.Branch, pr.State, pr.ETag, pr.ReviewsETag,
			pr.LastReviewID, toNanos(pr.NextCheckAt), toNanos(now), toNanos(now))
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "UPDATE tasks SET pr_url = ? WHERE id = ?", pr.URL, pr.TaskID)
		return err
	})
	if err != nil {
		return models.PullRequest{}, fmt.Errorf("save pull request of task %s: %w", pr.TaskID, err)
	}
	out, _, err := s.PullRequestOf(ctx, pr.TaskID)
	return out, err
}

// PullRequestOf returns a task's pull request, if it has one.
func (s *Store) PullRequestOf(ctx context.Context, taskID string) (models.PullRequest, bool, error) {
	pr, err := scanPullRequest(s.rdb.QueryRowContext(ctx, "SELECT "+pullRequestColumns+" FROM pull_requests WHERE task_id = ?", taskID))
	if errors.Is(err, sql.ErrNoRows) {
		return models.PullRequest{}, false, nil
	}
	if err != nil {
		return models.PullRequest{}, false, fmt.Errorf("pull request of task %s: %w", taskID, err)
	}
	return pr, true, nil
}

// PullRequestByNumber returns the pull request owner/repo#number, if a
// task lands through it.
func (s *Store) PullRequestByNumber(ctx context.Context, owner, repo string, number int) (models.PullRequest, bool, error) {
	pr, err := scanPullRequest(s.rdb.QueryRowContext(ctx, "SELECT "+pullRequestColumns+
		" FROM pull_requests WHERE owner = ? AND repo = ? AND number = ?", strings.ToLower(owner), strings.ToLower(repo), number))
	if errors.Is(err, sql.ErrNoRows) {
		return models.PullRequest{}, false, nil
	}
	if err != nil {
		return models.PullRequest{}, false, fmt.Errorf("pull request %s/%s#%d: %w", owner, repo, number, err)
	}
	return pr, true, nil
}

// DuePullRequests returns up to limit open pull requests whose next check
// is due at now, the most overdue first; soonest is when the next one not
// yet due is (zero when none). What it returns is durable (see
// WaitDurable): the watcher acts on GitHub for it.
func (s *Store) DuePullRequests(ctx context.Context, now time.Time, limit int) (due []models.PullRequest, soonest time.Time, err error) {
	due, err = queryAll(ctx, s.rdb, scanPullRequest, "SELECT "+pullRequestColumns+
		" FROM pull_requests WHERE state = 'open' AND next_check_at <= ? ORDER BY next_check_at LIMIT ?", toNanos(now), limit)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("due pull requests: %w", err)
	}
	var next sql.NullInt64
	if err := s.rdb.QueryRowContext(ctx, "SELECT min(next_check_at) FROM pull_requests WHERE state = 'open' AND next_check_at > ?",
		toNanos(now)).Scan(&next); err != nil {
		return nil, time.Time{}, fmt.Errorf("due pull requests: %w", err)
	}
	if next.Valid {
		soonest = fromNanos(next.Int64)
	}
	if err := s.WaitDurable(ctx); err != nil {
		return nil, time.Time{}, fmt.Errorf("due pull requests: %w", err)
	}
	return due, soonest, nil
}

// RecordPullRequestCheck records what a check of a pull request saw and
// when to check it next.
func (s *Store) RecordPullRequestCheck(ctx context.Context, pr models.PullRequest) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE pull_requests SET state = ?, etag = ?, reviews_etag = ?, last_review_id = ?,
			next_check_at = ?, updated_at = ? WHERE task_id = ? AND number = ?`, pr.State, pr.ETag, pr.ReviewsETag,
			pr.LastReviewID, toNanos(pr.NextCheckAt), toNanos(s.now()), pr.TaskID, pr.Number)
		return err
	})
	if err != nil {
		return fmt.Errorf("record check of pull request %s/%s#%d: %w", pr.Owner, pr.Repo, pr.Number, err)
	}
	return nil
}

// PokePullRequest makes an open pull request due for a check at now,
// touching nothing else of what the watcher recorded. It reports whether
// an open pull request owner/repo#number is watched.
func (s *Store) PokePullRequest(ctx context.Context, owner, repo string, number int, now time.Time) (bool, error) {
	var n int64
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE pull_requests SET next_check_at = min(next_check_at, ?)
			WHERE owner = ? AND repo = ? AND number = ? AND state = 'open'`, toNanos(now), strings.ToLower(owner), strings.ToLower(repo), number)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("poke pull request %s/%s#%d: %w", owner, repo, number, err)
	}
	return n > 0, nil
}
