package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// TestWritesOfADaemonThatLostItsLeaseAreRefused is a daemon paused past its
// lease's expiry (SIGSTOP) while a second one took over: when it wakes, its
// writes are refused inside their transactions, before anything changes.
func TestWritesOfADaemonThatLostItsLeaseAreRefused(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "aq.db")
	open := func() *store.Store {
		s := storetest.OpenAt(t, path, storetest.WithClock(clock))
		return s
	}
	ctx := context.Background()
	stale, fresh := open(), open()
	if err := stale.AcquireLease(ctx, models.LeaseHolder{Owner: "stale", Hostname: "other", PID: 1}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := stale.CreateProject(ctx, models.Project{ID: "before"}); err != nil {
		t.Fatalf("a write under the lease: %v", err)
	}
	clock.Advance(time.Minute) // the stale daemon sleeps past its lease
	if err := fresh.AcquireLease(ctx, models.LeaseHolder{Owner: "fresh", Hostname: "other", PID: 2}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if g1, g2 := stale.LeaseGeneration(), fresh.LeaseGeneration(); g1 != 1 || g2 != 2 {
		t.Fatalf("generations %d and %d, want 1 and 2", g1, g2)
	}

	// The stale daemon wakes: every kind of write is refused.
	_, err := stale.CreateProject(ctx, models.Project{ID: "after"})
	if !errors.Is(err, store.ErrLeaseLost) || models.ErrorCodeOf(err) != models.CodeConflict ||
		!strings.Contains(err.Error(), "generation 2 is held by owner fresh") {
		t.Fatalf("a stale daemon's write: %v", err)
	}
	if err := stale.RecordTokenUsage(ctx, models.TokenUsage{ProjectID: "before", Input: 1}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("a stale daemon's usage: %v", err)
	}
	if err := stale.RenewLease(ctx, "stale", 30*time.Second); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("a stale daemon's renewal: %v", err)
	}
	if _, err := fresh.GetProject(ctx, "after"); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("the refused write left a project: %v", err)
	}
	if p, _ := fresh.GetProject(ctx, "before"); p.TotalTokensUsed != 0 {
		t.Fatalf("the refused usage was counted: %d", p.TotalTokensUsed)
	}
	// The new owner writes as usual; after it releases, its own store
	// writes nothing more, and a third daemon gets the next generation.
	if _, err := fresh.CreateProject(ctx, models.Project{ID: "fresh"}); err != nil {
		t.Fatal(err)
	}
	if err := fresh.ReleaseLease(ctx, "fresh"); err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.CreateProject(ctx, models.Project{ID: "late"}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("a write after the release: %v", err)
	}
	third := open()
	if err := third.AcquireLease(ctx, models.LeaseHolder{Owner: "third", Hostname: "other", PID: 3}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if g := third.LeaseGeneration(); g != 3 {
		t.Fatalf("generation %d after a release, want 3", g)
	}
}

