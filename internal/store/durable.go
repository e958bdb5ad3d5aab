package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Group commit. The writer connection commits with synchronous=NORMAL: its
// COMMIT writes the transaction's frames to the write-ahead log and returns
// without an fsync. The transaction's method is answered only once a sync
// of the log that began after its COMMIT has ended (groupCommit.await), and
// the committers that wait at the same time share that sync: while one
// commit's sync runs, the next transactions take the writer and commit,
// and the next sync covers them all.
//
// This is what synchronous=FULL does, split in two. In SQLite 3.54
// (sqlite3-binding.c of github.com/mattn/go-sqlite3): walFrames writes a
// commit's frames and then, only when the commit's WAL_SYNC_FLAGS are set
// (synchronous=FULL), pads the last frame out to a sector boundary when
// Wal.padToSectorBoundary is set and fsyncs the log. sqlite3WalOpen clears
// padToSectorBoundary when the file reports
// SQLITE_IOCAP_POWERSAFE_OVERWRITE, which the unix VFS does by default
// (SQLITE_POWERSAFE_OVERWRITE=1; the data source name sets no psow=0): so
// FULL on Linux is "write the frames, fsync the log", and NORMAL followed by
// an fsync of the same file writes and syncs the same bytes. unixSync
// calls fsync(2) (fdatasync is defined to fsync unless HAVE_FDATASYNC), and
// so does walFile.sync. What NORMAL keeps of FULL's syncs, it keeps:
// the header of a log that starts again is written and synced before any
// frame when Wal.syncHeader (CKPT_SYNC_FLAGS, set under NORMAL too), the
// directory is synced with the log's first sync (UNIXFILE_DIRSYNC), and a
// checkpoint syncs the log before it copies frames into the database file
// and the database file before it marks them copied (walCheckpoint). A
// log is only overwritten from its start once every frame is in the
// database file and that file synced, so a sync of the log covers every
// frame written before it began. What a crash can lose is a suffix of the
// log: the commits not yet answered.
//
// Readers on the read pool see a commit as soon as its COMMIT returns,
// up to one sync before it is durable. A reader that acts outside the
// daemon on what it read, with no durable write of its own in between,
// waits for it with Store.WaitDurable; the store's reads that feed such
// actions do so themselves (see docs/architecture.md, "Durability").

// groupCommit makes the writer's commits durable together. Commits are
// counted as they begin (before COMMIT) and end (after it): the writer
// connection runs one transaction at a time, so when k commits have ended
// the first k in the writer's order have finished writing the log, and a
// sync that begins then makes all of them durable.
type groupCommit struct {
	// sync makes the log durable; tests replace it to hold or fail it.
	sync func() error
	// waiting, set by tests, is called when a caller starts to wait for
	// another's sync or commit.
	waiting func()
	// syncs counts the syncs run (see Store.Syncs).
	syncs atomic.Int64

	mu sync.Mutex
	// begun and ended count the commits begun and ended; covered is the
	// count of commits ended when the last successful sync began: the
	// first covered commits are durable.
	begun, ended, covered uint64
	// running is set while a sync runs.
	running bool
	// change, when not nil, is closed at the next change of the above: a
	// commit ended, a sync ended.
	change chan struct{}
	// failed is the error of a sync that failed: no later commit is
	// claimed durable (see fail).
	failed error
	// reports are the commits' after functions not yet run, in ticket
	// order.
	reports []dueReport
}

// dueReport is what a commit's sync runs for it (see commit).
type dueReport struct {
	ticket uint64
	f      func()
}

// newGroupCommit returns a group commit syncing with sync.
func newGroupCommit(sync func() error) *groupCommit { return &groupCommit{sync: sync} }

// commit runs c, the COMMIT of a write transaction, counting it, and
// returns its ticket for await: the number of commits ended with it. When
// c succeeds, after (if any) is run by the sync that covers it, before
// that sync is published: whoever waits for durability (await,
// waitRead) finds it run.
func (g *groupCommit) commit(c func() error, after func()) (ticket uint64, err error) {
	g.mu.Lock()
	g.begun++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.ended++
		ticket = g.ended
		if err == nil && after != nil {
			g.reports = append(g.reports, dueReport{ticket: ticket, f: after})
		}
		g.changedLocked()
		g.mu.Unlock()
	}()
	return 0, c()
}

// await returns once the commit of ticket is durable: once a sync that
// began after it has ended. When no sync runs it runs one itself, covering
// every commit ended so far; else it waits for the running one, which
// began before its commit ended and so may not cover it, and then looks
// again. It does not give up when a context ends: the commit has happened,
// and the wait is one or two syncs. It returns the failure of a sync when
// one failed before the commit was covered.
func (g *groupCommit) await(ticket uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waitLocked(context.Background(), ticket)
}

// waitRead returns once every commit begun so far is durable: what a read
// that has ended may have seen (a commit is visible before its COMMIT
// returns). It returns at once when they are already (the usual case:
// nothing is being written), and when ctx ends while it waits.
func (g *groupCommit) waitRead(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waitLocked(ctx, g.begun)
}

