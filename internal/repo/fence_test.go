package repo_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/repo"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// takenOver is two daemons on one data directory and one database: A did
// a task's work, staged it and held the lease; it was paused past its
// lease's expiry, and B took the database over and runs the task again on
// the same agent's checkout (its agent's work under way, uncommitted),
// verifies it in the same verification checkout and runs a hook in the
// project's hook checkout.
type takenOver struct {
	a, b   *repo.Workspaces
	base   string // the data directory's workspaces
	p      models.Project
	task   models.Task
	origin string
	// ws is the agent's checkout as A prepared it for the task; now B's.
	ws models.Workspace
	// marks are files B's work left, which no act of A's may remove.
	marks []string
}

func takeOver(t *testing.T) *takenOver {
	t.Helper()
	clock := clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	db := filepath.Join(t.TempDir(), "aq.db")
	stA := storetest.OpenAt(t, db, storetest.WithClock(clock))
	stB := storetest.OpenAt(t, db, storetest.WithClock(clock))
	if err := stA.AcquireLease(ctx, models.LeaseHolder{Owner: "a", Hostname: "host-a", PID: 1}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	a, err := repo.New(repo.Config{BaseDir: base, Fence: stA.ConfirmLease})
	if err != nil {
		t.Fatal(err)
	}
	b, err := repo.New(repo.Config{BaseDir: base, Fence: stB.ConfirmLease})
	if err != nil {
		t.Fatal(err)
	}
	origin := bareOrigin(t)
	x := &takenOver{a: a, b: b, base: base, origin: origin, task: task("t1-fence", "fence"),
		p: project(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})}
	x.ws = work(t, a, "a1", x.p, x.task, map[string]string{"a.txt": "A's work\n"})
	stage(t, a, x.p, x.task, x.ws.Dir)

	clock.Advance(time.Minute) // A sleeps past its lease
	if err := stB.AcquireLease(ctx, models.LeaseHolder{Owner: "b", Hostname: "host-b", PID: 2}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	prepare(t, b, "a1", x.p, x.task)
	write(t, x.ws.Dir, "b-progress.txt", "B's agent at work\n")
	staged := stage(t, b, x.p, x.task, x.ws.Dir)
	write(t, staged.Dir, "b-check.out", "B's check at work\n")
	hook, done, err := b.HookCheckout(ctx, x.p)
	if err != nil {
		t.Fatal(err)
	}
	done()
	write(t, hook, "b-hook.out", "B's hook at work\n")
	x.marks = []string{filepath.Join(x.ws.Dir, "b-progress.txt"), filepath.Join(staged.Dir, "b-check.out"),
		filepath.Join(hook, "b-hook.out")}
	return x
}

// state is what B's work depends on: its files, the checkout's branch,
// commit and changes, and every ref of the origin and of each repository
// under the data directory.
func (x *takenOver) state(t *testing.T) map[string]string {
	t.Helper()
	s := map[string]string{
		"checkout HEAD":   git(t, x.ws.Dir, "rev-parse", "--symbolic-full-name", "HEAD") + " " + git(t, x.ws.Dir, "rev-parse", "HEAD"),
		"checkout status": git(t, x.ws.Dir, "status", "--porcelain"),
		"origin refs":     git(t, x.origin, "for-each-ref"),
	}
	for _, m := range x.marks {
		b, err := os.ReadFile(m)
		s[m] = string(b)
		if err != nil {
			s[m] = err.Error()
		}
	}
	repos, err := filepath.Glob(filepath.Join(x.base, "integration", "*.git"))
	if err != nil {
		t.Fatal(err)
	}
	if len(repos) == 0 {
		t.Fatal("no integration repository")
	}
	for _, r := range repos {
		s[r+" refs"] = git(t, r, "for-each-ref")
	}
	return s
}

// TestADeposedDaemonTouchesNoCheckoutOrRef: a daemon paused past its
// lease's expiry while another took the database over comes back to what
// it was doing — preparing the agent's checkout again, committing what
// its run left, cleaning up or staging the verification, merging and
// pushing the work, refreshing the hook checkout. Its database writes are
// refused, and now so is every one of these acts: each fails with the
// lease's error, and B's checkout, its verification and hook checkouts,
// the origin's refs and the integration repository's are as B left them.
func TestADeposedDaemonTouchesNoCheckoutOrRef(t *testing.T) {
	t.Parallel()
	acts := []struct {
		name string
		act  func(x *takenOver) error
	}{
		{"prepare the checkout again", func(x *takenOver) error {
			_, err := x.a.Prepare(ctx, models.Agent{ID: "a1"}, x.p, x.task)
			return err
		}},
		{"seal the run's work", func(x *takenOver) error {
			_, err := x.a.Seal(ctx, x.p, x.task, x.ws)
			return err
		}},
		{"clean up after a merge", func(x *takenOver) error { return x.a.Cleanup(ctx, x.p, x.task, x.ws.Dir, true) }},
		{"stage the verification", func(x *takenOver) error {
			_, err := x.a.Stage(ctx, x.p, x.task, x.ws.Dir)
			return err
		}},
		{"merge into the default branch", func(x *takenOver) error {
			_, err := x.a.Deliver(ctx, x.p, x.task, x.ws.Dir)
			return err
		}},
		{"push the task branch", func(x *takenOver) error {
			_, _, err := x.a.PushBranch(ctx, x.p, x.task, x.ws.Dir)
			return err
		}},
		{"refresh the hook checkout", func(x *takenOver) error {
			_, done, err := x.a.HookCheckout(ctx, x.p)
			if err == nil {
				done()
			}
			return err
		}},
	}
	for _, tc := range acts {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			x := takeOver(t)
			before := x.state(t)
			err := tc.act(x)
			for k, v := range x.state(t) {
				if before[k] != v {
					t.Errorf("%s changed:\n%s\nwas:\n%s", k, v, before[k])
				}
			}
			if !errors.Is(err, store.ErrLeaseLost) {
				t.Fatalf("the deposed daemon's act: %v, want the lease's error", err)
			}
		})
	}
}
