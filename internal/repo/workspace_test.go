package repo_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

func TestCloneFromBareRepo(t *testing.T) {
	t.Parallel()
	origin := bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	tk := task("bold-orbit", "Add the login page!")
	ws := prepare(t, w, "a1", p, tk)
	main := git(t, origin, "rev-parse", "main")
	if ws.Branch != "aq/bold-orbit-add-the-login-page" || ws.DefaultBranch != "main" || ws.Base != main ||
		ws.Rescued != "" || len(ws.Conflicts) != 0 || git(t, ws.Dir, "branch", "--show-current") != ws.Branch {
		t.Fatalf("workspace %+v", ws)
	}
	if ws.Dir != w.CheckoutPath(models.Agent{ID: "a1"}, p) {
		t.Fatalf("checkout %s, want %s", ws.Dir, w.CheckoutPath(models.Agent{ID: "a1"}, p))
	}
	write(t, ws.Dir, "login.html", "<form>") // left uncommitted
	if files := seal(t, w, p, tk, ws); !slices.Equal(files, []string{"login.html"}) {
		t.Fatalf("sealed files %v", files)
	}
	if got := git(t, ws.Dir, "log", "-1", "--format=%s"); got != "Add the login page! (bold-orbit)" {
		t.Fatalf("commit message %q", got)
	}
	st := stage(t, w, p, tk, ws.Dir)
	if read(t, filepath.Join(st.Dir, "login.html")) != "<form>" || read(t, filepath.Join(st.Dir, "README")) != "hello\n" {
		t.Fatal("the verification checkout lacks the merged files")
	}
	if !strings.Contains(st.Diff, "+<form>") || !slices.Equal(st.Files, []string{"login.html"}) {
		t.Fatalf("staged %+v", st)
	}
	d := deliver(t, w, p, tk, ws.Dir)
	if !d.Merged || d.Commit != git(t, origin, "rev-parse", "main") {
		t.Fatalf("delivery %+v, origin main %s", d, git(t, origin, "rev-parse", "main"))
	}
	if got := git(t, origin, "show", "main:login.html"); got != "<form>" {
		t.Fatalf("origin main has %q", got)
	}
	if got := git(t, origin, "log", "-1", "--format=%s", "main"); got != "Merge bold-orbit: Add the login page!" {
		t.Fatalf("merge commit message %q", got)
	}
	if again := deliver(t, w, p, tk, ws.Dir); !again.Merged || again.Commit != d.Commit {
		t.Fatalf("a second delivery: %+v", again)
	}
	if err := w.Cleanup(ctx, p, tk, ws.Dir, true); err != nil {
		t.Fatal(err)
	}

	// The next task reuses the checkout, on a new branch from the new main.
	next := prepare(t, w, "a1", p, task("calm-river", "Next"))
	if next.Dir != ws.Dir || next.Base != d.Commit || next.Rescued != "" {
		t.Fatalf("next workspace %+v", next)
	}
	if read(t, filepath.Join(next.Dir, "login.html")) != "<form>" {
		t.Fatal("the new branch does not start from the delivered main")
	}
}

func TestScratchWithoutRepo(t *testing.T) {
	t.Parallel()
	w, p := setup(t, nil)
	a, tk := models.Agent{ID: "a1"}, task("no-repo", "x")
	ws, err := w.Prepare(ctx, a, p, tk)
	if err != nil || ws.Branch != "" || ws.Dir != w.CheckoutPath(a, p) {
		t.Fatalf("scratch: %+v %v", ws, err)
	}
	if fi, err := os.Stat(ws.Dir); err != nil || !fi.IsDir() {
		t.Fatalf("scratch dir: %v", err)
	}
	if files, err := w.Seal(ctx, p, tk, ws); err != nil || files != nil {
		t.Fatalf("seal: %v %v", files, err)
	}
	if st, err := w.Stage(ctx, p, tk, ws.Dir); err != nil || st.Dir != ws.Dir {
		t.Fatalf("stage: %+v %v", st, err)
	}
	if d, err := w.Deliver(ctx, p, tk, ws.Dir); err != nil || !d.Merged || d.Note != "no repository" {
		t.Fatalf("deliver: %+v %v", d, err)
	}
	if err := w.Cleanup(ctx, p, tk, ws.Dir, true); err != nil {
		t.Fatal(err)
	}
	w.Release(ws)
}

