package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/repo"
)

// These end-to-end tests run the real adapters against the fake agent
// executable (internal/agent/fakeagent, installed under each CLI's name),
// which prints the CLIs' real line formats and edits, commits and reports
// over the real agent RPC as the task's description directs; the
// repositories are real git repositories in temporary directories.

var (
	fakeOnce sync.Once
	fakeDir  string
	fakeErr  error
)

// fakeAgents builds the fake agent once and returns the directory where it
// is installed as claude, codex, cursor-agent and aider.
func fakeAgents(t *testing.T) string {
	t.Helper()
	fakeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "aq-fake")
		if err != nil {
			fakeErr = err
			return
		}
		bin := filepath.Join(dir, "fakeagent")
		if out, err := exec.Command("go", "build", "-o", bin, "../agent/fakeagent").CombinedOutput(); err != nil {
			fakeErr = fmt.Errorf("build the fake agent: %v\n%s", err, out)
			return
		}
		for _, name := range []string{"claude", "codex", "cursor-agent", "aider"} {
			if err := os.Symlink(bin, filepath.Join(dir, name)); err != nil {
				fakeErr = err
				return
			}
		}
		fakeDir = dir
	})
	if fakeErr != nil {
		t.Fatal(fakeErr)
	}
	return fakeDir
}

// e2e is the orchestrator harness with the real adapters and the agent RPC
// served on a Unix socket.
type e2e struct {
	*harness
	fake  string
	state string // FAKEAGENT_STATE_DIR
	// requests, when set, signals each request a fake service answered:
	// work outside the loop's rounds (a branch deleted after a merge)
	// that waitFor must see too.
	requests chan struct{}
}

func newE2E(t *testing.T) *e2e {
	t.Helper()
	fake := fakeAgents(t)
	sockDir, err := os.MkdirTemp("", "aq-sock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	socket := filepath.Join(sockDir, "agent.sock")
	h := newHarness(t, func(c *Config) {
		// Every run gets "<Executable> mcp" as its agentqueued MCP server
		// (the fake agents start no MCP server).
		c.SocketPath, c.Executable = socket, filepath.Join(fake, "agentqueued")
	})
	h.o.adapters = agent.DefaultRegistry()
	rpc, err := api.NewRPCServer(api.RPCConfig{SocketPath: socket}, h.o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := rpc.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- rpc.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-served
	})
	return &e2e{harness: h, fake: fake, state: t.TempDir()}
}

// cli registers an agent of a CLI type running the fake agent.
func (e *e2e) cli(id, typ string, projects ...string) {
	e.t.Helper()
	bin := map[string]string{"claude": "claude", "codex": "codex", "cursor": "cursor-agent", "aider": "aider"}[typ]
	a := models.Agent{ID: id, AgentType: typ, AgentSettings: models.AgentSettings{Command: filepath.Join(e.fake, bin),
		Env: map[string]string{"FAKEAGENT_STATE_DIR": e.state}, Projects: projects}}
	if _, err := e.st.RegisterAgent(context.Background(), a); err != nil {
		e.t.Fatal(err)
	}
}

// project creates a project with a repo and settings.
func (e *e2e) project(id string, r *models.RepoConfig, settings models.ProjectSettings) {
	e.t.Helper()
	if _, err := e.st.CreateProject(context.Background(), models.Project{ID: id, MaxConcurrentAgents: 4, Repo: r,
		Settings: settings}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *e2e) add(project string, ts ...models.BatchTask) map[string]string {
	e.t.Helper()
	res, err := e.st.CreateTasks(context.Background(), models.TaskBatch{ProjectID: project, Tasks: ts})
	if err != nil {
		e.t.Fatal(err)
	}
	ids := map[string]string{}
	for _, r := range res {
		ids[r.LocalID] = r.TaskID
	}
	return ids
}

// waitFor waits until cond holds, checking after every round of the loop
// (every committed change wakes it) for as long as rounds keep coming: a
// round is progress, and only a stall fails the wait.
func (e *e2e) waitFor(what string, cond func() bool) {
	e.t.Helper()
	watch := progresstest.New(e.t, "the start of the wait for "+what)
	for !cond() {
		select {
		case seq := <-e.rounds:
			watch.Progress(fmt.Sprintf("round %d", seq))
		case <-e.requests:
			watch.Progress("a request to a fake service")
		case <-watch.Done():
			e.t.Fatalf("waiting for %s: %v", what, watch.Err())
		}
	}
}

func (e *e2e) waitStatus(id string, want models.TaskStatus) models.Task {
	e.t.Helper()
	var tk models.Task
	e.waitFor(fmt.Sprintf("task %s to be %s", id, want), func() bool {
		tk = e.task(id)
		return tk.Status == want
	})
	return tk
}

// waitOutcome waits for the task to be COMPLETED, FAILED or BLOCKED and
// returns it: a test then says which it wanted, instead of stalling when
// it is another.
func (e *e2e) waitOutcome(id string) models.Task {
	e.t.Helper()
	var tk models.Task
	e.waitFor(fmt.Sprintf("task %s's outcome", id), func() bool {
		tk = e.task(id)
		return tk.Status == models.StatusCompleted || tk.Status == models.StatusFailed || tk.Status == models.StatusBlocked
	})
	return tk
}

func (e *e2e) prompt(id string, attempt int) string {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.o.cfg.RunDir, id, fmt.Sprintf("%d.prompt", attempt)))
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

