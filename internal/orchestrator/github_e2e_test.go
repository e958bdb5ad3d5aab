package orchestrator

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/repo"
	"github.com/agentqueued/agentqueued/internal/repo/githubtest"
)

const (
	ghToken  = "ghs_0123456789abcdefSECRET"
	ghSecret = "webhook-secret"
)

// syncBuf is a log sink tests read while the daemon writes.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// prEnv is an orchestrator on a fake GitHub: the project's repository is
// acme/shop there (cloned, fetched and pushed with the token), agents are
// shell commands, and webhooks reach the watcher through the real handler.
type prEnv struct {
	*e2e
	gh      *githubtest.Server
	client  *repo.GitHub
	url     string
	hook    string
	logs    *syncBuf
	checks  chan error
	dumpDir string
	wsDir   string
}

func newPREnv(t *testing.T, settings models.ProjectSettings, tamper bool) *prEnv {
	t.Helper()
	steal := ""
	if tamper {
		steal = "http://127.0.0.1:9/"
	}
	e := newE2E(t)
	e.requests = make(chan struct{}, 1)
	gh := githubtest.New(githubtest.Options{Token: ghToken, Clock: e.clock, Logf: func(format string, args ...any) {
		t.Logf(format, args...)
		select {
		case e.requests <- struct{}{}:
		default:
		}
	}})
	t.Cleanup(gh.Close)
	url := gh.CreateRepo("acme", "shop", "main")
	logs := &syncBuf{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	wsDir := t.TempDir()
	ws, err := repo.New(repo.Config{BaseDir: wsDir, Credentials: repo.TokenCredentials(ghToken, true, "127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	client, err := repo.NewGitHub(repo.GitHubConfig{Token: ghToken, APIBaseURL: gh.URL() + "/api/v3/", Logger: log}, ws)
	if err != nil {
		t.Fatal(err)
	}
	p := &prEnv{e2e: e, gh: gh, client: client, url: url, logs: logs, checks: make(chan error, 100), dumpDir: t.TempDir(), wsDir: wsDir}
	e.o.ws, e.o.log = ws, log
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs.String())
		}
	})
	e.o.cfg.PullRequests = client
	e.o.cfg.OnPRCheck = func(_ models.PullRequest, err error) { p.checks <- err }
	// The daemon's own environment holds the token (as when the
	// configuration reads it from there): agents must not see it.
	e.o.cfg.Environ = append(os.Environ(), "GITHUB_TOKEN="+ghToken)
	hook := httptest.NewServer(repo.WebhookHandler(ghSecret, log, func(owner, name string, n int) {
		e.o.PokePullRequest(context.Background(), owner, name, n)
	}))
	t.Cleanup(hook.Close)
	p.hook = hook.URL
	e.project("web", &models.RepoConfig{ID: "web", SourceType: models.RepoClone, URL: url, DefaultBranch: "main"}, settings)
	// A shell agent: it leaves its environment beside the work (outside
	// the checkout), writes a file named after its task and commits it.
	// With tamper, it also tries to steer pushes of the repository
	// elsewhere through its checkout's configuration: pushes must not
	// follow (and the next run in that checkout is refused).
	script := `env > "$DUMP/$AQ_TASK_ID.env"; if [ -n "$STEAL" ]; then git config url."$STEAL".pushInsteadOf "$REPO"; fi; ` +
		`echo "work of $AQ_TASK_ID, run $$" >> "$AQ_TASK_ID.txt"; git add . && ` +
		`git -c user.name=agent -c user.email=agent@localhost commit -qm "work of $AQ_TASK_ID"`
	if _, err := e.st.RegisterAgent(context.Background(), models.Agent{ID: "sh-1", AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "/bin/sh", Args: []string{"-c", script},
			Env: map[string]string{"DUMP": p.dumpDir, "REPO": url, "STEAL": steal}}}); err != nil {
		t.Fatal(err)
	}
	return p
}

// start runs the orchestrator and the pull request watcher.
func (p *prEnv) start() {
	p.e2e.start()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.o.WatchPullRequests(ctx) }()
	p.t.Cleanup(func() {
		cancel()
		<-done
	})
}

// pr returns the task's pull request on the fake GitHub.
func (p *prEnv) pr(taskID string) *githubPR {
	p.t.Helper()
	var found []*githubPR
	for _, pr := range p.gh.PRs("acme", "shop") {
		if strings.Contains(pr.GetBody(), taskID) {
			found = append(found, pr)
		}
	}
	if len(found) != 1 {
		p.t.Fatalf("task %s has %d pull requests", taskID, len(found))
	}
	return found[0]
}

