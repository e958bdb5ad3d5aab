package repo_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/repo"
)

var ctx = context.Background()

// gitCmd runs git as a person would, without their configuration.
func gitCmd(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main",
		"-c", "advice.detachedHead=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gitCmd(dir, args...)
	if err != nil {
		t.Fatalf("git %v in %s: %v\n%s", args, dir, err, out)
	}
	return out
}

// hasRef reports whether ref exists in the repository at dir.
func hasRef(t *testing.T, dir, ref string) bool {
	t.Helper()
	_, err := gitCmd(dir, "rev-parse", "-q", "--verify", ref)
	return err == nil
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// bareOrigin makes a bare repository with one commit holding README.
func bareOrigin(t *testing.T) string {
	t.Helper()
	seed, origin := userRepo(t), filepath.Join(t.TempDir(), "origin.git")
	git(t, "", "clone", "-q", "--bare", seed, origin)
	return origin
}

// userRepo makes a working tree on main with one commit holding README.
func userRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, dir, "README", "hello\n")
	git(t, dir, "add", "README")
	git(t, dir, "commit", "-q", "-m", "first")
	return dir
}

// advance commits file=content on the default branch of a bare origin, as
// another person's push would.
func advance(t *testing.T, origin, file, content string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "other")
	git(t, "", "clone", "-q", origin, dir)
	write(t, dir, file, content)
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "other work on "+file)
	git(t, dir, "push", "-q", "origin", "HEAD:main")
	return git(t, dir, "rev-parse", "HEAD")
}

func setup(t *testing.T, r *models.RepoConfig) (*repo.Workspaces, models.Project) {
	t.Helper()
	w, err := repo.New(repo.Config{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return w, project(t, r)
}

func project(t *testing.T, r *models.RepoConfig) models.Project {
	t.Helper()
	p := models.Project{ID: "web", Repo: r}
	p.ApplyDefaults()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return p
}

func prepare(t *testing.T, w *repo.Workspaces, a string, p models.Project, task models.Task) models.Workspace {
	t.Helper()
	ws, err := w.Prepare(ctx, models.Agent{ID: a}, p, task)
	if err != nil {
		t.Fatalf("prepare %s for %s: %v", task.ID, a, err)
	}
	return ws
}

// work prepares task on agent a, writes files as the agent would (left
// uncommitted) and seals the run.
func work(t *testing.T, w *repo.Workspaces, a string, p models.Project, task models.Task, files map[string]string) models.Workspace {
	t.Helper()
	ws := prepare(t, w, a, p, task)
	for name, content := range files {
		write(t, ws.Dir, name, content)
	}
	seal(t, w, p, task, ws)
	return ws
}

func seal(t *testing.T, w *repo.Workspaces, p models.Project, task models.Task, ws models.Workspace) []string {
	t.Helper()
	files, err := w.Seal(ctx, p, task, ws)
	if err != nil {
		t.Fatalf("seal %s: %v", task.ID, err)
	}
	return files
}

func stage(t *testing.T, w *repo.Workspaces, p models.Project, task models.Task, src string) models.Staged {
	t.Helper()
	st, err := w.Stage(ctx, p, task, src)
	if err != nil {
		t.Fatalf("stage %s: %v", task.ID, err)
	}
	return st
}

func deliver(t *testing.T, w *repo.Workspaces, p models.Project, task models.Task, src string) models.Delivery {
	t.Helper()
	d, err := w.Deliver(ctx, p, task, src)
	if err != nil {
		t.Fatalf("deliver %s: %v", task.ID, err)
	}
	return d
}

func wantConflict(t *testing.T, err error, parts ...string) {
	t.Helper()
	if models.ErrorCodeOf(err) != models.CodeConflict {
		t.Fatalf("want a conflict error, got %v", err)
	}
	for _, s := range parts {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %q does not mention %q", err, s)
		}
	}
}

func wantMergeConflict(t *testing.T, err error, branch string, files ...string) {
	t.Helper()
	var ce *models.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("want a *models.ConflictError, got %v", err)
	}
	if ce.Branch != branch || ce.Into != "main" || !slices.Equal(ce.Files, files) {
		t.Fatalf("conflict %+v, want %s into main in %v", ce, branch, files)
	}
}

func task(id, title string) models.Task { return models.Task{ID: id, Title: title} }
