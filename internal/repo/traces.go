package repo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file removes what a LINK project leaves in the user's repository
// once nothing needs it: the worktree of an agent that was removed and the
// branch of a task that was deleted. Nothing that holds work not in the
// default branch is removed: it is kept, and the answer says why.

// RemoveCheckout removes agent a's checkout of project p's repository when
// it is a worktree of a LINK repository (`git worktree remove`), so that
// the user's `git worktree list` no longer shows it. A checkout with
// uncommitted or untracked changes, or a directory that is not a worktree
// of the repository, is kept: kept says so. Other checkouts (a clone in
// the data directory, an in_place repository, none) are left alone, and a
// checkout that is already gone is no error.
func (w *Workspaces) RemoveCheckout(ctx context.Context, a models.Agent, p models.Project) (kept string, err error) {
	r := p.Repo
	if r == nil || r.SourceType != models.RepoLink || r.InPlace || !models.ValidID(a.ID) {
		return "", nil
	}
	dir := w.CheckoutPath(a, p)
	if !exists(dir) {
		return "", nil
	}
	lock := w.checkoutLock(dir)
	lock.Lock()
	defer lock.Unlock()
	if err := w.fenced(ctx); err != nil {
		return "", fmt.Errorf("remove checkout %s: %w", dir, err)
	}
	user := r.SourcePath
	wts, err := w.worktrees(ctx, user)
	if err != nil {
		return "", fmt.Errorf("remove checkout %s: %w", dir, err)
	}
	registered := false
	for _, wt := range wts {
		registered = registered || canonical(wt.path) == canonical(dir)
	}
	if !registered {
		return fmt.Sprintf("the checkout %s was kept: it is not a worktree of %s", dir, user), nil
	}
	status, err := w.git(ctx, dir, "status", "--porcelain", "--untracked-files=all")
	if err != nil {
		return "", fmt.Errorf("remove checkout %s: %w", dir, err)
	}
	if status != "" {
		return fmt.Sprintf("the checkout %s was kept: it has uncommitted changes (%s); commit or discard them, then "+
			"`git worktree remove %s` in %s", dir, firstFiles(status), dir, user), nil
	}
	if _, err := w.worktreeGit(ctx, user, "remove", dir); err != nil {
		return "", fmt.Errorf("remove checkout %s: %w", dir, err)
	}
	_ = os.Remove(filepath.Dir(dir)) // the agent's directory, when it is empty now
	return "", nil
}

// RemoveTaskBranch deletes the branch of task t (BranchName) from the
// user's repository of LINK project p, as when the task was deleted. Only
// a branch the default branch contains, or whose files are the default
// branch's, is deleted; one with work that has not landed is kept, and so
// is one checked out in the user's own working tree or in a daemon
// checkout with changes: kept says why. A daemon checkout left clean on
// the branch is detached first. Other projects, and a branch that is
// already gone, are no error.
func (w *Workspaces) RemoveTaskBranch(ctx context.Context, p models.Project, t models.Task) (kept string, err error) {
	r := p.Repo
	if r == nil || r.SourceType != models.RepoLink || !models.ValidTaskID(t.ID) {
		return "", nil
	}
	branch := BranchName(t)
	user := r.SourcePath
	if err := w.fenced(ctx); err != nil {
		return "", fmt.Errorf("delete branch %s of task %s: %w", branch, t.ID, err)
	}
	kept, err = w.removeLinkBranch(ctx, r, user, branch)
	if err != nil {
		return "", fmt.Errorf("delete branch %s of task %s: %w", branch, t.ID, err)
	}
	return kept, nil
}

func (w *Workspaces) removeLinkBranch(ctx context.Context, r *models.RepoConfig, user, branch string) (string, error) {
	repo, err := openRepo(user)
	if err != nil {
		return "", err
	}
	tip, ok, err := refHash(repo, "refs/heads/"+branch)
	if err != nil || !ok {
		return "", err
	}
	def, ok, err := refHash(repo, "refs/heads/"+r.DefaultBranch)
	if err != nil {
		return "", err
	}
	if !ok {
		return fmt.Sprintf("the branch %s was kept: %s has no branch %s to tell whether its work landed",
			branch, user, r.DefaultBranch), nil
	}
	landed, err := isAncestor(repo, tip, def)
	if err != nil {
		return "", err
	}
	if !landed {
		same, err := sameTree(repo, tip, def)
		if err != nil {
			return "", err
		}
		if !same {
			n, err := w.git(ctx, user, "rev-list", "--count", def.String()+".."+tip.String())
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("the branch %s was kept: it has %s commit(s) that %s does not contain; "+
				"`git branch -D %s` deletes them", branch, n, r.DefaultBranch, branch), nil
		}
	}
	wts, err := w.worktrees(ctx, user)
	if err != nil {
		return "", err
	}
	for _, wt := range wts {
		if wt.branch != "refs/heads/"+branch {
			continue
		}
		ours := !r.InPlace && filepath.Base(wt.path) == r.ID &&
			canonical(filepath.Dir(filepath.Dir(wt.path))) == canonical(w.checkoutBase(r))
		if !ours {
			return fmt.Sprintf("the branch %s was kept: it is checked out in %s", branch, wt.path), nil
		}
		lock := w.checkoutLock(wt.path)
		if !lock.TryLock() {
			return fmt.Sprintf("the branch %s was kept: it is checked out in %s, which is in use", branch, wt.path), nil
		}
		status, err := w.git(ctx, wt.path, "status", "--porcelain")
		if err == nil && status == "" {
			_, err = w.git(ctx, wt.path, "checkout", "-q", "--detach")
		}
		lock.Unlock()
		if err != nil {
			return "", err
		}
		if status != "" {
			return fmt.Sprintf("the branch %s was kept: it is checked out in %s, which has uncommitted changes (%s)",
				branch, wt.path, firstFiles(status)), nil
		}
	}
	if _, err := w.git(ctx, user, "branch", "-q", "-D", "--", branch); err != nil {
		return "", err
	}
	return "", nil
}

// sameTree reports whether commits a and b have the same files.
func sameTree(r *git.Repository, a, b plumbing.Hash) (bool, error) {
	ca, err := r.CommitObject(a)
	if err != nil {
		return false, err
	}
	cb, err := r.CommitObject(b)
	if err != nil {
		return false, err
	}
	return ca.TreeHash == cb.TreeHash, nil
}

// firstFiles names up to five of the files of `git status --porcelain`
// output.
func firstFiles(status string) string {
	lines := strings.Split(strings.TrimSpace(status), "\n")
	var names []string
	for i, l := range lines {
		if i == 5 {
			names = append(names, fmt.Sprintf("and %d more", len(lines)-5))
			break
		}
		if _, name, ok := strings.Cut(strings.TrimSpace(l), " "); ok {
			names = append(names, strings.TrimSpace(name))
		}
	}
	return strings.Join(names, ", ")
}