// TestImplausibleUsageIsRefusedAndTotalsSaturate: an agent reporting 5e18
// tokens twice overflowed projects.total_tokens_used, after which every
// scheduling pass and budget report failed. A report beyond any plausible
// count is refused naming the count, and totals stop at the largest
// integer instead of wrapping.
func TestImplausibleUsageIsRefusedAndTotalsSaturate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "aq.db")
	s := storetest.OpenAt(t, path)
	storetest.Project(t, s, "p")
	ctx := context.Background()
	for _, u := range []models.TokenUsage{
		{ProjectID: "p", Input: 5e18},
		{ProjectID: "p", CacheRead: math.MaxInt64},
		{ProjectID: "p", Output: -1},
	} {
		err := s.RecordTokenUsage(ctx, u)
		if models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), "_tokens") {
			t.Errorf("usage %+v: %v", u, err)
		}
	}
	raw := rawDB(t, path)
	if _, err := raw.Exec("UPDATE projects SET total_tokens_used = ? WHERE id = 'p'", int64(math.MaxInt64-10)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.RecordTokenUsage(ctx, models.TokenUsage{ProjectID: "p", Input: store.MaxTokensPerRecord}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := s.GetProject(ctx, "p")
	if err != nil || p.TotalTokensUsed != math.MaxInt64 {
		t.Fatalf("a total near the top: %d, %v; want it to stop at %d", p.TotalTokensUsed, err, int64(math.MaxInt64))
	}
}

// TestUnreadableTotalsAreRepairedAtOpen starts from what an older daemon
// left after two reports of 5e18 tokens: a total overflowed into a float,
// an agent's total wrapped negative, ledger rows beyond any plausible
// count. Opening the store repairs them: the project and the budget report
// can be read again, summed from the clamped ledger.
func TestUnreadableTotalsAreRepairedAtOpen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "aq.db")
	s := storetest.OpenAt(t, path)
	storetest.Project(t, s, "p")
	storetest.Project(t, s, "q")
	ctx := context.Background()
	if _, err := s.RegisterAgent(ctx, models.Agent{ID: "a", AgentType: "command", AgentSettings: models.AgentSettings{Command: "true"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordTokenUsage(ctx, models.TokenUsage{ProjectID: "p", AgentID: "a", Input: 10}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordTokenUsage(ctx, models.TokenUsage{ProjectID: "q", Input: 7}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	raw := rawDB(t, path)
	for _, q := range []string{
		"DROP TRIGGER token_ledger_no_update",
		"INSERT INTO token_ledger (project_id, agent_id, input_tokens, created_at) VALUES ('p', 'a', 5000000000000000000, 1)",
		"INSERT INTO token_ledger (project_id, agent_id, output_tokens, created_at) VALUES ('p', 'a', 5000000000000000000, 2)",
		// One report in the scheduling window, written behind the store's
		// back: the usage buckets' tokens are filled again from the ledger.
		fmt.Sprintf("INSERT INTO token_ledger (project_id, agent_id, cache_read_tokens, created_at) VALUES ('p', 'a', 5000000000000000000, %d)",
			time.Now().UnixNano()),
		"UPDATE projects SET total_tokens_used = 1.0e19 WHERE id = 'p'",
		"UPDATE agents SET total_tokens_used = -8446744073709551616 WHERE id = 'a'",
		`CREATE TRIGGER token_ledger_no_update BEFORE UPDATE ON token_ledger
		BEGIN
		    SELECT RAISE(ABORT, 'token_ledger is append-only');
		END`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()

	s = storetest.OpenAt(t, path)
	p, err := s.GetProject(ctx, "p")
	want := int64(10 + 3*store.MaxTokensPerRecord)
	if err != nil || p.TotalTokensUsed != want {
		t.Fatalf("project p after the repair: %d, %v; want %d", p.TotalTokensUsed, err, want)
	}
	if q, _ := s.GetProject(ctx, "q"); q.TotalTokensUsed != 7 {
		t.Fatalf("a sound project's total changed: %d", q.TotalTokensUsed)
	}
	agents, err := s.ListAgents(ctx)
	if err != nil || len(agents) != 1 || agents[0].TotalTokensUsed != want {
		t.Fatalf("agents after the repair: %+v, %v", agents, err)
	}
	if n, err := s.TokensUsedSince(ctx, "p", time.Unix(0, 0)); err != nil || n != want {
		t.Fatalf("budget window sum: %d, %v", n, err)
	}
	if _, err := s.ListProjects(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := s.SchedulingState(ctx, time.Now(), time.Hour)
	if inWindow := int64(10 + 7 + store.MaxTokensPerRecord); err != nil || st.TokensInWindow != inWindow {
		t.Fatalf("tokens in the scheduling window after the repair: %d, %v; want %d", st.TokensInWindow, err, inWindow)
	}
	// The ledger is append-only again.
	raw = rawDB(t, path)
	if _, err := raw.Exec("UPDATE token_ledger SET input_tokens = 1"); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("the ledger's trigger is gone: %v", err)
	}
}

// rawDB opens the store's file directly, as a person with sqlite3 would.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestDamagedDatabaseIsRefused: a corrupted database was served with
// /healthz ok. Opening one now fails, saying it is damaged and what to do.
func TestDamagedDatabaseIsRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "aq.db")
	s := storetest.OpenAt(t, path)
	storetest.Project(t, s, "p")
	ctx := context.Background()
	var tasks []models.BatchTask
	for i := range 400 {
		tasks = append(tasks, models.BatchTask{Title: fmt.Sprintf("task %d with a title long enough to fill pages", i)})
	}
	if _, err := s.CreateTasks(ctx, models.TaskBatch{ProjectID: "p", Tasks: tasks}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Scribble over two pages in the middle of the file, as a failing disk
	// or a stray write would.
	storetest.DamageMiddle(t, path, 2)
	// Open does not read the whole file (the daemon checks it while it
	// serves); the check finds the damage, and opening may too.
	if s2, err := store.Open(ctx, store.Config{Path: path}); err == nil {
		err = s2.CheckIntegrity(ctx)
		s2.Close()
		if err == nil || !strings.Contains(err.Error(), "the database is damaged") || !strings.Contains(err.Error(), "restore it from a backup") {
			t.Fatalf("checking a damaged database: %v", err)
		}
	} else if !strings.Contains(err.Error(), "damaged") && !strings.Contains(err.Error(), "malformed") {
		t.Fatalf("opening a damaged database: %v", err)
	}
}

// TestOpenSaysWhatFailed: a data directory that cannot hold the database,
// or a start cancelled on the way, was reported as "SQLite is unavailable
// (… CGO_ENABLED …)".
func TestOpenSaysWhatFailed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := store.Open(context.Background(), store.Config{Path: filepath.Join(notDir, "aq.db")})
	if err == nil || strings.Contains(err.Error(), "CGO") || !strings.Contains(err.Error(), "open the database file") {
		t.Fatalf("a database under a file: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = store.Open(ctx, store.Config{Path: filepath.Join(dir, "aq.db")})
	if err == nil || strings.Contains(err.Error(), "CGO") || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("a cancelled start: %v", err)
	}
}

// TestDatabaseFilesArePrivate: the database and its WAL and shared-memory
// files are readable by the daemon's user only, tightened at open when an
// earlier version or an umask left them looser.
func TestDatabaseFilesArePrivate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "aq.db")
	check := func(when string) {
		t.Helper()
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: %s has mode %o, want 600", when, filepath.Base(p), fi.Mode().Perm())
			}
		}
	}
	s := storetest.OpenAt(t, path)
	storetest.Project(t, s, "p")
	check("a new database")
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s2 := storetest.OpenAt(t, path)
	storetest.Project(t, s2, "q")
	check("a database left readable by others")
}

