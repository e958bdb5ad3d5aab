package repo

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/agentqueued/agentqueued/internal/clock"
	"github.com/agentqueued/agentqueued/internal/models"
)

// Config configures Workspaces.
type Config struct {
	// BaseDir holds checkouts when a repo names no checkout_base_path, the
	// working directories of agents whose project has no repo, INIT
	// origins without a source_path, integration repositories and
	// verification checkouts.
	BaseDir string
	// Git is the git executable; default "git".
	Git string
	// Credentials, when set, returns the HTTP credentials of a remote URL
	// (a GitHub token). They travel in a header only: never on a command
	// line, in a URL or in a checkout's configuration.
	Credentials func(url string) (user, password string, ok bool)
	// Logger receives what the package repairs (a damaged repository
	// indexed again or rebuilt, a checkout set aside); default: discarded.
	Logger *slog.Logger
	// Clock names set-aside checkouts and rescue branches; nil:
	// clock.Real.
	Clock clock.Clock
	// Fence, when set, confirms that this daemon still holds the
	// database's lease immediately before each act that changes a
	// repository or a checkout: the start of every operation that may
	// (Prepare, Seal, Stage, Deliver, Cleanup, PushBranch, RemoveCheckout,
	// RemoveTaskBranch, HookCheckout, a repair), every git command that
	// writes, every fetch and push, and the removal or replacement of a
	// checkout. Its error refuses the act and is returned as is (see
	// models.Fenced): a daemon deposed by another must not touch the
	// checkouts and refs of the new owner's runs. Nil: every act is done.
	Fence func(ctx context.Context) error
	// CAFile, when set, is a PEM file of the certificate authorities
	// trusted for https remotes (a runner's daemon with a certificate of
	// its own authority). git is given it as http.sslCAInfo, which takes
	// the place of its own bundle: the file must hold the system's
	// authorities too (the runner writes such a file); go-git adds its
	// certificates to the system's. New reads it.
	CAFile string
	// AdoptRemote makes a clone's task branch follow its origin's (a
	// runner's checkouts, whose origin is the daemon's served repository):
	// Prepare takes the origin's task branch unless the checkout's own
	// contains it. Off, the integration repository's is adopted instead.
	AdoptRemote bool
}

// fenced asks the Fence, when there is one, whether the next act may be
// done.
func (w *Workspaces) fenced(ctx context.Context) error {
	if w.cfg.Fence == nil {
		return nil
	}
	return w.cfg.Fence(ctx)
}

// TokenCredentials returns Credentials that send token to the given hosts
// (host names, any port) over https only, as GitHub expects; plain http
// too when allowHTTP (a GitHub reached over http, as in tests).
func TokenCredentials(token string, allowHTTP bool, hosts ...string) func(url string) (string, string, bool) {
	return func(raw string) (string, string, bool) {
		u, err := url.Parse(raw)
		if err != nil || token == "" || (u.Scheme != "https" && !(allowHTTP && u.Scheme == "http")) {
			return "", "", false
		}
		return "x-access-token", token, slices.Contains(hosts, strings.ToLower(u.Hostname()))
	}
}

// checkRepoURL refuses to use the repository URL of a project when it
// carries credentials (a project stored by an older daemon, which accepted
// them): they would reach git's command line, where every local user can
// read them, and every error that quotes the URL. Nothing runs before it;
// the error shows the URL redacted and says what to do.
func checkRepoURL(p models.Project) error {
	if p.Repo == nil || models.CheckRepoURL("repo.url", p.Repo.URL) == nil {
		return nil
	}
	return models.Errorf(models.CodeInvalid, "project %s: its repo.url %s carries credentials, which the daemon "+
		"does not use: they would show in answers, logs and git's command line; set the project's repo.url to "+
		"the URL without them (PATCH /api/v1/projects/%s with \"repo\") — for GitHub set github.token, which the "+
		"daemon sends itself; for other hosts use an SSH URL (git@host:owner/repo.git) with an SSH key, or a git "+
		"credential helper", p.ID, models.RedactURL(p.Repo.URL), p.ID)
}

// authEnv is the environment that makes git send url's credentials.
func (w *Workspaces) authEnv(url string) []string {
	if w.cfg.Credentials == nil {
		return nil
	}
	user, pass, ok := w.cfg.Credentials(url)
	if !ok {
		return nil
	}
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	return []string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.extraHeader", "GIT_CONFIG_VALUE_0=Authorization: Basic " + auth}
}

// auth is url's credentials for go-git, or nil.
func (w *Workspaces) auth(url string) transport.AuthMethod {
	if w.cfg.Credentials == nil {
		return nil
	}
	user, pass, ok := w.cfg.Credentials(url)
	if !ok {
		return nil
	}
	return &githttp.BasicAuth{Username: user, Password: pass}
}

