package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/agentqueued/agentqueued/internal/models"
)

// ExecForTest runs a statement on the write connection.
func ExecForTest(s *Store, q string) error {
	_, err := s.wdb.ExecContext(context.Background(), q)
	return err
}

// CountForTest runs a count query.
func CountForTest(s *Store, q string) (int, error) {
	var n int
	err := s.rdb.QueryRowContext(context.Background(), q).Scan(&n)
	return n, err
}

// QueryPlanForTest returns SQLite's plan for q.
func QueryPlanForTest(s *Store, q string, args ...any) (string, error) {
	// Unprepared: the test passes one argument per "?", more than a
	// statement with numbered parameters takes.
	rows, err := s.rdb.DB.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var plan string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			return "", err
		}
		plan += detail + "\n"
	}
	return plan, rows.Err()
}

// HotQueriesForTest returns the named queries of queries.go.
func HotQueriesForTest() map[string]string {
	return map[string]string{
		"qEdgeCounts": qEdgeCounts, "qBrokenRoot": qBrokenRoot, "qStatusReason": qStatusReason,
		"qLastEvent": qLastEvent, "qUpdateStatus": qUpdateStatus, "qInsertEvent": qInsertEvent,
		"qSatisfyEdges": qSatisfyEdges, "qBreakEdges": qBreakEdges, "qWithdrawEdges": qWithdrawEdges,
		"qDependentsToCheck": qDependentsToCheck, "qRepoOwner": qRepoOwner, "qProjectStatus": qProjectStatus,
		"qTaskStatus": qTaskStatus, "qTaskStatuses": qTaskStatuses, "qIDsInUse": qIDsInUse, "qUpstreamsOf": qUpstreamsOf,
		"qTaskEvents": qTaskEvents, "qPendingOutbox": qPendingOutbox, "qTokensSince": qTokensSince,
		"qAgentSecondsInWindow": qAgentSecondsInWindow, "qCompletedInWindow": qCompletedInWindow,
		"qSlotHolders": qSlotHolders, "qNextNotBefore": qNextNotBefore, "qDuePaused": qDuePaused,
		"qNextPause": qNextPause, "qDueFailed": qDueFailed, "qNextRetry": qNextRetry, "qTokensInWindow": qTokensInWindow,
		"qTokensPerProjectSince": qTokensPerProjectSince, "qInsertEdges": qInsertEdges, "qInsertPendingEdges": qInsertPendingEdges, "qInsertPromotions": qInsertPromotions,
		"qLastScheduledFirings": qLastScheduledFirings, "qTaskEventsAfter": qTaskEventsAfter,
		"qLastHookRun": qLastHookRun, "qRunStepCounts": qRunStepCounts, "qOpenRunsByRunner": qOpenRunsByRunner,
		"qUsageInWindow": qUsageInWindow, "qOpenAgentTime": qOpenAgentTime, "qAddCompletion": qAddCompletion,
		"qAddAgentTime": qAddAgentTime, "qPruneUsage": qPruneUsage, "qForgetCompletion": qForgetCompletion,
		"qForgetAgentTime": qForgetAgentTime, "qTaskCompletions": qTaskCompletions, "qTaskEndedRuns": qTaskEndedRuns,
		"qTokensInBuckets": qTokensInBuckets, "qAddTokens": qAddTokens, "qReadyGeneration": qReadyGeneration,
		"qReadyPage": qReadyPage + " ORDER BY priority, submission_seq LIMIT +?", "qOpenWork": qOpenWork,
	}
}

// MigrateForTest creates the database at path with the embedded migrations
// up to version upTo only, as an older agentqueued left it.
func MigrateForTest(path string, upTo int) error {
	if err := createFile(context.Background(), path); err != nil {
		return err
	}
	db, err := sql.Open("sqlite3", dsn(path, connCheckpoint))
	if err != nil {
		return err
	}
	defer db.Close()
	// The connection commits with synchronous=FULL: SQLite syncs.
	s := &Store{wdb: db, now: time.Now, gc: newGroupCommit(func() error { return nil })}
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	if _, err := db.Exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		return err
	}
	for _, m := range ms {
		if m.version > upTo {
			break
		}
		err := s.withTx(context.Background(), func(tx *sql.Tx) error {
			if _, err := tx.Exec(m.sql); err != nil {
				return err
			}
			_, err := tx.Exec("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, 0)", m.version, m.name)
			return err
		})
		if err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	return nil
}