func TestInitRepo(t *testing.T) {
	t.Parallel()
	origin := filepath.Join(t.TempDir(), "new", "origin.git")
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoInit, SourcePath: origin})
	tk := task("new-repo", "start")
	ws := work(t, w, "a1", p, tk, map[string]string{"main.go": "package main\n"})
	if ws.Branch == "" || ws.Base != git(t, origin, "rev-parse", "main") {
		t.Fatalf("init: %+v", ws)
	}
	stage(t, w, p, tk, ws.Dir)
	if d := deliver(t, w, p, tk, ws.Dir); !d.Merged {
		t.Fatalf("delivery %+v", d)
	}
	if got := git(t, origin, "show", "main:main.go"); got != "package main" {
		t.Fatalf("origin main has %q", got)
	}

	// Without a source_path the origin is the daemon's own.
	w2, p2 := setup(t, &models.RepoConfig{SourceType: models.RepoInit})
	if ws := prepare(t, w2, "a1", p2, tk); ws.Branch == "" {
		t.Fatalf("init without source_path: %+v", ws)
	}
}

func TestOriginMismatchIsRefused(t *testing.T) {
	t.Parallel()
	origin, other := bareOrigin(t), bareOrigin(t)
	base := t.TempDir()
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin, CheckoutBasePath: base})
	ws := prepare(t, w, "a1", p, task("x-y", "x"))
	// Trailing slash and .git suffix do not make another repository.
	p.Repo.URL = origin + "/"
	prepare(t, w, "a1", p, task("x-y", "x"))
	p2 := project(t, &models.RepoConfig{SourceType: models.RepoClone, URL: other, CheckoutBasePath: base})
	_, err := w.Prepare(ctx, models.Agent{ID: "a1"}, p2, task("x-y", "x"))
	wantConflict(t, err, ws.Dir, "has origin "+origin, "not the project's repository "+other)
}

func TestLinkOriginMismatchIsRefused(t *testing.T) {
	t.Parallel()
	userA, userB, base := userRepo(t), userRepo(t), t.TempDir()
	w, pa := setup(t, &models.RepoConfig{SourceType: models.RepoLink, SourcePath: userA, CheckoutBasePath: base})
	ws := prepare(t, w, "a1", pa, task("x-y", "x"))
	pb := project(t, &models.RepoConfig{SourceType: models.RepoLink, SourcePath: userB, CheckoutBasePath: base})
	_, err := w.Prepare(ctx, models.Agent{ID: "a1"}, pb, task("x-y", "x"))
	wantConflict(t, err, ws.Dir, "is a worktree of "+userA, "not a worktree of the project's repository "+userB)

	// A clone where a worktree is expected is refused too.
	origin := bareOrigin(t)
	pc := project(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin, CheckoutBasePath: t.TempDir()})
	cws := prepare(t, w, "a2", pc, task("x-y", "x"))
	pc.Repo = &models.RepoConfig{ID: "web", SourceType: models.RepoLink, SourcePath: userA,
		CheckoutBasePath: pc.Repo.CheckoutBasePath, DefaultBranch: "main"}
	_, err = w.Prepare(ctx, models.Agent{ID: "a2"}, pc, task("x-y", "x"))
	wantConflict(t, err, cws.Dir, "independent clone of "+origin)
}

func TestLinkWorktreeLeavesTheUsersTreeAlone(t *testing.T) {
	t.Parallel()
	user := userRepo(t)
	git(t, user, "checkout", "-q", "-b", "feature")
	write(t, user, "README", "my edit\n") // the user's own uncommitted work
	write(t, user, "notes.txt", "mine\n")
	statusBefore, featureBefore := git(t, user, "status", "--porcelain"), git(t, user, "rev-parse", "feature")
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoLink, SourcePath: user})
	tk := task("link-task", "link")
	ws := work(t, w, "a1", p, tk, map[string]string{"agent.txt": "agent\n"})
	if ws.Dir == user || !strings.HasPrefix(ws.Base, git(t, user, "rev-parse", "main")) {
		t.Fatalf("workspace %+v", ws)
	}
	if got := git(t, user, "show", ws.Branch+":agent.txt"); got != "agent" {
		t.Fatalf("the task branch in the user's repo has %q", got)
	}
	stage(t, w, p, tk, ws.Dir)
	d := deliver(t, w, p, tk, ws.Dir)
	if !d.Merged || git(t, user, "rev-parse", "main") != d.Commit || git(t, user, "show", "main:agent.txt") != "agent" {
		t.Fatalf("delivery %+v", d)
	}
	if git(t, user, "branch", "--show-current") != "feature" || git(t, user, "rev-parse", "feature") != featureBefore ||
		git(t, user, "status", "--porcelain") != statusBefore || read(t, filepath.Join(user, "README")) != "my edit\n" {
		t.Fatal("the user's working tree or branch changed")
	}
	if _, err := os.Stat(filepath.Join(user, "agent.txt")); !os.IsNotExist(err) {
		t.Fatal("the agent's file appeared in the user's working tree")
	}
	if err := w.Cleanup(ctx, p, tk, ws.Dir, true); err != nil {
		t.Fatal(err)
	}
	if hasRef(t, user, "refs/heads/"+ws.Branch) {
		t.Fatal("the merged task branch is left in the user's repo")
	}
	if git(t, user, "status", "--porcelain") != statusBefore {
		t.Fatal("cleanup changed the user's working tree")
	}
	// The worktree serves the next task.
	if next := prepare(t, w, "a1", p, task("link-next", "next")); next.Dir != ws.Dir {
		t.Fatalf("worktree not reused: %+v", next)
	}
}