// Workspaces prepares agents' checkouts and merges their work.
type Workspaces struct {
	cfg Config
	// caBundle is the content of Config.CAFile, for go-git.
	caBundle []byte

	mu sync.Mutex
	// locks holds the mutexes of checkouts ("checkout:<dir>"), of repos'
	// integration repositories ("repo:<id>") and of INIT origins
	// ("origin:<dir>"), and of repositories' worktree registries
	// ("worktrees:<dir>", a leaf). Lock order: checkout, then repo, then
	// origin, then worktrees.
	locks map[string]*sync.Mutex
	// inPlace holds the LINK directories an in_place workspace uses until
	// it is released.
	inPlace map[string]bool

	// beforePublish, set by tests, runs before each attempt of Deliver to
	// move the origin's default branch.
	beforePublish func(try int)
}

// New returns Workspaces; BaseDir is required.
func New(cfg Config) (*Workspaces, error) {
	if cfg.BaseDir == "" {
		return nil, errors.New("repo: Config.BaseDir is required")
	}
	if cfg.Git == "" {
		cfg.Git = "git"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Clock = clock.Or(cfg.Clock)
	w := &Workspaces{cfg: cfg, locks: map[string]*sync.Mutex{}, inPlace: map[string]bool{}}
	if cfg.CAFile != "" {
		ca, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("repo: the certificate authorities: %w", err)
		}
		w.caBundle = ca
	}
	return w, nil
}

func (w *Workspaces) lock(key string) *sync.Mutex {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.locks[key] == nil {
		w.locks[key] = &sync.Mutex{}
	}
	return w.locks[key]
}

// checkoutLock serialises Prepare, Seal and Cleanup of one checkout.
func (w *Workspaces) checkoutLock(dir string) *sync.Mutex {
	return w.lock("checkout:" + filepath.Clean(dir))
}

// repoLock serialises Stage, Deliver and every use of a repo's
// integration repository.
func (w *Workspaces) repoLock(r *models.RepoConfig) *sync.Mutex { return w.lock("repo:" + r.ID) }

// worktreeGit runs a `git worktree` command in repo under the lock of the
// repository's worktree registry (.git/worktrees). git does not lock it:
// `worktree list` reading an entry that a concurrent `worktree add` is
// still writing fails ("failed to read .git/worktrees/<name>/commondir"),
// and concurrent adds race. The lock is a leaf: nothing is taken while it
// is held.
func (w *Workspaces) worktreeGit(ctx context.Context, repo string, args ...string) ([]byte, error) {
	l := w.lock("worktrees:" + canonical(repo))
	l.Lock()
	defer l.Unlock()
	out, _, err := w.gitRaw(ctx, repo, gitOutputCap, append([]string{"worktree"}, args...)...)
	return out, err
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

// CheckoutPath is where an agent's checkout of a project's repo lives: the
// LINK repository itself when it is used in place.
func (w *Workspaces) CheckoutPath(a models.Agent, p models.Project) string {
	if p.Repo == nil {
		return filepath.Join(w.cfg.BaseDir, "scratch", a.ID, p.ID)
	}
	if p.Repo.SourceType == models.RepoLink && p.Repo.InPlace {
		return filepath.Clean(p.Repo.SourcePath)
	}
	return filepath.Join(w.checkoutBase(p.Repo), a.ID, p.Repo.ID)
}

func (w *Workspaces) checkoutBase(r *models.RepoConfig) string {
	if r.CheckoutBasePath != "" {
		return r.CheckoutBasePath
	}
	return filepath.Join(w.cfg.BaseDir, "checkouts")
}

// origin returns the repository work is taken from and merged into: the
// CLONE url, the LINK directory, or the INIT bare repository (created with
// one empty commit on first use).
func (w *Workspaces) origin(ctx context.Context, r *models.RepoConfig) (string, error) {
	switch r.SourceType {
	case models.RepoClone:
		return r.URL, nil
	case models.RepoLink:
		return r.SourcePath, nil
	}
	dir := w.initOriginPath(r)
	lock := w.lock("origin:" + dir) // agents starting together create it once
	lock.Lock()
	defer lock.Unlock()
	if isFile(filepath.Join(dir, "HEAD")) {
		return dir, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return "", err
	}
	// Built beside its place and renamed: a crash leaves no half repository.
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".new-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	seed := filepath.Join(tmp, "seed")
	steps := [][]string{
		{"init", "-q", "-b", r.DefaultBranch, seed},
		{"-C", seed, "commit", "-q", "--allow-empty", "-m", "Initial commit"},
		{"clone", "-q", "--bare", seed, filepath.Join(tmp, "bare")},
	}
	for _, s := range steps {
		if _, err := w.git(ctx, "", s...); err != nil {
			return "", fmt.Errorf("create repository %s: %w", dir, err)
		}
	}
	if _, err := w.git(ctx, filepath.Join(tmp, "bare"), "remote", "remove", "origin"); err != nil {
		return "", fmt.Errorf("create repository %s: %w", dir, err)
	}
	if err := os.Rename(filepath.Join(tmp, "bare"), dir); err != nil {
		return "", fmt.Errorf("create repository %s: %w", dir, err)
	}
	return dir, nil
}

// initOriginPath is where an INIT repo's origin lives: source_path, else
// BaseDir/origins/<repo id>.git.
func (w *Workspaces) initOriginPath(r *models.RepoConfig) string {
	if r.SourcePath != "" {
		return r.SourcePath
	}
	return filepath.Join(w.cfg.BaseDir, "origins", r.ID+".git")
}

// baseRef is the ref of a checkout that holds the default branch: the
// remote-tracking branch of a clone, the user's own branch for LINK.
func baseRef(r *models.RepoConfig) string {
	if r.SourceType == models.RepoLink {
		return "refs/heads/" + r.DefaultBranch
	}
	return "refs/remotes/origin/" + r.DefaultBranch
}

// Prepare returns the agent's checkout on the task's branch.
func (w *Workspaces) Prepare(ctx context.Context, a models.Agent, p models.Project, t models.Task) (models.Workspace, error) {
	dir := w.CheckoutPath(a, p)
	if p.Repo == nil {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return models.Workspace{}, fmt.Errorf("prepare workspace: %w", err)
		}
		return models.Workspace{Dir: dir}, nil
	}
	if !models.ValidTaskID(t.ID) {
		return models.Workspace{}, models.Errorf(models.CodeInvalid, "prepare workspace: %q is not a task id", t.ID)
	}
	if err := checkRepoURL(p); err != nil {
		return models.Workspace{}, err
	}
	lock := w.checkoutLock(dir)
	lock.Lock()
	defer lock.Unlock()
	if err := w.fenced(ctx); err != nil {
		return models.Workspace{}, fmt.Errorf("prepare workspace %s for task %s: %w", dir, t.ID, err)
	}
	r := p.Repo
	ws, err := w.prepare(ctx, r, t, dir)
	if err != nil {
		// A damaged repository is repaired and the checkout prepared again.
		log := w.cfg.Logger.With("repo_id", r.ID, "project_id", p.ID, "task_id", t.ID, "agent", a.ID, "op", "prepare")
		repo := w.repoLock(r)
		repo.Lock()
		var rescued string
		rescued, err = w.retryRepaired(ctx, log, r, err, w.repairTargets(r, dir, true), func() (err error) {
			ws, err = w.prepare(ctx, r, t, dir)
			return err
		})
		repo.Unlock()
		if err == nil && ws.Rescued == "" {
			ws.Rescued = rescued
		}
	}
	if err != nil {
		return models.Workspace{}, fmt.Errorf("prepare workspace %s for task %s: %w", dir, t.ID, err)
	}
	return ws, nil
}

