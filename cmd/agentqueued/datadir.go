package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentqueued/agentqueued/internal/config"
)

// dataMarker names the file that marks a data directory as used by a
// daemon: written at the first start, it tells a later start that a
// missing database was lost, not never made.
const dataMarker = "agentqueued-data"

// dataDirMode is the permission of the data directory: it holds the
// database, run logs, the agents' checkouts and the agent socket.
const dataDirMode fs.FileMode = 0o700

// dbWatchInterval is how often a running daemon checks that its database
// file is still the one it opened.
const dbWatchInterval = 10 * time.Second

// prepareDataDir creates the data directory (private to the daemon's
// user, tightened when looser) and refuses to create a fresh database in a
// data directory that shows earlier use, unless newDatabase: a database
// deleted or moved by mistake would otherwise be replaced by an empty one
// without a word.
func prepareDataDir(cfg config.Config, newDatabase bool, log *slog.Logger) error {
	dbPath := cfg.DatabasePath()
	for _, dir := range []string{cfg.DataDir, filepath.Dir(dbPath)} {
		if err := os.MkdirAll(dir, dataDirMode); err != nil {
			return fmt.Errorf("create data directory: %w", err)
		}
	}
	fi, err := os.Stat(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	if fi.Mode().Perm()&^dataDirMode != 0 {
		if err := os.Chmod(cfg.DataDir, dataDirMode); err != nil {
			return fmt.Errorf("restrict the data directory %s to mode %o: %w", cfg.DataDir, dataDirMode, err)
		}
		log.Warn("the data directory was readable by others; it is now private", "data_dir", cfg.DataDir,
			"was", fmt.Sprintf("%o", fi.Mode().Perm()), "now", fmt.Sprintf("%o", dataDirMode))
	}
	if _, err := os.Stat(dbPath); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return nil // the database is there (or unreadable: opening it says why)
	}
	var signs []string
	for _, name := range []string{dataMarker, "runs", "workspaces"} {
		if _, err := os.Stat(filepath.Join(cfg.DataDir, name)); err == nil {
			signs = append(signs, name)
		}
	}
	if len(signs) == 0 || newDatabase {
		if len(signs) > 0 {
			log.Warn("starting with a new, empty database in a data directory used before (--new-database)",
				"data_dir", cfg.DataDir, "database", dbPath)
		}
		return nil
	}
	return &configError{err: fmt.Errorf("the data directory %s was used before (it holds %s) but its database %s is missing: "+
		"restore the database from a backup, or start with --new-database to begin with an empty one",
		cfg.DataDir, strings.Join(signs, ", "), dbPath)}
}

// markDataDir writes the data directory's marker once the database is open.
func markDataDir(cfg config.Config) error {
	p := filepath.Join(cfg.DataDir, dataMarker)
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	text := fmt.Sprintf("This directory holds the data of an agentqueued daemon.\ndatabase: %s\nfirst started: %s\n",
		cfg.DatabasePath(), time.Now().UTC().Format(time.RFC3339))
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		return fmt.Errorf("mark the data directory: %w", err)
	}
	return nil
}

// dbWatch notices the database file disappearing or being replaced under
// a running daemon: SQLite keeps writing to the file it opened, so
// everything from then on would be lost at the next start, and new
// connections fail. Run returns the problem, which stops the daemon; the
// daemon then saves what its open connection still holds (saveLostDatabase).
type dbWatch struct {
	path   string
	every  time.Duration
	opened os.FileInfo
	// save, when set, saves what the open connection holds as soon as the
	// file is found gone (see Run); early is that copy, once made.
	save  func(ctx context.Context, path string) error
	mu    sync.Mutex
	early string
}

// newDBWatch records the database file as it is now.
func newDBWatch(path string, every time.Duration) (*dbWatch, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("database file: %w", err)
	}
	if every <= 0 {
		every = dbWatchInterval
	}
	return &dbWatch{path: path, every: every, opened: fi}, nil
}