// ExecAtForTest runs statements on the database at path outside any store.
func ExecAtForTest(path, q string) error {
	db, err := sql.Open("sqlite3", dsn(path, connCheckpoint))
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec(q)
	return err
}

// LimitPagesForTest caps the database at its current size plus extra pages
// (PRAGMA max_page_count on the writer), so writes that need more fail as
// on a full disk; a negative extra lifts the cap.
func LimitPagesForTest(s *Store, extra int) error {
	if extra < 0 {
		_, err := s.wdb.Exec("PRAGMA max_page_count = 1073741823")
		return err
	}
	var n int
	if err := s.wdb.QueryRow("PRAGMA page_count").Scan(&n); err != nil {
		return err
	}
	_, err := s.wdb.Exec(fmt.Sprintf("PRAGMA max_page_count = %d", n+extra))
	return err
}

// RecountUsageForTest counts each project's completions and agent seconds
// in the window from history, from where the usage buckets start it.
func RecountUsageForTest(s *Store, now time.Time, window time.Duration) (map[string]int, map[string]float64, error) {
	ctx := context.Background()
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, nil, err
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	rows, err := tx.QueryContext(ctx, "SELECT id FROM projects")
	if err != nil {
		return nil, nil, err
	}
	byID := map[string]*models.ProjectUsage{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, nil, err
		}
		byID[id] = &models.ProjectUsage{}
	}
	rows.Close()
	if err := recountUsage(ctx, tx, toNanos(now), usageWindowStart(now, window), byID); err != nil {
		return nil, nil, err
	}
	completed, seconds := map[string]int{}, map[string]float64{}
	for id, p := range byID {
		completed[id], seconds[id] = p.CompletedInWindow, p.AgentSeconds
	}
	return completed, seconds, nil
}

// compiles counts the statements SQLite compiled (prepared, or prepared
// again at a use) on the connections of stores opened by
// OpenCountingCompilesForTest: SQLite asks the authorizer about each
// statement as it compiles it, never as it runs it.
var (
	compiles         atomic.Int64
	registerCounting sync.Once
)

// OpenCountingCompilesForTest opens a store whose connections count the
// statements they compile; the returned function reads the count (all
// such stores together: tests using it must not run in parallel with each
// other).
func OpenCountingCompilesForTest(ctx context.Context, path string) (*Store, func() int64, error) {
	registerCounting.Do(func() {
		sql.Register("sqlite3_counting", &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
			c.RegisterAuthorizer(func(op int, _, _, _ string) int {
				if op == sqlite3.SQLITE_SELECT || op == sqlite3.SQLITE_INSERT || op == sqlite3.SQLITE_UPDATE ||
					op == sqlite3.SQLITE_DELETE {
					compiles.Add(1)
				}
				return sqlite3.SQLITE_OK
			})
			return nil
		}})
	})
	s, err := Open(ctx, Config{Path: path, driver: "sqlite3_counting"})
	return s, compiles.Load, err
}

// StatementsCachedForTest returns how many statements the store keeps
// prepared.
func StatementsCachedForTest(s *Store) int {
	n := 0
	for _, c := range []*stmtCache{s.wcache, s.rdb.cache} {
		c.mu.Lock()
		n += len(c.m)
		c.mu.Unlock()
	}
	return n
}

// MetricsQueriesForTest are the statements of a metrics scrape, by name.
func MetricsQueriesForTest() map[string]string {
	return map[string]string{"taskStatusCounts": qTaskStatusCounts, "agentStates": qAgentStates,
		"outboxBacklog": qOutboxBacklog, "runUsage": qRunUsageSince, "projectTokens": qProjectTokens,
		"runnerActivity": qRunnerActivity}
}

// ArchiveQueriesForTest returns the statements of archiving a batch: its
// read and its write transaction.
func ArchiveQueriesForTest() map[string]string {
	return map[string]string{
		"qArchivableTasks": qArchivableTasks, "qStillArchivable": qStillArchivable, "qInsertArchived": qInsertArchived,
		"qDeleteArchivedChats": qDeleteArchivedChats, "qDeleteArchivedTasks": qDeleteArchivedTasks,
		"qBatchTasks": qBatchTasks, "qBatchDependencies": qBatchDependencies, "qBatchDependents": qBatchDependents,
		"qBatchEvents": qBatchEvents, "qBatchResults": qBatchResults, "qBatchRuns": qBatchRuns,
		"qBatchPendingPlans": qBatchPendingPlans,
	}
}

