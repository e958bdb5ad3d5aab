package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// TestAMissingDatabaseIsNotReplacedSilently: a database deleted while the
// daemon was down meant a silently empty database at the next start. A
// data directory that shows earlier use now refuses a fresh database
// unless --new-database says so.
func TestAMissingDatabaseIsNotReplacedSilently(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := startDaemon(t, dir)
	mustCtl(t, d.m.Addr(), "project", "create", "web")
	if err := d.m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, dataMarker)); err != nil {
		t.Fatalf("no marker after the first start: %v", err)
	}
	for _, f := range []string{"agentqueued.db", "agentqueued.db-wal", "agentqueued.db-shm"} {
		os.Remove(filepath.Join(dir, f))
	}
	_, err := startMain(t, nil, "run", "--data-dir", dir, "--listen", "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), "was used before (it holds "+dataMarker) ||
		!strings.Contains(err.Error(), "--new-database") {
		t.Fatalf("a start without the database: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "agentqueued.db")); err == nil {
		t.Fatal("the refused start created a database")
	}
	d = startDaemon(t, dir, "--new-database")
	if out := mustCtl(t, d.m.Addr(), "project", "list"); strings.Contains(out, "web") {
		t.Fatalf("the new database is not empty:\n%s", out)
	}
	if !strings.Contains(d.logs.String(), "starting with a new, empty database") {
		t.Errorf("the new database was not logged:\n%s", d.logs)
	}
}

// TestTheDataDirectoryIsPrivate: a data directory readable by others is
// tightened at start.
func TestTheDataDirectoryIsPrivate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, dir)
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("data directory mode %o, %v; want 700", fi.Mode().Perm(), err)
	}
	if !strings.Contains(d.logs.String(), "the data directory was readable by others") {
		t.Errorf("the change was not logged:\n%s", d.logs)
	}
}

// TestADeletedDatabaseIsNoticed: a database deleted under the running
// daemon went unnoticed until the next start found it empty. The daemon
// now stops, saves what its open connection still holds beside the lost
// file and says where.
func TestADeletedDatabaseIsNoticed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, err := startMainWith(t, func(m *Main) { m.dbWatchEvery = 10 * time.Millisecond },
		"run", "--data-dir", dir, "--listen", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d.stoppedWithError = true
	mustCtl(t, d.m.Addr(), "project", "create", "web")
	if err := os.Remove(filepath.Join(dir, "agentqueued.db")); err != nil {
		t.Fatal(err)
	}
	var runErr error
	select {
	case runErr = <-d.errc:
	case <-progresstest.Context(t).Done():
		t.Fatalf("the daemon did not stop after its database was deleted\n%s", d.logs)
	}
	if runErr == nil || !strings.Contains(runErr.Error(), "was deleted while the daemon ran") ||
		!strings.Contains(runErr.Error(), "saved its last state in ") || !strings.Contains(d.logs.String(), "DATABASE FILE GONE") {
		t.Fatalf("Run = %v\n%s", runErr, d.logs)
	}
	saved, _ := filepath.Glob(filepath.Join(dir, "agentqueued.db.saved-*"))
	if len(saved) != 1 {
		t.Fatalf("saved copies: %v", saved)
	}
	st := storetest.OpenAt(t, saved[0])
	if _, err := st.GetProject(context.Background(), "web"); err != nil {
		t.Fatalf("the saved copy lacks what was recorded: %v", err)
	}
}

// saverFunc is a databaseSaver of a function.
type saverFunc func(ctx context.Context, path string) error

func (f saverFunc) SaveCopy(ctx context.Context, path string) error { return f(ctx, path) }

// TestALostDatabaseFallsBackToItsEarlyCopy: the daemon's stop can cost the
// writer its connection (a write the stop cancels drops it), and a deleted
// file cannot be opened again: the copy made when the file was found gone
// is then the one named, where the stop used to end with no copy at all.
func TestALostDatabaseFallsBackToItsEarlyCopy(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	gone := errors.New("the database file is gone: x was deleted while the daemon ran")
	failing := saverFunc(func(context.Context, string) error { return errors.New("unable to open database file") })
	err := saveLostDatabase(context.Background(), failing, gone, "/data/aq.db", time.Now(), "/data/aq.db.saved-1-early", log)
	if err == nil || !strings.Contains(err.Error(), "saved its last state in /data/aq.db.saved-1-early") {
		t.Fatalf("with an early copy: %v", err)
	}
	err = saveLostDatabase(context.Background(), failing, gone, "/data/aq.db", time.Now(), "", log)
	if err == nil || !strings.Contains(err.Error(), "could not be saved") {
		t.Fatalf("without one: %v", err)
	}
	dir := t.TempDir()
	early := filepath.Join(dir, "aq.db.saved-early")
	if err := os.WriteFile(early, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := saverFunc(func(context.Context, string) error { return nil })
	if err := saveLostDatabase(context.Background(), ok, gone, filepath.Join(dir, "aq.db"), time.Now(), early, log); err == nil ||
		!strings.Contains(err.Error(), "saved its last state in "+filepath.Join(dir, "aq.db.saved-")) {
		t.Fatalf("with a newer copy: %v", err)
	}
	if _, err := os.Stat(early); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the early copy was kept beside the newer one: %v", err)
	}
}
