package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/agentqueued/agentqueued/internal/clock"
	"github.com/agentqueued/agentqueued/internal/models"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Defaults of the store's configuration.
const (
	DefaultBusyTimeout = 10 * time.Second
	DefaultReadConns   = 4
	DefaultListLimit   = 500
	MaxListLimit       = 10_000
)

// Config configures a Store.
type Config struct {
	// Path is the SQLite file; its directory must exist.
	Path string
	// Clock reads the current time; nil: clock.Real.
	Clock clock.Clock
	// Logger receives the store's logs; default discards.
	Logger *slog.Logger
	// Rand chooses task names; default a randomly seeded source.
	Rand *rand.Rand
	// OnChange, when set, is called after a commit that may have made work
	// ready (a task created, promoted, reopened or finished) or moved a
	// task to wait for a person (a question asked): the orchestrator's
	// wake-up signal. It must not block.
	OnChange func()
	// OnStateChange, when set, is called after a commit that changed a
	// task's state without making work ready: a claim, a run's start. It
	// is for views that show the state, not the orchestrator's wake-up
	// (which would run a round for nothing). It must not block.
	OnStateChange func()
	// Observer, when set, is told each committed status change and run
	// end (for metrics); nil reports nothing.
	Observer Observer
	// ReadConns is the size of the read pool; default DefaultReadConns.
	ReadConns int
	// driver is the database/sql driver's name; default "sqlite3" (tests
	// use one that watches the connections).
	driver string
}

func (c Config) driverName() string {
	if c.driver == "" {
		return "sqlite3"
	}
	return c.driver
}

// Store is agentqueued's durable state in one SQLite database. Writes go
// through a single connection in IMMEDIATE transactions; reads use a
// separate pool and see WAL snapshots.
type Store struct {
	wdb *sql.DB
	// wcache holds the writer's prepared statements, used by transactions
	// (see txn.stmt); rdb is the read pool, its statements cached alike.
	wcache   *stmtCache
	rdb      *cachedDB
	now      func() time.Time
	log      *slog.Logger
	rnd      *rand.Rand
	onChange func()
	// onState is Config.OnStateChange.
	onState func()
	// fence is the lease the store's writes are made under, once
	// AcquireLease has succeeded (see checkFence).
	fence atomic.Pointer[fence]
	// path is the database file; full holds the disk-full error of the
	// last write when it failed so (see WriteHealth).
	path string
	full atomic.Pointer[error]
	// ruleCache holds the rules in force (see CurrentRules); rulesMu orders
	// the writes of the rule set with the cache's updates.
	ruleCache atomic.Pointer[ruleCache]
	rulesMu   sync.Mutex
	// usagePruned is when usage buckets were last pruned (Unix nanoseconds).
	usagePruned atomic.Int64
	// commits counts the write transactions committed (see Commits).
	commits atomic.Int64
	// gc makes the writer's commits durable, syncing wal, the
	// write-ahead log (durable.go).
	gc  *groupCommit
	wal *walFile
	// obs is Config.Observer; pending holds what each open write
	// transaction did for it, by transaction (see observe.go).
	obs     Observer
	pending sync.Map
	// ckdb is a connection of its own for Checkpoint.
	ckdb *sql.DB
	// afterArchiveRead, set by tests, runs between the read of a batch to
	// archive and its write transaction.
	afterArchiveRead func()
	// onStatement, set by tests, is called for each statement a write
	// transaction's txn runs.
	onStatement func()
}

// connKind is what a connection of the store is for; each has its data
// source name (dsn).
type connKind int

const (
	// connWriter is the writer: its commits are made durable by the group
	// commit (durable.go).
	connWriter connKind = iota
	// connRead is a connection of the read pool.
	connRead
	// connCheckpoint is Checkpoint's connection.
	connCheckpoint
)

// synchronous is PRAGMA synchronous for a connection of kind k: NORMAL (1)
// for the writer, whose commits the group commit syncs; FULL (2) for the
// others, whose commits (none but a checkpoint's) SQLite syncs.
func (k connKind) synchronous() int {
	if k == connWriter {
		return 1
	}
	return 2
}

// dsn is the data source name of a connection of kind conn to the
// database at p. Connections never create the file (mode=rw; Open creates
// it once): a connection opened after the file was deleted under a
// running daemon fails loudly instead of starting an empty database beside
// the one still open.
func dsn(p string, conn connKind) string {
	q := url.Values{}
	q.Set("mode", "rw")
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", strconv.Itoa(conn.synchronous()))
	q.Set("_busy_timeout", strconv.Itoa(int(DefaultBusyTimeout/time.Millisecond)))
	q.Set("_foreign_keys", "on")
	if conn == connRead {
		q.Set("_query_only", "true")
	} else {
		q.Set("_txlock", "immediate")
	}
	return "file:" + (&url.URL{Path: p}).EscapedPath() + "?" + q.Encode()
}