// prepare prepares the checkout dir as its repo's kind wants.
func (w *Workspaces) prepare(ctx context.Context, r *models.RepoConfig, t models.Task, dir string) (models.Workspace, error) {
	switch {
	case r.SourceType == models.RepoLink && r.InPlace:
		return w.prepareInPlace(ctx, r, t, dir)
	case r.SourceType == models.RepoLink:
		return w.prepareWorktree(ctx, r, t, dir)
	}
	return w.prepareClone(ctx, r, t, dir)
}

// prepareClone prepares a CLONE or INIT checkout: a clone of the origin.
func (w *Workspaces) prepareClone(ctx context.Context, r *models.RepoConfig, t models.Task, dir string) (models.Workspace, error) {
	src, err := w.origin(ctx, r)
	if err != nil {
		return models.Workspace{}, err
	}
	if !exists(filepath.Join(dir, ".git")) {
		if err := w.clone(ctx, src, dir); err != nil {
			return models.Workspace{}, err
		}
	}
	gitDir, common, err := gitDirs(dir)
	if err != nil {
		return models.Workspace{}, models.WrapError(models.CodeConflict, err,
			"the checkout %s is not a usable git checkout (%v); the project's repository is %s", dir, err, src)
	}
	if gitDir != common {
		return models.Workspace{}, models.Errorf(models.CodeConflict,
			"the checkout %s is a worktree of %s, not a clone of the project's repository %s",
			dir, repoOf(common), src)
	}
	if isFile(filepath.Join(gitDir, damagedMark)) {
		return models.Workspace{}, errDamagedMark
	}
	repo, err := openRepo(dir)
	if err != nil {
		return models.Workspace{}, err
	}
	got := "(no origin remote)"
	if rem, err := repo.Remote("origin"); err == nil && len(rem.Config().URLs) > 0 {
		got = rem.Config().URLs[0]
	}
	if bare := withoutUserinfo(got); bare != got && sameRepo(bare, src) {
		// An older daemon cloned with credentials in the URL, and git kept
		// them in the checkout's configuration, which its agents can read.
		if err := setOrigin(repo, src); err != nil {
			return models.Workspace{}, err
		}
		w.cfg.Logger.Warn("removed the credentials an older version left in a checkout's origin", "dir", dir, "repo_id", r.ID)
		got = src
	}
	got = models.RedactURL(got)
	if !sameRepo(got, src) {
		return models.Workspace{}, models.Errorf(models.CodeConflict,
			"the checkout %s has origin %s, not the project's repository %s", dir, got, src)
	}
	if err := removeStaleLocks(gitDir, true); err != nil {
		return models.Workspace{}, err
	}
	if err := w.fetch(ctx, dir, src, true, w.auth(src), "+refs/heads/*:refs/remotes/origin/*"); err != nil {
		return models.Workspace{}, err
	}
	rescued, err := w.rescue(ctx, dir, gitDir)
	if err != nil {
		return models.Workspace{}, err
	}
	if err := w.resetClean(ctx, dir); err != nil {
		return models.Workspace{}, err
	}
	// Detached, the checkout leaves every branch free to be moved.
	if _, err := w.git(ctx, dir, "checkout", "-q", "--detach"); err != nil {
		return models.Workspace{}, err
	}
	if repo, err = openRepo(dir); err != nil {
		return models.Workspace{}, err
	}
	base, ok, err := refHash(repo, baseRef(r))
	if err != nil {
		return models.Workspace{}, err
	}
	if !ok {
		return models.Workspace{}, models.Errorf(models.CodeConflict,
			"the repository %s has no branch %s", src, r.DefaultBranch)
	}
	branch := BranchName(t)
	if err := w.adoptStagedBranch(ctx, r, dir, branch); err != nil {
		return models.Workspace{}, err
	}
	conflicts, err := w.checkoutTask(ctx, dir, branch, base)
	if err != nil {
		return models.Workspace{}, err
	}
	// The clone's own default branch follows the origin's, for agents that
	// compare with it.
	if _, err := w.git(ctx, dir, "update-ref", "refs/heads/"+r.DefaultBranch, base.String()); err != nil {
		return models.Workspace{}, err
	}
	return models.Workspace{Dir: dir, Branch: branch, DefaultBranch: r.DefaultBranch, Base: base.String(),
		Conflicts: conflicts, Rescued: rescued}, nil
}

