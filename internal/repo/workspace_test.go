package repo_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/repo"
)

func git(t *testing.T, dir string, args ...string) string {
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

// bareOrigin makes a bare repository with one commit holding README.
func bareOrigin(t *testing.T) string {
	t.Helper()
	seed, origin := t.TempDir(), filepath.Join(t.TempDir(), "origin.git")
	git(t, seed, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(seed, "README"), []byte("hello\n"), 0o644)
	git(t, seed, "add", "README")
	git(t, seed, "commit", "-q", "-m", "first")
	git(t, "", "clone", "-q", "--bare", seed, origin)
	return origin
}

func setup(t *testing.T, r *models.RepoConfig) (*repo.Workspaces, models.Project) {
	t.Helper()
	w, err := repo.New(repo.Config{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	p := models.Project{ID: "web", Repo: r}
	p.ApplyDefaults()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return w, p
}

func TestPrepareAndDeliverToOrigin(t *testing.T) {
	t.Parallel()
	origin := bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	ctx := context.Background()
	a := models.Agent{ID: "a1"}
	task := models.Task{ID: "bold-orbit", Title: "Add the login page!"}
	ws, err := w.Prepare(ctx, a, p, task)
	if err != nil {
		t.Fatal(err)
	}
	if ws.Branch != "aq/bold-orbit-add-the-login-page" || git(t, ws.Dir, "branch", "--show-current") != ws.Branch {
		t.Fatalf("workspace %+v", ws)
	}
	os.WriteFile(filepath.Join(ws.Dir, "login.html"), []byte("<form>"), 0o644) // left uncommitted
	if err := w.Deliver(ctx, a, p, task, ws); err != nil {
		t.Fatal(err)
	}
	if got := git(t, origin, "show", "main:login.html"); got != "<form>" {
		t.Fatalf("origin main has %q", got)
	}
	if !strings.Contains(git(t, origin, "log", "-1", "--format=%s", "main"), "Merge bold-orbit") {
		t.Fatal("no merge commit on main")
	}
	before := git(t, origin, "rev-parse", "main")
	if err := w.Deliver(ctx, a, p, task, ws); err != nil || git(t, origin, "rev-parse", "main") != before {
		t.Fatalf("a second delivery changed main: %v", err)
	}

	// The next task reuses the checkout, clean and on a new branch from main.
	os.WriteFile(filepath.Join(ws.Dir, "junk"), []byte("x"), 0o644)
	next, err := w.Prepare(ctx, a, p, models.Task{ID: "calm-river", Title: "Next"})
	if err != nil {
		t.Fatal(err)
	}
	if next.Dir != ws.Dir {
		t.Fatalf("checkout not reused: %s vs %s", next.Dir, ws.Dir)
	}
	if _, err := os.Stat(filepath.Join(next.Dir, "junk")); !os.IsNotExist(err) {
		t.Fatal("leftover file survived Prepare")
	}
	if _, err := os.Stat(filepath.Join(next.Dir, "login.html")); err != nil {
		t.Fatal("the new branch does not start from the delivered main")
	}
}

func TestDeliverConflictIsRefused(t *testing.T) {
	t.Parallel()
	origin := bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	ctx := context.Background()
	a, b := models.Agent{ID: "a1"}, models.Agent{ID: "a2"}
	t1, t2 := models.Task{ID: "one-task", Title: "one"}, models.Task{ID: "two-task", Title: "two"}
	ws1, _ := w.Prepare(ctx, a, p, t1)
	ws2, _ := w.Prepare(ctx, b, p, t2)
	os.WriteFile(filepath.Join(ws1.Dir, "README"), []byte("from one\n"), 0o644)
	os.WriteFile(filepath.Join(ws2.Dir, "README"), []byte("from two\n"), 0o644)
	if err := w.Deliver(ctx, a, p, t1, ws1); err != nil {
		t.Fatal(err)
	}
	err := w.Deliver(ctx, b, p, t2, ws2)
	if models.ErrorCodeOf(err) != models.CodeConflict || !strings.Contains(err.Error(), "merging aq/two-task-two into main failed") {
		t.Fatalf("conflict: %v", err)
	}
	if got := git(t, origin, "show", "main:README"); got != "from one" {
		t.Fatalf("main changed by a failed merge: %q", got)
	}
}

func TestOriginMismatchIsRefused(t *testing.T) {
	t.Parallel()
	origin, other := bareOrigin(t), bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	ctx := context.Background()
	a := models.Agent{ID: "a1"}
	if _, err := w.Prepare(ctx, a, p, models.Task{ID: "x-y", Title: "x"}); err != nil {
		t.Fatal(err)
	}
	_, p2 := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: other})
	_, err := w.Prepare(ctx, a, p2, models.Task{ID: "x-y", Title: "x"})
	if models.ErrorCodeOf(err) != models.CodeConflict || !strings.Contains(err.Error(), "not the project's repository") {
		t.Fatalf("mismatch: %v", err)
	}
}

func TestInitAndScratch(t *testing.T) {
	t.Parallel()
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoInit})
	ctx := context.Background()
	ws, err := w.Prepare(ctx, models.Agent{ID: "a1"}, p, models.Task{ID: "new-repo", Title: "start"})
	if err != nil || ws.Branch == "" {
		t.Fatalf("init: %+v %v", ws, err)
	}
	w2, p2 := setup(t, nil)
	ws, err = w2.Prepare(ctx, models.Agent{ID: "a1"}, p2, models.Task{ID: "no-repo", Title: "x"})
	if err != nil || ws.Branch != "" {
		t.Fatalf("scratch: %+v %v", ws, err)
	}
	if fi, err := os.Stat(ws.Dir); err != nil || !fi.IsDir() {
		t.Fatalf("scratch dir: %v", err)
	}
	if err := w2.Deliver(ctx, models.Agent{ID: "a1"}, p2, models.Task{ID: "no-repo"}, ws); err != nil {
		t.Fatalf("deliver without repo: %v", err)
	}
}

