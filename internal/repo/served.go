package repo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentqueued/agentqueued/internal/models"
)

// ServedPath is the repository the daemon serves to runners for r
// (docs/runners.md, "Git through the daemon"): the user's repository for
// LINK, else a daemon-owned bare repository, BaseDir/served/<repo id>.git,
// whose default branch follows the origin's and which holds the task
// branches runners push.
func (w *Workspaces) ServedPath(r *models.RepoConfig) string {
	if r.SourceType == models.RepoLink {
		return r.SourcePath
	}
	return filepath.Join(w.cfg.BaseDir, "served", r.ID+".git")
}

// Serve readies the served repository of a task's project for a run on a
// runner and returns the run's workspace as the daemon sees it: Dir is the
// served repository (the run's "checkout" for Stage, Diff and Deliver),
// Branch the task branch and Base the default branch's commit the runner
// starts from. For CLONE and INIT the served repository's default branch
// is first moved to the origin's, and a task branch that the integration
// repository holds in a newer version (an earlier attempt ran on one of
// the daemon's agents and was staged) is taken from there. A project
// without a repository gets an empty Workspace.
func (w *Workspaces) Serve(ctx context.Context, p models.Project, t models.Task) (models.Workspace, error) {
	if p.Repo == nil {
		return models.Workspace{}, nil
	}
	if !models.ValidTaskID(t.ID) {
		return models.Workspace{}, models.Errorf(models.CodeInvalid, "serve task %q: not a task id", t.ID)
	}
	if err := checkRepoURL(p); err != nil {
		return models.Workspace{}, err
	}
	r := p.Repo
	branch := BranchName(t)
	if r.SourceType == models.RepoLink {
		repo, err := openRepo(r.SourcePath)
		if err != nil {
			return models.Workspace{}, fmt.Errorf("serve task %s: %w", t.ID, err)
		}
		base, ok, err := refHash(repo, "refs/heads/"+r.DefaultBranch)
		if err != nil || !ok {
			return models.Workspace{}, errors.Join(err, models.Errorf(models.CodeConflict,
				"serve task %s: the repository %s has no branch %s", t.ID, r.SourcePath, r.DefaultBranch))
		}
		return models.Workspace{Dir: r.SourcePath, Branch: branch, DefaultBranch: r.DefaultBranch, Base: base.String()}, nil
	}
	lock := w.repoLock(r)
	lock.Lock()
	defer lock.Unlock()
	if err := w.fenced(ctx); err != nil {
		return models.Workspace{}, fmt.Errorf("serve task %s: %w", t.ID, err)
	}
	dir, err := w.served(ctx, r)
	if err != nil {
		return models.Workspace{}, fmt.Errorf("serve task %s: %w", t.ID, err)
	}
	origin, err := w.origin(ctx, r)
	if err != nil {
		return models.Workspace{}, fmt.Errorf("serve task %s: %w", t.ID, err)
	}
	defRef := "refs/heads/" + r.DefaultBranch
	if err := w.fetch(ctx, dir, origin, false, w.auth(origin), "+"+defRef+":"+defRef); errors.Is(err, errNoRef) {
		return models.Workspace{}, models.Errorf(models.CodeConflict, "serve task %s: the repository %s has no branch %s",
			t.ID, models.RedactURL(origin), r.DefaultBranch)
	} else if err != nil {
		return models.Workspace{}, fmt.Errorf("serve task %s: fetch the default branch: %w", t.ID, err)
	}
	if err := w.adoptInto(ctx, r, dir, branch); err != nil {
		return models.Workspace{}, fmt.Errorf("serve task %s: %w", t.ID, err)
	}
	repo, err := openRepo(dir)
	if err != nil {
		return models.Workspace{}, err
	}
	base, _, err := refHash(repo, defRef)
	if err != nil {
		return models.Workspace{}, err
	}
	return models.Workspace{Dir: dir, Branch: branch, DefaultBranch: r.DefaultBranch, Base: base.String()}, nil
}