// withoutUserinfo returns a URL without its user information, or s
// itself when it has none or is not a URL with a scheme.
func withoutUserinfo(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	u.User = nil
	return u.String()
}

// setOrigin points the origin remote of repo at u.
func setOrigin(repo *git.Repository, u string) error {
	cfg, err := repo.Config()
	if err != nil {
		return fmt.Errorf("read the checkout's configuration: %w", err)
	}
	rc, ok := cfg.Remotes["origin"]
	if !ok {
		return errors.New("the checkout has no origin remote")
	}
	rc.URLs = []string{u}
	if err := repo.SetConfig(cfg); err != nil {
		return fmt.Errorf("write the checkout's configuration: %w", err)
	}
	return nil
}

// clone clones src to dir through a temporary sibling renamed into place:
// a crash leaves no half clone at dir.
// agentLitter is the info/exclude of the daemon's clones.
const agentLitter = "# written by agentqueued: files agent CLIs leave in a checkout\n.aider*\n"

func (w *Workspaces) clone(ctx context.Context, src, dir string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return models.Errorf(models.CodeConflict,
			"the checkout %s exists and is not a git checkout of the project's repository %s", dir, src)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".clone-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	url := src
	if isLocal(url) {
		url = localPath(url)
	}
	if _, _, err := w.gitRawEnv(ctx, "", gitOutputCap, w.authEnv(url), "clone", "-q", "--", url, tmp); err != nil {
		return fmt.Errorf("clone %s: %w", models.RedactURL(src), err)
	}
	// Files agent CLIs leave beside the work (aider's repo-map cache and
	// histories) are never committed with it.
	if err := os.WriteFile(filepath.Join(tmp, ".git", "info", "exclude"), []byte(agentLitter), 0o644); err != nil {
		return fmt.Errorf("clone %s: %w", models.RedactURL(src), err)
	}
	// The clone may have taken long: the lease is confirmed again before
	// the checkout's place is taken.
	if err := w.fenced(ctx); err != nil {
		return err
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.Rename(tmp, dir)
}

// adoptStagedBranch takes the task branch from the integration repository
// when it holds a newer version than the checkout (an earlier attempt ran
// on another agent and was staged): a retry continues that work. It only
// reads the integration repository (refs are replaced atomically), so it
// does not wait for the repo lock, which a slow push may hold.
func (w *Workspaces) adoptStagedBranch(ctx context.Context, r *models.RepoConfig, dir, branch string) error {
	if w.cfg.AdoptRemote {
		return w.adoptRemoteBranch(ctx, dir, branch)
	}
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
	cr, err := openRepo(dir)
	if err != nil {
		return err
	}
	local, ok, err := refHash(cr, "refs/heads/"+branch)
	if err != nil {
		return err
	}
	if ok {
		if local == staged {
			return nil
		}
		// Only a local branch the staged one contains is replaced.
		if _, err := cr.CommitObject(staged); err != nil {
			if err := w.fetch(ctx, dir, integ, false, nil, "+refs/heads/"+branch+":refs/aq/adopt"); err != nil {
				return err
			}
			defer w.git(ctx, dir, "update-ref", "-d", "refs/aq/adopt") //nolint:errcheck // a scratch ref
		}
		if cr, err = openRepo(dir); err != nil {
			return err
		}
		if up, err := isAncestor(cr, local, staged); err != nil || !up {
			return err
		}
		_, err := w.git(ctx, dir, "update-ref", "refs/heads/"+branch, staged.String(), local.String())
		return err
	}
	return w.fetch(ctx, dir, integ, false, nil, "refs/heads/"+branch+":refs/heads/"+branch)
}

// adoptRemoteBranch sets the checkout's task branch to its origin's
// (fetched as refs/remotes/origin/<branch>) unless the checkout's own
// already contains it.
func (w *Workspaces) adoptRemoteBranch(ctx context.Context, dir, branch string) error {
	cr, err := openRepo(dir)
	if err != nil {
		return err
	}
	remote, ok, err := refHash(cr, "refs/remotes/origin/"+branch)
	if err != nil || !ok {
		return err
	}
	local, ok, err := refHash(cr, "refs/heads/"+branch)
	if err != nil {
		return err
	}
	if ok {
		if in, err := isAncestor(cr, remote, local); err != nil || in {
			return err
		}
	}
	_, err = w.git(ctx, dir, "update-ref", "refs/heads/"+branch, remote.String())
	return err
}

// prepareWorktree prepares a LINK checkout: a worktree of the user's
// repository, sharing its refs, never its working tree.
func (w *Workspaces) prepareWorktree(ctx context.Context, r *models.RepoConfig, t models.Task, dir string) (models.Workspace, error) {
	user := r.SourcePath
	_, userCommon, err := gitDirs(user)
	if err != nil {
		return models.Workspace{}, models.WrapError(models.CodeConflict, err,
			"the project's repository %s is not a git repository: %v", user, err)
	}
	ur, err := openRepo(user)
	if err != nil {
		return models.Workspace{}, err
	}
	base, ok, err := refHash(ur, baseRef(r))
	if err != nil {
		return models.Workspace{}, err
	}
	if !ok {
		return models.Workspace{}, models.Errorf(models.CodeConflict,
			"the repository %s has no branch %s", user, r.DefaultBranch)
	}
	if !exists(filepath.Join(dir, ".git")) {
		if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
			return models.Workspace{}, models.Errorf(models.CodeConflict,
				"the checkout %s exists and is not a worktree of the project's repository %s", dir, user)
		}
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			return models.Workspace{}, err
		}
		if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
			return models.Workspace{}, err
		}
		// -f: a worktree of this path deleted without `git worktree
		// remove` is still registered.
		if _, err := w.worktreeGit(ctx, user, "add", "-q", "-f", "--detach", dir, base.String()); err != nil {
			return models.Workspace{}, err
		}
	}
	gitDir, common, err := gitDirs(dir)
	if err != nil {
		return models.Workspace{}, models.WrapError(models.CodeConflict, err,
			"the checkout %s is not a usable worktree (%v); the project's repository is %s", dir, err, user)
	}
	if common != userCommon {
		what := "a worktree of " + repoOf(common)
		if gitDir == common {
			what = "an independent clone"
			if repo, err := openRepo(dir); err == nil {
				if rem, err := repo.Remote("origin"); err == nil && len(rem.Config().URLs) > 0 {
					what += " of " + models.RedactURL(rem.Config().URLs[0])
				}
			}
		}
		return models.Workspace{}, models.Errorf(models.CodeConflict,
			"the checkout %s is %s, not a worktree of the project's repository %s", dir, what, user)
	}
	if err := removeStaleLocks(gitDir, false); err != nil {
		return models.Workspace{}, err
	}
	rescued, err := w.rescue(ctx, dir, gitDir)
	if err != nil {
		return models.Workspace{}, err
	}
	if err := w.resetClean(ctx, dir); err != nil {
		return models.Workspace{}, err
	}
	branch := BranchName(t)
	if err := w.freeBranch(ctx, r, user, dir, branch); err != nil {
		return models.Workspace{}, err
	}
	conflicts, err := w.checkoutTask(ctx, dir, branch, base)
	if err != nil {
		return models.Workspace{}, err
	}
	return models.Workspace{Dir: dir, Branch: branch, DefaultBranch: r.DefaultBranch, Base: base.String(),
		Conflicts: conflicts, Rescued: rescued}, nil
}

