package repo_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

func TestStageConflictIsAConflictError(t *testing.T) {
	t.Parallel()
	origin := bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	t1, t2 := task("one-task", "one"), task("two-task", "two")
	ws1 := work(t, w, "a1", p, t1, map[string]string{"README": "from one\n", "a.txt": "a\n"})
	ws2 := work(t, w, "a2", p, t2, map[string]string{"README": "from two\n", "a.txt": "b\n", "b.txt": "fine\n"})
	stage(t, w, p, t1, ws1.Dir)
	deliver(t, w, p, t1, ws1.Dir)
	_, err := w.Stage(ctx, p, t2, ws2.Dir)
	wantMergeConflict(t, err, ws2.Branch, "README", "a.txt")
	_, err = w.Deliver(ctx, p, t2, ws2.Dir)
	wantMergeConflict(t, err, ws2.Branch, "README", "a.txt")
	if got := git(t, origin, "show", "main:README"); got != "from one" {
		t.Fatalf("main changed by a failed merge: %q", got)
	}
}

func TestStageWithoutChanges(t *testing.T) {
	t.Parallel()
	origin := bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	tk := task("idle-task", "nothing")
	ws := work(t, w, "a1", p, tk, nil)
	st := stage(t, w, p, tk, ws.Dir)
	if st.Diff != "" || len(st.Files) != 0 || read(t, filepath.Join(st.Dir, "README")) != "hello\n" {
		t.Fatalf("staged %+v", st)
	}
	main := git(t, origin, "rev-parse", "main")
	if d := deliver(t, w, p, tk, ws.Dir); !d.Merged || d.Commit != main || git(t, origin, "rev-parse", "main") != main {
		t.Fatalf("delivery of nothing %+v", d)
	}
}

func TestStageRecreatesTheVerificationCheckout(t *testing.T) {
	t.Parallel()
	origin := bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	tk := task("again-task", "again")
	ws := work(t, w, "a1", p, tk, map[string]string{"v.txt": "1\n"})
	st := stage(t, w, p, tk, ws.Dir)
	write(t, st.Dir, "left-by-checks.txt", "x") // a check's leftovers
	write(t, ws.Dir, "v.txt", "2\n")
	seal(t, w, p, tk, ws)
	st2 := stage(t, w, p, tk, ws.Dir)
	if st2.Dir != st.Dir || read(t, filepath.Join(st2.Dir, "v.txt")) != "2\n" {
		t.Fatalf("restaged %+v", st2)
	}
	if _, err := os.Stat(filepath.Join(st2.Dir, "left-by-checks.txt")); !os.IsNotExist(err) {
		t.Fatal("the verification checkout was not recreated")
	}
}

func TestStageTruncatesALargeDiff(t *testing.T) {
	t.Parallel()
	origin := bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	tk := task("big-task", "big")
	big := strings.Repeat("a line of text that is fairly long, to fill the diff quickly\n", 8000)
	ws := work(t, w, "a1", p, tk, map[string]string{"big.txt": big})
	st := stage(t, w, p, tk, ws.Dir)
	if len(st.Diff) > 201<<10 || !strings.Contains(st.Diff, "[diff truncated: ") || !slices.Equal(st.Files, []string{"big.txt"}) {
		t.Fatalf("diff of %d bytes, tail %q", len(st.Diff), st.Diff[max(0, len(st.Diff)-80):])
	}
}

func TestDeliverTwiceIsIdempotent(t *testing.T) {
	t.Parallel()
	origin := bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	tk := task("twice-task", "twice")
	ws := work(t, w, "a1", p, tk, map[string]string{"x.txt": "x\n"})
	stage(t, w, p, tk, ws.Dir)
	d1 := deliver(t, w, p, tk, ws.Dir)
	d2 := deliver(t, w, p, tk, ws.Dir)
	if !d1.Merged || d2 != d1 || git(t, origin, "rev-parse", "main") != d1.Commit {
		t.Fatalf("deliveries %+v %+v", d1, d2)
	}
	if git(t, origin, "rev-list", "--merges", "--count", "main") != "1" {
		t.Fatal("the branch was merged twice")
	}
	// The staged merge is what was delivered.
	if got := git(t, origin, "rev-parse", "main^2"); got != git(t, ws.Dir, "rev-parse", ws.Branch) {
		t.Fatalf("merge's second parent %s", got)
	}
}

