package repo

import (
	"context"
	"errors"
	"os"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// DefaultRemoteCheckTimeout bounds the `git ls-remote` of CheckSource when
// the caller gives no timeout.
const DefaultRemoteCheckTimeout = 20 * time.Second

// CheckSource checks that a project's repository can be used before the
// project is stored: a LINK source_path must be the top level of a git
// working tree or a bare repository, a CLONE url must answer `git
// ls-remote` within timeout (DefaultRemoteCheckTimeout when not positive),
// with the credentials clones would use. INIT needs nothing. The error is
// CodeInvalid and names the field, the path or URL (without credentials)
// and what git said.
func (w *Workspaces) CheckSource(ctx context.Context, r models.RepoConfig, timeout time.Duration) error {
	switch r.SourceType {
	case models.RepoLink:
		return w.checkLink(ctx, r.SourcePath)
	case models.RepoClone:
		return w.checkRemote(ctx, r.URL, timeout)
	}
	return nil
}

func (w *Workspaces) checkLink(ctx context.Context, path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return models.Errorf(models.CodeInvalid, "repo.source_path: %s does not exist (a LINK project needs an existing "+
			"git repository: create it with `git init %s`, or give the path of yours)", path, path)
	case err != nil:
		return models.WrapError(models.CodeInvalid, err, "repo.source_path: %s cannot be read: %v", path, err)
	case !fi.IsDir():
		return models.Errorf(models.CodeInvalid, "repo.source_path: %s is not a directory", path)
	}
	out, err := w.git(ctx, path, "rev-parse", "--is-bare-repository", "--show-toplevel")
	if err != nil {
		if bare, berr := w.git(ctx, path, "rev-parse", "--is-bare-repository"); berr == nil && bare == "true" {
			return nil
		}
		return models.WrapError(models.CodeInvalid, err, "repo.source_path: %s is not a git repository (%s); "+
			"run `git init` there, or give the path of a repository", path, gitMessage(err))
	}
	lines := strings.Split(out, "\n")
	if lines[0] == "true" {
		return nil
	}
	if len(lines) > 1 && canonical(lines[1]) != canonical(path) {
		return models.Errorf(models.CodeInvalid, "repo.source_path: %s is inside the repository %s, not its top "+
			"level: give %s", path, lines[1], lines[1])
	}
	return nil
}

func (w *Workspaces) checkRemote(ctx context.Context, url string, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = DefaultRemoteCheckTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dir := w.cfg.BaseDir
	if !isDir(dir) {
		dir = os.TempDir()
	}
	_, _, err := w.gitRawEnv(ctx, dir, 4096, w.authEnv(url), "ls-remote", "--heads", url)
	if err == nil {
		return nil
	}
	msg := gitMessage(err)
	if ctx.Err() != nil {
		msg = "no answer within " + timeout.String()
	}
	return models.WrapError(models.CodeInvalid, err, "repo.url: %s does not answer `git ls-remote`: %s",
		models.RedactURL(url), msg)
}

// gitMessage is what git printed for a failed command (its first lines),
// without credentials.
func gitMessage(err error) string {
	var ge *gitError
	if !errors.As(err, &ge) {
		return models.RedactURL(err.Error())
	}
	msg := ge.stderr
	if msg == "" {
		msg = ge.err.Error()
	}
	var lines []string
	for _, l := range strings.Split(msg, "\n") {
		if l = strings.TrimSpace(l); l != "" && len(lines) < 3 {
			lines = append(lines, l)
		}
	}
	return models.RedactURL(strings.Join(lines, "; "))
}
