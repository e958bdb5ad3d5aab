package landing_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/landing"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/repo"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// git runs git in dir with the test's identity and no user or system
// configuration, and returns its trimmed output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@localhost",
		"-c", "commit.gpgsign=false"}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// linkEnv is a Lander on a real store and real workspaces, for the LINK
// project p whose repository, the user's, has main checked out.
type linkEnv struct {
	*env
	user string
	ws   *repo.Workspaces
}

// linkOpts adjust a linkEnv.
type linkOpts struct {
	// settings are the project's.
	settings models.ProjectSettings
	// ws and store, when set, wrap what the Lander uses.
	ws    func(landing.Workspaces) landing.Workspaces
	store func(landing.Store) landing.Store
	// cfg is the Lander's configuration (the run directory, environment
	// and, unless set, clock are the test's).
	cfg landing.Config
	// setup runs on the Lander before anything verifies.
	setup func(*landing.Lander)
}

// newLinkEnv makes the user's repository (main holding notes.md, clean)
// and the project p linked to it.
func newLinkEnv(t *testing.T, o linkOpts) *linkEnv {
	t.Helper()
	ctx := context.Background()
	user := filepath.Join(t.TempDir(), "mine")
	if err := os.MkdirAll(user, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, user, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(user, "notes.md"), "mine\n")
	git(t, user, "add", "-A")
	git(t, user, "commit", "-q", "-m", "mine")

	st := storetest.Open(t)
	ws, err := repo.New(repo.Config{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateProject(ctx, models.Project{ID: "p", Settings: o.settings,
		Repo: &models.RepoConfig{ID: "mine", SourceType: models.RepoLink, SourcePath: user, DefaultBranch: "main"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RegisterAgent(ctx, models.Agent{ID: "worker", AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "/bin/true"}}); err != nil {
		t.Fatal(err)
	}
	var lws landing.Workspaces = ws
	if o.ws != nil {
		lws = o.ws(ws)
	}
	var lst landing.Store = st
	if o.store != nil {
		lst = o.store(st)
	}
	h := &host{}
	cfg := o.cfg
	cfg.RunDir, cfg.Environ = t.TempDir(), os.Environ()
	if cfg.Clock == nil {
		cfg.Clock = clocktest.NewFollowing()
	}
	l := landing.New(cfg, lst, lws, h)
	if o.setup != nil {
		o.setup(l)
	}
	t.Cleanup(func() { l.Shutdown(); l.Wait() })
	return &linkEnv{env: &env{t: t, st: st, host: h, l: l, dir: t.TempDir()}, user: user, ws: ws}
}

// verified creates a task whose branch in the user's repository writes
// file, and takes it through a run to VERIFYING.
func (e *linkEnv) verified(bt models.BatchTask, file, content string) string {
	e.t.Helper()
	id := e.verifyingWith(bt, func(tk models.Task) {
		git(e.t, e.user, "checkout", "-q", "-b", repo.BranchName(tk))
		writeFile(e.t, filepath.Join(e.user, file), content)
		git(e.t, e.user, "add", file)
		git(e.t, e.user, "commit", "-q", "-m", "work of "+tk.ID)
		git(e.t, e.user, "checkout", "-q", "main")
	})
	return id
}

// gatedDeliver lets the first n Deliver calls through and holds the next
// one: it closes inside and waits for release (or for its context to end)
// before merging.
type gatedDeliver struct {
	landing.Workspaces
	n       int
	inside  chan struct{}
	release chan struct{}

	mu    sync.Mutex
	calls int
}

func (g *gatedDeliver) Deliver(ctx context.Context, p models.Project, t models.Task, src string) (models.Delivery, error) {
	g.mu.Lock()
	g.calls++
	held := g.calls == g.n+1
	g.mu.Unlock()
	if held {
		close(g.inside)
		select {
		case <-g.release:
		case <-ctx.Done():
			return models.Delivery{}, ctx.Err()
		}
	}
	return g.Workspaces.Deliver(ctx, p, t, src)
}

// TestApproveAnswersAsItsOwnVerificationLeftTheTask: a person approves
// work that waits for approval while the user's main has local changes.
// The decision's verification leaves the landing waiting; as soon as it
// has released the task a second verification of it (the loop's resume,
// or `land`) starts and holds it in the middle of its merge again. The
// approval still answers that the change waits to land, and why — not
// "still AWAITING_APPROVAL" from the second verification's state.
func TestApproveAnswersAsItsOwnVerificationLeftTheTask(t *testing.T) {
	t.Parallel()
	gate := &gatedDeliver{n: 1, inside: make(chan struct{}), release: make(chan struct{})}
	var once sync.Once
	var id string
	e := newLinkEnv(t, linkOpts{settings: models.ProjectSettings{PRMode: models.PRNever},
		ws: func(ws landing.Workspaces) landing.Workspaces { gate.Workspaces = ws; return gate },
		setup: func(l *landing.Lander) {
			landing.SetAfterVerify(l, func(taskID string) {
				gate.mu.Lock()
				calls := gate.calls
				gate.mu.Unlock()
				if taskID != id || calls != 1 {
					return // not the decision's verification
				}
				once.Do(func() {
					l.Advance(taskID)
					select {
					case <-gate.inside:
					case <-progresstest.Context(t).Done():
						t.Error("the second verification never reached its merge")
					}
				})
			})
		}})
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(gate.release) }) }
	t.Cleanup(release)
	ctx := context.Background()
	id = e.verified(models.BatchTask{Title: "Needs a person", RequiresApproval: true}, "gated.txt", "gated\n")
	e.l.Verify(id)
	if tk := e.task(id); tk.Status != models.StatusAwaitingApproval {
		t.Fatalf("the verified task is %s (%q)", tk.Status, tk.StatusReason)
	}
	writeFile(t, filepath.Join(e.user, "notes.md"), "mine, edited\n")
	head := git(t, e.user, "rev-parse", "main")

	_, err := e.l.Approve(ctx, id, "ana", "ship it")
	if models.ErrorCodeOf(err) != models.CodeConflict || !strings.Contains(err.Error(), "waits to land") ||
		!strings.Contains(err.Error(), "local changes (notes.md)") {
		t.Fatalf("approve with local changes, a second verification merging: %v", err)
	}
	select {
	case <-gate.inside:
	default:
		t.Fatal("the answer came without the second verification inside its merge: the interleaving was not forced")
	}
	release()
	e.l.Verify(id) // waits for the second one, and verifies once more
	tk := e.task(id)
	if tk.Status != models.StatusAwaitingApproval || tk.WaitingCode != models.WaitingLanding ||
		git(t, e.user, "rev-parse", "main") != head {
		t.Fatalf("the approved task: %s %q %q", tk.Status, tk.WaitingCode, tk.WaitingReason)
	}
	if b, _ := os.ReadFile(filepath.Join(e.user, "notes.md")); string(b) != "mine, edited\n" {
		t.Fatalf("notes.md is %q", b)
	}
}

// TestLandReportsAMergeThatNowConflicts: a landing waits for the user's
// local changes; the user then commits a change of the file the task
// changed. Land merges again, the merge conflicts, and the answer lists
// the task as failed, naming the file, as the verification left it:
// FAILED (VERIFY_FAILED) for verified work, READY (ADMIN_RESTART) for
// approved work. Nothing is merged.
func TestLandReportsAMergeThatNowConflicts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		approval bool
		status   models.TaskStatus
	}{
		{"verified work", false, models.StatusFailed},
		{"approved work", true, models.StatusReady},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newLinkEnv(t, linkOpts{settings: models.ProjectSettings{PRMode: models.PRNever}})
			ctx := context.Background()
			id := e.verified(models.BatchTask{Title: "Shared", RequiresApproval: c.approval}, "shared.txt", "from the task\n")
			writeFile(t, filepath.Join(e.user, "notes.md"), "mine, edited\n")
			e.l.Verify(id)
			if c.approval {
				if _, err := e.l.Approve(ctx, id, "ana", ""); !strings.Contains(errText(err), "waits to land") {
					t.Fatalf("approve with local changes: %v", err)
				}
			}
			if tk := e.task(id); tk.WaitingCode != models.WaitingLanding {
				t.Fatalf("the landing does not wait: %s %q", tk.Status, tk.StatusReason)
			}
			writeFile(t, filepath.Join(e.user, "shared.txt"), "from the user\n")
			git(t, e.user, "add", "-A")
			git(t, e.user, "commit", "-q", "-m", "my shared.txt")
			head := git(t, e.user, "rev-parse", "main")

			res, err := e.l.Land(ctx, "p")
			if err != nil || len(res.Landed) != 0 || len(res.Waiting) != 0 || len(res.Failed) != 1 {
				t.Fatalf("land: %+v %v", res, err)
			}
			f := res.Failed[0]
			if f.TaskID != id || f.Status != c.status || strings.Join(f.Files, ",") != "shared.txt" ||
				f.Reason != "main moved: shared.txt conflict; the task runs again with the conflict to resolve" {
				t.Fatalf("the failed landing: %+v", f)
			}
			if tk := e.task(id); tk.Status != c.status || tk.WaitingCode != "" || !strings.Contains(tk.StatusReason, "shared.txt") {
				t.Fatalf("the task after land: %s %q %q", tk.Status, tk.WaitingCode, tk.StatusReason)
			}
			if git(t, e.user, "rev-parse", "main") != head || git(t, e.user, "status", "--porcelain") != "" {
				t.Fatal("the user's main or tree changed")
			}
			if b, _ := os.ReadFile(filepath.Join(e.user, "shared.txt")); string(b) != "from the user\n" {
				t.Fatalf("shared.txt is %q", b)
			}
		})
	}
}

