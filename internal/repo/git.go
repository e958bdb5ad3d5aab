package repo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/proc"
)

// Bounds of git commands.
const (
	gitTimeout   = 10 * time.Minute
	gitWaitDelay = 5 * time.Second
	// gitOutputCap bounds what is kept of a command's output (a status of
	// a tree full of untracked files); gitStderrCap of its error output.
	gitOutputCap = 16 << 20
	gitStderrCap = 64 << 10
)

// gitEnvPass lists the daemon's variables git may see: nothing secret, and
// no GIT_* variable that could point it at another repository.
var gitEnvPass = []string{"PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "LANG", "TZ", "SSH_AUTH_SOCK"}

// gitError is a git command that failed.
type gitError struct {
	args []string
	// code is git's exit status, -1 when it did not exit by itself.
	code   int
	stderr string
	err    error
}

// Error quotes the command and what git printed, without the credentials
// of any URL in them.
func (e *gitError) Error() string {
	return models.RedactURL(fmt.Sprintf("git %s: %v: %s", strings.Join(e.args, " "), e.err, e.stderr))
}

func (e *gitError) Unwrap() error { return e.err }

// exitCode is the exit status of the failed git command in err, or -1.
func exitCode(err error) int {
	var ge *gitError
	if errors.As(err, &ge) {
		return ge.code
	}
	return -1
}

// capped keeps the first max bytes written to it and counts the rest.
type capped struct {
	buf     bytes.Buffer
	max     int
	dropped int64
}

func (c *capped) Write(p []byte) (int, error) {
	n := len(p)
	if room := c.max - c.buf.Len(); room < len(p) {
		c.dropped += int64(len(p) - max(room, 0))
		p = p[:max(room, 0)]
	}
	c.buf.Write(p)
	return n, nil
}

// git runs git in dir and returns its output without surrounding space.
func (w *Workspaces) git(ctx context.Context, dir string, args ...string) (string, error) {
	out, _, err := w.gitRaw(ctx, dir, gitOutputCap, args...)
	return strings.TrimSpace(string(out)), err
}

// gitRaw runs git in dir with a fixed identity, no user or system
// configuration, hooks and fsmonitor off (an agent can write its checkout's
// .git, but nothing there runs with the daemon's rights), a scrubbed
// environment, a timeout, and its own process group. It returns at most
// limit bytes of the output and how many more there were.
func (w *Workspaces) gitRaw(ctx context.Context, dir string, limit int, args ...string) ([]byte, int64, error) {
	return w.gitRawEnv(ctx, dir, limit, nil, args...)
}

// gitRawEnv is gitRaw with extra environment variables (credentials given
// through environment-only configuration).
func (w *Workspaces) gitRawEnv(ctx context.Context, dir string, limit int, extra []string, args ...string) ([]byte, int64, error) {
	return w.gitRun(ctx, dir, limit, extra, nil, args...)
}

// gitMsg runs a git command that takes a message (commit, commit-tree)
// with the message on its standard input ("-F -" is appended to args):
// text a person or an agent wrote never becomes a command-line argument,
// where it could be taken for an option or exceed the system's limit on
// one argument's length.
func (w *Workspaces) gitMsg(ctx context.Context, dir, msg string, args ...string) (string, error) {
	out, _, err := w.gitRun(ctx, dir, gitOutputCap, nil, strings.NewReader(msg), append(args, "-F", "-")...)
	return strings.TrimSpace(string(out)), err
}

// gitRun runs git as gitRaw describes, with extra environment variables
// and stdin (nil: none) as its standard input.
func (w *Workspaces) gitRun(ctx context.Context, dir string, limit int, extra []string, stdin io.Reader, args ...string) ([]byte, int64, error) {
	if gitWrites(args) {
		if err := w.fenced(ctx); err != nil {
			return nil, 0, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	full := append([]string{"-c", "user.name=agentqueued", "-c", "user.email=agentqueued@localhost",
		"-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false", "-c", "init.defaultBranch=main",
		"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "protocol.ext.allow=never",
		"-c", "gc.autoDetach=false", "-c", "advice.detachedHead=false", "-c", "submodule.recurse=false"}, args...)
	if w.cfg.CAFile != "" {
		full = append([]string{"-c", "http.sslCAInfo=" + w.cfg.CAFile}, full...)
	}
	cmd := proc.Command(ctx, w.cfg.Git, full...)
	cmd.Dir = dir
	cmd.WaitDelay = gitWaitDelay
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); slices.Contains(gitEnvPass, k) || strings.HasPrefix(k, "LC_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(append(env, "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_EDITOR=true", "GIT_SSH_COMMAND=ssh -o BatchMode=yes -o ConnectTimeout=30"), extra...)
	out, errb := &capped{max: limit}, &capped{max: gitStderrCap}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, out, errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.buf.String())
		if msg == "" {
			msg = strings.TrimSpace(out.buf.String())
		}
		code := -1
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.Exited() {
			code = ee.ExitCode()
		}
		return out.buf.Bytes(), out.dropped, &gitError{args: args, code: code, stderr: msg, err: err}
	}
	return out.buf.Bytes(), out.dropped, nil
}

// gitReads are the git commands that change no repository a daemon
// shares: they pass without the lease's fence. merge-tree and write-tree
// only add objects, which are named by their content and harm nothing.
// Every other command is taken for a write.
var gitReads = map[string]bool{"status": true, "diff": true, "log": true, "show": true, "rev-parse": true,
	"rev-list": true, "merge-base": true, "ls-files": true, "ls-tree": true, "ls-remote": true, "for-each-ref": true,
	"show-ref": true, "cat-file": true, "fsck": true, "merge-tree": true, "write-tree": true, "version": true}

// gitWrites reports whether the git command args (the subcommand after
// any global options) may change a repository, a working tree or a ref:
// anything but a read of gitReads, `worktree list` and a symbolic-ref
// that names at most one ref (a read).
func gitWrites(args []string) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-c" || a == "-C":
			i++ // the option's value
			continue
		case strings.HasPrefix(a, "-"):
			continue
		}
		rest := args[i+1:]
		switch a {
		case "worktree":
			return len(rest) == 0 || rest[0] != "list"
		case "symbolic-ref":
			names := 0
			for _, r := range rest {
				if !strings.HasPrefix(r, "-") {
					names++
				}
			}
			return names > 1
		}
		return !gitReads[a]
	}
	return true
}

