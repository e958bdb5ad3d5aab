package repo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/agentqueued/agentqueued/internal/models"
)

// maxDiff bounds Staged.Diff.
const maxDiff = 200 << 10

// deliverTries is how often Deliver merges again when the default branch
// moved between its fetch and its update.
const deliverTries = 3

func (w *Workspaces) integrationPath(r *models.RepoConfig) string {
	return filepath.Join(w.cfg.BaseDir, "integration", r.ID+".git")
}

func (w *Workspaces) verifyPath(t models.Task) string {
	return filepath.Join(w.cfg.BaseDir, "verify", t.ID)
}

// integration returns the repo's integration repository, a daemon-owned
// bare repository, creating it on first use. Call with the repo lock held.
func (w *Workspaces) integration(ctx context.Context, r *models.RepoConfig) (string, error) {
	dir := w.integrationPath(r)
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
		return "", fmt.Errorf("create integration repository: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	return dir, nil
}

// branchSource is the repository holding a task's branch: the user's for
// LINK, else the agent's checkout src.
func branchSource(r *models.RepoConfig, src string) (string, error) {
	if r.SourceType == models.RepoLink {
		return r.SourcePath, nil
	}
	if src == "" {
		return "", errors.New("no checkout to take the task branch from")
	}
	return src, nil
}

// tips fetches the origin's default branch (as refs/remotes/origin/<def>)
// and the task branch (as refs/heads/<branch>) into the integration
// repository and returns their commits. With keep, a task branch src no
// longer has is taken as the integration repository last saw it.
func (w *Workspaces) tips(ctx context.Context, r *models.RepoConfig, integ, origin, src, branch string, keep bool) (def, task plumbing.Hash, err error) {
	defSpec := "+refs/heads/" + r.DefaultBranch + ":refs/remotes/origin/" + r.DefaultBranch
	taskSpec := "+refs/heads/" + branch + ":refs/heads/" + branch
	from, err := branchSource(r, src)
	if err != nil {
		return def, task, err
	}
	if err := w.fetch(ctx, integ, origin, false, w.auth(origin), defSpec); errors.Is(err, errNoRef) {
		return def, task, models.Errorf(models.CodeConflict, "the repository %s has no branch %s", origin, r.DefaultBranch)
	} else if err != nil {
		return def, task, err
	}
	err = w.fetch(ctx, integ, from, false, w.auth(from), taskSpec)
	repo, oerr := openRepo(integ)
	if oerr != nil {
		return def, task, oerr
	}
	if errors.Is(err, errNoRef) {
		if _, ok, _ := refHash(repo, "refs/heads/"+branch); !ok || !keep {
			return def, task, models.Errorf(models.CodeNotFound, "the task branch %s is not in %s", branch, from)
		}
	} else if err != nil {
		return def, task, err
	}
	def, _, err = refHash(repo, "refs/remotes/origin/"+r.DefaultBranch)
	if err != nil {
		return def, task, err
	}
	task, _, err = refHash(repo, "refs/heads/"+branch)
	return def, task, err
}

// mergeCommit merges task into def in the integration repository without
// a working tree (merge-tree, commit-tree) and returns the merge commit; a
// conflict is a *models.ConflictError.
func (w *Workspaces) mergeCommit(ctx context.Context, integ, into, branch string, def, task plumbing.Hash, t models.Task) (plumbing.Hash, error) {
	out, _, err := w.gitRaw(ctx, integ, gitOutputCap, "merge-tree", "--write-tree", "--name-only", "--no-messages", "-z",
		def.String(), task.String())
	entries := nulList(out)
	if exitCode(err) == 1 {
		var files []string
		if len(entries) > 1 {
			files = sortedSet(entries[1:])
		}
		return plumbing.ZeroHash, &models.ConflictError{Branch: branch, Into: into, Files: files}
	}
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if len(entries) == 0 {
		return plumbing.ZeroHash, errors.New("git merge-tree wrote no tree")
	}
	commit, err := w.gitMsg(ctx, integ, mergeMessage(t, branch), "commit-tree", entries[0], "-p", def.String(), "-p", task.String())
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return plumbing.NewHash(commit), nil
}

// mergeMessage is the message of a task's merge commit.
func mergeMessage(t models.Task, branch string) string {
	return fmt.Sprintf("Merge %s: %s\n\nBranch %s.\n", t.ID, t.Title, branch)
}

// Stage merges the task branch (from the checkout src; for LINK from the
// user's repository) into the origin's current default branch in the
// integration repository, keeps the merge as refs/aq/staged/<task>, and
// checks it out in a detached verification worktree.
func (w *Workspaces) Stage(ctx context.Context, p models.Project, t models.Task, src string) (models.Staged, error) {
	if p.Repo == nil {
		return models.Staged{Dir: src}, nil
	}
	if !models.ValidTaskID(t.ID) {
		return models.Staged{}, models.Errorf(models.CodeInvalid, "stage: %q is not a task id", t.ID)
	}
	if err := checkRepoURL(p); err != nil {
		return models.Staged{}, err
	}
	r := p.Repo
	lock := w.repoLock(r)
	lock.Lock()
	defer lock.Unlock()
	if err := w.fenced(ctx); err != nil {
		return models.Staged{}, fmt.Errorf("stage task %s: %w", t.ID, err)
	}
	st, err := w.stage(ctx, r, t, src)
	if err != nil {
		_, err = w.retryRepaired(ctx, w.opLog(p, t, "stage"), r, err, w.repairTargets(r, src, false), func() (err error) {
			st, err = w.stage(ctx, r, t, src)
			return err
		})
	}
	if err != nil {
		return models.Staged{}, fmt.Errorf("stage task %s: %w", t.ID, err)
	}
	return st, nil
}

// opLog is the logger of an operation on a task's repository.
func (w *Workspaces) opLog(p models.Project, t models.Task, op string) *slog.Logger {
	return w.cfg.Logger.With("repo_id", p.Repo.ID, "project_id", p.ID, "task_id", t.ID, "op", op)
}

func (w *Workspaces) stage(ctx context.Context, r *models.RepoConfig, t models.Task, src string) (models.Staged, error) {
	branch := BranchName(t)
	origin, err := w.origin(ctx, r)
	if err != nil {
		return models.Staged{}, err
	}
	integ, err := w.integration(ctx, r)
	if err != nil {
		return models.Staged{}, err
	}
	def, task, err := w.tips(ctx, r, integ, origin, src, branch, false)
	if err != nil {
		return models.Staged{}, err
	}
	repo, err := openRepo(integ)
	if err != nil {
		return models.Staged{}, err
	}
	staged := def // a branch the default one contains changes nothing
	if in, err := isAncestor(repo, task, def); err != nil {
		return models.Staged{}, err
	} else if !in {
		if staged, err = w.mergeCommit(ctx, integ, r.DefaultBranch, branch, def, task, t); err != nil {
			return models.Staged{}, err
		}
	}
	if _, err := w.git(ctx, integ, "update-ref", "refs/aq/staged/"+t.ID, staged.String()); err != nil {
		return models.Staged{}, err
	}
	dir := w.verifyPath(t)
	if err := w.removeVerify(ctx, integ, dir); err != nil {
		return models.Staged{}, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return models.Staged{}, err
	}
	if _, err := w.worktreeGit(ctx, integ, "add", "-q", "-f", "--detach", dir, staged.String()); err != nil {
		return models.Staged{}, err
	}
	text, err := w.diff(ctx, integ, def.String()+"..."+task.String())
	if err != nil {
		return models.Staged{}, err
	}
	files, err := changedFiles(ctx, repo, def, task)
	if err != nil {
		return models.Staged{}, err
	}
	return models.Staged{Dir: dir, Diff: text, Files: files}, nil
}

// diff is the change of the commit range span ("def...task" for a task
// branch against the default branch, "parent..commit" for a landed
// commit), cut at maxDiff bytes (at a line end, saying how much was left
// out).
func (w *Workspaces) diff(ctx context.Context, integ, span string) (string, error) {
	diff, more, err := w.gitRaw(ctx, integ, maxDiff, "diff", "--no-color", "--no-ext-diff", "--no-textconv", span)
	if err != nil {
		return "", err
	}
	text := string(diff)
	if more > 0 {
		if i := strings.LastIndexByte(text, '\n'); i > 0 {
			more += int64(len(text) - i - 1)
			text = text[:i+1]
		}
		text += fmt.Sprintf("[diff truncated: %d more bytes not shown]\n", more)
	}
	return text, nil
}

// Diff returns the change of the task branch (from the checkout src; for
// LINK from the user's repository) against the origin's default branch.
func (w *Workspaces) Diff(ctx context.Context, p models.Project, t models.Task, src string) (string, error) {
	if p.Repo == nil {
		return "", models.Errorf(models.CodeInvalid, "task %s: project %s has no repository", t.ID, p.ID)
	}
	if err := checkRepoURL(p); err != nil {
		return "", err
	}
	r := p.Repo
	lock := w.repoLock(r)
	lock.Lock()
	defer lock.Unlock()
	text, err := w.diffTask(ctx, r, t, src)
	if err != nil {
		_, err = w.retryRepaired(ctx, w.opLog(p, t, "diff"), r, err, w.repairTargets(r, src, false), func() (err error) {
			text, err = w.diffTask(ctx, r, t, src)
			return err
		})
	}
	if err != nil {
		return "", fmt.Errorf("diff of task %s: %w", t.ID, err)
	}
	return text, nil
}

func (w *Workspaces) diffTask(ctx context.Context, r *models.RepoConfig, t models.Task, src string) (string, error) {
	origin, err := w.origin(ctx, r)
	if err != nil {
		return "", err
	}
	integ, err := w.integration(ctx, r)
	if err != nil {
		return "", err
	}
	def, task, err := w.tips(ctx, r, integ, origin, src, BranchName(t), true)
	if err != nil {
		return "", err
	}
	return w.diff(ctx, integ, def.String()+"..."+task.String())
}

// LandedDiff returns the change a landed task brought to the origin's
// default branch: the diff of the commit that landed it against that
// commit's first parent (`git diff M^1 M`), whether or not the task's
// branch still exists. The commit is looked for on the first-parent
// history of the default branch: the merge Deliver made ("Merge <task>:
// …"), or, for a task landed through pull request number pr (0 for none),
// GitHub's merge commit ("Merge pull request #N from …") or squashed
// commit ("… (#N)"). commit is "" when none is there: a branch the default
// branch already contained was not merged, and a pull request GitHub
// rebased leaves no commit that names it.
func (w *Workspaces) LandedDiff(ctx context.Context, p models.Project, t models.Task, pr int) (text, commit string, err error) {
	if p.Repo == nil {
		return "", "", models.Errorf(models.CodeInvalid, "task %s: project %s has no repository", t.ID, p.ID)
	}
	if !models.ValidTaskID(t.ID) {
		return "", "", models.Errorf(models.CodeInvalid, "landed diff: %q is not a task id", t.ID)
	}
	if err := checkRepoURL(p); err != nil {
		return "", "", err
	}
	r := p.Repo
	lock := w.repoLock(r)
	lock.Lock()
	defer lock.Unlock()
	text, commit, err = w.landedDiff(ctx, r, t, pr)
	if err != nil {
		_, err = w.retryRepaired(ctx, w.opLog(p, t, "landed diff"), r, err, w.repairTargets(r, "", false), func() (err error) {
			text, commit, err = w.landedDiff(ctx, r, t, pr)
			return err
		})
	}
	if err != nil {
		return "", "", fmt.Errorf("diff of landed task %s: %w", t.ID, err)
	}
	return text, commit, nil
}

func (w *Workspaces) landedDiff(ctx context.Context, r *models.RepoConfig, t models.Task, pr int) (text, commit string, err error) {
	origin, err := w.origin(ctx, r)
	if err != nil {
		return "", "", err
	}
	integ, err := w.integration(ctx, r)
	if err != nil {
		return "", "", err
	}
	defRef := "refs/remotes/origin/" + r.DefaultBranch
	err = w.fetch(ctx, integ, origin, false, w.auth(origin), "+refs/heads/"+r.DefaultBranch+":"+defRef)
	if errors.Is(err, errNoRef) {
		return "", "", models.Errorf(models.CodeConflict, "the repository %s has no branch %s", models.RedactURL(origin), r.DefaultBranch)
	} else if err != nil {
		return "", "", err
	}
	commit, err = w.landedCommit(ctx, integ, defRef, t.ID, pr)
	if err != nil || commit == "" {
		return "", "", err
	}
	text, err = w.diff(ctx, integ, commit+"^1.."+commit)
	return text, commit, err
}

// landedCommit finds, newest first on the first-parent history of ref,
// the commit that landed task id (see LandedDiff); "" when none did.
func (w *Workspaces) landedCommit(ctx context.Context, integ, ref, id string, pr int) (string, error) {
	// Each kind of commit: what git greps for, and what its subject and
	// number of parents must then be.
	type kind struct {
		grep    string
		match   func(subject string) bool
		parents int
	}
	kinds := []kind{{grep: "Merge " + id + ": ", parents: 2,
		match: func(s string) bool { return strings.HasPrefix(s, "Merge "+id+": ") }}}
	if pr > 0 {
		num := fmt.Sprintf("#%d", pr)
		kinds = append(kinds,
			kind{grep: "Merge pull request " + num + " from ", parents: 2,
				match: func(s string) bool { return strings.HasPrefix(s, "Merge pull request "+num+" from ") }},
			kind{grep: "(" + num + ")", parents: 1,
				match: func(s string) bool { return strings.HasSuffix(s, "("+num+")") }})
	}
	for _, k := range kinds {
		out, _, err := w.gitRaw(ctx, integ, gitOutputCap, "log", "--first-parent", "--fixed-strings",
			"--grep="+k.grep, "-z", "--format=%H %P%n%s", ref, "--")
		if err != nil {
			return "", err
		}
		for _, entry := range nulList(out) {
			hashes, subject, _ := strings.Cut(entry, "\n")
			fields := strings.Fields(hashes)
			if len(fields) == 1+k.parents && k.match(subject) {
				return fields[0], nil
			}
		}
	}
	return "", nil
}

// PushBranch pushes the task branch, as verified, to the project's
// repository URL, replacing the remote branch (a retried task's branch is
// rebased). The branch is taken from the checkout src (for LINK the user's
// repository) into the daemon's integration repository, and pushed from
// there with go-git: nothing an agent may write (its checkout's git
// configuration) steers where the credentials go. It returns the pushed
// commit, and whether the default branch already contains it (nothing to
// review).
func (w *Workspaces) PushBranch(ctx context.Context, p models.Project, t models.Task, src string) (commit string, contained bool, err error) {
	if p.Repo == nil || p.Repo.URL == "" {
		return "", false, models.Errorf(models.CodeInvalid, "project %s has no repository URL to push to", p.ID)
	}
	if err := checkRepoURL(p); err != nil {
		return "", false, err
	}
	r := p.Repo
	lock := w.repoLock(r)
	lock.Lock()
	defer lock.Unlock()
	if err := w.fenced(ctx); err != nil {
		return "", false, fmt.Errorf("push the branch of task %s: %w", t.ID, err)
	}
	commit, contained, err = w.pushBranch(ctx, r, t, src)
	if err != nil {
		_, err = w.retryRepaired(ctx, w.opLog(p, t, "push"), r, err, w.repairTargets(r, src, false), func() (err error) {
			commit, contained, err = w.pushBranch(ctx, r, t, src)
			return err
		})
	}
	if err != nil {
		return "", false, err
	}
	return commit, contained, nil
}

func (w *Workspaces) pushBranch(ctx context.Context, r *models.RepoConfig, t models.Task, src string) (commit string, contained bool, err error) {
	branch := BranchName(t)
	origin, err := w.origin(ctx, r)
	if err != nil {
		return "", false, err
	}
	integ, err := w.integration(ctx, r)
	if err != nil {
		return "", false, err
	}
	def, task, err := w.tips(ctx, r, integ, origin, src, branch, true)
	if err != nil {
		return "", false, err
	}
	repo, err := openRepo(integ)
	if err != nil {
		return "", false, err
	}
	if in, err := isAncestor(repo, task, def); err != nil {
		return "", false, err
	} else if in {
		return task.String(), true, nil
	}
	if err := w.fenced(ctx); err != nil {
		return "", false, err
	}
	remote := git.NewRemote(repo.Storer, &config.RemoteConfig{Name: "origin", URLs: []string{r.URL}})
	pctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	err = remote.PushContext(pctx, &git.PushOptions{RemoteName: "origin", Auth: w.auth(r.URL), CABundle: w.caBundle,
		RefSpecs: []config.RefSpec{config.RefSpec("+" + task.String() + ":refs/heads/" + branch)}})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return "", false, fmt.Errorf("push task branch %s: %w", branch, err)
	}
	return task.String(), false, nil
}

