package repo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Config configures Workspaces.
type Config struct {
	// BaseDir holds checkouts when a repo names no checkout_base_path, and
	// the working directories of agents whose project has no repo.
	BaseDir string
	// Git is the git executable; default "git".
	Git string
}

// Workspaces prepares agents' checkouts with the git command line.
type Workspaces struct {
	cfg Config
	// deliveries serialises deliveries to one repository: concurrent pushes
	// of its default branch would refuse each other.
	mu         sync.Mutex
	deliveries map[string]*sync.Mutex
}

// checkoutLock serialises Prepare and Deliver in one checkout: a task's
// delivery and the next task's preparation must not interleave.
func (w *Workspaces) checkoutLock(dir string) *sync.Mutex { return w.repoLock("checkout:" + dir) }

// Bounds of git commands.
const (
	gitTimeout   = 10 * time.Minute
	gitWaitDelay = 5 * time.Second
)

// deliverPushTries is how often a delivery is retried when another push
// moved the default branch between its fetch and its push.
const deliverPushTries = 3

func (w *Workspaces) repoLock(id string) *sync.Mutex {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.deliveries == nil {
		w.deliveries = map[string]*sync.Mutex{}
	}
	if w.deliveries[id] == nil {
		w.deliveries[id] = &sync.Mutex{}
	}
	return w.deliveries[id]
}

// New returns Workspaces; BaseDir is required.
func New(cfg Config) (*Workspaces, error) {
	if cfg.BaseDir == "" {
		return nil, errors.New("repo: Config.BaseDir is required")
	}
	if cfg.Git == "" {
		cfg.Git = "git"
	}
	return &Workspaces{cfg: cfg}, nil
}

var slugSpan = regexp.MustCompile(`[^a-z0-9]+`)

// BranchName is the task branch: aq/<task-id>-<slug of the title>.
func BranchName(t models.Task) string {
	slug := strings.Trim(slugSpan.ReplaceAllString(strings.ToLower(t.Title), "-"), "-")
	if len(slug) > 40 {
		slug = strings.TrimRight(slug[:40], "-")
	}
	if slug == "" {
		return "aq/" + t.ID
	}
	return "aq/" + t.ID + "-" + slug
}

// CheckoutPath is where an agent's checkout of a project's repo lives.
func (w *Workspaces) CheckoutPath(a models.Agent, p models.Project) string {
	if p.Repo == nil {
		return filepath.Join(w.cfg.BaseDir, "scratch", a.ID, p.ID)
	}
	base := p.Repo.CheckoutBasePath
	if base == "" {
		base = filepath.Join(w.cfg.BaseDir, "checkouts")
	}
	return filepath.Join(base, a.ID, p.Repo.ID)
}

// origin returns the repository agents clone from, creating it for INIT.
func (w *Workspaces) origin(ctx context.Context, r *models.RepoConfig) (string, error) {
	switch r.SourceType {
	case models.RepoClone:
		return r.URL, nil
	case models.RepoLink:
		return r.SourcePath, nil
	}
	dir := r.SourcePath
	if dir == "" {
		dir = filepath.Join(w.cfg.BaseDir, "origins", r.ID+".git")
	}
	lock := w.repoLock("origin:" + dir) // agents starting together create it once
	lock.Lock()
	defer lock.Unlock()
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err == nil {
		return dir, nil
	}
	seed, err := os.MkdirTemp("", "aq-init")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(seed)
	steps := [][]string{
		{"init", "-q", "-b", r.DefaultBranch, seed},
		{"-C", seed, "commit", "-q", "--allow-empty", "-m", "Initial commit"},
		{"clone", "-q", "--bare", seed, dir},
	}
	for _, s := range steps {
		if _, err := w.git(ctx, "", s...); err != nil {
			return "", fmt.Errorf("create repository %s: %w", dir, err)
		}
	}
	return dir, nil
}