// waitLocked returns once the first ticket commits are durable, running
// the syncs it needs when no other does; g.mu is held on entry and on
// return.
func (g *groupCommit) waitLocked(ctx context.Context, ticket uint64) error {
	signalled := false
	for {
		switch {
		case g.covered >= ticket:
			return nil
		case g.failed != nil:
			return g.failed
		case !g.running && g.ended > g.covered:
			g.runLocked()
			continue
		}
		// A sync runs, or a commit to cover has not ended yet.
		change, waiting := g.waitChange(), g.waiting
		g.mu.Unlock()
		if waiting != nil && !signalled {
			waiting()
			signalled = true
		}
		select {
		case <-change:
		case <-ctx.Done():
			g.mu.Lock()
			return ctx.Err()
		}
		g.mu.Lock()
	}
}

// waitChange returns a channel closed at the next change, g.mu held.
func (g *groupCommit) waitChange() <-chan struct{} {
	if g.change == nil {
		g.change = make(chan struct{})
	}
	return g.change
}

// changedLocked wakes the callers waiting for a change, g.mu held.
func (g *groupCommit) changedLocked() {
	if g.change != nil {
		close(g.change)
		g.change = nil
	}
}

// runLocked runs one sync, g.mu held on entry and on return but not while
// the sync runs, and records what it covered or that it failed.
func (g *groupCommit) runLocked() {
	g.running = true
	target, sync := g.ended, g.sync
	g.mu.Unlock()
	err := runSync(sync, &g.syncs)
	g.mu.Lock()
	n := 0
	for n < len(g.reports) && g.reports[n].ticket <= target {
		n++
	}
	due := slices.Clone(g.reports[:n])
	g.reports = slices.Delete(g.reports, 0, n)
	if err == nil && len(due) > 0 {
		// What the covered commits did is reported before they are
		// published as durable, in the order they committed.
		g.mu.Unlock()
		for _, d := range due {
			d.f()
		}
		g.mu.Lock()
	}
	g.running = false
	if err != nil {
		g.fail(err)
	} else {
		g.covered = max(g.covered, target)
	}
	g.changedLocked()
}

// runSync runs sync, counting it in n, and turns a panic into an error so
// that the waiters are woken.
func runSync(sync func() error, n *atomic.Int64) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("sync panicked: %v", p)
		}
	}()
	n.Add(1)
	return sync()
}

// fail records a sync's failure, g.mu held. After a failed fsync the
// kernel may have dropped the pages it could not write and marked them
// clean, so a later fsync that succeeds proves nothing about them: like
// SQLite, which answers SQLITE_IOERR_FSYNC, the store then claims no
// durability any more, and every later write is refused (see err).
func (g *groupCommit) fail(err error) {
	if g.failed == nil {
		g.failed = models.WrapError(models.CodeUnavailable, err,
			"the database's log could not be synced to disk, so what was written since the last sync may be lost: "+
				"the daemon takes no more writes; check the disk and restart it")
	}
}

// syncNow runs a sync of the log, or joins one, that begins now: it
// counts as one commit what was written before it, by this store or an
// earlier one.
func (g *groupCommit) syncNow() error {
	ticket, _ := g.commit(func() error { return nil }, nil)
	return g.await(ticket)
}

// err returns the failure of a sync, nil while every sync succeeded.
func (g *groupCommit) err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.failed
}

// walFile syncs a database's write-ahead log. It keeps the log open and
// checks at each sync that the path still names that file: the log is
// deleted when the last connection to the database closes and made again
// by the next, and a sync of the file that was deleted would not cover
// the new one. When the path names no file (deleted under the daemon),
// the file kept open is synced: SQLite's connection goes on writing to it.
type walFile struct {
	path string
	mu   sync.Mutex
	f    *os.File
	fi   os.FileInfo
}

// sync makes everything written to the log so far durable.
func (w *walFile) sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	cur, err := os.Stat(w.path)
	switch {
	case err == nil && w.f != nil && os.SameFile(cur, w.fi):
	case err == nil:
		if err := w.reopen(); err != nil {
			return err
		}
	case errors.Is(err, fs.ErrNotExist) && w.f != nil:
	default:
		return fmt.Errorf("sync %s: %w", w.path, err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", w.path, err)
	}
	return nil
}

// reopen opens the file at the path, syncing and closing the one it
// replaces (a commit may have reached it before it was replaced).
func (w *walFile) reopen() error {
	f, err := os.OpenFile(w.path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("sync %s: %w", w.path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", w.path, err)
	}
	old := w.f
	w.f, w.fi = f, fi
	if old != nil {
		err := old.Sync()
		old.Close()
		if err != nil {
			return fmt.Errorf("sync %s (the file it replaced): %w", w.path, err)
		}
	}
	return nil
}

// close closes the log file kept open.
func (w *walFile) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// WaitDurable returns once every write transaction committed before it was
// called is durable, at once when they all are already. A read on the read
// pool may see a commit up to one sync of the log before it is durable; a
// caller that acts outside the daemon on what it read (posts it, runs or
// signals a process for it), with no write of its own in between, calls
// it after the read. It returns ctx's error when ctx ends first, and the
// failure of a sync when one failed.
func (s *Store) WaitDurable(ctx context.Context) error {
	if err := s.gc.waitRead(ctx); err != nil {
		return fmt.Errorf("wait for the database's writes to reach the disk: %w", err)
	}
	return nil
}

// Syncs returns how many syncs of the write-ahead log this store has run
// to make its commits durable: fewer than its commits when writers that
// waited together shared one.
func (s *Store) Syncs() int64 { return s.gc.syncs.Load() }