// deliver sends the webhook of a pull request event.
func (p *prEnv) deliver(action string, pr *githubPR) {
	p.t.Helper()
	resp, err := p.gh.Deliver(context.Background(), p.hook+"/webhooks/github", ghSecret, "pull_request",
		githubtest.PullRequestEvent(action, pr))
	if err != nil {
		p.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 {
		p.t.Fatalf("webhook answered %d", resp.StatusCode)
	}
}

// advance moves the fake clock and makes the watcher look at it (the fake
// clock's timers are relative to when they are set, which can race a
// move).
func (p *prEnv) advance(d time.Duration) {
	p.clock.Advance(d)
	p.o.landing.WakeWatcher()
}

// nextCheck waits for the watcher's next check and returns its error.
func (p *prEnv) nextCheck() error {
	p.t.Helper()
	select {
	case err := <-p.checks:
		return err
	case <-time.After(progresstest.Stall()):
		p.t.Fatal("no pull request check")
		return nil
	}
}

func TestE2EPullRequestMergedCompletesTheTask(t *testing.T) {
	t.Parallel()
	p := newPREnv(t, models.ProjectSettings{PRReviewers: []string{"alice"}, PRLabels: []string{"agent"}}, true)
	ids := p.add("web", models.BatchTask{LocalID: "t", Title: "Add the buy button", RequiresApproval: true,
		Description: "Add a buy button to the shop page."},
		models.BatchTask{LocalID: "d", Title: "After it", Dependencies: []models.BatchDependency{{ID: "t"}}})
	p.start()
	tk := p.waitStatus(ids["t"], models.StatusAwaitingApproval)
	pr := p.pr(ids["t"])
	if tk.PRURL == nil || *tk.PRURL != pr.GetHTMLURL() || !strings.HasPrefix(pr.GetHead().GetRef(), "aq/"+ids["t"]) ||
		pr.GetBase().GetRef() != "main" || !strings.Contains(pr.GetTitle(), "Add the buy button") ||
		!strings.Contains(pr.GetBody(), ids["t"]+".txt") || len(pr.Labels) != 1 || len(pr.RequestedReviewers) != 1 {
		t.Fatalf("pull request %+v for task %+v", pr, tk)
	}
	if d := p.task(ids["d"]); d.Status != models.StatusDefined {
		t.Fatalf("the dependent ran before the merge: %s", d.Status)
	}
	// A retry of the opening (after a crash between push and record)
	// finds the same pull request.
	proj, _ := p.st.GetProject(context.Background(), "web")
	run, _, _ := p.st.LastWorkRun(context.Background(), ids["t"])
	again, err := p.client.Open(context.Background(), proj, tk, run.CheckoutPath, models.PRContent{Summary: "again"})
	if err != nil || again.Number != pr.GetNumber() || len(p.gh.PRs("acme", "shop")) != 1 {
		t.Fatalf("second open: %+v %v, %d pull requests", again, err, len(p.gh.PRs("acme", "shop")))
	}

	// Polls before anything changed: the second (with the first's ETag)
	// costs a 304.
	for range 2 {
		p.advance(2 * time.Minute)
		if err := p.nextCheck(); err != nil {
			t.Fatal(err)
		}
	}
	if _, notModified := p.gh.Counts(); notModified == 0 {
		t.Error("the unchanged pull request was not answered 304")
	}
	// Merged on GitHub; the webhook comes twice, and a poll too.
	if err := p.gh.MergePR("acme", "shop", pr.GetNumber()); err != nil {
		t.Fatal(err)
	}
	p.deliver("closed", pr)
	p.deliver("closed", pr)
	p.advance(2 * time.Minute)
	p.waitStatus(ids["t"], models.StatusCompleted)
	p.waitFor("the dependent to be promoted", func() bool { return p.task(ids["d"]).Status != models.StatusDefined })
	merged := 0
	for _, ev := range p.events(ids["t"]) {
		if ev == string(models.EventPRMerged) {
			merged++
		}
	}
	if merged != 1 {
		t.Errorf("%d PR_MERGED events: %v", merged, p.events(ids["t"]))
	}
	p.waitFor("the branch to be deleted", func() bool {
		return slices.Contains(p.gh.DeletedBranches("acme", "shop"), pr.GetHead().GetRef())
	})
	p.assertTokenNowhere()
}

func TestE2EPullRequestClosedBlocksWithCascade(t *testing.T) {
	t.Parallel()
	p := newPREnv(t, models.ProjectSettings{PRMode: models.PRAlways}, false)
	ids := p.add("web", models.BatchTask{LocalID: "t", Title: "Risky change"},
		models.BatchTask{LocalID: "d", Title: "After it", Dependencies: []models.BatchDependency{{ID: "t"}}})
	p.start()
	p.waitStatus(ids["t"], models.StatusAwaitingApproval)
	pr := p.pr(ids["t"])
	if err := p.gh.ClosePR("acme", "shop", pr.GetNumber()); err != nil {
		t.Fatal(err)
	}
	p.deliver("closed", pr)
	tk := p.waitStatus(ids["t"], models.StatusBlocked)
	if !strings.Contains(tk.StatusReason, "closed without merge") {
		t.Errorf("blocked with %q", tk.StatusReason)
	}
	if d := p.waitStatus(ids["d"], models.StatusBlocked); d.CascadeRootID != ids["t"] {
		t.Errorf("dependent %+v", d)
	}
}

func TestE2EPullRequestPollingBacksOffOnRateLimits(t *testing.T) {
	t.Parallel()
	p := newPREnv(t, models.ProjectSettings{PRMode: models.PRAlways}, false)
	ids := p.add("web", models.BatchTask{LocalID: "t", Title: "Watched"})
	p.start()
	p.waitStatus(ids["t"], models.StatusAwaitingApproval)
	pr := p.pr(ids["t"])
	p.gh.RateLimitNext(1, "primary", 10*time.Minute)
	p.advance(2 * time.Minute)
	if err := p.nextCheck(); err == nil || !strings.Contains(err.Error(), "rate limit") {
		t.Fatalf("check under a rate limit: %v", err)
	}
	// Merged meanwhile; polls wait for the reset, then see it.
	if err := p.gh.MergePR("acme", "shop", pr.GetNumber()); err != nil {
		t.Fatal(err)
	}
	before, _ := p.gh.Counts()
	p.advance(2 * time.Minute) // still limited: nothing is asked
	p.advance(9 * time.Minute) // past the reset
	if err := p.nextCheck(); err != nil {
		t.Fatalf("after the reset: %v", err)
	}
	p.waitStatus(ids["t"], models.StatusCompleted)
	if after, _ := p.gh.Counts(); after-before > 3 {
		t.Errorf("%d requests while limited and after", after-before)
	}
}

func TestE2EPullRequestChangesRequestedReopensTheTask(t *testing.T) {
	t.Parallel()
	p := newPREnv(t, models.ProjectSettings{PRMode: models.PRAlways, ReopenOnChangesRequested: true}, false)
	ids := p.add("web", models.BatchTask{LocalID: "t", Title: "Reviewed"})
	p.start()
	p.waitStatus(ids["t"], models.StatusAwaitingApproval)
	pr := p.pr(ids["t"])
	p.gh.AddReview("acme", "shop", pr.GetNumber(), "alice", "CHANGES_REQUESTED", "Please add a test.")
	p.advance(2 * time.Minute)
	p.waitFor("the task to run again", func() bool {
		return p.task(ids["t"]).RetryCount > 0 || p.task(ids["t"]).Status != models.StatusAwaitingApproval
	})
	fb, err := p.st.TaskFeedback(context.Background(), ids["t"])
	if err != nil || len(fb) == 0 || !strings.Contains(fb[len(fb)-1].Text, "Please add a test.") || !strings.Contains(fb[len(fb)-1].Source, "alice") {
		t.Fatalf("feedback %+v %v", fb, err)
	}
	// The next attempt lands on the same pull request.
	p.waitStatus(ids["t"], models.StatusAwaitingApproval)
	if n := len(p.gh.PRs("acme", "shop")); n != 1 {
		t.Errorf("%d pull requests after the second attempt", n)
	}
}

// assertTokenNowhere checks that the token reached no log, no agent's
// environment, no checkout's git configuration and no run file.
func (p *prEnv) assertTokenNowhere() {
	p.t.Helper()
	if strings.Contains(p.logs.String(), ghToken) {
		p.t.Error("the token is in the logs")
	}
	dumps, _ := filepath.Glob(filepath.Join(p.dumpDir, "*.env"))
	if len(dumps) == 0 {
		p.t.Fatal("no agent environment was dumped")
	}
	var files []string
	files = append(files, dumps...)
	for _, root := range []string{p.o.cfg.RunDir, p.wsDir} {
		_ = filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
			if err == nil && info.Mode().IsRegular() && (filepath.Base(path) == "config" || strings.HasSuffix(path, ".log") ||
				strings.HasSuffix(path, ".prompt") || strings.HasSuffix(path, ".env")) {
				files = append(files, path)
			}
			return nil
		})
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && bytes.Contains(b, []byte(ghToken)) {
			p.t.Errorf("the token is in %s", f)
		}
	}
	for _, r := range p.gh.GitRequests() {
		if !r.Authorization {
			p.t.Errorf("a git request went without credentials: %+v", r)
		}
	}
}