func TestLinkCheckedOutDefaultBranchAdvancesInPlace(t *testing.T) {
	t.Parallel()
	user := userRepo(t) // on main, clean
	before := git(t, user, "rev-parse", "main")
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoLink, SourcePath: user})
	tk := task("link-main", "link")
	ws := work(t, w, "a1", p, tk, map[string]string{"agent.txt": "agent\n"})
	stage(t, w, p, tk, ws.Dir)
	d := deliver(t, w, p, tk, ws.Dir)
	if !d.Merged || d.Waiting != "" || d.Note != "" || git(t, user, "rev-parse", "main") != d.Commit || d.Commit == before {
		t.Fatalf("delivery %+v", d)
	}
	// As `git pull --ff-only` would: the branch, the index and the files.
	if git(t, user, "branch", "--show-current") != "main" || git(t, user, "status", "--porcelain") != "" ||
		read(t, filepath.Join(user, "agent.txt")) != "agent\n" || git(t, user, "ls-files", "--stage", "agent.txt") == "" {
		t.Fatalf("the user's tree was not advanced: status %q", git(t, user, "status", "--porcelain"))
	}
	if err := w.Cleanup(ctx, p, tk, ws.Dir, true); err != nil {
		t.Fatal(err)
	}
	if hasRef(t, user, "refs/heads/"+ws.Branch) {
		t.Fatal("the merged task branch is left in the user's repo")
	}
	// The next task starts from the landed work.
	next := prepare(t, w, "a2", p, task("link-next", "next"))
	if next.Base != d.Commit || read(t, filepath.Join(next.Dir, "agent.txt")) != "agent\n" {
		t.Fatalf("the next workspace starts at %s, not at the landed %s", next.Base, d.Commit)
	}
}