// errText is err's message, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// listedStore closes listed once the Lander has listed verifications.
type listedStore struct {
	landing.Store
	listed chan struct{}
	once   sync.Once
}

func (s *listedStore) Verifications(ctx context.Context, phases ...models.VerificationPhase) ([]models.Verification, error) {
	vs, err := s.Store.Verifications(ctx, phases...)
	s.once.Do(func() { close(s.listed) })
	return vs, err
}

// TestLandWaitsForARetryUnderWay: the user stashed (or committed a
// change of the file the task writes), and a retry of the waiting landing
// (the daemon's own) is in the middle of its merge when `land` lists the
// project's waiting landings. Land counts it, waits for it and answers
// what it did: landed, or failed with the file in conflict. It answered
// that nothing waited.
func TestLandWaitsForARetryUnderWay(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		approval bool
		conflict bool
		status   models.TaskStatus
	}{
		{"verified work lands", false, false, models.StatusCompleted},
		{"approved work lands", true, false, models.StatusCompleted},
		{"verified work conflicts", false, true, models.StatusFailed},
		{"approved work conflicts", true, true, models.StatusReady},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			gate := &gatedDeliver{n: 1, inside: make(chan struct{}), release: make(chan struct{})}
			lst := &listedStore{listed: make(chan struct{})}
			e := newLinkEnv(t, linkOpts{settings: models.ProjectSettings{PRMode: models.PRNever},
				ws:    func(ws landing.Workspaces) landing.Workspaces { gate.Workspaces = ws; return gate },
				store: func(st landing.Store) landing.Store { lst.Store = st; return lst }})
			var releaseOnce sync.Once
			release := func() { releaseOnce.Do(func() { close(gate.release) }) }
			t.Cleanup(release)
			ctx := context.Background()
			id := e.verified(models.BatchTask{Title: "Retried", RequiresApproval: c.approval}, "retried.txt", "retried\n")
			writeFile(t, filepath.Join(e.user, "notes.md"), "mine, edited\n")
			e.l.Verify(id)
			if c.approval {
				if _, err := e.l.Approve(ctx, id, "ana", ""); !strings.Contains(errText(err), "waits to land") {
					t.Fatalf("approve with local changes: %v", err)
				}
			}
			if tk := e.task(id); tk.WaitingCode != models.WaitingLanding {
				t.Fatalf("the landing does not wait: %s %q", tk.Status, tk.StatusReason)
			}
			if c.conflict {
				writeFile(t, filepath.Join(e.user, "retried.txt"), "the user's\n")
				git(t, e.user, "add", "-A")
				git(t, e.user, "commit", "-q", "-m", "mine")
			} else {
				git(t, e.user, "stash", "-q")
			}
			e.l.Advance(id) // the daemon's own retry
			select {
			case <-gate.inside:
			case <-progresstest.Context(t).Done():
				t.Fatal("the retry never reached its merge")
			}
			type answer struct {
				res models.LandResult
				err error
			}
			landed := make(chan answer, 1)
			go func() {
				res, err := e.l.Land(ctx, "p")
				landed <- answer{res, err}
			}()
			select {
			case <-lst.listed:
			case <-progresstest.Context(t).Done():
				t.Fatal("land never listed the waiting landings")
			}
			release()
			var a answer
			select {
			case a = <-landed:
			case <-progresstest.Context(t).Done():
				t.Fatal("land never answered")
			}
			list, other, want := a.res.Landed, len(a.res.Waiting)+len(a.res.Failed), "retried\n"
			if c.conflict {
				list, other, want = a.res.Failed, len(a.res.Waiting)+len(a.res.Landed), "the user's\n"
			}
			if a.err != nil || len(list) != 1 || list[0].TaskID != id || list[0].Status != c.status || other != 0 ||
				(c.conflict && strings.Join(list[0].Files, ",") != "retried.txt") {
				t.Fatalf("land during a retry: %+v %v", a.res, a.err)
			}
			if b, err := os.ReadFile(filepath.Join(e.user, "retried.txt")); err != nil || string(b) != want {
				t.Fatalf("retried.txt in the user's tree: %q %v", b, err)
			}
		})
	}
}

