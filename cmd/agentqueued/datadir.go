package main

import (
	"context"
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
// everything from then on would be lost at the next start. It says so
// loudly in the log and through Err (the health check).
type dbWatch struct {
	path     string
	every    time.Duration
	log      *slog.Logger
	opened   os.FileInfo
	mu       sync.Mutex
	err      error
	reported time.Time
}

// newDBWatch records the database file as it is now.
func newDBWatch(path string, every time.Duration, log *slog.Logger) (*dbWatch, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("database file: %w", err)
	}
	if every <= 0 {
		every = dbWatchInterval
	}
	return &dbWatch{path: path, every: every, log: log, opened: fi}, nil
}

// Run checks the file every interval until ctx ends.
func (w *dbWatch) Run(ctx context.Context) error {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			w.check()
		}
	}
}

// check compares the file at the path with the one opened.
func (w *dbWatch) check() {
	fi, err := os.Stat(w.path)
	var problem error
	switch {
	case errors.Is(err, fs.ErrNotExist):
		problem = fmt.Errorf("the database file %s was deleted while the daemon runs: what it records from now on is lost when it stops; "+
			"stop it and restore the database from a backup", w.path)
	case err != nil:
		problem = fmt.Errorf("the database file %s cannot be checked: %v", w.path, err)
	case !os.SameFile(fi, w.opened):
		problem = fmt.Errorf("the database file %s was replaced while the daemon runs: it still writes to the file it opened; "+
			"stop it and find out which file is the right one", w.path)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.err = problem
	if problem != nil && time.Since(w.reported) >= time.Minute {
		w.reported = time.Now()
		w.log.Error("DATABASE FILE GONE", "err", problem)
	}
}

// Err is the problem last found, or nil.
func (w *dbWatch) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}