// removeVerify removes a verification worktree and its registration.
func (w *Workspaces) removeVerify(ctx context.Context, integ, dir string) error {
	if err := w.fenced(ctx); err != nil {
		return err
	}
	if exists(dir) {
		w.worktreeGit(ctx, integ, "remove", "-f", "-f", dir) //nolint:errcheck // removed below either way
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	_, err := w.worktreeGit(ctx, integ, "prune")
	return err
}

// Deliver merges the task branch into the origin's default branch. A
// branch the default branch already contains is delivered (Deliver may be
// repeated after a crash). A LINK repository's default branch checked out
// in a clean working tree is advanced with that tree (branch, index and
// files); one checked out with local changes is not touched: Deliver
// returns Delivery.Waiting, nothing merged, and is repeated once the user
// committed or stashed them.
func (w *Workspaces) Deliver(ctx context.Context, p models.Project, t models.Task, src string) (models.Delivery, error) {
	if p.Repo == nil {
		return models.Delivery{Merged: true, Note: "no repository"}, nil
	}
	if !models.ValidTaskID(t.ID) {
		return models.Delivery{}, models.Errorf(models.CodeInvalid, "deliver: %q is not a task id", t.ID)
	}
	if err := checkRepoURL(p); err != nil {
		return models.Delivery{}, err
	}
	r := p.Repo
	lock := w.repoLock(r)
	lock.Lock()
	defer lock.Unlock()
	if err := w.fenced(ctx); err != nil {
		return models.Delivery{}, fmt.Errorf("deliver task %s: %w", t.ID, err)
	}
	d, err := w.deliver(ctx, r, t, src)
	if err != nil {
		_, err = w.retryRepaired(ctx, w.opLog(p, t, "deliver"), r, err, w.repairTargets(r, src, false), func() (err error) {
			d, err = w.deliver(ctx, r, t, src)
			return err
		})
	}
	if err != nil {
		return models.Delivery{}, fmt.Errorf("deliver task %s: %w", t.ID, err)
	}
	return d, nil
}

func (w *Workspaces) deliver(ctx context.Context, r *models.RepoConfig, t models.Task, src string) (models.Delivery, error) {
	branch, into := BranchName(t), r.DefaultBranch
	origin, err := w.origin(ctx, r)
	if err != nil {
		return models.Delivery{}, err
	}
	integ, err := w.integration(ctx, r)
	if err != nil {
		return models.Delivery{}, err
	}
	deliverRef := "refs/aq/deliver/" + t.ID
	defer w.git(context.WithoutCancel(ctx), integ, "update-ref", "-d", deliverRef) //nolint:errcheck // a scratch ref
	for try := range deliverTries {
		def, task, err := w.tips(ctx, r, integ, origin, src, branch, true)
		if err != nil {
			return models.Delivery{}, err
		}
		repo, err := openRepo(integ)
		if err != nil {
			return models.Delivery{}, err
		}
		if in, err := isAncestor(repo, task, def); err != nil {
			return models.Delivery{}, err
		} else if in {
			return models.Delivery{Merged: true, Commit: def.String()}, nil
		}
		// A working tree on the default branch is advanced with it (LINK),
		// or the branch waits for it; git would leave it behind otherwise.
		var tree string
		if isLocal(origin) {
			var waiting string
			if tree, waiting, err = w.heldBy(ctx, r, origin, into); err != nil || waiting != "" {
				return models.Delivery{Waiting: waiting}, err
			}
		}
		// The verified merge is delivered when it still fits.
		merge := plumbing.ZeroHash
		if staged, ok, _ := refHash(repo, "refs/aq/staged/"+t.ID); ok {
			if c, err := repo.CommitObject(staged); err == nil && len(c.ParentHashes) == 2 &&
				c.ParentHashes[0] == def && c.ParentHashes[1] == task {
				merge = staged
			}
		}
		if merge.IsZero() {
			if merge, err = w.mergeCommit(ctx, integ, into, branch, def, task, t); err != nil {
				return models.Delivery{}, err
			}
		}
		if _, err := w.git(ctx, integ, "update-ref", deliverRef, merge.String()); err != nil {
			return models.Delivery{}, err
		}
		if w.beforePublish != nil {
			w.beforePublish(try)
		}
		var moved bool
		var waiting string
		switch {
		case tree != "":
			moved, waiting, err = w.advanceTree(ctx, integ, localPath(origin), tree, deliverRef, into, def, merge)
		case isLocal(origin):
			moved, err = w.publishLocal(ctx, integ, localPath(origin), deliverRef, into, branch, def, merge)
		default:
			if err = w.fenced(ctx); err == nil {
				moved, err = publishRemote(ctx, integ, origin, into, def, merge, w.auth(origin), w.caBundle)
			}
		}
		if err != nil || waiting != "" {
			return models.Delivery{Waiting: waiting}, err
		}
		if !moved {
			if _, err := w.git(ctx, integ, "update-ref", "refs/remotes/origin/"+into, merge.String()); err != nil {
				return models.Delivery{}, err
			}
			return models.Delivery{Merged: true, Commit: merge.String()}, nil
		}
		// Someone moved the default branch since the fetch: merge again.
	}
	return models.Delivery{}, models.Errorf(models.CodeConflict,
		"%s of %s kept moving: the merge of %s was retried %d times", into, origin, branch, deliverTries)
}

// publishLocal moves the default branch of the repository at target from
// old to merge: the objects are fetched into it from the integration
// repository and the branch is compare-and-swapped by git update-ref.
// Nothing is pushed, so no hook of the target runs. moved is true when the
// branch was no longer at old.
func (w *Workspaces) publishLocal(ctx context.Context, integ, target, ref, into, branch string, old, merge plumbing.Hash) (moved bool, err error) {
	if _, err := w.git(ctx, target, "fetch", "-q", "--no-tags", "--no-write-fetch-head", "--no-auto-maintenance",
		"--no-recurse-submodules", "--", integ, ref); err != nil {
		return false, err
	}
	_, err = w.git(ctx, target, "update-ref", "-m", "agentqueued: merge "+branch, "refs/heads/"+into, merge.String(), old.String())
	if err == nil {
		return false, nil
	}
	repo, oerr := openRepo(target)
	if oerr != nil {
		return false, errors.Join(err, oerr)
	}
	if now, _, rerr := refHash(repo, "refs/heads/"+into); rerr == nil && now != old {
		return true, nil
	}
	return false, err
}

// heldBy finds the working tree of the local repository origin (a path
// or a file:// URL) that has the branch into checked out (tree, "" when
// none has), and says why it keeps into from being moved now (waiting, ""
// when nothing does): into checked out in several working trees, or in
// one with local changes. A repository that is not LINK with into checked
// out cannot be moved at all: a conflict error.
func (w *Workspaces) heldBy(ctx context.Context, r *models.RepoConfig, origin, into string) (tree, waiting string, err error) {
	trees, err := w.checkedOut(ctx, localPath(origin), into)
	if err != nil {
		return "", "", err
	}
	if len(trees) > 0 && r.SourceType != models.RepoLink {
		return "", "", models.Errorf(models.CodeConflict,
			"%s of the origin %s is checked out in %s and cannot be moved: make the origin a bare repository",
			into, origin, trees[0])
	}
	switch len(trees) {
	case 0:
		return "", "", nil
	case 1:
	default:
		return "", fmt.Sprintf("%s is checked out in several working trees (%s): "+
			"nothing was merged; check it out in one only", into, strings.Join(trees, ", ")), nil
	}
	tree = trees[0]
	why, err := w.localChanges(ctx, tree)
	if err != nil || why == "" {
		return tree, "", err
	}
	return tree, fmt.Sprintf("%s is checked out in %s with %s: nothing of them "+
		"was touched and nothing was merged; commit or stash them", into, tree, why), nil
}

// LandingHeld says why a landing of project p would wait now: its LINK
// repository's default branch checked out in several working trees, or
// in one with local changes (the check Deliver makes, without fetching or
// merging anything: `git status` in the user's tree). "" when nothing
// holds it, and for a project whose repository is not LINK. Deliver
// checks again when it lands.
func (w *Workspaces) LandingHeld(ctx context.Context, p models.Project) (string, error) {
	if p.Repo == nil || p.Repo.SourceType != models.RepoLink {
		return "", nil
	}
	_, waiting, err := w.heldBy(ctx, p.Repo, p.Repo.SourcePath, p.Repo.DefaultBranch)
	if err != nil {
		return "", fmt.Errorf("check the working tree of project %s: %w", p.ID, err)
	}
	return waiting, nil
}

// checkedOut lists the working trees of the repository at repo that have
// branch checked out, or are rebasing it. A working tree whose directory
// is gone (removed without `git worktree remove`) has nothing to update.
func (w *Workspaces) checkedOut(ctx context.Context, repo, branch string) ([]string, error) {
	wts, err := w.worktrees(ctx, repo)
	if err != nil {
		return nil, err
	}
	ref := "refs/heads/" + branch
	var trees []string
	for _, wt := range wts {
		if !exists(wt.path) {
			continue
		}
		on := wt.branch == ref
		if !on && wt.branch == "" {
			if gitDir, _, err := gitDirs(wt.path); err == nil {
				for _, d := range []string{"rebase-merge", "rebase-apply"} {
					if b, err := os.ReadFile(filepath.Join(gitDir, d, "head-name")); err == nil && strings.TrimSpace(string(b)) == ref {
						on = true
					}
				}
			}
		}
		if on {
			trees = append(trees, wt.path)
		}
	}
	return trees, nil
}

// localChanges describes what in the working tree dir keeps the daemon
// from updating it: an operation in progress, or changes to tracked files
// in the index or the tree (up to five named). Untracked files do not
// count: git refuses an update that would overwrite one. "" when clean.
func (w *Workspaces) localChanges(ctx context.Context, dir string) (string, error) {
	gitDir, _, err := gitDirs(dir)
	if err != nil {
		return "", err
	}
	if op := inProgress(gitDir); op != "" {
		return "a " + op + " in progress", nil
	}
	out, _, err := w.gitRaw(ctx, dir, gitOutputCap, "--no-optional-locks", "status", "--porcelain=v1", "-z",
		"--untracked-files=no", "--ignore-submodules=none")
	if err != nil {
		return "", err
	}
	changed := nulList(out)
	if len(changed) == 0 {
		return "", nil
	}
	names := make([]string, 0, 5)
	for i := 0; i < len(changed) && len(names) < 5; i++ {
		c := changed[i]
		names = append(names, c[min(len(c), 3):])
		if c[0] == 'R' || c[0] == 'C' || c[1] == 'R' {
			i++ // the rename's source follows
		}
	}
	more := ""
	if len(changed) > len(names) {
		more = ", …"
	}
	return "local changes (" + strings.Join(names, ", ") + more + ")", nil
}

// advanceTree moves the default branch into, checked out in the user's
// working tree dir of the repository target, from old to merge as `git
// pull --ff-only` would: branch, index and files, by `git merge --ff-only`
// in that tree, which refuses to overwrite a change of the user's. The
// tree is first checked to be on into at old and clean. moved is true
// when the branch was no longer at old; waiting says why the tree could
// not be updated (nothing of it was changed).
func (w *Workspaces) advanceTree(ctx context.Context, integ, target, dir, ref, into string, old, merge plumbing.Hash) (moved bool, waiting string, err error) {
	if _, err := w.git(ctx, target, "fetch", "-q", "--no-tags", "--no-write-fetch-head", "--no-auto-maintenance",
		"--no-recurse-submodules", "--", integ, ref); err != nil {
		return false, "", err
	}
	if head, err := w.git(ctx, dir, "symbolic-ref", "-q", "HEAD"); err != nil || head != "refs/heads/"+into {
		return true, "", nil // switched meanwhile: look again
	}
	if at, err := w.git(ctx, dir, "rev-parse", "-q", "--verify", "HEAD^{commit}"); err != nil || at != old.String() {
		return true, "", nil
	}
	if why, err := w.localChanges(ctx, dir); err != nil || why != "" {
		return false, fmt.Sprintf("%s is checked out in %s with %s: nothing of them was touched and nothing "+
			"was merged; commit or stash them", into, dir, why), err
	}
	_, err = w.git(ctx, dir, "merge", "-q", "--ff-only", "--no-autostash", "--no-stat", merge.String())
	if err == nil {
		return false, "", nil
	}
	if at, rerr := w.git(ctx, dir, "rev-parse", "-q", "--verify", "refs/heads/"+into); rerr == nil && at != old.String() {
		return true, "", nil
	}
	var ge *gitError
	if errors.As(err, &ge) && ge.code > 0 {
		return false, fmt.Sprintf("%s is checked out in %s, which git could not bring up to date without "+
			"touching the user's files (%s): nothing was merged", into, dir, oneLine(ge.stderr)), nil
	}
	return false, "", err
}

// oneLine joins the lines of git's message.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// publishRemote pushes merge to the default branch of a remote origin with
// go-git, only while that branch is still at old. moved is true when it
// was not.
func publishRemote(ctx context.Context, integ, url, into string, old, merge plumbing.Hash, auth transport.AuthMethod,
	ca []byte) (moved bool, err error) {
	repo, err := openRepo(integ)
	if err != nil {
		return false, err
	}
	dst := "refs/heads/" + into
	remote := git.NewRemote(repo.Storer, &config.RemoteConfig{Name: "origin", URLs: []string{url}})
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	err = remote.PushContext(ctx, &git.PushOptions{
		RemoteName:        "origin",
		RefSpecs:          []config.RefSpec{config.RefSpec(merge.String() + ":" + dst)},
		RequireRemoteRefs: []config.RefSpec{config.RefSpec(old.String() + ":" + dst)},
		Auth:              auth,
		CABundle:          ca,
	})
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate):
		return false, nil
	case strings.Contains(err.Error(), "required to be"), errors.Is(err, git.ErrNonFastForwardUpdate):
		return true, nil
	}
	return false, fmt.Errorf("push to %s: %w", models.RedactURL(url), err)
}