// TestStoreEntryPointsRefuseTextThatBreaksLater: a batch's local ids and
// an answer's author are checked where they enter the store, and
// feedback from outside the daemon's own validation (a reviewer on
// GitHub) is kept without its control characters.
func TestStoreEntryPointsRefuseTextThatBreaksLater(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	storetest.Project(t, s, "web")
	storetest.Agent(t, s, "a")
	ctx := context.Background()
	_, err := s.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{{LocalID: "x\x00y", Title: "One"}}})
	if models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), "tasks[0].id") {
		t.Fatalf("a NUL in a local id: %v", err)
	}
	ids := storetest.Tasks(t, s, "web", models.BatchTask{LocalID: "q", Title: "Ask"})
	run, _, err := s.ClaimTask(ctx, ids["q"], "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartRun(ctx, run.ID, 1, ""); err != nil {
		t.Fatal(err)
	}
	q, err := s.AskQuestion(ctx, run.ID, "Which database?")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AnswerQuestion(ctx, q.ID, "SQLite", "ann\x1b[2J"); models.ErrorCodeOf(err) != models.CodeInvalid ||
		!strings.Contains(err.Error(), "answered_by") {
		t.Fatalf("an answer by a name with a control character: %v", err)
	}
	if err := s.AddTaskFeedback(ctx, "web", ids["q"], models.Feedback{Source: "hook:x", Text: "fix\x00 it"}); models.ErrorCodeOf(err) != models.CodeInvalid {
		t.Fatalf("feedback with a NUL: %v", err)
	}
}

