package repo_test

import (
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// A landed task's diff is its merge's change, after its branch was deleted
// and the default branch moved on.
func TestLandedDiffAfterTheBranchIsGone(t *testing.T) {
	t.Parallel()
	origin := bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	tk := task("landed-task", "landed")
	ws := work(t, w, "a1", p, tk, map[string]string{"mine.txt": "mine\n"})
	stage(t, w, p, tk, ws.Dir)
	advance(t, origin, "theirs.txt", "theirs\n") // the merge is a real one
	d := deliver(t, w, p, tk, ws.Dir)
	if err := w.Cleanup(ctx, p, tk, ws.Dir, true); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Diff(ctx, p, tk, ws.Dir); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("the branch diff of a deleted branch: %v", err)
	}
	// A task with an id that extends this one's lands later.
	other := task("landed-task-2", "other")
	ows := work(t, w, "a2", p, other, map[string]string{"other.txt": "other\n"})
	stage(t, w, p, other, ows.Dir)
	deliver(t, w, p, other, ows.Dir)
	advance(t, origin, "later.txt", "later\n")

	text, commit, err := w.LandedDiff(ctx, p, tk, 0)
	if err != nil {
		t.Fatal(err)
	}
	if commit != d.Commit {
		t.Fatalf("landed commit %q, want the merge %s", commit, d.Commit)
	}
	if want := git(t, origin, "diff", d.Commit+"^1", d.Commit); strings.TrimSpace(text) != want {
		t.Fatalf("landed diff\n%s\nwant\n%s", text, want)
	}
	if !strings.Contains(text, "+mine") || strings.Contains(text, "theirs") || strings.Contains(text, "other") {
		t.Fatalf("landed diff holds the wrong change:\n%s", text)
	}
}

// A pull request GitHub merged or squashed is found by its number; a task
// whose landing left no commit is not found.
func TestLandedDiffOfPullRequests(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		subject string
		merge   bool
		pr      int
		found   bool
	}{
		{name: "merge commit", subject: "Merge pull request #7 from someone/aq/pr-task-x", merge: true, pr: 7, found: true},
		{name: "squashed", subject: "Change things (#7)", pr: 7, found: true},
		{name: "another number", subject: "Change things (#70)", pr: 7},
		{name: "no pull request", subject: "Change things (#7)", pr: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			origin := bareOrigin(t)
			w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
			dir := t.TempDir()
			git(t, "", "clone", "-q", origin, dir)
			if tc.merge {
				git(t, dir, "checkout", "-q", "-b", "feature")
				write(t, dir, "pr.txt", "from the pull request\n")
				git(t, dir, "add", "-A")
				git(t, dir, "commit", "-q", "-m", "work")
				git(t, dir, "checkout", "-q", "main")
				write(t, dir, "main.txt", "meanwhile\n")
				git(t, dir, "add", "-A")
				git(t, dir, "commit", "-q", "-m", "meanwhile")
				git(t, dir, "merge", "-q", "--no-ff", "-m", tc.subject, "feature")
			} else {
				write(t, dir, "pr.txt", "from the pull request\n")
				git(t, dir, "add", "-A")
				git(t, dir, "commit", "-q", "-m", tc.subject)
			}
			landed := git(t, dir, "rev-parse", "HEAD")
			write(t, dir, "after.txt", "after\n")
			git(t, dir, "add", "-A")
			git(t, dir, "commit", "-q", "-m", "after")
			git(t, dir, "push", "-q", "origin", "HEAD:main")

			text, commit, err := w.LandedDiff(ctx, p, task("pr-task", "x"), tc.pr)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.found {
				if commit != "" || text != "" {
					t.Fatalf("found %s:\n%s", commit, text)
				}
				return
			}
			if commit != landed || !strings.Contains(text, "+from the pull request") ||
				strings.Contains(text, "meanwhile") || strings.Contains(text, "after") {
				t.Fatalf("landed %s (want %s):\n%s", commit, landed, text)
			}
		})
	}
}

func TestLandedDiffNeedsARepository(t *testing.T) {
	t.Parallel()
	w, _ := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: bareOrigin(t)})
	_, _, err := w.LandedDiff(ctx, models.Project{ID: "bare"}, task("t1", "x"), 0)
	if models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), "no repository") {
		t.Fatalf("err %v", err)
	}
}