// freeBranch makes the task branch available to the worktree dir: git
// checks a branch out in one worktree only. Another agent's worktree left
// on it (its run ended) is detached at the same commit, its files kept; a
// branch checked out anywhere else (the user's) is refused.
func (w *Workspaces) freeBranch(ctx context.Context, r *models.RepoConfig, user, dir, branch string) error {
	wts, err := w.worktrees(ctx, user)
	if err != nil {
		return err
	}
	for _, wt := range wts {
		if wt.branch != "refs/heads/"+branch || canonical(wt.path) == canonical(dir) {
			continue
		}
		ours := filepath.Base(wt.path) == r.ID && canonical(filepath.Dir(filepath.Dir(wt.path))) == canonical(w.checkoutBase(r))
		if !ours {
			return models.Errorf(models.CodeConflict,
				"the task branch %s is checked out in %s: switch that working tree to another branch", branch, wt.path)
		}
		other := w.checkoutLock(wt.path)
		if !other.TryLock() {
			return models.Errorf(models.CodeConflict, "the task branch %s is checked out in %s, which is in use", branch, wt.path)
		}
		_, err := w.git(ctx, wt.path, "checkout", "-q", "--detach")
		other.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// worktree is an entry of `git worktree list --porcelain`.
type worktree struct{ path, branch string }

func (w *Workspaces) worktrees(ctx context.Context, repo string) ([]worktree, error) {
	out, err := w.worktreeGit(ctx, repo, "list", "--porcelain", "-z")
	if err != nil {
		return nil, err
	}
	var list []worktree
	for _, line := range strings.Split(string(out), "\x00") {
		if p, ok := strings.CutPrefix(line, "worktree "); ok {
			list = append(list, worktree{path: p})
		} else if b, ok := strings.CutPrefix(line, "branch "); ok && len(list) > 0 {
			list[len(list)-1].branch = b
		}
	}
	return list, nil
}

// prepareInPlace prepares the user's own LINK checkout for one run at a
// time; its uncommitted changes are the user's and refuse the run.
func (w *Workspaces) prepareInPlace(ctx context.Context, r *models.RepoConfig, t models.Task, dir string) (models.Workspace, error) {
	w.mu.Lock()
	busy := w.inPlace[dir]
	w.mu.Unlock()
	if busy {
		return models.Workspace{}, models.Errorf(models.CodeConflict,
			"the repository %s is in use by another run (in_place allows one at a time)", dir)
	}
	gitDir, _, err := gitDirs(dir)
	if err != nil {
		return models.Workspace{}, models.WrapError(models.CodeConflict, err,
			"the project's repository %s is not a git repository: %v", dir, err)
	}
	if gitDir == canonical(dir) {
		return models.Workspace{}, models.Errorf(models.CodeConflict,
			"the repository %s is bare: in_place needs a working tree", dir)
	}
	if op := inProgress(gitDir); op != "" {
		return models.Workspace{}, models.Errorf(models.CodeConflict,
			"the repository %s has a %s in progress; in_place never touches it: finish or abort it", dir, op)
	}
	out, _, err := w.gitRaw(ctx, dir, gitOutputCap, "status", "--porcelain", "-z")
	if err != nil {
		return models.Workspace{}, err
	}
	if changed := nulList(out); len(changed) > 0 {
		names := make([]string, 0, 5)
		for _, c := range changed[:min(len(changed), 5)] {
			names = append(names, strings.TrimSpace(c[min(len(c), 3):]))
		}
		more := ""
		if len(changed) > 5 {
			more = ", …"
		}
		return models.Workspace{}, models.Errorf(models.CodeConflict,
			"the repository %s has uncommitted changes (%s%s); in_place never touches them: commit or stash them",
			dir, strings.Join(names, ", "), more)
	}
	repo, err := openRepo(dir)
	if err != nil {
		return models.Workspace{}, err
	}
	base, ok, err := refHash(repo, baseRef(r))
	if err != nil {
		return models.Workspace{}, err
	}
	if !ok {
		return models.Workspace{}, models.Errorf(models.CodeConflict, "the repository %s has no branch %s", dir, r.DefaultBranch)
	}
	branch := BranchName(t)
	conflicts, err := w.checkoutTask(ctx, dir, branch, base)
	if err != nil {
		return models.Workspace{}, err
	}
	w.mu.Lock()
	w.inPlace[dir] = true
	w.mu.Unlock()
	return models.Workspace{Dir: dir, Branch: branch, DefaultBranch: r.DefaultBranch, Base: base.String(),
		Conflicts: conflicts}, nil
}

// Release ends a workspace's use of its checkout: an in_place repository
// may be prepared again. It does nothing for other checkouts.
func (w *Workspaces) Release(ws models.Workspace) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.inPlace, filepath.Clean(ws.Dir))
}