// RunArchiveQueriesForTest returns the reads of a run's archived tasks,
// each taking a run id and, when it has a second parameter, a step.
func RunArchiveQueriesForTest() map[string]string {
	return map[string]string{
		"qArchivedRunCounts": qArchivedRunCounts, "qArchivedRunStepCounts": qArchivedRunStepCounts,
		"qArchivedRunTasks": qArchivedRunTasks, "qArchivedStepTaskIDs": qArchivedStepTaskIDs,
		"qArchivedRunOutputs": qArchivedRunOutputs, "qArchivedBlockedRunTasks": qArchivedBlockedRunTasks,
		"qRunTaskCounts": qRunTaskCounts,
	}
}

// SetAfterArchiveReadForTest makes f run between the read of each batch to
// archive and its write transaction.
func SetAfterArchiveReadForTest(s *Store, f func()) { s.afterArchiveRead = f }

// SetSyncForTest makes the store sync its write-ahead log with
// wrap(the real sync), and calls waiting (when not nil) each time a write
// or a WaitDurable starts to wait for a sync another caller runs.
func SetSyncForTest(s *Store, wrap func(next func() error) func() error, waiting func()) {
	s.gc.mu.Lock()
	defer s.gc.mu.Unlock()
	s.gc.sync, s.gc.waiting = wrap(s.wal.sync), waiting
}

// CreateTasksOneByOneForTest creates a batch the way CreateTasks first
// did: the cycle check over the graph of names alone, every new task
// inserted DEFINED with all its columns, each edge to an existing task resolved against it in
// SQL, and then every new task evaluated in turn. CreateTasks must answer
// and leave the database as this does.
func CreateTasksOneByOneForTest(ctx context.Context, s *Store, b models.TaskBatch) ([]models.BatchResult, error) {
	entries, err := prepareBatch(b)
	if err != nil {
		return nil, err
	}
	var results []models.BatchResult
	err = s.withTx(ctx, func(tx *sql.Tx) error {
		x := s.newTxn(ctx, tx)
		x.allColumns = true
		for _, step := range []func([]*entry) error{x.checkProjects, x.dedupe, x.checkRules,
			func(es []*entry) error { _, err := x.resolveDeps(es); return err }, x.checkCyclesByName,
			func(es []*entry) error { return x.insert(es, nil) }} {
			if err := step(entries); err != nil {
				return err
			}
		}
		results = make([]models.BatchResult, len(entries))
		for i, e := range entries {
			switch {
			case e.skippedAs != "":
				results[i] = models.BatchResult{TaskID: e.skippedAs, Skipped: true}
				continue
			case e.dupOf >= 0:
				results[i] = models.BatchResult{TaskID: entries[e.dupOf].task.ID, Skipped: true}
				continue
			}
			results[i].TaskID = e.task.ID
			if _, err := x.run(change{taskID: e.task.ID, event: evalEvent, followUp: true}); err != nil {
				return fmt.Errorf("evaluate task %s: %w", e.task.ID, err)
			}
		}
		for i := range results {
			results[i].LocalID = entries[i].src.LocalID
			if err := x.QueryRowContext(ctx, qTaskStatus, results[i].TaskID).Scan(&results[i].Status); err != nil {
				return err
			}
		}
		return x.noticeBlockedChain("created")
	})
	if err != nil {
		return nil, fmt.Errorf("create tasks: %w", err)
	}
	s.changed()
	return results, nil
}

// RowsForTest runs a query and answers each row's columns, printed.
func RowsForTest(s *Store, q string) ([]string, error) {
	rows, err := s.wdb.Query(q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		line := ""
		for i, v := range vals {
			if b, ok := v.([]byte); ok {
				v = string(b)
			}
			line += fmt.Sprintf("%s=%v ", cols[i], v)
		}
		out = append(out, line)
	}
	return out, rows.Err()
}

// CountStatementsForTest makes s count the statements its write
// transactions run; the function returned reads the count. Call it before
// s is used by more than one goroutine.
func CountStatementsForTest(s *Store) func() int64 {
	var n atomic.Int64
	s.onStatement = func() { n.Add(1) }
	return n.Load
}

// PublishedDurable returns how many commits the store has ended and how
// many of them it has published as durable.
func PublishedDurable(s *Store) (ended, covered uint64) {
	s.gc.mu.Lock()
	defer s.gc.mu.Unlock()
	return s.gc.ended, s.gc.covered
}