// TestWatchLandingsLandsOnceTheTreeIsClean: with nothing waiting the
// watcher arms no timer; once a landing waits for the user's local change
// it checks the tree every LandPollInterval, leaves a dirty tree alone,
// and at the first check after `git stash` lands the task: COMPLETED,
// the user's main advanced in place, the stash intact.
func TestWatchLandingsLandsOnceTheTreeIsClean(t *testing.T) {
	t.Parallel()
	clk := clocktest.NewFollowing()
	verified := make(chan string, 16)
	e := newLinkEnv(t, linkOpts{cfg: landing.Config{Clock: clk}, setup: func(l *landing.Lander) {
		landing.SetAfterVerify(l, func(id string) { verified <- id })
	}})
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan error, 1)
	go func() { watched <- e.l.WatchLandings(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-watched; err != nil {
			t.Errorf("WatchLandings: %v", err)
		}
	})
	poll := landing.DefaultLandPollInterval
	// A check, as the watcher makes it: the poll's timer fires, and the
	// pass is over once the next poll's timer is armed.
	pass := func() {
		t.Helper()
		if err := clk.WaitTimer(progresstest.Context(t), poll); err != nil {
			t.Fatal(err)
		}
		clk.Advance(poll)
	}

	id := e.verified(models.BatchTask{Title: "Watched"}, "watched.txt", "watched\n")
	writeFile(t, filepath.Join(e.user, "notes.md"), "mine, edited\n")
	head := git(t, e.user, "rev-parse", "main")
	select {
	case d := <-clk.Armed():
		t.Fatalf("a timer of %s was armed while nothing waited to land", d)
	default:
	}
	e.l.Verify(id)
	<-verified
	if tk := e.task(id); tk.Status != models.StatusVerifying || tk.WaitingCode != models.WaitingLanding ||
		!strings.Contains(tk.WaitingReason, "lands by itself") {
		t.Fatalf("the landing does not wait: %s %q %q", tk.Status, tk.StatusReason, tk.WaitingReason)
	}
	// Dirty: two checks leave everything alone.
	for range 2 {
		pass()
	}
	if err := clk.WaitTimer(progresstest.Context(t), poll); err != nil {
		t.Fatal(err)
	}
	if tk := e.task(id); tk.WaitingCode != models.WaitingLanding || git(t, e.user, "rev-parse", "main") != head {
		t.Fatalf("the dirty tree's landing: %s %q, main moved: %v", tk.Status, tk.WaitingCode, git(t, e.user, "rev-parse", "main") != head)
	}
	if b, _ := os.ReadFile(filepath.Join(e.user, "notes.md")); string(b) != "mine, edited\n" {
		t.Fatalf("notes.md is %q", b)
	}
	select {
	case id := <-verified:
		t.Fatalf("%s was verified while the tree was dirty", id)
	default:
	}

	git(t, e.user, "stash", "-q")
	pass()
	select {
	case <-verified:
	case <-progresstest.Context(t).Done():
		t.Fatal("the watcher did not land the task after the stash")
	}
	tk := e.task(id)
	if tk.Status != models.StatusCompleted || tk.WaitingCode != "" || !strings.Contains(tk.StatusReason, "merged into main") {
		t.Fatalf("after the stash: %s %q %q", tk.Status, tk.WaitingCode, tk.StatusReason)
	}
	if git(t, e.user, "rev-parse", "main") == head || git(t, e.user, "status", "--porcelain", "--untracked-files=no") != "" {
		t.Fatal("the user's main was not advanced in place")
	}
	if b, _ := os.ReadFile(filepath.Join(e.user, "watched.txt")); string(b) != "watched\n" {
		t.Fatalf("watched.txt in the user's tree: %q", b)
	}
	if list := git(t, e.user, "stash", "list"); strings.Count(list, "\n")+1 != 1 || list == "" {
		t.Fatalf("the stash: %q", list)
	}
	git(t, e.user, "stash", "pop", "-q")
	if b, _ := os.ReadFile(filepath.Join(e.user, "notes.md")); string(b) != "mine, edited\n" {
		t.Fatalf("the user's change after stash pop: %q", b)
	}
}

