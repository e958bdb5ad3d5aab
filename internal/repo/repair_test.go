package repo_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/repo"
)

// syncBuffer is a bytes.Buffer for a logger shared by goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// setupLogged is setup with the base directory returned and the log kept.
func setupLogged(t *testing.T, r *models.RepoConfig) (*repo.Workspaces, models.Project, string, *syncBuffer) {
	t.Helper()
	base, logs := t.TempDir(), &syncBuffer{}
	w, err := repo.New(repo.Config{BaseDir: base, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return w, project(t, r), base, logs
}

// packs lists the packs (their .pack files) of the git directory gitDir.
func packs(t *testing.T, gitDir string) []string {
	t.Helper()
	list, err := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "pack-*.pack"))
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// damage is what a crash (or a disk) does to a pack.
type damage string

const (
	emptyIndex    damage = "an emptied index"
	truncatedPack damage = "a truncated pack"
)

// breakPacks damages every pack of the git directory gitDir as d says and
// returns how many there were.
func breakPacks(t *testing.T, gitDir string, d damage) int {
	t.Helper()
	list := packs(t, gitDir)
	if len(list) == 0 {
		t.Fatalf("%s has no pack to damage", gitDir)
	}
	for _, pack := range list {
		path, size := strings.TrimSuffix(pack, ".pack")+".idx", int64(0)
		if d == truncatedPack {
			fi, err := os.Stat(pack)
			if err != nil {
				t.Fatal(err)
			}
			path, size = pack, fi.Size()/2
		}
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, size); err != nil {
			t.Fatal(err)
		}
	}
	return len(list)
}

// mergesOf counts, per task, the merge commits on main of the repository
// at dir.
func mergesOf(t *testing.T, dir string) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, s := range strings.Split(git(t, dir, "log", "--format=%s", "main"), "\n") {
		if id, ok := strings.CutPrefix(s, "Merge "); ok {
			id, _, _ = strings.Cut(id, ":")
			n[id]++
		}
	}
	return n
}

// wantWhole fails unless the repository at dir is whole: every object of
// every reference is there and readable.
func wantWhole(t *testing.T, dir string) {
	t.Helper()
	if out, err := gitCmd(dir, "fsck", "--connectivity-only", "--no-dangling"); err != nil || strings.Contains(out, "error") {
		t.Fatalf("%s is not whole after the repair: %v\n%s", dir, err, out)
	}
}

// TestDamagedIntegrationRepositoryIsRepaired starts from what a daemon
// killed during a fetch left in the integration repository (an empty pack
// index, which go-git then kept when the same pack came again; every
// merge of the project failed "EOF") and from a pack cut short: staging
// and delivering go on, every task is merged once, and staged work is not
// lost.
func TestDamagedIntegrationRepositoryIsRepaired(t *testing.T) {
	t.Parallel()
	for _, d := range []damage{emptyIndex, truncatedPack} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			origin := bareOrigin(t)
			w, p, base, logs := setupLogged(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
			integ := filepath.Join(base, "integration", p.Repo.ID+".git")
			t1, t2, t3 := task("one-task", "one"), task("two-task", "two"), task("three-task", "three")
			ws1 := work(t, w, "a1", p, t1, map[string]string{"one.txt": "1\n"})
			stage(t, w, p, t1, ws1.Dir)
			deliver(t, w, p, t1, ws1.Dir)
			ws2 := work(t, w, "a2", p, t2, map[string]string{"two.txt": "2\n"})
			stage(t, w, p, t2, ws2.Dir) // staged, awaiting its checks

			breakPacks(t, integ, d)
			ws3 := work(t, w, "a1", p, t3, map[string]string{"three.txt": "3\n"})
			st3 := stage(t, w, p, t3, ws3.Dir)
			if read(t, filepath.Join(st3.Dir, "three.txt")) != "3\n" || read(t, filepath.Join(st3.Dir, "one.txt")) != "1\n" {
				t.Fatal("the staged merge of three lacks its files")
			}
			for _, c := range []struct {
				tk models.Task
				ws models.Workspace
			}{{t2, ws2}, {t3, ws3}} {
				if dl := deliver(t, w, p, c.tk, c.ws.Dir); !dl.Merged {
					t.Fatalf("delivery of %s: %+v", c.tk.ID, dl)
				}
			}
			for file, want := range map[string]string{"one.txt": "1", "two.txt": "2", "three.txt": "3"} {
				if got := git(t, origin, "show", "main:"+file); got != want {
					t.Fatalf("origin main has %s = %q, want %q", file, got, want)
				}
			}
			if n := mergesOf(t, origin); n["one-task"] != 1 || n["two-task"] != 1 || n["three-task"] != 1 || len(n) != 3 {
				t.Fatalf("merges on main: %v, want each task once", n)
			}
			wantWhole(t, integ)
			if !strings.Contains(logs.String(), "repaired a damaged repository") || !strings.Contains(logs.String(), "task_id=three-task") {
				t.Fatalf("the repair was not logged:\n%s", logs)
			}
		})
	}
}

