package store

import (
	"os"
	"path/filepath"
	"testing"
)

// TestTheLogFileIsFollowedByItsPath: the group commit syncs the file the
// log's path names, opening it again when it was made anew, and the file
// it holds when the path names none (deleted under the daemon: SQLite
// writes on to the file it has open). With no file ever found, a sync
// fails.
func TestTheLogFileIsFollowedByItsPath(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "aq.db-wal")
	w := &walFile{path: path}
	t.Cleanup(func() { _ = w.close() })
	if err := w.sync(); err == nil {
		t.Fatal("a sync with no log file succeeded")
	}
	create := func() os.FileInfo {
		t.Helper()
		if err := os.WriteFile(path, []byte("log"), 0o600); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	syncs := func(want os.FileInfo, when string) {
		t.Helper()
		if err := w.sync(); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if !os.SameFile(w.fi, want) {
			t.Fatalf("%s: the sync used another file than the log", when)
		}
	}
	first := create()
	syncs(first, "first sync")
	if err := os.Rename(path, path+".old"); err != nil {
		t.Fatal(err)
	}
	syncs(first, "the log moved away")
	second := create()
	syncs(second, "the log made anew")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	syncs(second, "the log deleted")
}