// treeBytes is every file of a working tree (the .git directory's index
// and refs included), byte for byte.
func treeBytes(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if strings.HasPrefix(rel, ".git/objects/") || strings.HasPrefix(rel, ".git/logs/") ||
			strings.HasPrefix(rel, ".git/worktrees/") || strings.HasPrefix(rel, ".git/refs/heads/aq/") {
			return nil // objects fetched and the daemon's own worktrees and task branches
		}
		b, err := os.ReadFile(path)
		files[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestLinkCheckedOutDefaultBranchWithLocalChangesWaits(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		dirty   func(t *testing.T, user string)
		clean   func(t *testing.T, user string)
		waiting []string
	}{
		{"modified file", func(t *testing.T, user string) { write(t, user, "README", "my edit\n") },
			func(t *testing.T, user string) { git(t, user, "stash", "-q") }, []string{"local changes (README)"}},
		{"staged new file", func(t *testing.T, user string) {
			write(t, user, "mine.txt", "mine\n")
			git(t, user, "add", "mine.txt")
		}, func(t *testing.T, user string) { git(t, user, "commit", "-q", "-m", "mine") }, []string{"local changes (mine.txt)"}},
		{"merge in progress", func(t *testing.T, user string) {
			git(t, user, "checkout", "-q", "-b", "side")
			write(t, user, "README", "side\n")
			git(t, user, "commit", "-q", "-am", "side")
			git(t, user, "checkout", "-q", "main")
			write(t, user, "README", "main\n")
			git(t, user, "commit", "-q", "-am", "main")
			if _, err := gitCmd(user, "merge", "side"); err == nil {
				t.Fatal("the merge did not conflict")
			}
		}, func(t *testing.T, user string) { git(t, user, "merge", "--abort") }, []string{"a merge in progress"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			user := userRepo(t)
			w, p := setup(t, &models.RepoConfig{SourceType: models.RepoLink, SourcePath: user})
			tk := task("link-dirty", "link")
			ws := work(t, w, "a1", p, tk, map[string]string{"agent.txt": "agent\n"})
			stage(t, w, p, tk, ws.Dir)
			c.dirty(t, user)
			main, before := git(t, user, "rev-parse", "main"), treeBytes(t, user)
			d := deliver(t, w, p, tk, ws.Dir)
			if d.Merged || d.Commit != "" || !strings.Contains(d.Waiting, "main is checked out in "+user+" with ") {
				t.Fatalf("delivery %+v", d)
			}
			for _, want := range c.waiting {
				if !strings.Contains(d.Waiting, want) {
					t.Fatalf("waiting %q does not say %q", d.Waiting, want)
				}
			}
			// The cheap check says what Deliver said.
			if held, err := w.LandingHeld(context.Background(), p); err != nil || held != d.Waiting {
				t.Fatalf("LandingHeld while dirty: %q %v, want %q", held, err, d.Waiting)
			}
			if git(t, user, "rev-parse", "main") != main {
				t.Fatal("the user's main moved")
			}
			if after := treeBytes(t, user); !maps.Equal(after, before) {
				for k, v := range after {
					if before[k] != v {
						t.Errorf("%s changed", k)
					}
				}
				t.Fatal("the user's tree, index or refs changed")
			}
			if !hasRef(t, user, "refs/heads/"+ws.Branch) {
				t.Fatal("the task branch is gone")
			}
			// Once the user committed or stashed, delivering again lands it in place.
			c.clean(t, user)
			if held, err := w.LandingHeld(context.Background(), p); err != nil || held != "" {
				t.Fatalf("LandingHeld once clean: %q %v", held, err)
			}
			d = deliver(t, w, p, tk, ws.Dir)
			if !d.Merged || d.Waiting != "" || git(t, user, "rev-parse", "main") != d.Commit ||
				read(t, filepath.Join(user, "agent.txt")) != "agent\n" || git(t, user, "status", "--porcelain", "--untracked-files=no") != "" {
				t.Fatalf("after cleaning: %+v, status %q", d, git(t, user, "status", "--porcelain"))
			}
		})
	}
}

// TestLandingHeldChecksOnlyWhatHoldsALanding: untracked files, main not
// checked out, and a project that is not LINK hold nothing; main checked
// out in two working trees does.
func TestLandingHeldChecksOnlyWhatHoldsALanding(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		make func(t *testing.T) *models.RepoConfig
		want string
	}{
		{"untracked files", func(t *testing.T) *models.RepoConfig {
			user := userRepo(t)
			write(t, user, "scratch.txt", "mine\n")
			return &models.RepoConfig{SourceType: models.RepoLink, SourcePath: user}
		}, ""},
		{"main not checked out, the tree changed", func(t *testing.T) *models.RepoConfig {
			user := userRepo(t)
			git(t, user, "checkout", "-q", "-b", "feature")
			write(t, user, "README", "my edit\n")
			return &models.RepoConfig{SourceType: models.RepoLink, SourcePath: user}
		}, ""},
		{"main in two working trees", func(t *testing.T) *models.RepoConfig {
			user := userRepo(t)
			git(t, user, "worktree", "add", "-q", "-f", filepath.Join(t.TempDir(), "second"), "main")
			return &models.RepoConfig{SourceType: models.RepoLink, SourcePath: user}
		}, "main is checked out in several working trees"},
		{"a clone", func(t *testing.T) *models.RepoConfig {
			return &models.RepoConfig{SourceType: models.RepoClone, URL: bareOrigin(t)}
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w, p := setup(t, c.make(t))
			held, err := w.LandingHeld(context.Background(), p)
			if err != nil || !strings.HasPrefix(held, c.want) || (c.want == "") != (held == "") {
				t.Fatalf("LandingHeld: %q %v, want %q", held, err, c.want)
			}
		})
	}
}

func TestLinkDefaultBranchInARemovedWorktreeIsMoved(t *testing.T) {
	t.Parallel()
	user := userRepo(t)
	git(t, user, "checkout", "-q", "-b", "feature")
	gone := filepath.Join(t.TempDir(), "gone")
	git(t, user, "worktree", "add", "-q", gone, "main")
	if err := os.RemoveAll(gone); err != nil { // without `git worktree remove`: still registered
		t.Fatal(err)
	}
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoLink, SourcePath: user})
	tk := task("link-gone", "link")
	ws := work(t, w, "a1", p, tk, map[string]string{"agent.txt": "agent\n"})
	if d := deliver(t, w, p, tk, ws.Dir); !d.Merged || d.Waiting != "" || git(t, user, "rev-parse", "main") != d.Commit {
		t.Fatalf("delivery %+v", d)
	}
}