// Cleanup removes what Stage made for a task (its verification worktree
// and refs/aq/staged/<task>) and, when the task was merged, its branch: in
// the integration repository, in the checkout src (detached first when it
// is a daemon checkout left clean on the branch) and, for LINK, in the
// user's repository when its default branch contains it. What is already
// gone is no error.
func (w *Workspaces) Cleanup(ctx context.Context, p models.Project, t models.Task, src string, merged bool) error {
	if p.Repo == nil {
		return nil
	}
	if !models.ValidTaskID(t.ID) {
		return models.Errorf(models.CodeInvalid, "cleanup: %q is not a task id", t.ID)
	}
	if err := checkRepoURL(p); err != nil {
		return err
	}
	r := p.Repo
	if src != "" {
		lock := w.checkoutLock(src)
		lock.Lock()
		defer lock.Unlock()
	}
	lock := w.repoLock(r)
	lock.Lock()
	defer lock.Unlock()
	if err := w.fenced(ctx); err != nil {
		return fmt.Errorf("clean up task %s: %w", t.ID, err)
	}
	err := w.cleanup(ctx, r, t, src, merged)
	if err != nil {
		_, err = w.retryRepaired(ctx, w.opLog(p, t, "cleanup"), r, err, w.repairTargets(r, src, false), func() error {
			return w.cleanup(ctx, r, t, src, merged)
		})
	}
	if err != nil {
		return fmt.Errorf("clean up task %s: %w", t.ID, err)
	}
	return nil
}