// Open opens (creating if needed) the database at cfg.Path and applies
// pending migrations.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Path == "" {
		return nil, errors.New("open store: Config.Path is empty")
	}
	s := &Store{now: clock.Or(cfg.Clock).Now, log: cfg.Logger, rnd: cfg.Rand, onChange: cfg.OnChange, onState: cfg.OnStateChange,
		path: cfg.Path, obs: cfg.Observer, wal: &walFile{path: cfg.Path + "-wal"}}
	s.gc = newGroupCommit(s.wal.sync)
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.rnd == nil {
		s.rnd = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	readConns := cfg.ReadConns
	if readConns <= 0 {
		readConns = DefaultReadConns
	}
	if err := createFile(ctx, cfg.Path); err != nil {
		return nil, fmt.Errorf("open store %s: %w", cfg.Path, explainOpen(cfg.Path, err))
	}
	var err error
	if s.wdb, err = sql.Open(cfg.driverName(), dsn(cfg.Path, connWriter)); err != nil {
		return nil, fmt.Errorf("open store %s: %w", cfg.Path, err)
	}
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetConnMaxIdleTime(0)
	fail := func(err error) (*Store, error) {
		s.wdb.Close()
		s.wal.close()
		return nil, fmt.Errorf("open store %s: %w", cfg.Path, err)
	}
	if err := checkSQLite(ctx, s.wdb, connWriter.synchronous()); err != nil {
		return fail(explainOpen(cfg.Path, err))
	}
	if err := s.openLog(ctx); err != nil {
		return fail(err)
	}
	if err := s.migrate(ctx); err != nil {
		return fail(err)
	}
	if err := restrictFiles(cfg.Path); err != nil {
		return fail(err)
	}
	if err := s.repairTokenTotals(ctx); err != nil {
		return fail(err)
	}
	if err := s.fillTokenBuckets(ctx); err != nil {
		return fail(err)
	}
	rdb, err := sql.Open(cfg.driverName(), dsn(cfg.Path, connRead))
	if err != nil {
		return fail(err)
	}
	if s.ckdb, err = sql.Open(cfg.driverName(), dsn(cfg.Path, connCheckpoint)); err != nil {
		rdb.Close()
		return fail(err)
	}
	s.ckdb.SetMaxOpenConns(1)
	rdb.SetMaxOpenConns(readConns)
	// Every connection of the pool stays open: each keeps its prepared
	// statements, and a new one reads the schema again.
	rdb.SetMaxIdleConns(readConns)
	s.rdb = newCachedDB(rdb)
	s.wcache = newStmtCache(s.wdb)
	return s, nil
}

// openLog opens the write-ahead log for the group commit's syncs (a
// read on the writer makes SQLite create it) and syncs it: what an earlier
// life of the daemon committed without its sync (it stopped between its
// commit and the sync) is made durable before this one reads it.
func (s *Store) openLog(ctx context.Context) error {
	var n int
	if err := s.wdb.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&n); err != nil {
		return fmt.Errorf("read the schema: %w", err)
	}
	s.wal.mu.Lock()
	err := s.wal.reopen()
	s.wal.mu.Unlock()
	if err != nil {
		return fmt.Errorf("open the write-ahead log: %w", err)
	}
	return s.gc.syncNow()
}

// explainOpen names why SQLite could not open the database at path when
// the cause is a directory or file the daemon may not write (a read-only
// file system, missing permissions): SQLite, failing to create the file or
// its -wal and -shm files, retries read-only and reports that attempt's
// "no such file or directory". Any other error is returned as it is.
func explainOpen(path string, err error) error {
	var se sqlite3.Error
	if !errors.As(err, &se) || (se.Code != sqlite3.ErrCantOpen && se.Code != sqlite3.ErrReadonly) {
		return err
	}
	for _, p := range []string{filepath.Dir(path), path, path + "-wal", path + "-shm"} {
		if _, serr := os.Stat(p); serr != nil {
			continue // a file SQLite has yet to make: its directory decides
		}
		if aerr := syscall.Access(p, accessWrite); aerr != nil {
			return fmt.Errorf("%w (SQLite said: %v)", &fs.PathError{Op: "write", Path: p, Err: aerr}, err)
		}
	}
	return err
}