func TestLinkCheckedOutDefaultBranchLeavesUntrackedFiles(t *testing.T) {
	t.Parallel()
	user := userRepo(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoLink, SourcePath: user})
	tk := task("link-untracked", "link")
	ws := work(t, w, "a1", p, tk, map[string]string{"agent.txt": "agent\n"})
	stage(t, w, p, tk, ws.Dir)
	// An untracked file the merge would overwrite: git refuses, nothing moves.
	write(t, user, "agent.txt", "mine\n")
	main := git(t, user, "rev-parse", "main")
	d := deliver(t, w, p, tk, ws.Dir)
	if d.Merged || !strings.Contains(d.Waiting, "could not bring up to date") || git(t, user, "rev-parse", "main") != main ||
		read(t, filepath.Join(user, "agent.txt")) != "mine\n" {
		t.Fatalf("delivery %+v", d)
	}
	// An untracked file elsewhere does not hold the landing.
	if err := os.Rename(filepath.Join(user, "agent.txt"), filepath.Join(user, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	if d := deliver(t, w, p, tk, ws.Dir); !d.Merged || read(t, filepath.Join(user, "notes.txt")) != "mine\n" ||
		read(t, filepath.Join(user, "agent.txt")) != "agent\n" {
		t.Fatalf("delivery %+v", d)
	}
}

func TestInPlace(t *testing.T) {
	t.Parallel()
	user := userRepo(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoLink, SourcePath: user, InPlace: true})
	t1, t2 := task("in-place", "in place"), task("other-task", "other")
	if got := w.CheckoutPath(models.Agent{ID: "a1"}, p); got != user {
		t.Fatalf("in-place checkout path %s", got)
	}

	write(t, user, "README", "user's edit\n")
	_, err := w.Prepare(ctx, models.Agent{ID: "a1"}, p, t1)
	wantConflict(t, err, user, "uncommitted changes", "README")
	if read(t, filepath.Join(user, "README")) != "user's edit\n" || git(t, user, "branch", "--show-current") != "main" {
		t.Fatal("a refused in-place prepare touched the user's tree")
	}
	git(t, user, "checkout", "-q", "--", "README")

	ws := prepare(t, w, "a1", p, t1)
	if ws.Dir != user || git(t, user, "branch", "--show-current") != ws.Branch {
		t.Fatalf("in-place workspace %+v", ws)
	}
	_, err = w.Prepare(ctx, models.Agent{ID: "a2"}, p, t2)
	wantConflict(t, err, user, "in use by another run")

	write(t, user, "feature.txt", "agent\n")
	seal(t, w, p, t1, ws)
	w.Release(ws)
	stage(t, w, p, t1, ws.Dir)
	if d := deliver(t, w, p, t1, ws.Dir); !d.Merged || git(t, user, "show", "main:feature.txt") != "agent" {
		t.Fatalf("in-place delivery %+v", d)
	}
	if err := w.Cleanup(ctx, p, t1, ws.Dir, true); err != nil {
		t.Fatal(err)
	}
	// Released, the repository takes the next run.
	if ws2 := prepare(t, w, "a2", p, t2); ws2.Dir != user || git(t, user, "branch", "--show-current") != ws2.Branch {
		t.Fatalf("next in-place workspace %+v", ws2)
	}
}

func TestAgentsDeliverConcurrently(t *testing.T) {
	t.Parallel()
	for _, kind := range []models.RepoSourceType{models.RepoClone, models.RepoLink} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			var origin string
			r := &models.RepoConfig{SourceType: kind}
			if kind == models.RepoClone {
				origin = bareOrigin(t)
				r.URL = origin
			} else {
				origin = userRepo(t)
				git(t, origin, "checkout", "-q", "-b", "feature")
				r.SourcePath = origin
			}
			w, p := setup(t, r)
			const n = 4
			var wg sync.WaitGroup
			errs := make(chan error, n)
			tips := make([]string, n)
			for i := range n {
				wg.Go(func() {
					tk := task(fmt.Sprintf("task-%d", i), "parallel")
					ws, err := w.Prepare(ctx, models.Agent{ID: fmt.Sprintf("a%d", i)}, p, tk)
					if err != nil {
						errs <- err
						return
					}
					if err := os.WriteFile(filepath.Join(ws.Dir, fmt.Sprintf("file-%d", i)), []byte("x"), 0o644); err != nil {
						errs <- err
						return
					}
					if _, err := w.Seal(ctx, p, tk, ws); err != nil {
						errs <- err
						return
					}
					tips[i], _ = gitCmd(ws.Dir, "rev-parse", "HEAD")
					if _, err := w.Stage(ctx, p, tk, ws.Dir); err != nil {
						errs <- err
						return
					}
					d, err := w.Deliver(ctx, p, tk, ws.Dir)
					if err == nil && !d.Merged {
						err = fmt.Errorf("task %d not merged: %+v", i, d)
					}
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			for i := range n {
				git(t, origin, "merge-base", "--is-ancestor", tips[i], "main")
				git(t, origin, "cat-file", "-e", fmt.Sprintf("main:file-%d", i))
			}
		})
	}
}

