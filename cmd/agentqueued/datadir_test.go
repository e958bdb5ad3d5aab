package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/progresstest"
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
// now says so loudly.
func TestADeletedDatabaseIsNoticed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, err := startMainWith(t, func(m *Main) { m.dbWatchEvery = 10 * time.Millisecond },
		"run", "--data-dir", dir, "--listen", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "agentqueued.db")); err != nil {
		t.Fatal(err)
	}
	watch := progresstest.New(t, "the deletion")
	for !strings.Contains(d.logs.String(), "DATABASE FILE GONE") {
		select {
		case <-watch.Done():
			t.Fatalf("the deletion was not noticed: %v\n%s", watch.Err(), d.logs)
		case <-time.After(10 * time.Millisecond): // polling the daemon's log
		}
	}
	if !strings.Contains(d.logs.String(), "was deleted while the daemon runs") {
		t.Fatalf("log:\n%s", d.logs)
	}
}