// accessWrite is access(2)'s W_OK: unlike a mode check it sees a read-only
// file system, also for root.
const accessWrite = 0x2

// createFile creates an empty database file at path when there is none.
func createFile(ctx context.Context, path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	q := url.Values{}
	q.Set("mode", "rwc")
	db, err := sql.Open("sqlite3", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return err
	}
	defer db.Close()
	return checkSQLite(ctx, db, 0)
}

// checkSQLite fails clearly when the driver is unusable (a CGO_ENABLED=0
// build compiles but cannot run SQLite) or the file cannot be opened, and,
// when synchronous is not 0, confirms the durability settings: WAL mode and
// that PRAGMA synchronous.
func checkSQLite(ctx context.Context, db *sql.DB, synchronous int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("SQLite is unavailable (was the binary built with CGO_ENABLED=1 and gcc?): %v", r)
		}
	}()
	var version, mode string
	if err := db.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&version); err != nil {
		switch {
		case strings.Contains(err.Error(), "requires cgo"):
			return fmt.Errorf("SQLite is unavailable (the binary was built without cgo: build it with CGO_ENABLED=1 and gcc): %w", err)
		case ctx.Err() != nil:
			return fmt.Errorf("the start was cancelled: %w", ctx.Err())
		}
		return fmt.Errorf("open the database file: %w", err)
	}
	if synchronous == 0 {
		return nil
	}
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("read journal mode: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal mode is %q, want wal", mode)
	}
	var sync int
	if err := db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
		return fmt.Errorf("read synchronous: %w", err)
	}
	if sync != synchronous {
		return fmt.Errorf("synchronous is %d, want %d", sync, synchronous)
	}
	return nil
}

// CheckIntegrity reads every page and index of the database (PRAGMA
// quick_check) and answers an error saying what is damaged: serving a
// damaged database would lose or invent state without a word. It reads a
// snapshot through a read connection, so the daemon serves while it runs;
// Open does not run it, since on a large database it takes long enough
// (about 0.2 s for 100,000 tasks, more on a slow disk) that every start
// would wait for it.
func (s *Store) CheckIntegrity(ctx context.Context) error {
	return checkIntegrity(ctx, s.rdb.DB)
}

// checkIntegrity runs PRAGMA quick_check through db.
func checkIntegrity(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, "PRAGMA quick_check(5)")
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("the check was cancelled: %w", ctx.Err())
		}
		return fmt.Errorf("the database is damaged and cannot be checked (%w): restore it from a backup", err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return fmt.Errorf("check the database: %w", err)
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("the check was cancelled: %w", ctx.Err())
		}
		return fmt.Errorf("the database is damaged and cannot be checked (%w): restore it from a backup", err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("the database is damaged (quick_check: %s): restore it from a backup", strings.Join(problems, "; "))
	}
	return nil
}

// DatabaseFileMode is the permission of the database and its WAL and
// shared-memory files: they hold task texts, agents' settings and answers.
const DatabaseFileMode fs.FileMode = 0o600

// restrictFiles makes the database's files private to the daemon's user,
// tightening what an earlier version or an umask left looser.
func restrictFiles(path string) error {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&^DatabaseFileMode != 0 {
			if err := os.Chmod(p, DatabaseFileMode); err != nil {
				return fmt.Errorf("restrict %s to mode %o: %w", p, DatabaseFileMode, err)
			}
		}
	}
	return nil
}

// SaveCopy writes a complete copy of the database, as the store's own
// connection sees it, to a new file at path (VACUUM INTO). It serves when
// the database's file was deleted under the running daemon: the open
// connection still holds everything.
func (s *Store) SaveCopy(ctx context.Context, path string) error {
	if _, err := s.wdb.ExecContext(ctx, "VACUUM INTO ?", path); err != nil {
		return fmt.Errorf("save a copy of the database to %s: %w", path, err)
	}
	if err := os.Chmod(path, DatabaseFileMode); err != nil {
		return fmt.Errorf("save a copy of the database to %s: %w", path, err)
	}
	return nil
}

// Close closes the database.
func (s *Store) Close() error {
	var errs []error
	if s.rdb != nil {
		errs = append(errs, s.rdb.Close())
	}
	if s.ckdb != nil {
		errs = append(errs, s.ckdb.Close())
	}
	errs = append(errs, s.wcache.close(), s.wdb.Close(), s.wal.close())
	return errors.Join(errs...)
}

