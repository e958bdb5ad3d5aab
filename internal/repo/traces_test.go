package repo_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/repo"
)

// worktreeList returns the paths `git worktree list` shows for the
// user's repository.
func worktreeList(t *testing.T, user string) string {
	t.Helper()
	return git(t, user, "worktree", "list", "--porcelain")
}

// TestRemoveCheckout: a removed agent's LINK worktree leaves the user's
// repository (directory and registration) when it is clean; one with
// changes is kept, with the reason; clones and in_place repositories are
// left alone.
func TestRemoveCheckout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// dirty, when set, is a file written into the checkout before the
		// removal.
		dirty    string
		removed  bool
		keptWhy  string
		inPlace  bool
		noAction bool
	}{
		{name: "clean", removed: true},
		{name: "untracked file", dirty: "notes.txt", keptWhy: "it has uncommitted changes (notes.txt)"},
		{name: "changed file", dirty: "README", keptWhy: "it has uncommitted changes (README)"},
		{name: "in place", inPlace: true, noAction: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			user := userRepo(t)
			w, p := setup(t, &models.RepoConfig{SourceType: models.RepoLink, SourcePath: user, InPlace: tt.inPlace})
			a := models.Agent{ID: "a1"}
			ws := work(t, w, a.ID, p, task("bold-orbit", "Add notes"), map[string]string{"NOTES": "x\n"})
			w.Release(ws)
			if tt.dirty != "" {
				write(t, ws.Dir, tt.dirty, "local\n")
			}
			kept, err := w.RemoveCheckout(ctx, a, p)
			if err != nil {
				t.Fatal(err)
			}
			_, statErr := os.Stat(ws.Dir)
			listed := strings.Contains(worktreeList(t, user), "worktree "+ws.Dir+"\n")
			switch {
			case tt.noAction:
				if kept != "" || statErr != nil {
					t.Errorf("in place: kept %q, the repository: %v", kept, statErr)
				}
			case tt.removed:
				if kept != "" || !os.IsNotExist(statErr) || listed {
					t.Errorf("kept %q; the directory: %v; still listed: %v", kept, statErr, listed)
				}
				if _, err := os.Stat(filepath.Dir(ws.Dir)); !os.IsNotExist(err) {
					t.Errorf("the agent's empty directory is left: %v", err)
				}
			default:
				if !strings.Contains(kept, "the checkout "+ws.Dir+" was kept: "+tt.keptWhy) || statErr != nil || !listed {
					t.Errorf("kept %q, want %q; the directory: %v; listed: %v", kept, tt.keptWhy, statErr, listed)
				}
			}
			// Again: nothing left to do is no error.
			if _, err := w.RemoveCheckout(ctx, a, p); err != nil {
				t.Errorf("a second removal: %v", err)
			}
		})
	}
}

// TestRemoveCheckoutLeavesClones: an agent's clone (CLONE) may hold work
// waiting to land: it is not removed.
func TestRemoveCheckoutLeavesClones(t *testing.T) {
	t.Parallel()
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: bareOrigin(t)})
	ws := prepare(t, w, "a1", p, task("bold-orbit", "x"))
	w.Release(ws)
	if kept, err := w.RemoveCheckout(ctx, models.Agent{ID: "a1"}, p); err != nil || kept != "" {
		t.Fatalf("RemoveCheckout = %q, %v", kept, err)
	}
	if _, err := os.Stat(ws.Dir); err != nil {
		t.Errorf("the clone is gone: %v", err)
	}
}

// TestRemoveTaskBranch: a deleted task's branch leaves the user's LINK
// repository when its work is in the default branch or its files are the
// default branch's; a branch with unlanded work, or checked out in the
// user's tree, is kept with the reason; a daemon checkout left clean on it
// is detached first.
func TestRemoveTaskBranch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// arrange brings the branch of tk (worked on in ws) into the state
		// the case tests.
		arrange func(t *testing.T, user string, w *repo.Workspaces, p models.Project, tk models.Task, ws models.Workspace)
		keptWhy string
	}{
		{"landed", func(t *testing.T, user string, w *repo.Workspaces, p models.Project, tk models.Task, ws models.Workspace) {
			git(t, user, "merge", "-q", "--no-ff", "-m", "land", repo.BranchName(tk))
		}, ""},
		{"no work of its own", func(t *testing.T, user string, w *repo.Workspaces, p models.Project, tk models.Task, ws models.Workspace) {
			git(t, ws.Dir, "reset", "-q", "--hard", "main")
		}, ""},
		{"the same files by another way", func(t *testing.T, user string, w *repo.Workspaces, p models.Project, tk models.Task, ws models.Workspace) {
			write(t, user, "NOTES", "x\n")
			git(t, user, "add", "NOTES")
			git(t, user, "commit", "-q", "-m", "the same by hand")
		}, ""},
		{"unlanded work", func(t *testing.T, user string, w *repo.Workspaces, p models.Project, tk models.Task, ws models.Workspace) {
		}, "it has 1 commit(s) that main does not contain"},
		{"checked out in the user's tree", func(t *testing.T, user string, w *repo.Workspaces, p models.Project, tk models.Task, ws models.Workspace) {
			git(t, user, "merge", "-q", "--no-ff", "-m", "land", repo.BranchName(tk))
			git(t, ws.Dir, "checkout", "-q", "--detach")
			git(t, user, "checkout", "-q", repo.BranchName(tk))
		}, "it is checked out in " + "USER"},
		{"a daemon checkout with changes on it", func(t *testing.T, user string, w *repo.Workspaces, p models.Project, tk models.Task, ws models.Workspace) {
			git(t, user, "merge", "-q", "--no-ff", "-m", "land", repo.BranchName(tk))
			write(t, ws.Dir, "scratch", "y\n")
		}, "which has uncommitted changes (scratch)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			user := userRepo(t)
			w, p := setup(t, &models.RepoConfig{SourceType: models.RepoLink, SourcePath: user})
			tk := task("bold-orbit", "Add notes")
			ws := work(t, w, "a1", p, tk, map[string]string{"NOTES": "x\n"})
			w.Release(ws)
			tt.arrange(t, user, w, p, tk, ws)
			kept, err := w.RemoveTaskBranch(ctx, p, tk)
			if err != nil {
				t.Fatal(err)
			}
			branch := repo.BranchName(tk)
			exists := hasRef(t, user, "refs/heads/"+branch)
			if tt.keptWhy == "" {
				if kept != "" || exists {
					t.Fatalf("kept %q; the branch still exists: %v", kept, exists)
				}
				if head := git(t, ws.Dir, "status", "--porcelain"); head != "" {
					t.Errorf("the detached checkout is not clean: %s", head)
				}
				return
			}
			want := strings.ReplaceAll(tt.keptWhy, "USER", user)
			if !strings.HasPrefix(kept, "the branch "+branch+" was kept: ") || !strings.Contains(kept, want) || !exists {
				t.Errorf("kept %q, want %q; the branch exists: %v", kept, want, exists)
			}
		})
	}
	t.Run("gone already", func(t *testing.T) {
		t.Parallel()
		w, p := setup(t, &models.RepoConfig{SourceType: models.RepoLink, SourcePath: userRepo(t)})
		if kept, err := w.RemoveTaskBranch(ctx, p, task("calm-river", "never ran")); kept != "" || err != nil {
			t.Errorf("RemoveTaskBranch = %q, %v", kept, err)
		}
	})
}