func TestAgentWrittenHooksNeverRun(t *testing.T) {
	t.Setenv("DISCORD_TOKEN", "s3cret") // the daemon's own secret
	origin := bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	ctx := context.Background()
	a, task := models.Agent{ID: "a1"}, models.Task{ID: "hook-task", Title: "hook"}
	ws, err := w.Prepare(ctx, a, p, task)
	if err != nil {
		t.Fatal(err)
	}
	leak := filepath.Join(t.TempDir(), "leak")
	hook := "#!/bin/sh\necho \"$DISCORD_TOKEN\" > " + leak + "\n"
	for _, name := range []string{"pre-commit", "post-merge", "pre-push", "post-checkout"} {
		os.WriteFile(filepath.Join(ws.Dir, ".git", "hooks", name), []byte(hook), 0o755)
	}
	os.WriteFile(filepath.Join(ws.Dir, "work.txt"), []byte("x"), 0o644) // left uncommitted: Deliver commits it
	if err := w.Deliver(ctx, a, p, task, ws); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(leak); err == nil {
		t.Fatalf("a hook ran with the daemon's environment: %q", b)
	}
}

func TestLinkDeliveryPushesTheBranchOnly(t *testing.T) {
	t.Parallel()
	user := t.TempDir()
	git(t, user, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(user, "README"), []byte("mine\n"), 0o644)
	git(t, user, "add", "README")
	git(t, user, "commit", "-q", "-m", "mine")
	git(t, user, "checkout", "-q", "-b", "feature")
	mainBefore := git(t, user, "rev-parse", "main")
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoLink, SourcePath: user})
	ctx := context.Background()
	a, task := models.Agent{ID: "a1"}, models.Task{ID: "link-task", Title: "link"}
	ws, err := w.Prepare(ctx, a, p, task)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ws.Dir, "agent.txt"), []byte("agent\n"), 0o644)
	if err := w.Deliver(ctx, a, p, task, ws); err != nil {
		t.Fatal(err)
	}
	if got := git(t, user, "rev-parse", "main"); got != mainBefore {
		t.Fatal("the user's main branch moved")
	}
	if got := git(t, user, "branch", "--show-current"); got != "feature" {
		t.Fatalf("the user's checkout is on %s", got)
	}
	if got := git(t, user, "show", ws.Branch+":agent.txt"); got != "agent" {
		t.Fatalf("the task branch in the user's repo has %q", got)
	}
	if _, err := os.Stat(filepath.Join(user, "agent.txt")); !os.IsNotExist(err) {
		t.Fatal("the user's working tree was changed")
	}
}

func TestDeliverAfterRestartLeavesOtherWorkAlone(t *testing.T) {
	t.Parallel()
	origin := bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	ctx := context.Background()
	a := models.Agent{ID: "a1"}
	first, second := models.Task{ID: "first-task", Title: "first"}, models.Task{ID: "second-task", Title: "second"}
	ws, _ := w.Prepare(ctx, a, p, first)
	os.WriteFile(filepath.Join(ws.Dir, "first.txt"), []byte("1"), 0o644)
	git(t, ws.Dir, "add", "first.txt")
	git(t, ws.Dir, "commit", "-q", "-m", "first")
	// The checkout has moved on to another task with uncommitted work when
	// the first task's delivery is repeated (as after a restart).
	ws2, _ := w.Prepare(ctx, a, p, second)
	os.WriteFile(filepath.Join(ws2.Dir, "second.txt"), []byte("2"), 0o644)
	if err := w.Deliver(ctx, a, p, first, models.Workspace{}); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.Command("git", "--git-dir", origin, "cat-file", "-e", "main:second.txt").CombinedOutput(); err == nil {
		t.Fatal("another task's uncommitted work was delivered with the first")
	}
	if got := git(t, origin, "show", "main:first.txt"); got != "1" {
		t.Fatalf("first task not delivered: %q", got)
	}
}

func TestStaleLockAndConcurrentInit(t *testing.T) {
	t.Parallel()
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoInit, SourcePath: filepath.Join(t.TempDir(), "origin.git")})
	ctx := context.Background()
	errs := make(chan error, 4)
	for i := range 4 {
		go func() {
			_, err := w.Prepare(ctx, models.Agent{ID: fmt.Sprintf("a%d", i)}, p, models.Task{ID: fmt.Sprintf("t-%d", i), Title: "t"})
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent first use of an INIT repo: %v", err)
		}
	}
	dir := w.CheckoutPath(models.Agent{ID: "a0"}, p)
	os.WriteFile(filepath.Join(dir, ".git", "index.lock"), nil, 0o644) // left by a killed git
	if _, err := w.Prepare(ctx, models.Agent{ID: "a0"}, p, models.Task{ID: "after-crash", Title: "t"}); err != nil {
		t.Fatalf("a stale index.lock broke the checkout: %v", err)
	}
}