// gitOut runs git and returns its trimmed output.
func gitOut(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false",
		"-c", "init.defaultBranch=main"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// bareOrigin creates a bare repository whose main holds README.md.
func bareOrigin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	seed, bare := filepath.Join(dir, "seed"), filepath.Join(dir, "origin.git")
	gitOut(t, "init", "-q", "-b", "main", seed)
	if err := os.WriteFile(filepath.Join(seed, "README.md"), []byte("# web\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitOut(t, "-C", seed, "add", "-A")
	gitOut(t, "-C", seed, "commit", "-q", "-m", "init")
	gitOut(t, "clone", "-q", "--bare", seed, bare)
	return bare
}

func cloneRepo(path string) *models.RepoConfig {
	return &models.RepoConfig{ID: "web", SourceType: models.RepoClone, URL: path, DefaultBranch: "main"}
}

const work = "@write %s %s\n@commit %s\n@complete %s"

func TestE2ECloneWithClaudeAutoTestPassAndFail(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	origin := bareOrigin(t)
	e.project("web", cloneRepo(origin), models.ProjectSettings{})
	e.cli("claude-1", "claude")
	zero := 0
	ids := e.add("web",
		models.BatchTask{LocalID: "ok", Title: "Say hello", Description: fmt.Sprintf(work, "hello.txt", "hi", "add hello", "wrote hello.txt"),
			TestCommands: []string{"grep -q hi hello.txt"}},
		models.BatchTask{LocalID: "bad", Title: "Break it", Description: fmt.Sprintf(work, "b.txt", "b", "add b", "wrote b"),
			TestCommands: []string{"echo checking; test -f missing.txt"}, MaxRetries: &zero, Dependencies: []models.BatchDependency{{ID: "ok"}}})
	e.start()
	done := e.waitStatus(ids["ok"], models.StatusCompleted)
	if !strings.Contains(done.StatusReason, "1 test command(s) passed") || !strings.Contains(done.StatusReason, "merged into main") {
		t.Fatalf("completed with %q", done.StatusReason)
	}
	if got := gitOut(t, "--git-dir", origin, "show", "main:hello.txt"); got != "hi" {
		t.Fatalf("origin main hello.txt = %q", got)
	}
	blocked := e.waitStatus(ids["bad"], models.StatusBlocked)
	if !strings.Contains(blocked.StatusReason, `test command "echo checking; test -f missing.txt" failed`) ||
		!strings.Contains(blocked.StatusReason, "checking") {
		t.Fatalf("blocked with %q", blocked.StatusReason)
	}
	if out, err := exec.Command("git", "--git-dir", origin, "show", "main:b.txt").CombinedOutput(); err == nil {
		t.Fatalf("the failing task's work was merged: %s", out)
	}
	ctx := context.Background()
	// The adapter read the session and the usage from the stream.
	session, _, err := e.st.LastSession(ctx, ids["ok"], "claude-1")
	if err != nil || session == "" {
		t.Fatalf("no session recorded: %q %v", session, err)
	}
	p, _ := e.st.GetProject(ctx, "web")
	if p.TotalTokensUsed != 2*1540 {
		t.Fatalf("project tokens %d, want two runs of 1000+200+300+40", p.TotalTokensUsed)
	}
	res, ok, _ := e.st.TaskResult(ctx, ids["ok"])
	if !ok || res.Summary != "wrote hello.txt" || !slices.Equal(res.FilesChanged, []string{"hello.txt"}) {
		t.Fatalf("result %+v", res)
	}
	if log, err := os.ReadFile(filepath.Join(e.o.cfg.RunDir, ids["ok"], "1.log")); err != nil || !strings.Contains(string(log), session) {
		t.Fatalf("the run's log lacks its stream: %v", err)
	}
	// No run token reaches a prompt or a log; the MCP config holding it is
	// private to its run.
	e.o.mu.Lock()
	tokens := maps.Clone(e.tokens)
	e.o.mu.Unlock()
	if len(tokens) == 0 {
		t.Fatal("no run token recorded")
	}
	files, _ := filepath.Glob(filepath.Join(e.o.cfg.RunDir, "*", "*.*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a directory
		}
		for _, tok := range tokens {
			if strings.Contains(string(b), tok) {
				t.Errorf("%s holds a run token", f)
			}
		}
	}
	mcp, _ := filepath.Glob(filepath.Join(e.o.cfg.RunDir, ids["ok"], "1.state", "mcp.json"))
	if len(mcp) != 1 {
		t.Fatal("no mcp.json for the claude run")
	}
	if fi, err := os.Stat(mcp[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mcp.json mode %v %v", fi.Mode(), err)
	}
	// What the agent said went to the outbox as progress of its task.
	said := 0
	notices, _ := e.st.PendingOutbox(ctx, 1000)
	for _, n := range notices {
		if n.Kind == "task.progress" && n.TaskID == ids["ok"] && strings.Contains(n.Payload, `"source":"agent"`) {
			said++
		}
	}
	if said == 0 {
		t.Errorf("no agent message in the outbox: %+v", notices)
	}
	// The dependent received its upstream's result.
	if pr := e.prompt(ids["bad"], 1); !strings.Contains(pr, "wrote hello.txt") || !strings.Contains(pr, "Files changed: hello.txt") {
		t.Fatalf("dependent prompt:\n%s", pr)
	}
}

func TestE2ELinkWithCodexAndInitWithCursor(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	user := filepath.Join(t.TempDir(), "mine")
	gitOut(t, "init", "-q", "-b", "main", user)
	if err := os.WriteFile(filepath.Join(user, "notes.md"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitOut(t, "-C", user, "add", "-A")
	gitOut(t, "-C", user, "commit", "-q", "-m", "mine")
	userHead := gitOut(t, "-C", user, "rev-parse", "HEAD")
	e.project("linked", &models.RepoConfig{ID: "mine", SourceType: models.RepoLink, SourcePath: user, DefaultBranch: "main"},
		models.ProjectSettings{})
	initOrigin := filepath.Join(t.TempDir(), "fresh.git")
	e.project("fresh", &models.RepoConfig{ID: "fresh", SourceType: models.RepoInit, SourcePath: initOrigin, DefaultBranch: "main"},
		models.ProjectSettings{})
	e.cli("codex-1", "codex", "linked")
	e.cli("cursor-1", "cursor", "fresh")
	link := e.add("linked", models.BatchTask{LocalID: "l", Title: "Linked work",
		Description: fmt.Sprintf(work, "linked.txt", "from-codex", "linked work", "done in a worktree")})["l"]
	fresh := e.add("fresh", models.BatchTask{LocalID: "f", Title: "Fresh work",
		Description: fmt.Sprintf(work, "fresh.txt", "from-cursor", "fresh work", "done in a new repo")})["f"]
	e.start()
	lt := e.waitStatus(link, models.StatusCompleted)
	ft := e.waitStatus(fresh, models.StatusCompleted)
	// LINK: the user's checked-out, clean main advanced in place.
	if got := gitOut(t, "-C", user, "rev-parse", "HEAD^1"); got != userHead {
		t.Fatalf("the user's main is not the merge on top of their commit: %s", got)
	}
	if st := gitOut(t, "-C", user, "status", "--porcelain"); st != "" {
		t.Fatalf("the user's tree is not at main:\n%s", st)
	}
	if b, err := os.ReadFile(filepath.Join(user, "linked.txt")); err != nil || string(b) != "from-codex\n" {
		t.Fatalf("linked.txt in the user's tree: %q %v", b, err)
	}
	if !strings.Contains(lt.StatusReason, "merged into main") {
		t.Fatalf("the LINK completion: %q", lt.StatusReason)
	}
	// INIT: the daemon created the repository and merged into its main.
	if got := gitOut(t, "--git-dir", initOrigin, "show", "main:fresh.txt"); got != "from-cursor" {
		t.Fatalf("INIT origin main fresh.txt = %q (%s)", got, ft.StatusReason)
	}
}

func TestE2ETwoAgentsConflictThenRetrySucceeds(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	origin := bareOrigin(t)
	e.project("web", cloneRepo(origin), models.ProjectSettings{})
	e.cli("claude-1", "claude", "web")
	e.cli("codex-1", "codex", "web")
	gate := filepath.Join(t.TempDir(), "go")
	desc := func(who string) string {
		return "@wait-for " + gate + "\n" + fmt.Sprintf(work, "shared.txt", "from-"+who, who, "wrote shared.txt")
	}
	ids := e.add("web", models.BatchTask{LocalID: "x", Title: "X", Description: desc("x")},
		models.BatchTask{LocalID: "y", Title: "Y", Description: desc("y")})
	e.start()
	a, b := e.waitStart(), e.waitStart()
	if a.AgentID == b.AgentID || a.TaskID == b.TaskID {
		t.Fatalf("not two agents at once: %+v %+v", a, b)
	}
	ca, _ := e.st.GetAgent(context.Background(), a.AgentID)
	cb, _ := e.st.GetAgent(context.Background(), b.AgentID)
	if ca.CheckoutPath == nil || cb.CheckoutPath == nil || *ca.CheckoutPath == *cb.CheckoutPath {
		t.Fatalf("the agents' checkouts: %v %v", ca.CheckoutPath, cb.CheckoutPath)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// One lands; the other's merge conflicts and fails with the file named.
	var loser string
	e.waitFor("one completed and one failed", func() bool {
		x, y := e.task(ids["x"]), e.task(ids["y"])
		switch {
		case x.Status == models.StatusCompleted && y.Status == models.StatusFailed:
			loser = ids["y"]
		case y.Status == models.StatusCompleted && x.Status == models.StatusFailed:
			loser = ids["x"]
		}
		return loser != ""
	})
	lt := e.task(loser)
	if !strings.Contains(lt.StatusReason, "shared.txt") || !strings.Contains(lt.StatusReason, "conflict") {
		t.Fatalf("the conflict's reason: %q", lt.StatusReason)
	}
	e.clock.Advance(time.Minute) // past the retry backoff
	e.waitStatus(loser, models.StatusCompleted)
	pr := e.prompt(loser, 2)
	if !strings.Contains(pr, "Conflicts to resolve first") || !strings.Contains(pr, "- shared.txt") {
		t.Fatalf("the retry's prompt:\n%s", pr)
	}
	who := "x"
	if loser == ids["y"] {
		who = "y"
	}
	if got := gitOut(t, "--git-dir", origin, "show", "main:shared.txt"); got != "from-"+who {
		t.Fatalf("main shared.txt = %q, want the retried task's", got)
	}
	log := gitOut(t, "--git-dir", origin, "log", "--format=%s", "main")
	for _, id := range ids {
		if strings.Count(log, "Merge "+id+":") != 1 {
			t.Fatalf("task %s is not merged exactly once:\n%s", id, log)
		}
	}
}

func TestE2EQAReviewRejectsThenApproves(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	origin := bareOrigin(t)
	e.project("web", cloneRepo(origin), models.ProjectSettings{QAAgent: "qa"})
	e.cli("worker", "claude", "web")
	e.cli("qa", "codex", "p") // works on another project: it only reviews here
	id := e.add("web", models.BatchTask{LocalID: "t", Title: "Reviewed work", VerificationType: models.VerifyQAAgent,
		Description: fmt.Sprintf(work, "f.txt", "v1", "f", "wrote f.txt") +
			"\n@review @only-attempt 1 @reject there is no test\n@review @only-attempt 2 @approve good now"})["t"]
	e.start()
	failed := e.waitStatus(id, models.StatusFailed)
	if !strings.Contains(failed.StatusReason, "there is no test") {
		t.Fatalf("rejected with %q", failed.StatusReason)
	}
	if _, err := exec.Command("git", "--git-dir", origin, "show", "main:f.txt").CombinedOutput(); err == nil {
		t.Fatal("rejected work was merged")
	}
	e.clock.Advance(time.Minute)
	done := e.waitStatus(id, models.StatusCompleted)
	if !strings.Contains(done.StatusReason, "approved by reviewer qa: good now") {
		t.Fatalf("completed with %q", done.StatusReason)
	}
	if pr := e.prompt(id, 2); !strings.Contains(pr, "Feedback from reviewers") || !strings.Contains(pr, "there is no test") {
		t.Fatalf("the second attempt's prompt:\n%s", pr)
	}
	reviewPrompt, err := filepath.Glob(filepath.Join(e.o.cfg.RunDir, id, "1.review-*.prompt"))
	if err != nil || len(reviewPrompt) != 1 {
		t.Fatalf("review prompts %v %v", reviewPrompt, err)
	}
	if b, _ := os.ReadFile(reviewPrompt[0]); !strings.Contains(string(b), "+v1") || !strings.Contains(string(b), "# Review of task") {
		t.Fatalf("the review prompt lacks the diff:\n%s", b)
	}
	if got := gitOut(t, "--git-dir", origin, "show", "main:f.txt"); got != "v1" {
		t.Fatalf("main f.txt = %q", got)
	}
	if a, _ := e.st.GetAgent(context.Background(), "qa"); a.State != models.AgentIdle {
		t.Fatalf("the reviewer is %s", a.State)
	}
}

func TestE2EHumanRejectsThenApproves(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	origin := bareOrigin(t)
	e.project("web", cloneRepo(origin), models.ProjectSettings{})
	e.cli("claude-1", "claude", "web")
	id := e.add("web", models.BatchTask{LocalID: "t", Title: "Needs a person", VerificationType: models.VerifyHuman,
		Description: fmt.Sprintf(work, "page.html", "<p>hi</p>", "page", "wrote the page")})["t"]
	e.start()
	ctx := context.Background()
	human := func() bool {
		v, ok, _ := e.st.GetVerification(ctx, id)
		return e.task(id).Status == models.StatusVerifying && ok && v.Phase == models.PhaseHuman
	}
	e.waitFor("a person's decision to be awaited", human)
	if d, err := e.st.GetTaskDetail(ctx, id); err != nil || d.Verification == nil || d.Verification.Phase != models.PhaseHuman ||
		d.Result == nil || d.Result.Summary != "wrote the page" {
		t.Fatalf("task detail while waiting: %+v %v", d, err)
	}
	if _, err := e.o.Approve(ctx, "no-such-task", "ana", ""); err == nil {
		t.Fatal("approved a task that does not exist")
	}
	if _, err := e.o.Reject(ctx, id, "ana", ""); models.ErrorCodeOf(err) != models.CodeInvalid {
		t.Fatalf("a rejection without feedback: %v", err)
	}
	res, err := e.o.Reject(ctx, id, "ana", "add a heading")
	if err != nil || res.To != models.StatusFailed {
		t.Fatalf("reject: %+v %v", res, err)
	}
	if _, err := e.o.Reject(ctx, id, "ana", "again"); models.ErrorCodeOf(err) != models.CodeConflict {
		t.Fatalf("a second rejection: %v", err)
	}
	e.clock.Advance(time.Minute)
	e.waitFor("the second attempt to await a person", func() bool {
		run, _, _ := e.st.LastWorkRun(ctx, id)
		return run.Attempt == 2 && human()
	})
	if pr := e.prompt(id, 2); !strings.Contains(pr, "ana: add a heading") {
		t.Fatalf("the second prompt lacks the feedback:\n%s", pr)
	}
	res, err = e.o.Approve(ctx, id, "ana", "ship it")
	if err != nil || res.To != models.StatusCompleted {
		t.Fatalf("approve: %+v %v", res, err)
	}
	if got := e.events(id); !slices.Contains(got, "HUMAN_APPROVED") || !slices.Contains(got, "VERIFY_FAILED") {
		t.Fatalf("events %v", got)
	}
	if got := gitOut(t, "--git-dir", origin, "show", "main:page.html"); got != "<p>hi</p>" {
		t.Fatalf("main page.html = %q", got)
	}
}

func TestE2EOriginMismatchIsRefused(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	origin, other := bareOrigin(t), bareOrigin(t)
	e.project("web", cloneRepo(origin), models.ProjectSettings{})
	e.cli("claude-1", "claude", "web")
	a, _ := e.st.GetAgent(context.Background(), "claude-1")
	p, _ := e.st.GetProject(context.Background(), "web")
	dir := e.o.ws.(*repo.Workspaces).CheckoutPath(a, p)
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		t.Fatal(err)
	}
	gitOut(t, "clone", "-q", other, dir) // a checkout of another repository where the agent's should be
	id := e.add("web", models.BatchTask{LocalID: "t", Title: "t", Description: fmt.Sprintf(work, "a", "a", "a", "a")})["t"]
	e.start()
	e.waitFor("the refusal", func() bool { return slices.Contains(e.events(id), "EXECUTION_ERROR") })
	tk := e.task(id)
	if tk.Status != models.StatusReady || !strings.Contains(tk.StatusReason, "prepare workspace") ||
		!strings.Contains(tk.StatusReason, other) || !strings.Contains(tk.StatusReason, origin) {
		t.Fatalf("after the refusal: %s %q", tk.Status, tk.StatusReason)
	}
	if got := gitOut(t, "-C", dir, "remote", "get-url", "origin"); got != other {
		t.Fatalf("the foreign checkout was changed: origin %s", got)
	}
}

func TestE2EKilledRunsDirtyCheckoutIsRescued(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	origin := bareOrigin(t)
	e.project("web", cloneRepo(origin), models.ProjectSettings{})
	e.cli("claude-1", "claude", "web")
	ctx := context.Background()
	killed := e.add("web", models.BatchTask{LocalID: "k", Title: "Half done",
		Description: "@write wip.txt half-done\n@ask may I go on?\n@sleep-until-killed"})["k"]
	e.start()
	e.waitStatus(killed, models.StatusWaitingInput)
	qs, err := e.st.TaskQuestions(ctx, killed)
	if err != nil || len(qs) != 1 {
		t.Fatalf("questions %+v %v", qs, err)
	}
	if _, err := e.o.AnswerQuestion(ctx, qs[0].ID, "yes", "ana"); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(killed, models.StatusInProgress)
	if _, err := e.o.StopTask(ctx, killed, "enough", "ana"); err != nil {
		t.Fatal(err)
	}
	e.waitEnd()
	next := e.add("web", models.BatchTask{LocalID: "n", Title: "Next", Description: fmt.Sprintf(work, "n.txt", "n", "n", "n")})["n"]
	e.waitStatus(next, models.StatusCompleted)
	pr := e.prompt(next, 1)
	i := strings.Index(pr, "aq-rescue/")
	if i < 0 {
		t.Fatalf("the next prompt does not name the rescue branch:\n%s", pr)
	}
	rescue := strings.TrimSuffix(strings.Fields(pr[i:])[0], ".")
	a, _ := e.st.GetAgent(ctx, "claude-1")
	p, _ := e.st.GetProject(ctx, "web")
	dir := e.o.ws.(*repo.Workspaces).CheckoutPath(a, p)
	if got := gitOut(t, "-C", dir, "show", rescue+":wip.txt"); got != "half-done" {
		t.Fatalf("rescue branch %s wip.txt = %q", rescue, got)
	}
	if out, err := exec.Command("git", "--git-dir", origin, "show", "main:wip.txt").CombinedOutput(); err == nil {
		t.Fatalf("the killed run's work was merged: %s", out)
	}
}

func TestE2EPlanBecomesSubtasksThatRunInOrder(t *testing.T) {
	t.Parallel()
	for _, approval := range []bool{false, true} {
		t.Run(fmt.Sprintf("approval=%v", approval), func(t *testing.T) {
			t.Parallel()
			e := newE2E(t)
			origin := bareOrigin(t)
			e.project("web", cloneRepo(origin), models.ProjectSettings{RequirePlanApproval: approval})
			e.cli("claude-1", "claude", "web")
			e.cli("claude-2", "claude", "web")
			plan, err := json.Marshal([]models.BatchTask{
				{Title: "Step one", Description: fmt.Sprintf(work, "one.txt", "1", "one", "one done")},
				{Title: "Step two", Description: "@write two.txt 2\n@commit two\n@complete two done"},
			})
			if err != nil {
				t.Fatal(err)
			}
			root := e.add("web", models.BatchTask{LocalID: "r", Title: "Plan the feature",
				Description: "@plan " + string(plan) + "\n@complete planned"})["r"]
			e.start()
			ctx := context.Background()
			if approval {
				e.waitStatus(root, models.StatusAwaitingApproval)
				if all, _ := e.st.ListTasks(ctx, models.TaskFilter{ProjectID: "web"}); len(all) != 1 {
					t.Fatalf("%d tasks before the plan's approval", len(all))
				}
				if res, err := e.o.Approve(ctx, root, "ana", "good plan"); err != nil || res.To != models.StatusCompleted {
					t.Fatalf("approve the plan: %+v %v", res, err)
				}
			}
			e.waitStatus(root, models.StatusCompleted)
			var subs []models.Task
			e.waitFor("both subtasks completed", func() bool {
				all, _ := e.st.ListTasks(ctx, models.TaskFilter{ProjectID: "web"})
				subs = subs[:0]
				for _, tk := range all {
					if tk.ID != root {
						subs = append(subs, tk)
					}
				}
				n := 0
				for _, s := range subs {
					if s.Status == models.StatusCompleted {
						n++
					}
				}
				return len(subs) == 2 && n == 2
			})
			slices.SortFunc(subs, func(a, b models.Task) int { return strings.Compare(a.Title, b.Title) })
			one, two := subs[0], subs[1]
			if !one.IsPlanSubtask || one.ParentTaskID == nil || *one.ParentTaskID != root {
				t.Fatalf("subtask %+v", one)
			}
			// Step two waited for step one: it became READY by DEPS_MET.
			if ev := e.events(two.ID); len(ev) == 0 || ev[0] != "DEPS_MET" {
				t.Fatalf("step two's events %v", ev)
			}
			d1, _ := e.st.GetTaskDetail(ctx, one.ID)
			d2, _ := e.st.GetTaskDetail(ctx, two.ID)
			if !lastEventTime(d1, "VERIFY_PASSED").Before(lastEventTime(d2, "ASSIGNED")) &&
				!lastEventTime(d1, "VERIFY_PASSED").Equal(lastEventTime(d2, "ASSIGNED")) {
				t.Fatal("step two started before step one completed")
			}
			for file, want := range map[string]string{"one.txt": "1", "two.txt": "2"} {
				if got := gitOut(t, "--git-dir", origin, "show", "main:"+file); got != want {
					t.Fatalf("main %s = %q", file, got)
				}
			}
		})
	}
}

func lastEventTime(d models.TaskDetail, event string) time.Time {
	var at time.Time
	for _, ev := range d.Events {
		if string(ev.Event) == event {
			at = ev.CreatedAt
		}
	}
	return at
}

func TestE2ERateLimitPausesAndSessionResumes(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	e.project("web", cloneRepo(bareOrigin(t)), models.ProjectSettings{})
	e.cli("claude-1", "claude", "web")
	ctx := context.Background()
	limited := e.add("web", models.BatchTask{LocalID: "l", Title: "Limited", Description: "@ratelimit 3600"})["l"]
	e.start()
	before := time.Now()
	paused := e.waitStatus(limited, models.StatusPaused)
	if paused.RetryCount != 0 || paused.ResumeAfter == nil || paused.ResumeAfter.Before(before.Add(50*time.Minute)) ||
		paused.ResumeAfter.After(time.Now().Add(61*time.Minute)) {
		t.Fatalf("paused: retries %d resume %v", paused.RetryCount, paused.ResumeAfter)
	}
	// A run cut short resumes its session on the next attempt.
	cut := e.add("web", models.BatchTask{LocalID: "c", Title: "Cut short",
		Description: "@only-attempt 1 @exit 1\n" + fmt.Sprintf(work, "c.txt", "c", "c", "resumed and done")})["c"]
	// The rate limit rests the agent until the real reset, far beyond the
	// test's clock: a person ends the rest by resuming the agent.
	if _, err := e.o.SetAgentPaused(ctx, "claude-1", false); err != nil {
		t.Fatal(err)
	}
	failed := e.waitStatus(cut, models.StatusFailed)
	if !strings.Contains(failed.StatusReason, "without a result") {
		t.Fatalf("cut short: %q", failed.StatusReason)
	}
	first, _, _ := e.st.LastSession(ctx, cut, "claude-1")
	if first == "" {
		t.Fatal("the cut run's session was not recorded")
	}
	seen := len(e.events(cut))
	e.clock.Advance(time.Minute)
	e.waitFor("the retry to end", func() bool {
		ev := e.events(cut)[seen:]
		return slices.Contains(ev, "AGENT_COMPLETED") || slices.Contains(ev, "AGENT_FAILED")
	})
	if tk := e.task(cut); tk.Status != models.StatusVerifying && tk.Status != models.StatusCompleted {
		log, _ := os.ReadFile(filepath.Join(e.o.cfg.RunDir, cut, "2.log"))
		t.Fatalf("the resumed run ended %s: %q\n%s", tk.Status, tk.StatusReason, log)
	}
	e.waitStatus(cut, models.StatusCompleted)
	if second, _, _ := e.st.LastSession(ctx, cut, "claude-1"); second != first {
		t.Fatalf("the retry ran session %q, not %q", second, first)
	}
}

// checkGate is a FIFO a test command writes to when it starts: reading it
// waits for the checks to be running.
func checkGate(t *testing.T) (fifo, cmd string) {
	t.Helper()
	fifo = filepath.Join(t.TempDir(), "checks")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	return fifo, "echo started > " + fifo + "; sleep 300"
}

func TestE2EShutdownDuringChecksIsPromptAndResumes(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	e.project("web", cloneRepo(bareOrigin(t)), models.ProjectSettings{})
	e.cli("claude-1", "claude", "web")
	fifo, slow := checkGate(t)
	id := e.add("web", models.BatchTask{LocalID: "t", Title: "Slow checks", TestCommands: []string{slow},
		Description: fmt.Sprintf(work, "a.txt", "a", "a", "a")})["t"]
	e.start()
	if _, err := os.ReadFile(fifo); err != nil { // the check is running
		t.Fatal(err)
	}
	e.stop() // fails the test if the orchestrator does not stop within its bound
	tk := e.task(id)
	v, ok, _ := e.st.GetVerification(context.Background(), id)
	if tk.Status != models.StatusVerifying || !ok || v.Phase != models.PhaseChecks {
		t.Fatalf("after the shutdown: %s %q, verification %+v", tk.Status, tk.StatusReason, v)
	}
}

func TestE2ERestartDuringChecksDoesNotDecideTheNextAttempt(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	origin := bareOrigin(t)
	e.project("web", cloneRepo(origin), models.ProjectSettings{})
	e.cli("claude-1", "claude", "web")
	fifo, slow := checkGate(t)
	// The first attempt's checks hang; the second attempt's pass at once.
	id := e.add("web", models.BatchTask{LocalID: "t", Title: "Restarted", TestCommands: []string{"test -f second.txt || { " + slow + "; }"},
		Description: "@only-attempt 2 @write second.txt yes\n" + fmt.Sprintf(work, "a.txt", "a", "a", "a")})["t"]
	e.start()
	if _, err := os.ReadFile(fifo); err != nil {
		t.Fatal(err)
	}
	if _, err := e.o.ApplyAdminEvent(context.Background(), models.TransitionRequest{TaskID: id, Event: models.EventAdminRestart,
		Actor: "ana", Reason: "try again"}); err != nil {
		t.Fatal(err)
	}
	done := e.waitStatus(id, models.StatusCompleted)
	ev := e.events(id)
	passed, failed := 0, 0
	for _, x := range ev {
		passed += boolInt(x == "VERIFY_PASSED")
		failed += boolInt(x == "VERIFY_FAILED")
	}
	if passed != 1 || failed != 0 || !strings.Contains(done.StatusReason, "1 test command(s) passed") {
		t.Fatalf("events %v, reason %q", ev, done.StatusReason)
	}
	if got := gitOut(t, "--git-dir", origin, "show", "main:second.txt"); got != "yes" {
		t.Fatalf("main second.txt = %q", got)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestE2ERateLimitedReviewerKeepsTheReviewWaiting(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	e.project("web", cloneRepo(bareOrigin(t)), models.ProjectSettings{QAAgent: "qa"})
	e.cli("worker", "claude", "web")
	e.cli("qa", "claude", "p")
	id := e.add("web", models.BatchTask{LocalID: "t", Title: "Reviewed", VerificationType: models.VerifyQAAgent,
		Description: fmt.Sprintf(work, "f.txt", "v1", "f", "done") + "\n@review @ratelimit 3600"})["t"]
	e.start()
	e.waitFor("the reviewer to rest", func() bool { return e.o.coolingDown("agent:qa") })
	e.waitFor("the review run to close and the wait to be explained", func() bool {
		a, _ := e.st.GetAgent(context.Background(), "qa")
		v, _, _ := e.st.GetVerification(context.Background(), id)
		// Its run closed, the reviewer is shown resting (PAUSED).
		return a.State == models.AgentPaused && a.CurrentTaskID == nil && a.RestUntil != nil && v.Detail() != ""
	})
	tk := e.task(id)
	v, _, _ := e.st.GetVerification(context.Background(), id)
	if tk.Status != models.StatusVerifying || tk.RetryCount != 0 || v.Phase != models.PhaseReview ||
		!strings.Contains(v.Detail(), "waiting for the reviewer qa, which rests until ") ||
		!strings.Contains(v.Detail(), "during task "+id) {
		t.Fatalf("after the reviewer's rate limit: %s retries %d phase %s (%q, %q)", tk.Status, tk.RetryCount, v.Phase,
			tk.StatusReason, v.Detail())
	}
}

// TestE2EAPausedRunKeepsItsWork: a run that wrote a file and was then
// rate-limited resumes its session with the file in place (not moved to a
// rescue branch), and the file lands.
func TestE2EAPausedRunKeepsItsWork(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	origin := bareOrigin(t)
	e.project("web", cloneRepo(origin), models.ProjectSettings{})
	e.cli("claude-1", "claude", "web")
	id := e.add("web", models.BatchTask{LocalID: "k", Title: "Kept", Description: "@only-attempt 1 @write kept.txt first run\n" +
		"@only-attempt 1 @ratelimit 3600\n@complete resumed with kept.txt"})["k"]
	e.start()
	paused := e.waitStatus(id, models.StatusPaused)
	if paused.ResumeAfter == nil {
		t.Fatal("paused without a resume time")
	}
	// The rest and the pause end at the reset, which the fake CLI reports
	// an hour after the real time (months after the harness clock's).
	e.clock.Advance(paused.ResumeAfter.Sub(e.clock.Now()) + time.Minute)
	if _, err := e.o.SetAgentPaused(context.Background(), "claude-1", false); err != nil {
		t.Fatal(err)
	}
	if done := e.waitOutcome(id); done.Status != models.StatusCompleted || !strings.Contains(done.StatusReason, "merged") {
		t.Fatalf("the resumed run ended %s: %q", done.Status, done.StatusReason)
	}
	if got := gitOut(t, "--git-dir", origin, "show", "main:kept.txt"); got != "first run" {
		t.Fatalf("main's kept.txt is %q", got)
	}
}

// TestE2EAnAgentGoneMidQuestionKeepsItsWork: an agent that wrote a file,
// asked, and was killed while its question waited leaves its task waiting
// for the answer (WAITING_INPUT, its run ended); the answer runs it again
// with the file in place, and the file lands.
func TestE2EAnAgentGoneMidQuestionKeepsItsWork(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	origin := bareOrigin(t)
	e.project("web", cloneRepo(origin), models.ProjectSettings{})
	e.cli("claude-1", "claude", "web")
	ctx := context.Background()
	id := e.add("web", models.BatchTask{LocalID: "q", Title: "Asks", Description: "@only-attempt 1 @write asked.txt before the question\n" +
		"@only-attempt 1 @ask which way?\n@complete resumed with asked.txt"})["q"]
	e.start()
	e.waitStatus(id, models.StatusWaitingInput)
	run, ok, err := e.st.LastWorkRun(ctx, id)
	if err != nil || !ok || run.PID == nil {
		t.Fatalf("the asking run: %+v %t %v", run, ok, err)
	}
	if err := syscall.Kill(*run.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the killed run to end", func() bool {
		r, err := e.st.GetRun(ctx, run.ID)
		return err == nil && r.EndedAt != nil
	})
	if st := e.task(id).Status; st != models.StatusWaitingInput {
		t.Fatalf("after the killed run: %s", st)
	}
	qs, err := e.st.TaskQuestions(ctx, id)
	if err != nil || len(qs) != 1 {
		t.Fatalf("questions %+v %v", qs, err)
	}
	if _, err := e.o.AnswerQuestion(ctx, qs[0].ID, "left", "ana"); err != nil {
		t.Fatal(err)
	}
	if done := e.waitOutcome(id); done.Status != models.StatusCompleted || !strings.Contains(done.StatusReason, "merged") {
		t.Fatalf("the resumed run ended %s: %q", done.Status, done.StatusReason)
	}
	if got := gitOut(t, "--git-dir", origin, "show", "main:asked.txt"); got != "before the question" {
		t.Fatalf("main's asked.txt is %q", got)
	}
}