// TestManyAgentsPrepareWorktreesAtOnce starts many agents' first runs on a
// LINK repository at once: each adds its worktree and lists the others'
// (to free its branch) while the rest are still being added. git writes
// a new entry of .git/worktrees in steps, and a listing that read one
// half-written failed the run ("failed to read .git/worktrees/<name>/
// commondir"); the daemon's own worktree commands now take turns.
func TestManyAgentsPrepareWorktreesAtOnce(t *testing.T) {
	t.Parallel()
	user := userRepo(t)
	git(t, user, "checkout", "-q", "-b", "feature")
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoLink, SourcePath: user})
	const agents = 12
	for round := range 3 {
		var wg sync.WaitGroup
		errs := make(chan error, agents)
		for i := range agents {
			wg.Go(func() {
				a := models.Agent{ID: fmt.Sprintf("r%d-a%d", round, i)}
				_, err := w.Prepare(ctx, a, p, task(fmt.Sprintf("task-%d-%d", round, i), "at once"))
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
	if n := strings.Count(git(t, user, "worktree", "list"), "\n"); n < 3*agents {
		t.Fatalf("%d worktrees listed, want %d and the user's", n, 3*agents)
	}
}

var rescueName = regexp.MustCompile(`^aq-rescue/first-task-first-\d{8}T\d{6}$`)

func TestDirtyCheckoutIsRescued(t *testing.T) {
	t.Parallel()
	origin := bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	first := task("first-task", "first")
	ws := prepare(t, w, "a1", p, first)
	write(t, ws.Dir, "README", "changed\n")
	write(t, ws.Dir, "new/file.txt", "untracked\n")
	tip := git(t, ws.Dir, "rev-parse", "HEAD")
	// The run was killed; the next task comes.
	next := prepare(t, w, "a1", p, task("second-task", "second"))
	if !rescueName.MatchString(next.Rescued) {
		t.Fatalf("rescued onto %q", next.Rescued)
	}
	if git(t, ws.Dir, "show", next.Rescued+":README") != "changed" || git(t, ws.Dir, "show", next.Rescued+":new/file.txt") != "untracked" {
		t.Fatal("the rescue commit lacks the files")
	}
	if git(t, ws.Dir, "rev-parse", next.Rescued+"^") != tip {
		t.Fatal("the rescue commit is not on the interrupted branch's commit")
	}
	if git(t, next.Dir, "status", "--porcelain") != "" || read(t, filepath.Join(next.Dir, "README")) != "hello\n" {
		t.Fatal("the checkout was not cleaned after the rescue")
	}
}

func TestMergeInProgressIsRescued(t *testing.T) {
	t.Parallel()
	origin := bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	first := task("first-task", "first")
	ws := prepare(t, w, "a1", p, first)
	// The agent was merging another line of work when it was killed.
	git(t, ws.Dir, "checkout", "-q", "-b", "side", "main")
	write(t, ws.Dir, "README", "side\n")
	git(t, ws.Dir, "commit", "-q", "-am", "side")
	git(t, ws.Dir, "checkout", "-q", ws.Branch)
	write(t, ws.Dir, "README", "task\n")
	git(t, ws.Dir, "commit", "-q", "-am", "task")
	if _, err := gitCmd(ws.Dir, "merge", "side"); err == nil {
		t.Fatal("the test merge did not conflict")
	}
	write(t, ws.Dir, "half.txt", "half done\n")
	next := prepare(t, w, "a1", p, task("second-task", "second"))
	if !rescueName.MatchString(next.Rescued) {
		t.Fatalf("rescued onto %q", next.Rescued)
	}
	if got := git(t, ws.Dir, "show", next.Rescued+":README"); !strings.Contains(got, "<<<<<<< ") {
		t.Fatalf("the rescued README lost the merge state: %q", got)
	}
	if git(t, ws.Dir, "show", next.Rescued+":half.txt") != "half done" {
		t.Fatal("the rescue lacks the untracked file")
	}
	if _, err := os.Stat(filepath.Join(ws.Dir, ".git", "MERGE_HEAD")); !os.IsNotExist(err) {
		t.Fatal("the merge is still in progress")
	}
}

func TestRetryRebasesCleanly(t *testing.T) {
	t.Parallel()
	origin := bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	tk := task("retry-task", "retry")
	ws := work(t, w, "a1", p, tk, map[string]string{"mine.txt": "mine\n"})
	moved := advance(t, origin, "theirs.txt", "theirs\n")
	again := prepare(t, w, "a1", p, tk)
	if again.Branch != ws.Branch || again.Base != moved || len(again.Conflicts) != 0 {
		t.Fatalf("retry workspace %+v", again)
	}
	if git(t, again.Dir, "rev-parse", "HEAD~1") != moved || git(t, again.Dir, "rev-list", "--merges", "--count", "HEAD") != "0" {
		t.Fatal("the task branch was not rebased onto the new main")
	}
	if read(t, filepath.Join(again.Dir, "mine.txt")) != "mine\n" || read(t, filepath.Join(again.Dir, "theirs.txt")) != "theirs\n" {
		t.Fatal("the rebased checkout lacks a side's file")
	}
}

func TestRetryConflictIsLeftToTheAgent(t *testing.T) {
	t.Parallel()
	origin := bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	tk := task("conflict-task", "conflict")
	work(t, w, "a1", p, tk, map[string]string{"README": "mine\n", "other.txt": "x\n"})
	advance(t, origin, "README", "theirs\n")
	ws := prepare(t, w, "a1", p, tk)
	if !slices.Equal(ws.Conflicts, []string{"README"}) {
		t.Fatalf("conflicts %v", ws.Conflicts)
	}
	if got := read(t, filepath.Join(ws.Dir, "README")); !strings.Contains(got, "<<<<<<< ") || !strings.Contains(got, ">>>>>>> ") {
		t.Fatalf("no conflict markers: %q", got)
	}
	_, err := w.Seal(ctx, p, tk, ws)
	wantConflict(t, err, "unresolved", "README")
	git(t, ws.Dir, "add", "README") // markers and all
	_, err = w.Seal(ctx, p, tk, ws)
	wantConflict(t, err, "conflict markers remain in README")

	write(t, ws.Dir, "README", "mine and theirs\n")
	if files := seal(t, w, p, tk, ws); !slices.Equal(files, []string{"README", "other.txt"}) {
		t.Fatalf("sealed files %v", files)
	}
	if git(t, ws.Dir, "rev-list", "--merges", "--count", "HEAD") != "1" {
		t.Fatal("the merge was not concluded")
	}
	stage(t, w, p, tk, ws.Dir)
	if d := deliver(t, w, p, tk, ws.Dir); !d.Merged {
		t.Fatalf("delivery %+v", d)
	}
	if got := git(t, origin, "show", "main:README"); got != "mine and theirs" {
		t.Fatalf("origin README %q", got)
	}
}

func TestSealRefusesAnotherBranch(t *testing.T) {
	t.Parallel()
	origin := bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	tk := task("wander-task", "wander")
	ws := prepare(t, w, "a1", p, tk)
	git(t, ws.Dir, "checkout", "-q", "-b", "elsewhere")
	_, err := w.Seal(ctx, p, tk, ws)
	wantConflict(t, err, "is on elsewhere, not on the task branch "+ws.Branch)
}

func TestRetryOnAnotherAgentContinuesStagedWork(t *testing.T) {
	t.Parallel()
	origin := bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	tk := task("moving-task", "moves")
	ws := work(t, w, "a1", p, tk, map[string]string{"first.txt": "1\n"})
	stage(t, w, p, tk, ws.Dir)
	if err := w.Cleanup(ctx, p, tk, ws.Dir, false); err != nil { // verification failed
		t.Fatal(err)
	}
	again := prepare(t, w, "a2", p, tk)
	if read(t, filepath.Join(again.Dir, "first.txt")) != "1\n" {
		t.Fatal("the retry on another agent lost the first attempt's work")
	}
	write(t, again.Dir, "second.txt", "2\n")
	seal(t, w, p, tk, again)
	stage(t, w, p, tk, again.Dir)
	// Back on the first agent, its stale branch follows the staged one.
	back := prepare(t, w, "a1", p, tk)
	if read(t, filepath.Join(back.Dir, "second.txt")) != "2\n" {
		t.Fatal("the first agent's checkout kept its stale branch")
	}
}

func TestLinkRetryOnAnotherAgent(t *testing.T) {
	t.Parallel()
	user := userRepo(t)
	git(t, user, "checkout", "-q", "-b", "feature")
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoLink, SourcePath: user})
	tk := task("link-retry", "retry")
	first := work(t, w, "a1", p, tk, map[string]string{"first.txt": "1\n"})
	again := prepare(t, w, "a2", p, tk) // the branch is checked out in a1's worktree
	if read(t, filepath.Join(again.Dir, "first.txt")) != "1\n" {
		t.Fatal("the retry lost the first attempt's work")
	}
	if _, err := gitCmd(first.Dir, "symbolic-ref", "-q", "HEAD"); err == nil {
		t.Fatal("the first agent's worktree still holds the branch")
	}
	// A branch the user has checked out is refused.
	t2 := task("user-holds", "x")
	ws2 := work(t, w, "a1", p, t2, nil)
	git(t, ws2.Dir, "checkout", "-q", "--detach")
	git(t, user, "checkout", "-q", ws2.Branch)
	_, err := w.Prepare(ctx, models.Agent{ID: "a1"}, p, t2)
	wantConflict(t, err, ws2.Branch+" is checked out in "+user)
}

func TestStaleLockAndConcurrentInit(t *testing.T) {
	t.Parallel()
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoInit, SourcePath: filepath.Join(t.TempDir(), "origin.git")})
	errs := make(chan error, 4)
	for i := range 4 {
		go func() {
			_, err := w.Prepare(ctx, models.Agent{ID: fmt.Sprintf("a%d", i)}, p, task(fmt.Sprintf("t-%d", i), "t"))
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent first use of an INIT repo: %v", err)
		}
	}
	dir := w.CheckoutPath(models.Agent{ID: "a0"}, p)
	write(t, filepath.Join(dir, ".git"), "index.lock", "") // left by a killed git
	if _, err := w.Prepare(ctx, models.Agent{ID: "a0"}, p, task("after-crash", "t")); err != nil {
		t.Fatalf("a stale index.lock broke the checkout: %v", err)
	}
}