// Prepare returns the agent's checkout on the task's branch.
func (w *Workspaces) Prepare(ctx context.Context, a models.Agent, p models.Project, t models.Task) (models.Workspace, error) {
	dir := w.CheckoutPath(a, p)
	lock := w.checkoutLock(dir)
	lock.Lock()
	defer lock.Unlock()
	if p.Repo == nil {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return models.Workspace{}, fmt.Errorf("prepare workspace: %w", err)
		}
		return models.Workspace{Dir: dir}, nil
	}
	src, err := w.origin(ctx, p.Repo)
	if err != nil {
		return models.Workspace{}, fmt.Errorf("prepare workspace: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".git")); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
			return models.Workspace{}, fmt.Errorf("prepare workspace: %w", err)
		}
		if _, err := w.git(ctx, "", "clone", "-q", "--", src, dir); err != nil {
			return models.Workspace{}, fmt.Errorf("prepare workspace: clone %s: %w", src, err)
		}
	}
	got, err := w.git(ctx, dir, "remote", "get-url", "origin")
	if err != nil {
		return models.Workspace{}, fmt.Errorf("prepare workspace: %w", err)
	}
	if !sameRepo(got, src) {
		return models.Workspace{}, models.Errorf(models.CodeConflict,
			"the checkout %s has origin %s, not the project's repository %s", dir, got, src)
	}
	// A git killed mid-write (a crash, a timeout) leaves lock files that
	// would refuse every later command; under the checkout lock no git of
	// ours runs here, and the agent's run has ended.
	for _, name := range []string{"index.lock", "HEAD.lock", "config.lock"} {
		if err := os.Remove(filepath.Join(dir, ".git", name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return models.Workspace{}, fmt.Errorf("prepare workspace: %w", err)
		}
	}
	branch := BranchName(t)
	def := p.Repo.DefaultBranch
	steps := [][]string{
		{"fetch", "-q", "--", src, "+refs/heads/*:refs/remotes/origin/*"},
		{"reset", "-q", "--hard"},
		{"clean", "-q", "-fdx"},
	}
	for _, s := range steps {
		if _, err := w.git(ctx, dir, s...); err != nil {
			return models.Workspace{}, fmt.Errorf("prepare workspace: %w", err)
		}
	}
	if _, err := w.git(ctx, dir, "rev-parse", "-q", "--verify", "refs/heads/"+branch); err == nil {
		_, err = w.git(ctx, dir, "checkout", "-q", branch)
		if err != nil {
			return models.Workspace{}, fmt.Errorf("prepare workspace: %w", err)
		}
	} else if _, err := w.git(ctx, dir, "checkout", "-q", "-B", branch, "origin/"+def); err != nil {
		return models.Workspace{}, fmt.Errorf("prepare workspace: %w", err)
	}
	return models.Workspace{Dir: dir, Branch: branch}, nil
}