// Checkpoint copies what the write-ahead log holds into the database file
// with a passive checkpoint on a connection of its own: it neither waits
// for nor blocks the writer and the readers. SQLite's own checkpoint runs
// on the writer after a commit that grew the log past 1000 pages, and the
// daemon's writes wait behind it; after this one it finds little left to
// copy. A writer that does much (the pruner) calls it between its
// transactions. It returns the log's pages and how many of them are now
// in the database file.
func (s *Store) Checkpoint(ctx context.Context) (logPages, copied int, err error) {
	var busy int
	if err := s.ckdb.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logPages, &copied); err != nil {
		return 0, 0, fmt.Errorf("checkpoint: %w", err)
	}
	return logPages, copied, nil
}

// pingQueries are the reads of Ping: the schema, the count of projects
// and of tasks (SQLite counts over the narrowest index of a table, every
// leaf of it), and the newest tasks with every column, as the first page
// of a list reads them. Their cost grows with the tasks' index, not with
// the whole file, unlike PRAGMA quick_check, which the start runs.
var pingQueries = []string{
	"SELECT count(*) FROM sqlite_schema",
	"SELECT count(*) FROM projects",
	"SELECT count(*) FROM tasks",
	"SELECT count(*), sum(length(description)) FROM (SELECT " + taskColumns + " FROM tasks ORDER BY submission_seq DESC LIMIT 100)",
}

// Ping checks that the database answers real reads (see pingQueries): a
// database damaged while the daemon runs is reported as such, with what
// SQLite said, rather than passing a check that reads nothing.
func (s *Store) Ping(ctx context.Context) error {
	for _, q := range pingQueries {
		rows, err := s.rdb.QueryContext(ctx, q)
		if err == nil {
			for rows.Next() {
			}
			err = rows.Err()
			if cerr := rows.Close(); err == nil {
				err = cerr
			}
		}
		var se sqlite3.Error
		switch {
		case err == nil:
		case errors.As(err, &se) && (se.Code == sqlite3.ErrCorrupt || se.Code == sqlite3.ErrNotADB):
			return fmt.Errorf("ping store: the database is damaged (%w): restore it from a backup", err)
		default:
			return fmt.Errorf("ping store: %w", err)
		}
	}
	return nil
}

type migration struct {
	version int
	name    string
	sql     string
}

func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive number and '_'", name)
		}
		b, err := migrationFS.ReadFile(path.Join("migrations", name))
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: name, sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("migrations %s and %s share version %d", out[i-1].name, out[i].name, out[i].version)
		}
	}
	return out, nil
}

// migrate applies every embedded migration not yet recorded, each in its own
// transaction together with its schema_migrations row. The migrations
// recorded are read first, so that a start with nothing to apply commits
// nothing (each commit waits for a sync of the log); each transaction
// checks its version again, in case another process applied it meanwhile.
// The table's creation on a new database is made durable by the first
// migration's commit.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := loadMigrations()
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	if _, err := s.wdb.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	applied, newest, err := s.appliedMigrations(ctx)
	if err != nil {
		return err
	}
	if known := ms[len(ms)-1].version; newest > known {
		return fmt.Errorf("the database has schema version %d but this agentqueued knows only up to %d: use a newer agentqueued", newest, known)
	}
	for _, m := range ms {
		if applied[m.version] {
			continue
		}
		err := s.withTx(ctx, func(tx *sql.Tx) error {
			var n int
			if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM schema_migrations WHERE version = ?", m.version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
				m.version, m.name, s.now().UnixNano())
			return err
		})
		if err != nil {
			return fmt.Errorf("apply migration %s: %w", m.name, err)
		}
	}
	return nil
}

// appliedMigrations reads the versions schema_migrations records, and the
// newest of them.
func (s *Store) appliedMigrations(ctx context.Context) (map[int]bool, int, error) {
	rows, err := s.wdb.QueryContext(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return nil, 0, fmt.Errorf("read schema version: %w", err)
	}
	defer rows.Close()
	applied, newest := map[int]bool{}, 0
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, 0, fmt.Errorf("read schema version: %w", err)
		}
		applied[v], newest = true, max(newest, v)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("read schema version: %w", err)
	}
	return applied, newest, nil
}

// withTx runs fn in an IMMEDIATE write transaction and commits it, or rolls
// it back when fn or the commit fails. It returns once the commit is
// durable (see durable.go): the writer connection is given back at COMMIT,
// and the next transaction runs while this one waits for its sync.
func (s *Store) withTx(ctx context.Context, fn func(tx *sql.Tx) error) (err error) {
	defer func() { err = s.noteWrite(err) }()
	// Statements the transaction found unprepared are prepared once it has
	// given the writer connection back.
	defer s.wcache.fill(ctx)
	return s.runTx(ctx, true, fn)
}