type githubPR = github.PullRequest

// TestPollingFiftyPullRequestsForAnHour counts what watching 50 open pull
// requests that never change costs over an hour of fake time: every check
// after the first of each is a conditional request answered 304, which
// GitHub does not count against the rate limit.
func TestPollingFiftyPullRequestsForAnHour(t *testing.T) {
	t.Parallel()
	checks := make(chan error, 1000)
	h := newHarness(t, func(c *Config) {
		c.OnPRCheck = func(_ models.PullRequest, err error) { checks <- err }
	})
	gh := githubtest.New(githubtest.Options{Token: ghToken, Clock: h.clock})
	t.Cleanup(gh.Close)
	gh.CreateRepo("acme", "shop", "main")
	ws, err := repo.New(repo.Config{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	client, err := repo.NewGitHub(repo.GitHubConfig{Token: ghToken, APIBaseURL: gh.URL() + "/api/v3/"}, ws)
	if err != nil {
		t.Fatal(err)
	}
	h.o.cfg.PullRequests = client
	h.o.landing = h.o.newLander()
	api := github.NewClient(nil).WithAuthToken(ghToken)
	if api, err = api.WithEnterpriseURLs(gh.URL()+"/api/v3/", gh.URL()+"/api/v3/"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const n = 50
	for i := range n {
		id := h.tasks(models.BatchTask{LocalID: "t", Title: "watched"})["t"]
		branch := "aq/" + id
		dir := gh.RepoDir("acme", "shop")
		tree := gitOut(t, "--git-dir", dir, "rev-parse", "main^{tree}")
		commit := gitOut(t, "--git-dir", dir, "commit-tree", tree, "-p", "main", "-m", "work "+id)
		gitOut(t, "--git-dir", dir, "update-ref", "refs/heads/"+branch, commit)
		pr, _, err := api.PullRequests.Create(ctx, "acme", "shop", &github.NewPullRequest{Title: github.String(id),
			Head: github.String(branch), Base: github.String("main")})
		if err != nil {
			t.Fatalf("pull request %d: %v", i, err)
		}
		rec := models.PullRequest{TaskID: id, Owner: "acme", Repo: "shop", Number: pr.GetNumber(), URL: pr.GetHTMLURL(), Branch: branch}
		rec.NextCheckAt = h.clock.Now().Add(h.o.landing.PRSpread(rec))
		if _, err := h.st.SavePullRequest(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := gh.Counts()
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.o.WatchPullRequests(wctx) }()
	defer func() { cancel(); <-done }()
	for range 60 {
		h.clock.Advance(time.Minute)
		// The fake clock cannot register a timer at an absolute time: a
		// poke makes sure the watcher looks at the new time.
		h.o.landing.WakeWatcher()
		for {
			due, _, err := h.st.DuePullRequests(ctx, h.clock.Now(), n)
			if err != nil {
				t.Fatal(err)
			}
			if len(due) == 0 {
				break
			}
			select {
			case err := <-checks:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(progresstest.Stall()):
				t.Fatal("the watcher stopped checking")
			}
		}
	}
	total, notModified := gh.Counts()
	total -= before
	t.Logf("50 open pull requests for an hour: %d requests, %d answered 304 (free), %d counted", total, notModified, total-notModified)
	if total < n*59 || float64(notModified) < 0.95*float64(total) {
		t.Errorf("%d requests, %d of them 304", total, notModified)
	}
}

func TestE2EApprovingAPullRequestTask(t *testing.T) {
	t.Parallel()
	for _, fromChat := range []bool{false, true} {
		p := newPREnv(t, models.ProjectSettings{PRMode: models.PRAlways, MergeFromChat: fromChat}, false)
		ids := p.add("web", models.BatchTask{LocalID: "t", Title: "Approve me"})
		p.start()
		p.waitStatus(ids["t"], models.StatusAwaitingApproval)
		pr := p.pr(ids["t"])
		res, err := p.o.Approve(context.Background(), ids["t"], "discord:1", "")
		if !fromChat {
			if models.ErrorCodeOf(err) != models.CodeConflict || !strings.Contains(err.Error(), "merge it on GitHub") {
				t.Errorf("approve without merge_from_chat: %+v %v", res, err)
			}
			continue
		}
		if err != nil || res.To != models.StatusCompleted {
			t.Fatalf("approve with merge_from_chat: %+v %v", res, err)
		}
		for _, got := range p.gh.PRs("acme", "shop") {
			if got.GetNumber() == pr.GetNumber() && !got.GetMerged() {
				t.Errorf("the pull request was not merged: %+v", got)
			}
		}
	}
}