// Deliver commits what the agent left uncommitted on the task branch and
// merges the branch into the default branch of origin.
func (w *Workspaces) Deliver(ctx context.Context, a models.Agent, p models.Project, t models.Task, ws models.Workspace) error {
	if p.Repo == nil {
		return nil
	}
	dir := ws.Dir
	if dir == "" {
		dir = w.CheckoutPath(a, p)
	}
	lock := w.checkoutLock(dir)
	lock.Lock()
	defer lock.Unlock()
	src, err := w.origin(ctx, p.Repo)
	if err != nil {
		return fmt.Errorf("deliver task %s: %w", t.ID, err)
	}
	branch, def := BranchName(t), p.Repo.DefaultBranch
	if _, err := w.git(ctx, dir, "rev-parse", "-q", "--verify", "refs/heads/"+branch); err != nil {
		return fmt.Errorf("deliver task %s: no branch %s in %s", t.ID, branch, dir)
	}
	// Leftover changes are the task's only while the checkout is still on
	// its branch (after a restart it may hold another task's work).
	if current, _ := w.git(ctx, dir, "branch", "--show-current"); current == branch {
		if status, err := w.git(ctx, dir, "status", "--porcelain"); err != nil {
			return fmt.Errorf("deliver task %s: %w", t.ID, err)
		} else if status != "" {
			for _, s := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", fmt.Sprintf("%s (%s)", t.Title, t.ID)}} {
				if _, err := w.git(ctx, dir, s...); err != nil {
					return fmt.Errorf("deliver task %s: commit leftover changes: %w", t.ID, err)
				}
			}
		}
	}
	if p.Repo.SourceType == models.RepoLink {
		// The user's repository is never merged into: the task branch is
		// pushed beside their branches for them to merge.
		if _, err := w.git(ctx, dir, "push", "-q", "--", src, "+refs/heads/"+branch+":refs/heads/"+branch); err != nil {
			return fmt.Errorf("deliver task %s: push %s to %s: %w", t.ID, branch, src, err)
		}
		return nil
	}
	repoLock := w.repoLock(p.Repo.ID)
	repoLock.Lock()
	defer repoLock.Unlock()
	var pushErr error
	for range deliverPushTries {
		if _, err := w.git(ctx, dir, "fetch", "-q", "--", src, "+refs/heads/*:refs/remotes/origin/*"); err != nil {
			return fmt.Errorf("deliver task %s: %w", t.ID, err)
		}
		if _, err := w.git(ctx, dir, "merge-base", "--is-ancestor", branch, "origin/"+def); err == nil {
			return nil // already delivered
		}
		if _, err := w.git(ctx, dir, "checkout", "-q", "-B", def, "origin/"+def); err != nil {
			return fmt.Errorf("deliver task %s: %w", t.ID, err)
		}
		if _, err := w.git(ctx, dir, "merge", "-q", "--no-ff", "-m", fmt.Sprintf("Merge %s: %s", t.ID, t.Title), branch); err != nil {
			w.git(ctx, dir, "merge", "--abort") //nolint:errcheck // best effort; Prepare resets anyway
			return models.Errorf(models.CodeConflict, "merging %s into %s failed: %s", branch, def, firstLine(err.Error()))
		}
		if _, pushErr = w.git(ctx, dir, "push", "-q", "--", src, def+":refs/heads/"+def); pushErr == nil {
			return nil
		}
		// Someone else moved the branch since the fetch: merge again on top.
	}
	return fmt.Errorf("deliver task %s: push %s: %w", t.ID, def, pushErr)
}

func sameRepo(a, b string) bool {
	norm := func(s string) string {
		s = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(s), "/"), ".git")
		if abs, err := filepath.Abs(s); err == nil && filepath.IsAbs(s) {
			s = abs
		}
		return s
	}
	return norm(a) == norm(b)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// gitEnvPass lists the daemon's variables git may see: nothing secret, and
// no GIT_* variable that could point it at another repository.
var gitEnvPass = []string{"PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "LANG", "TZ", "SSH_AUTH_SOCK"}

// git runs git in dir with a fixed identity, no user or system
// configuration, hooks and fsmonitor off (an agent can write its checkout's
// .git, but nothing there runs with the daemon's rights), a scrubbed
// environment, a timeout, and its own process group.
func (w *Workspaces) git(ctx context.Context, dir string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	full := append([]string{"-c", "user.name=agentqueued", "-c", "user.email=agentqueued@localhost",
		"-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main", "-c", "core.hooksPath=/dev/null",
		"-c", "core.fsmonitor=false", "-c", "protocol.ext.allow=never"}, args...)
	cmd := exec.CommandContext(ctx, w.cfg.Git, full...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = gitWaitDelay
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); slices.Contains(gitEnvPass, k) || strings.HasPrefix(k, "LC_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_SSH_COMMAND=ssh -o BatchMode=yes -o ConnectTimeout=30")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if msg == "" {
			msg = strings.TrimSpace(out.String())
		}
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, msg)
	}
	return strings.TrimSpace(out.String()), nil
}
