package store

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// MaxCachedStatements bounds the statements a store keeps prepared per
// database handle (the writer and the read pool each). A statement beyond
// it runs as before: prepared, run and finalised each time.
const MaxCachedStatements = 256

// stmtCache keeps statements prepared for the life of a database handle,
// keyed by their text, so that SQLite parses and plans each one once per
// connection instead of at every call. database/sql prepares a cached
// statement again on a connection that has not seen it yet, and a
// transaction uses the writer's copy through Tx.StmtContext.
type stmtCache struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
	// pending are the texts a transaction asked for while it held the
	// writer connection; they are prepared after it (see fill).
	pending map[string]bool
	closed  bool
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, m: map[string]*sql.Stmt{}}
}

// get returns q prepared, preparing it now when it is not yet. It returns
// nil when the cache is full or closed, or q does not prepare: the caller
// then runs q unprepared (and reports its error). It takes a connection of
// the handle to prepare: never call it while holding the writer.
func (c *stmtCache) get(ctx context.Context, q string) *sql.Stmt {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	st, ok := c.m[q]
	full := c.closed || len(c.m) >= MaxCachedStatements
	c.mu.Unlock()
	if ok {
		return st
	}
	if full {
		return nil
	}
	st, err := c.db.PrepareContext(ctx, q)
	if err != nil {
		return nil
	}
	return c.keep(q, st)
}

// keep stores st under q unless another caller stored one first or the
// cache is closed or full; it returns the statement to use, nil if none.
func (c *stmtCache) keep(q string, st *sql.Stmt) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[q]; ok {
		_ = st.Close()
		return old
	}
	if c.closed || len(c.m) >= MaxCachedStatements {
		_ = st.Close()
		return nil
	}
	c.m[q] = st
	return st
}

// lookup returns q if it is prepared already, without preparing it; a
// miss is remembered for fill. Transactions use it: they hold the writer
// connection, which a preparation through the handle would wait for.
func (c *stmtCache) lookup(q string) *sql.Stmt {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[q]; ok {
		return st
	}
	if !c.closed && len(c.m)+len(c.pending) < MaxCachedStatements {
		if c.pending == nil {
			c.pending = map[string]bool{}
		}
		c.pending[q] = true
	}
	return nil
}

// fill prepares the statements transactions missed. The writer calls it
// after a transaction has ended, when its connection is free.
func (c *stmtCache) fill(ctx context.Context) {
	if c == nil {
		return
	}
	c.mu.Lock()
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	for q := range pending {
		_ = c.get(ctx, q)
	}
}

// close closes the cached statements; later gets return nil.
func (c *stmtCache) close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for q, st := range c.m {
		errs = append(errs, st.Close())
		delete(c.m, q)
	}
	return errors.Join(errs...)
}

// cachedDB is a database handle whose QueryContext, QueryRowContext and
// ExecContext run through its statement cache.
type cachedDB struct {
	*sql.DB
	cache *stmtCache
}

func newCachedDB(db *sql.DB) *cachedDB { return &cachedDB{DB: db, cache: newStmtCache(db)} }

// QueryContext runs q as a cached prepared statement.
func (d *cachedDB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := d.cache.get(ctx, q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return d.DB.QueryContext(ctx, q, args...)
}

// QueryRowContext runs q as a cached prepared statement.
func (d *cachedDB) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if st := d.cache.get(ctx, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return d.DB.QueryRowContext(ctx, q, args...)
}

// ExecContext runs q as a cached prepared statement.
func (d *cachedDB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if st := d.cache.get(ctx, q); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return d.DB.ExecContext(ctx, q, args...)
}

// Close closes the cached statements, then the handle.
func (d *cachedDB) Close() error {
	return errors.Join(d.cache.close(), d.DB.Close())
}

// txExec runs q in the write transaction tx through the writer's cache
// (see txn.stmt): for the statements written outside the transition
// engine.
func (s *Store) txExec(ctx context.Context, tx *sql.Tx, q string, args ...any) (sql.Result, error) {
	if st := s.wcache.lookup(q); st != nil {
		return tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, q, args...)
}

// txQueryRow runs q in the write transaction tx through the writer's
// cache, as txExec.
func (s *Store) txQueryRow(ctx context.Context, tx *sql.Tx, q string, args ...any) *sql.Row {
	if st := s.wcache.lookup(q); st != nil {
		return tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return tx.QueryRowContext(ctx, q, args...)
}

// execer runs statements that return no rows: a transaction, or the
// transition engine's (txn), which runs them prepared once.
type execer interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}

// readTx runs the statements of a read transaction through the read
// pool's cache. A statement not yet cached runs unprepared and is
// prepared for the cache by fill, once the transaction has ended.
type readTx struct {
	tx *sql.Tx
	c  *stmtCache
}

// QueryContext runs q in the transaction, prepared once.
func (t readTx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := t.c.lookup(q); st != nil {
		return t.tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return t.tx.QueryContext(ctx, q, args...)
}

// QueryRowContext runs q in the transaction, prepared once.
func (t readTx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if st := t.c.lookup(q); st != nil {
		return t.tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return t.tx.QueryRowContext(ctx, q, args...)
}
