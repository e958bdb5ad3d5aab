package repo_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// inode returns the inode number of a file.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestFetchesReplaceReferencesAtomically checks that a fetch writes a
// reference as git does, a new file renamed over the old one, and never
// truncates it in place: a daemon killed between go-git's truncation and
// its write left an empty reference, and every later fetch into that
// repository failed ("ref file is empty"), blocking the project's tasks.
func TestFetchesReplaceReferencesAtomically(t *testing.T) {
	t.Parallel()
	origin := bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	// The clone packs its references; the first fetch that moves one
	// writes it loose.
	ws := prepare(t, w, "a1", p, task("first-task", "first"))
	advance(t, origin, "one.txt", "moved")
	prepare(t, w, "a1", p, task("second-task", "second"))
	ref := filepath.Join(ws.Dir, ".git", "refs", "remotes", "origin", "main")
	before := inode(t, ref)
	tip := advance(t, origin, "two.txt", "moved again")
	prepare(t, w, "a1", p, task("third-task", "third"))
	if got := inode(t, ref); got == before {
		t.Fatalf("the fetch rewrote %s in place (inode %d): a crash midway leaves it empty", ref, got)
	}
	if b, err := os.ReadFile(ref); err != nil || string(b) != tip+"\n" {
		t.Fatalf("%s holds %q (%v), want the origin's new tip %s", ref, b, err, tip)
	}
	if left, _ := filepath.Glob(filepath.Join(ws.Dir, ".git", "aq-ref-*")); len(left) > 0 {
		t.Fatalf("temporary files left behind: %v", left)
	}
}

// TestEmptyReferenceLeftByACrashIsRepaired starts from what a daemon killed
// mid-write left before writes were atomic: an empty reference file in an
// agent's checkout. The next run's fetch removes it and writes it anew.
func TestEmptyReferenceLeftByACrashIsRepaired(t *testing.T) {
	t.Parallel()
	origin := bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	ws := prepare(t, w, "a1", p, task("first-task", "first"))
	ref := filepath.Join(ws.Dir, ".git", "refs", "remotes", "origin", "main")
	if err := os.WriteFile(ref, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tip := advance(t, origin, "other.txt", "moved")
	ws = prepare(t, w, "a1", p, task("second-task", "second"))
	if b, err := os.ReadFile(ref); err != nil || string(b) != tip+"\n" {
		t.Fatalf("%s holds %q (%v), want the origin's tip %s", ref, b, err, tip)
	}
	if ws.Base != tip {
		t.Fatalf("the run starts from %s, want the origin's tip %s", ws.Base, tip)
	}
}
