package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/store"
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
	st, err := store.Open(context.Background(), store.Config{Path: saved[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.GetProject(context.Background(), "web"); err != nil {
		t.Fatalf("the saved copy lacks what was recorded: %v", err)
	}
}