func TestDeliverAfterOriginMoved(t *testing.T) {
	t.Parallel()
	origin := bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	tk := task("late-task", "late")
	ws := work(t, w, "a1", p, tk, map[string]string{"mine.txt": "mine\n"})
	stage(t, w, p, tk, ws.Dir)
	moved := advance(t, origin, "theirs.txt", "theirs\n")
	d := deliver(t, w, p, tk, ws.Dir)
	if !d.Merged || git(t, origin, "rev-parse", "main") != d.Commit || git(t, origin, "rev-parse", "main^1") != moved {
		t.Fatalf("delivery %+v on %s", d, moved)
	}
	if git(t, origin, "show", "main:mine.txt") != "mine" || git(t, origin, "show", "main:theirs.txt") != "theirs" {
		t.Fatal("a side's change is missing")
	}
}

func TestCleanupRemovesBranchesAndWorktrees(t *testing.T) {
	t.Parallel()
	origin := bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	tk := task("tidy-task", "tidy")
	ws := work(t, w, "a1", p, tk, map[string]string{"t.txt": "t\n"})
	st := stage(t, w, p, tk, ws.Dir)
	integ := filepath.Join(filepath.Dir(filepath.Dir(st.Dir)), "integration", "web.git")
	if !hasRef(t, integ, "refs/aq/staged/"+tk.ID) || !hasRef(t, integ, "refs/heads/"+ws.Branch) {
		t.Fatal("stage left no refs in the integration repository")
	}

	// Not merged: the verification checkout goes, the branch stays.
	if err := w.Cleanup(ctx, p, tk, ws.Dir, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(st.Dir); !os.IsNotExist(err) {
		t.Fatal("the verification checkout is left")
	}
	if hasRef(t, integ, "refs/aq/staged/"+tk.ID) || !hasRef(t, integ, "refs/heads/"+ws.Branch) || !hasRef(t, ws.Dir, "refs/heads/"+ws.Branch) {
		t.Fatal("cleanup without a merge removed the wrong refs")
	}
	if strings.Contains(git(t, integ, "worktree", "list"), st.Dir) {
		t.Fatal("the verification worktree is still registered")
	}

	stage(t, w, p, tk, ws.Dir)
	deliver(t, w, p, tk, ws.Dir)
	if err := w.Cleanup(ctx, p, tk, ws.Dir, true); err != nil {
		t.Fatal(err)
	}
	if hasRef(t, integ, "refs/heads/"+ws.Branch) || hasRef(t, ws.Dir, "refs/heads/"+ws.Branch) {
		t.Fatal("the merged branch is left")
	}
	if git(t, ws.Dir, "status", "--porcelain") != "" || git(t, ws.Dir, "rev-parse", "HEAD") != git(t, origin, "rev-parse", "main^2") {
		t.Fatal("the checkout was not left clean at the delivered work")
	}
	// Again, with everything gone, and with a checkout that is gone.
	if err := w.Cleanup(ctx, p, tk, ws.Dir, true); err != nil {
		t.Fatal(err)
	}
	if err := w.Cleanup(ctx, p, tk, filepath.Join(t.TempDir(), "gone"), true); err != nil {
		t.Fatal(err)
	}
}

func TestCleanupKeepsUndeliveredWork(t *testing.T) {
	t.Parallel()
	origin := bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	tk := task("more-task", "more")
	ws := work(t, w, "a1", p, tk, map[string]string{"t.txt": "t\n"})
	stage(t, w, p, tk, ws.Dir)
	deliver(t, w, p, tk, ws.Dir)
	git(t, ws.Dir, "commit", "-q", "--allow-empty", "-m", "after the delivery")
	if err := w.Cleanup(ctx, p, tk, ws.Dir, true); err != nil {
		t.Fatal(err)
	}
	if !hasRef(t, ws.Dir, "refs/heads/"+ws.Branch) {
		t.Fatal("cleanup deleted a branch with undelivered commits")
	}
}