// TestAFullDiskFailsWritesCleanlyAndPasses: writes on a full disk failed
// with a bare internal error. They now fail whole, with an error saying
// the disk is full (CodeUnavailable, a 503), reads go on, WriteHealth says
// so, and writes resume by themselves when space returns.
func TestAFullDiskFailsWritesCleanlyAndPasses(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	storetest.Project(t, s, "web")
	ctx := context.Background()
	if err := store.LimitPagesForTest(s, 0); err != nil {
		t.Fatal(err)
	}
	var tasks []models.BatchTask
	for i := range 500 {
		tasks = append(tasks, models.BatchTask{Title: fmt.Sprintf("task %d, long enough to need new pages of the database", i)})
	}
	_, err := s.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: tasks})
	if models.ErrorCodeOf(err) != models.CodeUnavailable || !strings.HasPrefix(models.ErrorMessageOf(err), "disk full: ") {
		t.Fatalf("a batch on a full disk: %v (code %s)", err, models.ErrorCodeOf(err))
	}
	if h := s.WriteHealth(); h == nil || !strings.Contains(h.Error(), "disk full") {
		t.Fatalf("WriteHealth on a full disk: %v", h)
	}
	if got, err := s.ListTasks(ctx, models.TaskFilter{ProjectID: "web"}); err != nil || len(got) != 0 {
		t.Fatalf("reads on a full disk: %d tasks (a half-written batch?), %v", len(got), err)
	}
	if err := store.LimitPagesForTest(s, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: tasks}); err != nil {
		t.Fatalf("the batch once space returned: %v", err)
	}
	if h := s.WriteHealth(); h != nil {
		t.Fatalf("WriteHealth after a write succeeded: %v", h)
	}
}

// TestPingNoticesDamageWhileRunning: Ping read nothing (SELECT 1), so a
// database damaged under a running daemon passed the health check while
// every list of tasks failed. It reads the tasks now and says the
// database is damaged.
func TestPingNoticesDamageWhileRunning(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "aq.db")
	s := storetest.OpenAt(t, path)
	storetest.Project(t, s, "p")
	ctx := context.Background()
	var tasks []models.BatchTask
	for i := range 400 {
		tasks = append(tasks, models.BatchTask{Title: fmt.Sprintf("task %d with a title long enough to fill pages", i)})
	}
	if _, err := s.CreateTasks(ctx, models.TaskBatch{ProjectID: "p", Tasks: tasks}); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("ping before the damage: %v", err)
	}
	// Scribble over the tasks table's root page while the store is open.
	storetest.DamageTable(t, path, "tasks")
	if _, err := s.ListTasks(ctx, models.TaskFilter{ProjectID: "p", Limit: 10}); err == nil {
		t.Fatal("the damage does not show in a list: the test damaged the wrong page")
	}
	err := s.Ping(ctx)
	if err == nil || !strings.Contains(err.Error(), "the database is damaged") || !strings.Contains(err.Error(), "restore it from a backup") {
		t.Fatalf("ping of a damaged database: %v", err)
	}
}

// TestOpenOnReadOnlyFileSystem: a data directory on a read-only file
// system was reported as "no such file or directory" (SQLite's read-only
// retry), for a new database and for an existing one (its -wal and -shm
// cannot be made). The error names the read-only file system. It mounts a
// tmpfs, so it runs only as root (root is not stopped by a mode).
func TestOpenOnReadOnlyFileSystem(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a read-only file system needs root")
	}
	dir := t.TempDir()
	mount := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
			t.Skipf("mount %v: %v: %s", args, err, out)
		}
	}
	mount("-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", dir)
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	existing := filepath.Join(dir, "existing.db")
	s, err := store.Open(context.Background(), store.Config{Path: existing})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	mount("-o", "remount,ro", dir)
	for _, path := range []string{existing, filepath.Join(dir, "new.db")} {
		_, err := store.Open(context.Background(), store.Config{Path: path})
		if err == nil || !errors.Is(err, syscall.EROFS) || !strings.Contains(err.Error(), "read-only file system") {
			t.Errorf("open %s on a read-only file system: %v", filepath.Base(path), err)
		}
	}
}