// checkoutTask checks the task branch out in the clean checkout dir: a new
// branch from base, or the existing one brought up to date with base by a
// rebase or, when the rebase conflicts, by a merge left uncommitted with
// its conflicts for the agent (returned, sorted).
func (w *Workspaces) checkoutTask(ctx context.Context, dir, branch string, base plumbing.Hash) ([]string, error) {
	repo, err := openRepo(dir)
	if err != nil {
		return nil, err
	}
	tip, ok, err := refHash(repo, "refs/heads/"+branch)
	if err != nil {
		return nil, err
	}
	if !ok {
		_, err := w.git(ctx, dir, "checkout", "-q", "--no-track", "-b", branch, base.String())
		return nil, err
	}
	if _, err := w.git(ctx, dir, "checkout", "-q", branch); err != nil {
		return nil, err
	}
	if up, err := isAncestor(repo, base, tip); err != nil || up {
		return nil, err
	}
	_, err = w.git(ctx, dir, "rebase", "-q", "--no-autostash", "--no-update-refs", base.String())
	if err == nil {
		return nil, nil
	}
	gitDir, _, derr := gitDirs(dir)
	if derr != nil {
		return nil, derr
	}
	if op := inProgress(gitDir); op != "rebase" {
		return nil, err // the rebase did not start
	}
	if _, err := w.git(ctx, dir, "rebase", "--abort"); err != nil {
		return nil, err
	}
	_, err = w.git(ctx, dir, "merge", "-q", "--no-ff", "--no-commit", base.String())
	if err != nil && exitCode(err) != 1 {
		return nil, err
	}
	out, _, cerr := w.gitRaw(ctx, dir, gitOutputCap, "diff", "--name-only", "--diff-filter=U", "-z")
	if cerr != nil {
		return nil, cerr
	}
	conflicts := sortedSet(nulList(out))
	if len(conflicts) == 0 {
		if err != nil {
			return nil, err
		}
		// The merge went through where the rebase did not: conclude it.
		if _, err := w.git(ctx, dir, "commit", "-q", "--no-edit"); err != nil {
			return nil, err
		}
	}
	return conflicts, nil
}