// withRedoableTx is withTx for a write whose loss in a power cut costs
// nothing because it is done again: an archive batch lost leaves its tasks
// in the working tables, and the next pass archives them. It returns at
// its commit, without waiting for a sync of the log (an archive write's
// median on the writer is a fifth shorter than with it); the log is synced
// in order, so the next durable commit's sync makes this one durable too,
// and the database is whole either way.
func (s *Store) withRedoableTx(ctx context.Context, fn func(tx *sql.Tx) error) (err error) {
	defer func() { err = s.noteWrite(err) }()
	defer s.wcache.fill(ctx) // after the connection is given back
	return s.runTx(ctx, false, fn)
}

// runTx begins a write transaction on the writer, checks the lease's
// fence, runs fn and commits; when durable it then waits for the commit to
// be durable. What the transaction did is reported to the observer only
// after that; see withTx. After a sync of the log has failed it refuses to
// begin.
func (s *Store) runTx(ctx context.Context, durable bool, fn func(tx *sql.Tx) error) error {
	if err := s.gc.err(); err != nil {
		return err
	}
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if s.obs != nil {
		defer s.pending.Delete(tx) // what a rolled-back transaction did is not reported
	}
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback() // return the writer connection before re-panicking
			panic(p)
		}
	}()
	if err := s.checkFence(ctx, tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	// A durable commit's observations are reported by the sync that
	// covers it, before the sync is published: a reader that waited for
	// durability (WaitDurable) finds them counted.
	var after func()
	if durable && s.obs != nil {
		after = func() { s.report(tx) }
	}
	ticket, err := s.gc.commit(tx.Commit, after)
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	s.commits.Add(1)
	if durable {
		if err := s.gc.await(ticket); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		return nil
	}
	s.report(tx)
	return nil
}

// Commits returns how many write transactions this store has committed
// since it was opened. Each durable one is answered after a sync of the
// log that covers it; writers that wait together share a sync (Syncs).
func (s *Store) Commits() int64 { return s.commits.Load() }

// noteWrite keeps the outcome of a write for WriteHealth and turns a full
// disk into an error a person can act on: every write fails cleanly
// (nothing is half-written, a transaction is all or nothing) and says so,
// reads go on, and writes resume by themselves when space returns.
func (s *Store) noteWrite(err error) error {
	var se sqlite3.Error
	switch {
	case err == nil:
		if s.full.Load() != nil {
			s.full.Store(nil)
			s.log.Info("the database takes writes again: the disk has space")
		}
		return nil
	case errors.As(err, &se) && se.Code == sqlite3.ErrFull:
		full := models.WrapError(models.CodeUnavailable, err,
			"disk full: the daemon cannot write to its database %s; it serves what it has and resumes by itself once space is freed", s.path)
		var e error = full
		if s.full.Swap(&e) == nil {
			s.log.Error("DISK FULL: writes to the database fail until space is freed", "database", s.path, "err", err)
		}
		return full
	}
	return err
}

// WriteHealth returns why the database takes no writes: the failure of a
// sync of its log (from then on every write is refused), else the
// disk-full error of the last write when it failed so; nil when healthy.
func (s *Store) WriteHealth() error {
	if err := s.gc.err(); err != nil {
		return err
	}
	if e := s.full.Load(); e != nil {
		return *e
	}
	return nil
}

func (s *Store) changed() {
	if s.onChange != nil {
		s.onChange()
	}
}

// stateChanged tells Config.OnStateChange about a commit that changed a
// task's state but made no work ready.
func (s *Store) stateChanged() {
	if s.onState != nil {
		s.onState()
	}
}

// isUniqueViolation reports whether err is a UNIQUE or PRIMARY KEY conflict.
func isUniqueViolation(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && (se.ExtendedCode == sqlite3.ErrConstraintUnique || se.ExtendedCode == sqlite3.ErrConstraintPrimaryKey)
}

// Time helpers: times are stored as Unix nanoseconds.

func toNanos(t time.Time) int64 { return t.UnixNano() }

func nullNanos(t *time.Time) sql.NullInt64 {
	if t == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixNano(), Valid: true}
}

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

func fromNullNanos(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromNanos(n.Int64)
	return &t
}

func nullString(s *string) sql.NullString {
	if s == nil {
		return sql.NullString{}
	}
	return sql.NullString{String: *s, Valid: true}
}

func fromNullString(s sql.NullString) *string {
	if !s.Valid {
		return nil
	}
	v := s.String
	return &v
}

func emptyToNull(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

func notFound(kind, id string) error {
	return models.Errorf(models.CodeNotFound, "%s %q not found", kind, id)
}
