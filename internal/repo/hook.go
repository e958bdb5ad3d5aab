package repo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// HookCheckout returns the project's checkout for hooks, at the tip of its
// default branch: BaseDir/hooks/<project>, a clone of the project's origin
// (the CLONE url, the LINK repository, the INIT origin) fetched, reset and
// cleaned before each use, so what a hook reads is the project's merged
// state and what a hook command leaves behind does not last. A project
// without a repository gets an empty directory. Runs of one project's
// hooks share the checkout one at a time: the caller holds it until done
// is called.
func (w *Workspaces) HookCheckout(ctx context.Context, p models.Project) (dir string, done func(), err error) {
	if err := checkRepoURL(p); err != nil {
		return "", nil, err
	}
	dir = filepath.Join(w.cfg.BaseDir, "hooks", p.ID)
	lock := w.lock("hooks:" + p.ID)
	lock.Lock()
	if p.Repo == nil {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			lock.Unlock()
			return "", nil, fmt.Errorf("hook checkout of project %s: %w", p.ID, err)
		}
		return dir, lock.Unlock, nil
	}
	if err := w.fenced(ctx); err != nil {
		lock.Unlock()
		return "", nil, fmt.Errorf("hook checkout of project %s: %w", p.ID, err)
	}
	err = w.refreshHookCheckout(ctx, p.Repo, dir)
	if err != nil {
		// A damaged hook checkout holds nothing to keep: it is cloned again.
		log := w.cfg.Logger.With("repo_id", p.Repo.ID, "project_id", p.ID, "op", "hook checkout")
		targets := append([]target{{dir, ownHook}}, w.originTargets(p.Repo)...)
		_, err = w.retryRepaired(ctx, log, p.Repo, err, targets, func() error {
			return w.refreshHookCheckout(ctx, p.Repo, dir)
		})
	}
	if err != nil {
		lock.Unlock()
		return "", nil, fmt.Errorf("hook checkout of project %s: %w", p.ID, err)
	}
	return dir, lock.Unlock, nil
}

func (w *Workspaces) refreshHookCheckout(ctx context.Context, r *models.RepoConfig, dir string) error {
	src, err := w.origin(ctx, r)
	if err != nil {
		return err
	}
	if !exists(filepath.Join(dir, ".git")) {
		if err := w.clone(ctx, src, dir); err != nil {
			return err
		}
	}
	// Hook commands may have written the checkout's git configuration (a
	// proxy for the fetch that carries credentials, a filter the daemon's
	// own checkout would run): it is written anew before git reads it.
	if err := os.WriteFile(filepath.Join(dir, ".git", "config"), []byte(hookGitConfig), 0o600); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(dir, ".git", "info", "attributes")); err != nil {
		return err
	}
	url := src
	if isLocal(url) {
		url = localPath(url)
	}
	ref := "refs/remotes/origin/" + r.DefaultBranch
	if _, _, err := w.gitRawEnv(ctx, dir, gitOutputCap, w.authEnv(url), "fetch", "-q", "--prune", "--", url,
		"+refs/heads/"+r.DefaultBranch+":"+ref); err != nil {
		return fmt.Errorf("fetch %s: %w", r.DefaultBranch, err)
	}
	for _, args := range [][]string{
		{"checkout", "-q", "--detach", "--force", ref},
		{"reset", "-q", "--hard", ref},
		{"clean", "-q", "-ffdx"},
	} {
		if _, err := w.git(ctx, dir, args...); err != nil {
			return err
		}
	}
	return nil
}

// hookGitConfig is the whole configuration of a hook checkout: fetches
// name their URL, so it needs no remote.
const hookGitConfig = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n"

// GitDiff returns `git diff base head` in dir, cut at limit bytes.
func (w *Workspaces) GitDiff(ctx context.Context, dir, base, head string, limit int) (string, bool, error) {
	for _, rev := range []string{base, head} {
		if rev == "" || strings.HasPrefix(rev, "-") {
			return "", false, models.Errorf(models.CodeInvalid, "git diff: %q is not a revision", rev)
		}
	}
	out, dropped, err := w.gitRaw(ctx, dir, limit, "diff", "--no-color", "--no-ext-diff", "--no-textconv", base, head, "--")
	if err != nil {
		return "", false, err
	}
	return string(out), dropped > 0, nil
}

// GitLog returns the commits of dir's HEAD since a time, newest first, one
// a line ("<short id> <author date> <author>: <subject>"), at most max of
// them, cut at limit bytes; and how many it lists.
func (w *Workspaces) GitLog(ctx context.Context, dir string, since time.Time, max, limit int) (string, int, bool, error) {
	out, dropped, err := w.gitRaw(ctx, dir, limit, "-c", "log.showSignature=false", "log", "--no-color", "--since="+since.UTC().Format(time.RFC3339),
		"--max-count="+strconv.Itoa(max), "--date=iso-strict", "--format=%h %ad %an: %s", "HEAD", "--")
	if err != nil {
		return "", 0, false, err
	}
	s := strings.TrimRight(string(out), "\n")
	n := 0
	if s != "" {
		n = strings.Count(s, "\n") + 1
	}
	return s, n, dropped > 0, nil
}