// fetch is the package's fetch behind the lease's fence: a fetch moves
// refs.
func (w *Workspaces) fetch(ctx context.Context, path, url string, tags bool, auth transport.AuthMethod, specs ...string) error {
	if err := w.fenced(ctx); err != nil {
		return err
	}
	return fetch(ctx, path, url, tags, auth, w.caBundle, specs...)
}

// nulList splits NUL-terminated output into its entries.
func nulList(out []byte) []string {
	var list []string
	for _, s := range strings.Split(string(out), "\x00") {
		if s != "" {
			list = append(list, s)
		}
	}
	return list
}

// sortedSet returns the distinct entries of list, sorted.
func sortedSet(list []string) []string {
	list = slices.Clone(list)
	slices.Sort(list)
	return slices.Compact(list)
}

// gitDirs returns the git directory of the working tree or bare repository
// at dir, and its common directory (which differs for a linked worktree).
// It reads the files git writes; it runs nothing.
func gitDirs(dir string) (gitDir, common string, err error) {
	dot := filepath.Join(dir, ".git")
	fi, err := os.Stat(dot)
	switch {
	case err == nil && fi.IsDir():
		gitDir = dot
	case err == nil:
		b, err := os.ReadFile(dot)
		if err != nil {
			return "", "", err
		}
		line, _, _ := strings.Cut(string(b), "\n")
		path, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
		if !ok {
			return "", "", fmt.Errorf("%s is not a git link", dot)
		}
		gitDir = strings.TrimSpace(path)
		if !filepath.IsAbs(gitDir) {
			gitDir = filepath.Join(dir, gitDir)
		}
	case errors.Is(err, os.ErrNotExist) && isFile(filepath.Join(dir, "HEAD")) && isDir(filepath.Join(dir, "objects")):
		gitDir = dir // bare
	default:
		return "", "", fmt.Errorf("%s is not a git repository", dir)
	}
	if !isDir(gitDir) {
		return "", "", fmt.Errorf("the git directory %s of %s is missing", gitDir, dir)
	}
	common = gitDir
	if b, err := os.ReadFile(filepath.Join(gitDir, "commondir")); err == nil {
		common = strings.TrimSpace(string(b))
		if !filepath.IsAbs(common) {
			common = filepath.Join(gitDir, common)
		}
	}
	return canonical(gitDir), canonical(common), nil
}

