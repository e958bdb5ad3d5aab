package repo

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/agentqueued/agentqueued/internal/models"
)

func run(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// origin makes a bare repository whose main holds README, and a clone of
// it to commit from.
func origin(t *testing.T) (bare, clone string) {
	t.Helper()
	clone, bare = filepath.Join(t.TempDir(), "clone"), filepath.Join(t.TempDir(), "origin.git")
	run(t, "", "init", "-q", "--bare", bare)
	run(t, "", "clone", "-q", bare, clone)
	commit(t, clone, "README", "hello\n")
	return bare, clone
}

// commit commits file=content in clone and pushes it to main.
func commit(t *testing.T, clone, file, content string) string {
	t.Helper()
	run(t, clone, "fetch", "-q", "origin")
	if strings.Contains(run(t, clone, "branch", "-r"), "origin/main") {
		run(t, clone, "reset", "-q", "--hard", "origin/main")
	}
	if err := os.WriteFile(filepath.Join(clone, file), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, clone, "add", "-A")
	run(t, clone, "commit", "-q", "-m", file)
	run(t, clone, "push", "-q", "origin", "HEAD:main")
	return run(t, clone, "rev-parse", "HEAD")
}

func TestSameRepo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{dir, dir + "/", true},
		{dir, dir + ".git", true},
		{dir, dir + "/.git", true},
		{dir, "file://" + dir, true},
		{dir, link, true},
		{dir, filepath.Join(dir, "x", ".."), true},
		{dir, dir + "-other", false},
		{"https://example.com/a/b.git", "https://example.com/a/b", true},
		{"https://example.com/a/b/", "https://example.com/a/b", true},
		{"git@example.com:a/b.git", "git@example.com:a/b", true},
		{"https://example.com/a/b", "https://example.com/a/c", false},
	} {
		if got := sameRepo(c.a, c.b); got != c.same {
			t.Errorf("sameRepo(%q, %q) = %v", c.a, c.b, got)
		}
	}
}

func TestIsLocal(t *testing.T) {
	t.Parallel()
	for url, local := range map[string]bool{
		"/srv/repo.git": true, "file:///srv/repo": true, "./repo": true, "repo": true, "C/x:y": true,
		"https://h/r.git": false, "ssh://h/r": false, "git@h:r.git": false,
	} {
		if isLocal(url) != local {
			t.Errorf("isLocal(%q) = %v", url, !local)
		}
	}
}

// TestPublishRemoteIsACompareAndSwap pushes with go-git as to a remote
// origin (here a local path, which go-git serves the same way).
func TestPublishRemoteIsACompareAndSwap(t *testing.T) {
	t.Parallel()
	bare, clone := origin(t)
	old := run(t, bare, "rev-parse", "main")
	run(t, clone, "commit", "-q", "--allow-empty", "-m", "next")
	next := run(t, clone, "rev-parse", "HEAD")
	integ := filepath.Join(t.TempDir(), "integ.git")
	run(t, "", "clone", "-q", "--bare", clone, integ)
	ctx := context.Background()

	moved, err := publishRemote(ctx, integ, bare, "main", plumbing.NewHash(next), plumbing.NewHash(next), nil, nil)
	if err != nil || !moved || run(t, bare, "rev-parse", "main") != old {
		t.Fatalf("a push from the wrong old commit: moved %v, %v", moved, err)
	}
	moved, err = publishRemote(ctx, integ, bare, "main", plumbing.NewHash(old), plumbing.NewHash(next), nil, nil)
	if err != nil || moved || run(t, bare, "rev-parse", "main") != next {
		t.Fatalf("push: moved %v, %v; main %s", moved, err, run(t, bare, "rev-parse", "main"))
	}
}

// TestDeliverMergesAgainWhenTheOriginMoves moves the origin's main between
// Deliver's merge and its update: the update is refused and the merge made
// again on the new tip.
func TestDeliverMergesAgainWhenTheOriginMoves(t *testing.T) {
	t.Parallel()
	bare, clone := origin(t)
	w, err := New(Config{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	p := models.Project{ID: "web", Repo: &models.RepoConfig{SourceType: models.RepoClone, URL: bare}}
	p.ApplyDefaults()
	ctx := context.Background()
	tk := models.Task{ID: "race-task", Title: "race"}
	ws, err := w.Prepare(ctx, models.Agent{ID: "a1"}, p, tk)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws.Dir, "mine.txt"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Seal(ctx, p, tk, ws); err != nil {
		t.Fatal(err)
	}
	var tries []int
	var theirs string
	w.beforePublish = func(try int) {
		tries = append(tries, try)
		if try == 0 {
			theirs = commit(t, clone, "theirs.txt", "theirs\n")
		}
	}
	d, err := w.Deliver(ctx, p, tk, ws.Dir)
	if err != nil || !d.Merged {
		t.Fatalf("delivery %+v: %v", d, err)
	}
	if len(tries) != 2 || run(t, bare, "rev-parse", "main^1") != theirs || run(t, bare, "rev-parse", "main") != d.Commit {
		t.Fatalf("tries %v; main^1 %s, want %s", tries, run(t, bare, "rev-parse", "main^1"), theirs)
	}
	run(t, bare, "cat-file", "-e", "main:mine.txt")
	run(t, bare, "cat-file", "-e", "main:theirs.txt")

	// Moved on every try, Deliver gives up with a conflict.
	tk2 := models.Task{ID: "lost-race", Title: "lost"}
	ws2, err := w.Prepare(ctx, models.Agent{ID: "a1"}, p, tk2)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws2.Dir, "lost.txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Seal(ctx, p, tk2, ws2); err != nil {
		t.Fatal(err)
	}
	n := 0
	w.beforePublish = func(int) { n++; commit(t, clone, "churn.txt", strings.Repeat("x", n)) }
	if _, err := w.Deliver(ctx, p, tk2, ws2.Dir); models.ErrorCodeOf(err) != models.CodeConflict || !strings.Contains(err.Error(), "kept moving") {
		t.Fatalf("endless race: %v", err)
	}
}

// TestGitWrites: the git commands that pass without the lease's fence are
// reads; everything else, and anything unknown, is taken for a write.
func TestGitWrites(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args   []string
		writes bool
	}{
		{[]string{"status", "--porcelain"}, false},
		{[]string{"--no-optional-locks", "status", "--porcelain=v1", "-z"}, false},
		{[]string{"-c", "log.showSignature=false", "log", "--no-color"}, false},
		{[]string{"rev-parse", "-q", "--verify", "HEAD^{commit}"}, false},
		{[]string{"merge-tree", "--write-tree", "a", "b"}, false},
		{[]string{"worktree", "list", "--porcelain", "-z"}, false},
		{[]string{"symbolic-ref", "-q", "HEAD"}, false},
		{[]string{"symbolic-ref", "HEAD", "refs/heads/other"}, true},
		{[]string{"worktree", "remove", "-f", "-f", "dir"}, true},
		{[]string{"worktree", "prune"}, true},
		{[]string{"worktree"}, true},
		{[]string{"reset", "-q", "--hard"}, true},
		{[]string{"clean", "-q", "-ffdx"}, true},
		{[]string{"update-ref", "-d", "refs/aq/staged/t"}, true},
		{[]string{"fetch", "-q", "--", "url"}, true},
		{[]string{"-c", "x=y", "checkout", "-q", "--detach"}, true},
		{[]string{"some-new-command"}, true},
		{[]string{"--version"}, true},
		{nil, true},
	} {
		if got := gitWrites(c.args); got != c.writes {
			t.Errorf("gitWrites(%q) = %v, want %v", c.args, got, c.writes)
		}
	}
}