// inProgress names the operation in progress in a git directory, or "".
func inProgress(gitDir string) string {
	switch {
	case isFile(filepath.Join(gitDir, "rebase-apply", "applying")):
		return "am"
	case isDir(filepath.Join(gitDir, "rebase-merge")), isDir(filepath.Join(gitDir, "rebase-apply")):
		return "rebase"
	case isFile(filepath.Join(gitDir, "MERGE_HEAD")):
		return "merge"
	case isFile(filepath.Join(gitDir, "CHERRY_PICK_HEAD")):
		return "cherry-pick"
	case isFile(filepath.Join(gitDir, "REVERT_HEAD")):
		return "revert"
	}
	return ""
}

// removeStaleLocks removes the lock files a git killed mid-write leaves,
// which would refuse every later command. Under the checkout lock no git of
// ours runs in the checkout, and the agent's run has ended. In a worktree
// (shared false) the common directory is the user's and is left alone.
func removeStaleLocks(gitDir string, shared bool) error {
	names := []string{"index.lock", "HEAD.lock", "ORIG_HEAD.lock"}
	if shared {
		names = append(names, "config.lock", "packed-refs.lock", "shallow.lock")
	}
	for _, name := range names {
		if err := os.Remove(filepath.Join(gitDir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// rescue keeps what a killed run left in the daemon-owned checkout dir: an
// operation in progress is quit with its files kept, and uncommitted or
// untracked changes are committed on a new branch
// aq-rescue/<branch without aq/>-<UTC time>, whose name is returned ("" when
// the checkout was clean). The working tree itself is left as it was.
func (w *Workspaces) rescue(ctx context.Context, dir, gitDir string) (string, error) {
	repo, err := openRepo(dir)
	if err != nil {
		return "", err
	}
	branch := currentBranch(repo)
	op := inProgress(gitDir)
	if op == "rebase" {
		for _, d := range []string{"rebase-merge", "rebase-apply"} {
			if b, err := os.ReadFile(filepath.Join(gitDir, d, "head-name")); err == nil {
				branch = strings.TrimPrefix(strings.TrimSpace(string(b)), "refs/heads/")
			}
		}
	}
	if op != "" {
		if _, err := w.git(ctx, dir, op, "--quit"); err != nil {
			return "", err
		}
	}
	status, err := w.git(ctx, dir, "status", "--porcelain")
	if err != nil {
		return "", err
	}
	if status == "" && op != "rebase" {
		return "", nil
	}
	if _, err := w.git(ctx, dir, "add", "-A"); err != nil {
		return "", err
	}
	tree, err := w.git(ctx, dir, "write-tree")
	if err != nil {
		return "", err
	}
	from := branch
	if from == "" {
		from = "detached HEAD"
	}
	args := []string{"commit-tree", tree}
	if head, err := w.git(ctx, dir, "rev-parse", "-q", "--verify", "HEAD^{commit}"); err == nil {
		args = append(args, "-p", head)
	}
	commit, err := w.gitMsg(ctx, dir, "Rescued uncommitted changes of "+from+"\n", args...)
	if err != nil {
		return "", err
	}
	stem := strings.TrimPrefix(branch, "aq/")
	if stem == "" {
		stem = "detached"
	}
	stem = "aq-rescue/" + stem + "-" + w.cfg.Clock.Now().UTC().Format("20060102T150405")
	name := stem
	for i := 2; ; i++ {
		// An empty old value: created only when no such branch exists.
		_, err := w.git(ctx, dir, "update-ref", "refs/heads/"+name, commit, "")
		if err == nil {
			return name, nil
		}
		if i > 20 {
			return "", err
		}
		name = fmt.Sprintf("%s-%d", stem, i)
	}
}

// resetClean discards what is left in a daemon-owned checkout after
// rescue: changes to tracked files and untracked and ignored files.
func (w *Workspaces) resetClean(ctx context.Context, dir string) error {
	if _, err := w.git(ctx, dir, "reset", "-q", "--hard"); err != nil {
		return err
	}
	_, err := w.git(ctx, dir, "clean", "-q", "-ffdx")
	return err
}

// Seal ends a run in its checkout: it refuses while conflicts remain
// unresolved, commits what the agent left uncommitted (concluding a merge
// in progress), and returns the files the task branch changes relative to
// its merge base with the default branch, sorted.
func (w *Workspaces) Seal(ctx context.Context, p models.Project, t models.Task, ws models.Workspace) ([]string, error) {
	if p.Repo == nil {
		return nil, nil
	}
	if ws.Dir == "" || ws.Branch == "" {
		return nil, fmt.Errorf("seal task %s: the workspace names no checkout or branch", t.ID)
	}
	lock := w.checkoutLock(ws.Dir)
	lock.Lock()
	defer lock.Unlock()
	if err := w.fenced(ctx); err != nil {
		return nil, fmt.Errorf("seal task %s in %s: %w", t.ID, ws.Dir, err)
	}
	files, err := w.seal(ctx, p.Repo, t, ws)
	if err != nil {
		// The run's work is in the checkout's tree: a damaged clone is
		// mended in place only.
		log := w.cfg.Logger.With("repo_id", p.Repo.ID, "project_id", p.ID, "task_id", t.ID, "op", "seal")
		var targets []target
		if p.Repo.SourceType == models.RepoLink {
			targets = w.originTargets(p.Repo)
		} else {
			targets = []target{{ws.Dir, ownBusyCheckout}}
		}
		_, err = w.retryRepaired(ctx, log, p.Repo, err, targets, func() (err error) {
			files, err = w.seal(ctx, p.Repo, t, ws)
			return err
		})
	}
	if err != nil {
		return nil, fmt.Errorf("seal task %s in %s: %w", t.ID, ws.Dir, err)
	}
	return files, nil
}

func (w *Workspaces) seal(ctx context.Context, r *models.RepoConfig, t models.Task, ws models.Workspace) ([]string, error) {
	dir := ws.Dir
	gitDir, _, err := gitDirs(dir)
	if err != nil {
		return nil, err
	}
	repo, err := openRepo(dir)
	if err != nil {
		return nil, err
	}
	if cur := currentBranch(repo); cur != ws.Branch {
		if cur == "" {
			cur = "a detached HEAD"
			if op := inProgress(gitDir); op != "" {
				cur += " (a " + op + " in progress)"
			}
		}
		return nil, models.Errorf(models.CodeConflict, "the checkout %s is on %s, not on the task branch %s", dir, cur, ws.Branch)
	}
	out, _, err := w.gitRaw(ctx, dir, gitOutputCap, "diff", "--name-only", "--diff-filter=U", "-z")
	if err != nil {
		return nil, err
	}
	if unmerged := sortedSet(nulList(out)); len(unmerged) > 0 {
		return nil, models.Errorf(models.CodeConflict, "merge conflicts are unresolved in %s", strings.Join(unmerged, ", "))
	}
	var marked []string
	for _, f := range ws.Conflicts {
		if hasConflictMarkers(filepath.Join(dir, filepath.FromSlash(f))) {
			marked = append(marked, f)
		}
	}
	if len(marked) > 0 {
		return nil, models.Errorf(models.CodeConflict, "conflict markers remain in %s", strings.Join(sortedSet(marked), ", "))
	}
	status, err := w.git(ctx, dir, "status", "--porcelain")
	if err != nil {
		return nil, err
	}
	merging := isFile(filepath.Join(gitDir, "MERGE_HEAD"))
	if status != "" || merging {
		if _, err := w.git(ctx, dir, "add", "-A"); err != nil {
			return nil, err
		}
		_, err := w.git(ctx, dir, "diff", "--cached", "--quiet")
		staged := exitCode(err) == 1
		if err != nil && !staged {
			return nil, err
		}
		if staged || merging { // a merge in progress is concluded even without changes
			if _, err := w.gitMsg(ctx, dir, fmt.Sprintf("%s (%s)\n", t.Title, t.ID), "commit", "-q"); err != nil {
				return nil, err
			}
		}
	}
	if repo, err = openRepo(dir); err != nil {
		return nil, err
	}
	head, ok, err := refHash(repo, "refs/heads/"+ws.Branch)
	if err != nil || !ok {
		return nil, errors.Join(err, fmt.Errorf("no branch %s", ws.Branch))
	}
	base, ok, err := refHash(repo, baseRef(r))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("no %s in %s", baseRef(r), dir)
	}
	return changedFiles(ctx, repo, base, head)
}

// hasConflictMarkers reports whether a file has a line starting with a
// conflict marker ("<<<<<<< ", ">>>>>>> ") or a line that is the separator
// "=======". A file that is gone has none.
func hasConflictMarkers(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.HasPrefix(line, "<<<<<<< ") || strings.HasPrefix(line, ">>>>>>> ") || line == "=======" ||
			line == "<<<<<<<" || line == ">>>>>>>" {
			return true
		}
	}
	return false
}