// Run checks the file every interval until ctx ends or the file is gone.
func (w *dbWatch) Run(ctx context.Context) error {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := w.Check(); err != nil {
				// Saved at once: the stop that follows may cost the
				// writer its connection (a write the stop cancels drops
				// it), and a new one cannot open a deleted file. The copy
				// made after the stop, newer, replaces this one.
				if w.save != nil {
					p := savedPath(w.path, time.Now()) + "-early"
					if serr := w.save(context.WithoutCancel(ctx), p); serr == nil {
						w.mu.Lock()
						w.early = p
						w.mu.Unlock()
					}
				}
				return err
			}
		}
	}
}

// errDatabaseGone marks the problems of Check.
var errDatabaseGone = errors.New("the database file is gone")

// Check compares the file at the path with the one opened: nil when it is
// the same.
func (w *dbWatch) Check() error {
	fi, err := os.Stat(w.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s was deleted while the daemon ran", errDatabaseGone, w.path)
	case err != nil:
		return fmt.Errorf("%w: %s cannot be checked: %v", errDatabaseGone, w.path, err)
	case !os.SameFile(fi, w.opened):
		return fmt.Errorf("%w: %s was replaced by another file while the daemon ran", errDatabaseGone, w.path)
	}
	return nil
}

// databaseSaver is what saveLostDatabase needs from the store.
type databaseSaver interface {
	SaveCopy(ctx context.Context, path string) error
}

// saveLostDatabase writes what the daemon's open connection still holds
// of a database whose file is gone to a new file beside it, and returns
// the error that tells the person what happened and what to do.
func saveLostDatabase(ctx context.Context, st databaseSaver, gone error, path string, now time.Time, early string,
	log *slog.Logger) error {
	saved := savedPath(path, now)
	if err := st.SaveCopy(ctx, saved); err != nil && early != "" {
		// The copy made when the file was found gone stands.
		log.Error("DATABASE FILE GONE; the daemon stopped and saved its state as it was when the file was found gone",
			"err", gone, "saved", early, "save_err", err)
		return fmt.Errorf("%w; the daemon stopped and saved its last state in %s: put that file back at %s (or start with "+
			"--new-database) and start again", gone, early, path)
	} else if err != nil {
		log.Error("DATABASE FILE GONE; its last state could not be saved", "err", gone, "save_err", err)
		return fmt.Errorf("%w; its last state could not be saved (%v): restore the database from a backup", gone, err)
	}
	if early != "" {
		_ = os.Remove(early) // the newer copy replaces it
	}
	log.Error("DATABASE FILE GONE; the daemon stopped and saved its last state", "err", gone, "saved", saved)
	return fmt.Errorf("%w; the daemon stopped and saved its last state in %s: put that file back at %s (or start with --new-database) and start again",
		gone, saved, path)
}

// daemonHealth is what /healthz reports beyond the store answering: the
// daemon's own checks, each nil when healthy.
type daemonHealth struct {
	db        *dbWatch
	scheduler interface{ Health() error }
	store     interface{ WriteHealth() error }
}

// Check returns the first problem found, in words for an operator.
func (h *daemonHealth) Check(ctx context.Context) error {
	if err := h.db.Check(); err != nil {
		return err
	}
	if err := h.store.WriteHealth(); err != nil {
		return err
	}
	if err := h.scheduler.Health(); err != nil {
		return err
	}
	return nil
}

// savedPath is where the state of a lost database at path is saved at now.
func savedPath(path string, now time.Time) string {
	return fmt.Sprintf("%s.saved-%s", path, now.UTC().Format("20060102T150405Z"))
}

// earlyCopy returns the copy Run made when it found the file gone ("" if
// none).
func (w *dbWatch) earlyCopy() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.early
}

// databaseID names the database at path without saying where it is: a
// hash of the file's absolute path, symbolic links resolved (the file's,
// else its directory's). The daemon sends it in every /healthz answer,
// which needs no token; doctor computes it from its own configuration to
// tell this configuration's daemon from another one answering at the same
// address.
func databaseID(path string) string {
	p, err := filepath.Abs(path)
	if err != nil {
		p = filepath.Clean(path)
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	} else if d, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
		p = filepath.Join(d, filepath.Base(p))
	}
	sum := sha256.Sum256([]byte("agentqueued database\x00" + p))
	return "sha256:" + hex.EncodeToString(sum[:8])
}