// TestDamagedCheckoutIsRepaired damages the packs of an agent's clone: a
// sealed task is still staged and delivered from it, and the next
// Prepare succeeds, keeping what a killed run left uncommitted.
func TestDamagedCheckoutIsRepaired(t *testing.T) {
	t.Parallel()
	for _, d := range []damage{emptyIndex, truncatedPack} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			origin := bareOrigin(t)
			w, p, _, logs := setupLogged(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
			t1, t2, t3, t4 := task("one-task", "one"), task("two-task", "two"), task("three-task", "three"), task("four-task", "four")
			ws1 := work(t, w, "a1", p, t1, map[string]string{"one.txt": "1\n"})
			stage(t, w, p, t1, ws1.Dir)
			deliver(t, w, p, t1, ws1.Dir)
			advance(t, origin, "other.txt", "someone else's\n")
			ws2 := work(t, w, "a1", p, t2, map[string]string{"two.txt": "2\n"}) // sealed, not yet staged

			gitDir := filepath.Join(ws2.Dir, ".git")
			breakPacks(t, gitDir, d)
			stage(t, w, p, t2, ws2.Dir)
			if dl := deliver(t, w, p, t2, ws2.Dir); !dl.Merged {
				t.Fatalf("delivery of two: %+v", dl)
			}
			ws3 := prepare(t, w, "a1", p, t3)
			write(t, ws3.Dir, "three.txt", "unfinished\n") // a run killed before its end

			breakPacks(t, gitDir, d)
			ws4 := work(t, w, "a1", p, t4, map[string]string{"four.txt": "4\n"})
			if ws4.Dir != ws3.Dir || read(t, filepath.Join(ws4.Dir, "one.txt")) != "1\n" || read(t, filepath.Join(ws4.Dir, "two.txt")) != "2\n" {
				t.Fatal("the checkout prepared after the repair lacks the delivered work")
			}
			if ws4.Rescued == "" || git(t, ws4.Dir, "show", ws4.Rescued+":three.txt") != "unfinished" {
				t.Fatalf("the uncommitted work of the killed run was not rescued (rescued %q)", ws4.Rescued)
			}
			if aside, _ := filepath.Glob(ws3.Dir + ".damaged-*"); len(aside) > 0 {
				t.Fatalf("a damaged copy whose work was all carried over is kept: %v", aside)
			}
			stage(t, w, p, t4, ws4.Dir)
			deliver(t, w, p, t4, ws4.Dir)
			for file, want := range map[string]string{"one.txt": "1", "two.txt": "2", "four.txt": "4", "other.txt": "someone else's"} {
				if got := git(t, origin, "show", "main:"+file); got != want {
					t.Fatalf("origin main has %s = %q, want %q", file, got, want)
				}
			}
			if n := mergesOf(t, origin); n["one-task"] != 1 || n["two-task"] != 1 || n["four-task"] != 1 || len(n) != 3 {
				t.Fatalf("merges on main: %v, want each task once", n)
			}
			wantWhole(t, ws4.Dir)
			if !strings.Contains(logs.String(), "repaired a damaged repository") {
				t.Fatalf("the repair was not logged:\n%s", logs)
			}
		})
	}
}