func TestAgentWrittenHooksNeverRun(t *testing.T) {
	t.Setenv("DISCORD_TOKEN", "s3cret") // the daemon's own secret
	origin := bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	tk := task("hook-task", "hook")
	ws := prepare(t, w, "a1", p, tk)
	leak := filepath.Join(t.TempDir(), "leak")
	hook := "#!/bin/sh\necho \"$0 $DISCORD_TOKEN\" >> " + leak + "\n"
	for _, dir := range []string{filepath.Join(ws.Dir, ".git", "hooks"), filepath.Join(origin, "hooks")} {
		for _, name := range []string{"pre-commit", "commit-msg", "post-commit", "post-merge", "pre-push", "post-checkout",
			"pre-receive", "update", "post-receive", "post-update", "reference-transaction", "pre-rebase"} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(hook), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Commands the checkout's configuration names, for the git that reads
	// it (upload-pack serving Stage's fetch, the daemon's own commands).
	script := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(script, []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{{"uploadpack.packObjectsHook", script}, {"core.alternateRefsCommand", script},
		{"core.fsmonitor", script}, {"core.sshCommand", script}, {"filter.x.clean", script}, {"filter.x.smudge", script}} {
		git(t, ws.Dir, "config", kv[0], kv[1])
	}
	write(t, ws.Dir, ".git/objects/info/alternates", filepath.Join(origin, "objects")+"\n")
	write(t, ws.Dir, ".git/info/attributes", "* filter=x\n")
	write(t, ws.Dir, "work.txt", "x") // left uncommitted: Seal commits it
	seal(t, w, p, tk, ws)
	stage(t, w, p, tk, ws.Dir)
	if d := deliver(t, w, p, tk, ws.Dir); !d.Merged {
		t.Fatalf("delivery %+v", d)
	}
	if err := w.Cleanup(ctx, p, tk, ws.Dir, true); err != nil {
		t.Fatal(err)
	}
	prepare(t, w, "a1", p, task("next-task", "next"))
	b, _ := os.ReadFile(leak)
	if strings.Contains(string(b), "hooks/") || strings.Contains(string(b), "s3cret") {
		t.Fatalf("a hook ran, or a configured command saw the daemon's environment: %q", b)
	}
}

func TestDeliverAfterRestartLeavesOtherWorkAlone(t *testing.T) {
	t.Parallel()
	origin := bareOrigin(t)
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	first := task("first-task", "first")
	ws := work(t, w, "a1", p, first, map[string]string{"first.txt": "1"})
	// The checkout has moved on to another task with uncommitted work when
	// the first task's delivery is repeated (as after a restart).
	ws2 := prepare(t, w, "a1", p, task("second-task", "second"))
	write(t, ws2.Dir, "second.txt", "2")
	if d := deliver(t, w, p, first, ws.Dir); !d.Merged {
		t.Fatalf("delivery %+v", d)
	}
	if _, err := gitCmd(origin, "cat-file", "-e", "main:second.txt"); err == nil {
		t.Fatal("another task's uncommitted work was delivered with the first")
	}
	if got := git(t, origin, "show", "main:first.txt"); got != "1" {
		t.Fatalf("first task not delivered: %q", got)
	}
	if read(t, filepath.Join(ws2.Dir, "second.txt")) != "2" || git(t, ws2.Dir, "branch", "--show-current") != ws2.Branch {
		t.Fatal("the delivery touched the checkout")
	}
}

func TestInvalidTaskID(t *testing.T) {
	t.Parallel()
	w, p := setup(t, &models.RepoConfig{SourceType: models.RepoClone, URL: bareOrigin(t)})
	bad := task("../escape", "x")
	if _, err := w.Prepare(ctx, models.Agent{ID: "a1"}, p, bad); models.ErrorCodeOf(err) != models.CodeInvalid {
		t.Fatalf("prepare: %v", err)
	}
	if _, err := w.Stage(ctx, p, bad, "/nowhere"); models.ErrorCodeOf(err) != models.CodeInvalid {
		t.Fatalf("stage: %v", err)
	}
}

func TestAgentLitterIsNotCommitted(t *testing.T) {
	t.Parallel()
	w, p := setup(t, &models.RepoConfig{ID: "web", SourceType: models.RepoClone, URL: bareOrigin(t), DefaultBranch: "main"})
	task := models.Task{ID: "bold-orbit", Title: "Litter"}
	ws := work(t, w, "a1", p, task, map[string]string{"real.txt": "work\n", ".aider.tags.cache.v4/cache.db": "x",
		".aider.chat.history.md": "chat"})
	files, err := w.Seal(ctx, p, task, ws)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(files, []string{"real.txt"}) {
		t.Fatalf("sealed files %v", files)
	}
}