func (w *Workspaces) cleanup(ctx context.Context, r *models.RepoConfig, t models.Task, src string, merged bool) error {
	branch := BranchName(t)
	integ := w.integrationPath(r)
	verify := w.verifyPath(t)
	if !isFile(filepath.Join(integ, "HEAD")) {
		return os.RemoveAll(verify)
	}
	if err := w.removeVerify(ctx, integ, verify); err != nil {
		return err
	}
	refs := []string{"refs/aq/staged/" + t.ID, "refs/aq/deliver/" + t.ID}
	if merged {
		refs = append(refs, "refs/heads/"+branch)
	}
	// Integrated is the default branch as the integration repository
	// last saw it: a branch it contains is delivered.
	ir, err := openRepo(integ)
	if err != nil {
		return err
	}
	integrated, _, err := refHash(ir, "refs/remotes/origin/"+r.DefaultBranch)
	if err != nil {
		return err
	}
	for _, ref := range refs {
		if _, err := w.git(ctx, integ, "update-ref", "-d", ref); err != nil {
			return err
		}
	}
	if !merged {
		return nil
	}
	if r.SourceType == models.RepoLink {
		return w.deleteLinkBranch(ctx, r, src, branch)
	}
	if src == "" || !exists(filepath.Join(src, ".git")) {
		return nil
	}
	repo, err := openRepo(src)
	if err != nil {
		return err
	}
	tip, ok, err := refHash(repo, "refs/heads/"+branch)
	if err != nil || !ok {
		return err
	}
	// Only work that was delivered is deleted.
	if integrated.IsZero() {
		return nil
	}
	if in, err := isAncestor(ir, tip, integrated); err != nil || !in {
		return err
	}
	return w.deleteBranch(ctx, src, src, branch, true)
}