// repoOf is the repository a common git directory belongs to: the working
// tree holding a .git directory, or the bare repository itself.
func repoOf(common string) string {
	if filepath.Base(common) == ".git" {
		return filepath.Dir(common)
	}
	return common
}

// canonical is path made absolute and clean, symbolic links resolved when
// it exists.
func canonical(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	return filepath.Clean(path)
}

func isDir(p string) bool  { fi, err := os.Stat(p); return err == nil && fi.IsDir() }
func isFile(p string) bool { fi, err := os.Stat(p); return err == nil && !fi.IsDir() }
func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

// isLocal reports whether a repository address is a path on this machine
// (or a file:// URL) rather than a remote URL.
func isLocal(url string) bool {
	if strings.HasPrefix(url, "file://") {
		return true
	}
	if strings.Contains(url, "://") {
		return false
	}
	// scp-like syntax host:path has a colon before any slash.
	colon, slash := strings.IndexByte(url, ':'), strings.IndexByte(url, '/')
	return colon < 0 || (slash >= 0 && slash < colon)
}

// localPath is the directory of a local repository address.
func localPath(url string) string {
	return canonical(strings.TrimPrefix(url, "file://"))
}

// sameRepo reports whether two repository addresses name one repository:
// local paths are compared absolute with links resolved; a trailing slash,
// a .git suffix (a bare name or a working tree's .git) are ignored.
func sameRepo(a, b string) bool {
	norm := func(s string) string {
		s = strings.TrimSpace(s)
		if isLocal(s) {
			s = localPath(s)
		}
		s = strings.TrimSuffix(s, "/")
		s = strings.TrimSuffix(s, "/.git")
		return strings.TrimSuffix(s, ".git")
	}
	return norm(a) == norm(b)
}

// openRepo opens the repository at path with go-git: a working tree, a
// linked worktree (its refs are the common directory's) or a bare repository.
func openRepo(path string) (*git.Repository, error) {
	r, err := git.PlainOpenWithOptions(path, &git.PlainOpenOptions{EnableDotGitCommonDir: true})
	if err != nil {
		return nil, fmt.Errorf("open repository %s: %w", path, err)
	}
	return r, nil
}

// refHash resolves a reference; ok is false when it does not exist.
func refHash(r *git.Repository, name string) (h plumbing.Hash, ok bool, err error) {
	ref, err := r.Reference(plumbing.ReferenceName(name), true)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return plumbing.ZeroHash, false, nil
	}
	if err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("read %s: %w", name, err)
	}
	return ref.Hash(), true, nil
}

// currentBranch is the branch checked out in the repository ("" when HEAD
// is detached or unborn).
func currentBranch(r *git.Repository) string {
	ref, err := r.Reference(plumbing.HEAD, false)
	if err != nil || ref.Type() != plumbing.SymbolicReference || !ref.Target().IsBranch() {
		return ""
	}
	return ref.Target().Short()
}