// served returns r's served repository, creating it on first use: a bare
// repository borrowing the integration repository's objects. Call with the
// repo lock held.
func (w *Workspaces) served(ctx context.Context, r *models.RepoConfig) (string, error) {
	dir := w.ServedPath(r)
	if isFile(filepath.Join(dir, "HEAD")) {
		return dir, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+r.ID+".new-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if _, err := w.git(ctx, "", "init", "-q", "--bare", "-b", r.DefaultBranch, tmp); err != nil {
		return "", fmt.Errorf("create served repository: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	return dir, nil
}

// adoptInto moves the served repository's task branch to the integration
// repository's when that one is newer: it contains the served one, or the
// served repository has none.
func (w *Workspaces) adoptInto(ctx context.Context, r *models.RepoConfig, dir, branch string) error {
	integ := w.integrationPath(r)
	if !isFile(filepath.Join(integ, "HEAD")) {
		return nil
	}
	ir, err := openRepo(integ)
	if err != nil {
		return err
	}
	staged, ok, err := refHash(ir, "refs/heads/"+branch)
	if err != nil || !ok {
		return err
	}
	sr, err := openRepo(dir)
	if err != nil {
		return err
	}
	cur, ok, err := refHash(sr, "refs/heads/"+branch)
	if err != nil || (ok && cur == staged) {
		return err
	}
	if ok {
		if _, err := ir.CommitObject(cur); err != nil {
			return nil // the served branch has commits the staged one lacks: it is newer
		}
		if up, err := isAncestor(ir, cur, staged); err != nil || !up {
			return err
		}
	}
	return w.fetch(ctx, dir, integ, false, nil, "+refs/heads/"+branch+":refs/heads/"+branch)
}

// BranchFiles returns the files a task branch of the repository src
// changes relative to its merge base with the default branch there (the
// branch a runner pushed to the served repository). A branch src does not
// have is a CodeNotFound error.
func (w *Workspaces) BranchFiles(ctx context.Context, p models.Project, t models.Task, src string) ([]string, error) {
	if p.Repo == nil {
		return nil, nil
	}
	repo, err := openRepo(src)
	if err != nil {
		return nil, err
	}
	branch := BranchName(t)
	head, ok, err := refHash(repo, "refs/heads/"+branch)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, models.Errorf(models.CodeNotFound, "the task branch %s was not pushed", branch)
	}
	base, ok, err := refHash(repo, "refs/heads/"+p.Repo.DefaultBranch)
	if err != nil || !ok {
		return nil, errors.Join(err, fmt.Errorf("no branch %s in %s", p.Repo.DefaultBranch, src))
	}
	return changedFiles(ctx, repo, base, head)
}

// PushTask pushes the task branch of the checkout ws to the project's
// repository (forced: the branch is the task's alone), as a runner hands
// its run's work back to the daemon, and returns the commit pushed.
func (w *Workspaces) PushTask(ctx context.Context, p models.Project, ws models.Workspace) (string, error) {
	if p.Repo == nil || p.Repo.URL == "" {
		return "", models.Errorf(models.CodeInvalid, "project %s has no repository URL to push to", p.ID)
	}
	if ws.Dir == "" || ws.Branch == "" {
		return "", errors.New("push: the workspace names no checkout or branch")
	}
	lock := w.checkoutLock(ws.Dir)
	lock.Lock()
	defer lock.Unlock()
	if err := w.fenced(ctx); err != nil {
		return "", err
	}
	ref := "refs/heads/" + ws.Branch
	commit, err := w.git(ctx, ws.Dir, "rev-parse", "--verify", "-q", ref)
	if err != nil {
		return "", fmt.Errorf("push: no branch %s in %s", ws.Branch, ws.Dir)
	}
	if _, _, err := w.gitRawEnv(ctx, ws.Dir, gitOutputCap, w.authEnv(p.Repo.URL), "push", "-q", "--force", "--no-verify",
		"--", p.Repo.URL, ref+":"+ref); err != nil {
		return "", fmt.Errorf("push %s: %w", ws.Branch, err)
	}
	return commit, nil
}