// TestWatchLandingsBacksOffWhileGitRefuses: an untracked file of the
// user's that the merge would overwrite holds no landing by the check
// (the tree is clean), but git refuses to update the tree and the landing
// still waits. The watcher then retries that project less and less often
// (after 1, 2, 4 polls …), never touching the file, and lands the work at
// its next retry once the file is gone.
func TestWatchLandingsBacksOffWhileGitRefuses(t *testing.T) {
	t.Parallel()
	// A clock that stands between Advances: the back-off is counted in
	// polls, and a clock that followed the real time drifted by the
	// seconds a loaded machine took between them, moving a retry to an
	// earlier poll.
	clk := clocktest.New(time.Now())
	verified := make(chan string, 64)
	e := newLinkEnv(t, linkOpts{cfg: landing.Config{Clock: clk}, setup: func(l *landing.Lander) {
		landing.SetAfterVerify(l, func(id string) { verified <- id })
	}})
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan error, 1)
	go func() { watched <- e.l.WatchLandings(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-watched; err != nil {
			t.Errorf("WatchLandings: %v", err)
		}
	})
	poll := landing.DefaultLandPollInterval
	// pass makes one poll and returns how many verifications (retries of
	// the landing) it ran.
	pass := func() int {
		t.Helper()
		if err := clk.WaitTimer(progresstest.Context(t), poll); err != nil {
			t.Fatal(err)
		}
		clk.Advance(poll)
		if err := clk.WaitTimer(progresstest.Context(t), poll); err != nil {
			t.Fatal(err)
		}
		return len(verified)
	}
	drain := func() {
		for len(verified) > 0 {
			<-verified
		}
	}

	id := e.verified(models.BatchTask{Title: "Refused"}, "refused.txt", "the task's\n")
	untracked := filepath.Join(e.user, "refused.txt")
	writeFile(t, untracked, "the user's\n")
	e.l.Verify(id)
	drain()
	if tk := e.task(id); tk.WaitingCode != models.WaitingLanding || !strings.Contains(tk.WaitingReason, "git could not bring") {
		t.Fatalf("the landing does not wait for git: %s %q %q", tk.Status, tk.StatusReason, tk.WaitingReason)
	}
	var got []int
	for range 8 {
		got = append(got, pass())
		drain()
	}
	if want := []int{1, 1, 0, 1, 0, 0, 0, 1}; !slices.Equal(got, want) {
		t.Fatalf("retries per poll %v, want %v", got, want)
	}
	if b, _ := os.ReadFile(untracked); string(b) != "the user's\n" {
		t.Fatalf("the user's untracked file is %q", b)
	}
	if err := os.Remove(untracked); err != nil {
		t.Fatal(err)
	}
	// The next retry is due 16s after the last one: at the 8th poll.
	for i := range 7 {
		if n := pass(); n != 0 {
			t.Fatalf("retried at poll %d of the back-off, want the 8th", i+1)
		}
	}
	if err := clk.WaitTimer(progresstest.Context(t), poll); err != nil {
		t.Fatal(err)
	}
	clk.Advance(poll)
	select {
	case <-verified:
	case <-progresstest.Context(t).Done():
		t.Fatal("the 8th poll did not retry the landing")
	}
	if tk := e.task(id); tk.Status != models.StatusCompleted {
		t.Fatalf("once the file is gone: %s %q %q", tk.Status, tk.StatusReason, tk.WaitingReason)
	}
	if b, _ := os.ReadFile(untracked); string(b) != "the task's\n" {
		t.Fatalf("refused.txt after the landing: %q", b)
	}
}