// isAncestor reports whether commit a is b or one of its ancestors. A
// commit missing from the repository is no ancestor.
func isAncestor(r *git.Repository, a, b plumbing.Hash) (bool, error) {
	if a == b {
		return true, nil
	}
	ca, err := r.CommitObject(a)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	cb, err := r.CommitObject(b)
	if err != nil {
		return false, err
	}
	return ca.IsAncestor(cb)
}

// changedFiles lists the files head changes relative to its merge base
// with base (both sides of a rename), sorted: what `git diff base...head`
// shows.
func changedFiles(ctx context.Context, r *git.Repository, base, head plumbing.Hash) ([]string, error) {
	hc, err := r.CommitObject(head)
	if err != nil {
		return nil, err
	}
	bc, err := r.CommitObject(base)
	if err != nil {
		return nil, err
	}
	ht, err := hc.Tree()
	if err != nil {
		return nil, err
	}
	from := &object.Tree{} // unrelated histories: everything is new
	bases, err := bc.MergeBase(hc)
	if err != nil {
		return nil, err
	}
	if len(bases) > 0 {
		if from, err = bases[0].Tree(); err != nil {
			return nil, err
		}
	}
	changes, err := object.DiffTreeWithOptions(ctx, from, ht, &object.DiffTreeOptions{})
	if err != nil {
		return nil, err
	}
	var files []string
	for _, c := range changes {
		for _, name := range []string{c.From.Name, c.To.Name} {
			if name != "" {
				files = append(files, name)
			}
		}
	}
	return sortedSet(files), nil
}

// errNoRef is a fetch of a ref the source does not have.
var errNoRef = errors.New("no such ref")

// fetch fetches refspecs from url into the repository at path with go-git,
// writing references and packs atomically (see atomicStorage). For a local
// url go-git runs git-upload-pack there, which executes nothing a
// repository's own configuration or hooks name; and nothing of the
// receiving repository's configuration (which an agent can write in its
// checkout) steers the fetch, as an insteadOf or a proxy would steer the
// git command line's, credentials included. A missing source ref is errNoRef. Empty
// reference files in path, which an earlier daemon killed mid-write left,
// are removed and the fetch is tried again. ca, when set, holds PEM
// certificate authorities trusted for an https url besides the system's.
func fetch(ctx context.Context, path, url string, tags bool, auth transport.AuthMethod, ca []byte, specs ...string) error {
	err := fetchOnce(ctx, path, url, tags, auth, ca, specs...)
	if isEmptyRef(err) {
		if _, rerr := removeEmptyRefs(path); rerr != nil {
			return errors.Join(err, rerr)
		}
		err = fetchOnce(ctx, path, url, tags, auth, ca, specs...)
	}
	return err
}

func fetchOnce(ctx context.Context, path, url string, tags bool, auth transport.AuthMethod, ca []byte, specs ...string) error {
	r, err := openRepo(path)
	if err != nil {
		return err
	}
	st, err := withAtomicStorage(r, path)
	if err != nil {
		return err
	}
	if isLocal(url) {
		url = localPath(url)
	}
	rs := make([]config.RefSpec, len(specs))
	for i, s := range specs {
		rs[i] = config.RefSpec(s)
	}
	remote := git.NewRemote(st, &config.RemoteConfig{Name: "origin", URLs: []string{url}})
	mode := git.NoTags
	if tags {
		mode = git.TagFollowing
	}
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	err = remote.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", RefSpecs: rs, Tags: mode, Auth: auth, CABundle: ca})
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate):
		return nil
	case errors.Is(err, git.NoMatchingRefSpecError{}):
		return fmt.Errorf("fetch from %s: %w: %v", models.RedactURL(url), errNoRef, err)
	}
	return fmt.Errorf("fetch from %s: %w", models.RedactURL(url), err)
}
