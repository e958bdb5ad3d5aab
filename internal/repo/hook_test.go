package repo_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

func TestHookCheckoutFollowsTheDefaultBranchAndForgetsLeftovers(t *testing.T) {
	t.Parallel()
	origin := bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{ID: "web", SourceType: models.RepoClone, URL: origin})
	dir, done, err := w.HookCheckout(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dir, "README")); got != "hello\n" {
		t.Fatalf("README %q", got)
	}
	// What a hook command leaves behind, and a change of a tracked file.
	write(t, dir, "leftover.txt", "x")
	write(t, dir, "README", "changed\n")
	done()

	head := advance(t, origin, "NEWS", "news\n")
	dir2, done2, err := w.HookCheckout(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	defer done2()
	if dir2 != dir {
		t.Fatalf("checkout moved from %s to %s", dir, dir2)
	}
	if _, err := os.Stat(filepath.Join(dir, "leftover.txt")); !os.IsNotExist(err) {
		t.Fatalf("leftover kept: %v", err)
	}
	if read(t, filepath.Join(dir, "README")) != "hello\n" || read(t, filepath.Join(dir, "NEWS")) != "news\n" {
		t.Fatal("the checkout is not the default branch's tip")
	}
	if got := git(t, dir, "rev-parse", "HEAD"); got != head {
		t.Fatalf("HEAD %s, want %s", got, head)
	}
	log, n, cut, err := w.GitLog(ctx, dir, time.Now().Add(-time.Hour), 10, 1<<20)
	if err != nil || n != 2 || cut || !strings.Contains(log, ": other work on NEWS") {
		t.Fatalf("log %d %v %v:\n%s", n, cut, err, log)
	}
	diff, cut, err := w.GitDiff(ctx, dir, "HEAD~1", "HEAD", 1<<20)
	if err != nil || cut || !strings.Contains(diff, "+news") {
		t.Fatalf("diff %v %v:\n%s", cut, err, diff)
	}
	if _, cut, _ := w.GitDiff(ctx, dir, "HEAD~1", "HEAD", 10); !cut {
		t.Fatal("a diff over the limit is not marked cut")
	}
	if _, _, err := w.GitDiff(ctx, dir, "--output=/tmp/x", "HEAD", 10); models.ErrorCodeOf(err) != models.CodeInvalid {
		t.Fatalf("an option as a revision: %v", err)
	}
}

func TestHookCheckoutOfAProjectWithoutRepository(t *testing.T) {
	t.Parallel()
	w, p := setup(t, nil)
	dir, done, err := w.HookCheckout(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Fatalf("%v %v", entries, err)
	}
}