// TestCheckoutWithLostWorkIsKeptAside damages a clone whose agent packed
// its own commit (git gc) and left a file uncommitted: neither can be
// carried over into the new clone, so the damaged copy is kept beside it,
// named in the log, and the next Prepare still succeeds.
func TestCheckoutWithLostWorkIsKeptAside(t *testing.T) {
	t.Parallel()
	origin := bareOrigin(t)
	w, p, _, logs := setupLogged(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	ws := prepare(t, w, "a1", p, task("one-task", "one"))
	write(t, ws.Dir, "mine.txt", "committed by the agent\n")
	git(t, ws.Dir, "add", "mine.txt")
	git(t, ws.Dir, "commit", "-q", "-m", "the agent's own commit")
	git(t, ws.Dir, "repack", "-q", "-a", "-d")
	write(t, ws.Dir, "draft.txt", "uncommitted\n")
	breakPacks(t, filepath.Join(ws.Dir, ".git"), truncatedPack)

	ws2 := prepare(t, w, "a1", p, task("two-task", "two"))
	if ws2.Dir != ws.Dir || ws2.Rescued != "" || read(t, filepath.Join(ws2.Dir, "README")) != "hello\n" {
		t.Fatalf("workspace after the repair %+v", ws2)
	}
	aside, _ := filepath.Glob(ws.Dir + ".damaged-*")
	if len(aside) != 1 || read(t, filepath.Join(aside[0], "draft.txt")) != "uncommitted\n" {
		t.Fatalf("the damaged checkout was not kept aside with its work: %v", aside)
	}
	if !strings.Contains(logs.String(), "kept the damaged copy") || !strings.Contains(logs.String(), aside[0]) {
		t.Fatalf("the log does not name the copy kept:\n%s", logs)
	}
}

// TestDamagedUserRepositoryIsReported damages a pack of the user's own
// repository (LINK): nothing there is changed, and the error names the
// repository and the command that repairs it.
func TestDamagedUserRepositoryIsReported(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d    damage
		want string
	}{
		{emptyIndex, "index-pack"},
		{truncatedPack, "fsck"},
	} {
		t.Run(string(c.d), func(t *testing.T) {
			t.Parallel()
			user := userRepo(t)
			w, p, _, _ := setupLogged(t, &models.RepoConfig{SourceType: models.RepoLink, SourcePath: user})
			tk := task("one-task", "one")
			ws := work(t, w, "a1", p, tk, map[string]string{"one.txt": "1\n"})
			git(t, user, "repack", "-q", "-a", "-d")
			gitDir := filepath.Join(user, ".git")
			breakPacks(t, gitDir, c.d)
			before := snapshot(t, gitDir)
			_, err := w.Stage(ctx, p, tk, ws.Dir)
			wantConflict(t, err, "the repository "+user+" is damaged", c.want, "does not change a repository it does not own")
			_, err = w.Prepare(ctx, models.Agent{ID: "a2"}, p, task("two-task", "two"))
			wantConflict(t, err, "the repository "+user+" is damaged", c.want)
			if after := snapshot(t, gitDir); after != before {
				t.Fatalf("the user's repository changed:\n%s\nthen\n%s", before, after)
			}
		})
	}
}

// snapshot describes the files of objects/pack of a git directory.
func snapshot(t *testing.T, gitDir string) string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(gitDir, "objects", "pack"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(e.Name() + " " + fi.ModTime().String() + " " + fi.Mode().String() + "\n")
		b.WriteString(strings.Repeat("x", int(fi.Size()%7)) + "\n")
	}
	return b.String()
}