// deleteLinkBranch deletes a merged task branch in the user's repository
// once its default branch contains it.
func (w *Workspaces) deleteLinkBranch(ctx context.Context, r *models.RepoConfig, src, branch string) error {
	user := r.SourcePath
	repo, err := openRepo(user)
	if err != nil {
		return err
	}
	tip, ok, err := refHash(repo, "refs/heads/"+branch)
	if err != nil || !ok {
		return err
	}
	def, ok, err := refHash(repo, "refs/heads/"+r.DefaultBranch)
	if err != nil || !ok {
		return err
	}
	if in, err := isAncestor(repo, tip, def); err != nil || !in {
		return err
	}
	// The daemon's own worktree may be detached; the user's never is.
	ours := src != "" && !r.InPlace
	return w.deleteBranch(ctx, user, src, branch, ours)
}

// deleteBranch deletes branch in repo. Where it is checked out it stays,
// unless that is the daemon checkout src (detach true) left clean: that is
// detached first, and detachedRef names the commit it is detached at.
func (w *Workspaces) deleteBranch(ctx context.Context, repo, src, branch string, detach bool) error {
	wts, err := w.worktrees(ctx, repo)
	if err != nil {
		return err
	}
	for _, wt := range wts {
		if wt.branch != "refs/heads/"+branch {
			continue
		}
		if !detach || src == "" || canonical(wt.path) != canonical(src) {
			return nil
		}
		if status, err := w.git(ctx, src, "status", "--porcelain"); err != nil || status != "" {
			return err
		}
		if _, err := w.git(ctx, src, "checkout", "-q", "--detach"); err != nil {
			return err
		}
		if _, err := w.git(ctx, src, "update-ref", detachedRef, "HEAD"); err != nil {
			return err
		}
	}
	_, err = w.git(ctx, repo, "branch", "-q", "-D", "--", branch)
	return err
}

// detachedRef names the commit a daemon checkout was left detached at once
// its task branch was deleted. go-git cannot fetch from a repository whose
// HEAD is a commit no ref points to (it cannot tell which ref HEAD is), and
// a checkout is fetched from later: the branch of another task of its
// agent, waiting for a person's approval or a slow verification, lives there.
const detachedRef = "refs/aq/detached"