// TestDamagedInitOriginIsIndexedAgain empties a pack index of an INIT
// origin, the only copy of the project's delivered work: its pack is
// whole, so it gets a new index and delivery goes on. A pack cut short is
// reported, naming the repository; nothing is rebuilt.
func TestDamagedInitOriginIsIndexedAgain(t *testing.T) {
	t.Parallel()
	for _, d := range []damage{emptyIndex, truncatedPack} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			w, p, base, _ := setupLogged(t, &models.RepoConfig{SourceType: models.RepoInit})
			originDir := filepath.Join(base, "origins", p.Repo.ID+".git")
			t1, t2 := task("one-task", "one"), task("two-task", "two")
			ws1 := work(t, w, "a1", p, t1, map[string]string{"one.txt": "1\n"})
			stage(t, w, p, t1, ws1.Dir)
			deliver(t, w, p, t1, ws1.Dir)
			git(t, originDir, "repack", "-q", "-a", "-d")
			breakPacks(t, originDir, d)
			ws2, err := w.Prepare(ctx, models.Agent{ID: "a2"}, p, t2)
			if d == truncatedPack {
				wantConflict(t, err, "the repository "+originDir, "is damaged", "is not rebuilt")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			write(t, ws2.Dir, "two.txt", "2\n")
			seal(t, w, p, t2, ws2)
			deliver(t, w, p, t2, ws2.Dir)
			if n := mergesOf(t, originDir); n["one-task"] != 1 || n["two-task"] != 1 {
				t.Fatalf("merges on main: %v", n)
			}
			wantWhole(t, originDir)
		})
	}
}

// TestDamagedHookCheckoutIsRepaired damages the packs of a project's hook
// checkout that a hook command has written in, so that its next refresh
// fails: a whole pack is indexed again, and a checkout with a pack cut
// short, which holds nothing to keep, is cloned again.
func TestDamagedHookCheckoutIsRepaired(t *testing.T) {
	t.Parallel()
	for _, d := range []damage{emptyIndex, truncatedPack} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			origin := bareOrigin(t)
			w, p, _, logs := setupLogged(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
			dir, done, err := w.HookCheckout(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			done()
			git(t, dir, "repack", "-q", "-a", "-d")
			advance(t, origin, "new.txt", "new\n")
			if _, done, err = w.HookCheckout(ctx, p); err != nil {
				t.Fatal(err)
			}
			done()
			breakPacks(t, filepath.Join(dir, ".git"), d)
			write(t, dir, "README", "changed by a hook command\n")
			dir, done, err = w.HookCheckout(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			done()
			if read(t, filepath.Join(dir, "new.txt")) != "new\n" || read(t, filepath.Join(dir, "README")) != "hello\n" {
				t.Fatal("the hook checkout is not at the origin's tip")
			}
			wantWhole(t, dir)
			if !strings.Contains(logs.String(), "repaired a damaged repository") {
				t.Fatalf("the repair was not logged:\n%s", logs)
			}
		})
	}
}

// TestCheckoutDamagedInUseIsClonedAgainByItsNextPrepare damages a clone
// whose only copy of a sealed commit was in the damaged pack, while a run
// could be using the clone (Stage): it is refilled in place, found still
// incomplete and marked, and its agent's next Prepare sets it aside and
// clones it again.
func TestCheckoutDamagedInUseIsClonedAgainByItsNextPrepare(t *testing.T) {
	t.Parallel()
	origin := bareOrigin(t)
	w, p, _, logs := setupLogged(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
	t1 := task("one-task", "one")
	ws := work(t, w, "a1", p, t1, map[string]string{"one.txt": "1\n"})
	git(t, ws.Dir, "repack", "-q", "-a", "-d")
	breakPacks(t, filepath.Join(ws.Dir, ".git"), truncatedPack)

	if _, err := w.Stage(ctx, p, t1, ws.Dir); err == nil {
		t.Fatal("a task branch whose commit is lost was staged")
	}
	if _, err := os.Stat(filepath.Join(ws.Dir, ".git", "aq-damaged")); err != nil {
		t.Fatalf("the damaged checkout is not marked: %v\n%s", err, logs)
	}
	ws2 := prepare(t, w, "a1", p, task("two-task", "two"))
	if ws2.Dir != ws.Dir || read(t, filepath.Join(ws2.Dir, "README")) != "hello\n" {
		t.Fatalf("workspace after the repair %+v", ws2)
	}
	if _, err := os.Stat(filepath.Join(ws2.Dir, ".git", "aq-damaged")); !os.IsNotExist(err) {
		t.Fatalf("the new clone is still marked: %v", err)
	}
	wantWhole(t, ws2.Dir)
	if aside, _ := filepath.Glob(ws.Dir + ".damaged-*"); len(aside) != 1 {
		t.Fatalf("the damaged copy, whose branch could not be carried over, was not kept: %v", aside)
	}
}
