package orchestrator

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
)

// heldAgent registers an agent running the "hold" script and returns the
// FIFO that releases it with an exit code.
func (h *harness) heldAgent(id string) string {
	h.t.Helper()
	fifo := filepath.Join(h.t.TempDir(), "release")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		h.t.Fatal(err)
	}
	h.agent(id, "command", "hold", func(a *models.Agent) { a.Env = map[string]string{"RELEASE": fifo} })
	return fifo
}

func release(t *testing.T, fifo, code string) {
	t.Helper()
	if err := os.WriteFile(fifo, []byte(code+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// running starts the orchestrator and returns the first run once started.
func (h *harness) running() models.Run {
	h.t.Helper()
	h.start()
	r := h.waitStart()
	h.settle()
	return r
}

func TestCompleteThroughTheService(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	fifo := h.heldAgent("a1")
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "t"})["t"]
	run := h.running()
	ctx := context.Background()
	c := models.Completion{Summary: "added the page", FilesChanged: []string{"page.html"}}
	if err := h.o.Complete(ctx, run, c); err != nil {
		t.Fatal(err)
	}
	if err := h.o.Complete(ctx, run, models.Completion{Summary: "again"}); err != nil {
		t.Fatalf("a duplicate complete: %v", err)
	}
	release(t, fifo, "0")
	h.waitEnd()
	h.settle()
	tk := h.task(id)
	if tk.Status != models.StatusCompleted {
		t.Fatalf("status %s", tk.Status)
	}
	d, _ := h.st.GetTaskDetail(ctx, id)
	var summary string
	for _, e := range d.Events {
		if e.Event == models.EventAgentCompleted {
			summary = e.Reason
		}
	}
	if summary != "added the page" {
		t.Fatalf("completion summary %q", summary)
	}
	if err := h.o.Complete(ctx, run, c); err == nil {
		t.Fatal("complete after the run ended was accepted")
	}
	if _, err := h.o.Authenticate(ctx, h.tokenOf(t, run)); models.ErrorCodeOf(err) != models.CodeUnauthorized {
		t.Fatalf("stale token: %v", err)
	}
}

// tokenOf returns a run's token from the orchestrator's records kept by the
// harness.
func (h *harness) tokenOf(t *testing.T, run models.Run) string {
	t.Helper()
	h.o.mu.Lock()
	defer h.o.mu.Unlock()
	if tok, ok := h.tokens[run.ID]; ok {
		return tok
	}
	t.Fatalf("no token recorded for run %d", run.ID)
	return ""
}

func TestFailAndUsageThroughTheService(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	fifo := h.heldAgent("a1")
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "t"})["t"]
	run := h.running()
	ctx := context.Background()
	if err := h.o.Usage(ctx, run, models.TokenUsage{Input: 100, Output: 20, CacheRead: 5}); err != nil {
		t.Fatal(err)
	}
	if err := h.o.Fail(ctx, run, "the tests are red"); err != nil {
		t.Fatal(err)
	}
	release(t, fifo, "0")
	h.waitEnd()
	h.settle()
	if tk := h.task(id); tk.Status != models.StatusFailed || tk.StatusReason != "the tests are red" {
		t.Fatalf("after fail: %s %q", tk.Status, tk.StatusReason)
	}
	if p, _ := h.st.GetProject(ctx, "p"); p.TotalTokensUsed != 125 {
		t.Fatalf("tokens %d", p.TotalTokensUsed)
	}
}

func TestRateLimitedThroughTheService(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.heldAgent("a1") // never released: the rate limit ends the run
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "t"})["t"]
	run := h.running()
	reset := h.clock.Now().Add(2 * time.Hour)
	if err := h.o.RateLimited(context.Background(), run, models.RateLimit{ResetAt: &reset, Message: "429"}); err != nil {
		t.Fatal(err)
	}
	h.waitEnd()
	tk := h.task(id)
	if tk.Status != models.StatusPaused || !tk.ResumeAfter.Equal(reset) || tk.RetryCount != 0 || !strings.Contains(tk.StatusReason, "rate limited") {
		t.Fatalf("after the rate limit: %+v", tk)
	}
}

func TestAskAnswerAndInputTimeout(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.InputTimeout = time.Hour; c.IdleTimeout = time.Minute })
	fifo := h.heldAgent("a1")
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "t"})["t"]
	run := h.running()
	ctx := context.Background()

	type answer struct {
		text string
		err  error
	}
	ask := func(q string) chan answer {
		c := make(chan answer, 1)
		go func() { a, err := h.o.Ask(ctx, run, models.Ask{Question: q}); c <- answer{a, err} }()
		return c
	}
	// Each ask says when it has recorded its question; a round after that
	// has armed its expiry.
	asked := make(chan models.Question, 2)
	h.o.afterAsk = func(q models.Question) { asked <- q }
	waitOpen := func() models.Question {
		t.Helper()
		select {
		case q := <-asked:
			h.settle()
			if qs, err := h.o.OpenQuestions(ctx); err != nil || len(qs) != 1 || qs[0].ID != q.ID {
				t.Fatalf("open questions %+v, %v; want only %d", qs, err, q.ID)
			}
			return q
		case <-time.After(progresstest.Stall()):
			t.Fatal("the question never opened")
			return models.Question{}
		}
	}
	got := ask("Postgres or SQLite?")
	q := waitOpen()
	if st := h.task(id).Status; st != models.StatusWaitingInput {
		t.Fatalf("while asking: %s", st)
	}
	h.clock.Advance(30 * time.Minute) // longer than the idle timeout: waiting is not idling
	h.settle()
	if _, err := h.o.AnswerQuestion(ctx, q.ID, "SQLite", "alice"); err != nil {
		t.Fatal(err)
	}
	if a := <-got; a.err != nil || a.text != "SQLite" {
		t.Fatalf("answer %+v", a)
	}
	if st := h.task(id).Status; st != models.StatusInProgress {
		t.Fatalf("after the answer: %s", st)
	}
	if _, err := h.o.AnswerQuestion(ctx, q.ID, "Postgres", "bob"); models.ErrorCodeOf(err) != models.CodeConflict {
		t.Fatalf("answering twice: %v", err)
	}

	// A second question nobody answers in time: it expires, and the
	// project's on_expiry (pause, the default) pauses the task for the
	// input timeout once more, using one retry.
	got = ask("Ship it?")
	q2 := waitOpen()
	h.clock.Advance(time.Hour)
	if a := <-got; a.err == nil || !strings.Contains(a.err.Error(), "expired unanswered") {
		t.Fatalf("expired ask: %+v", a)
	}
	h.waitEnd()
	h.settle()
	if tk := h.task(id); tk.Status != models.StatusPaused || tk.RetryCount != 1 || !strings.Contains(tk.StatusReason, "on_expiry: pause") {
		t.Fatalf("after the expiry: %s, %d retries used (%q)", tk.Status, tk.RetryCount, tk.StatusReason)
	}
	// A late answer is refused, saying the question expired.
	if _, err := h.o.AnswerQuestion(ctx, q2.ID, "yes, ship it", "alice"); models.ErrorCodeOf(err) != models.CodeConflict ||
		!strings.Contains(err.Error(), "expired unanswered") {
		t.Fatalf("a late answer: %v", err)
	}
	h.clock.Advance(time.Hour)
	r2 := h.waitStart()
	prompt, err := os.ReadFile(filepath.Join(h.o.cfg.RunDir, id, "2.prompt"))
	if err != nil || !strings.Contains(string(prompt), "Q: Ship it?\nA: (no answer: the question expired") || !strings.Contains(string(prompt), "A: SQLite") {
		t.Fatalf("resumed prompt: %q %v", prompt, err)
	}
	if r2.Attempt != 2 {
		t.Fatalf("resumed run %+v", r2)
	}
	release(t, fifo, "0")
	h.waitEnd()
}

func TestProposePlanCreatesSubtasks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	fifo := h.heldAgent("a1")
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "t"})["t"]
	run := h.running()
	res, err := h.o.ProposePlan(context.Background(), run, models.TaskBatch{Tasks: []models.BatchTask{
		{LocalID: "s1", Title: "schema"}, {LocalID: "s2", Title: "api", Dependencies: []models.BatchDependency{{ID: "s1"}}}}})
	if err != nil || len(res) != 2 || res[0].LocalID != "s1" || res[0].TaskID != "" {
		t.Fatalf("plan %+v %v", res, err)
	}
	if all, _ := h.st.ListTasks(context.Background(), models.TaskFilter{ProjectID: "p"}); len(all) != 1 {
		t.Fatalf("the plan created %d tasks before its task completed", len(all)-1)
	}
	release(t, fifo, "0")
	h.waitEnd()
	h.settle()
	if got := h.task(id).Status; got != models.StatusCompleted {
		t.Fatalf("planning task is %s", got)
	}
	all, err := h.st.ListTasks(context.Background(), models.TaskFilter{ProjectID: "p"})
	if err != nil || len(all) != 3 {
		t.Fatalf("tasks after completion: %d %v", len(all), err)
	}
	for _, sub := range all {
		if sub.ID == id {
			continue
		}
		if sub.ParentTaskID == nil || *sub.ParentTaskID != id || !sub.IsPlanSubtask || sub.PlanSource == nil || sub.CreatedBy != "agent:a1" {
			t.Fatalf("subtask %+v", sub)
		}
	}
}

func TestAdminStopThroughTheCommandLayer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.heldAgent("a1")
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "t"})["t"]
	h.running()
	res, err := h.o.ApplyAdminEvent(context.Background(), models.TransitionRequest{TaskID: id, Event: models.EventAdminStop, Actor: "bob", Reason: "enough"})
	if err != nil || res.To != models.StatusBlocked {
		t.Fatalf("stop: %+v %v", res, err)
	}
	h.waitEnd() // the held process was killed, not released
	if a, _ := h.st.GetAgent(context.Background(), "a1"); a.State != models.AgentIdle {
		t.Fatalf("agent %s", a.State)
	}
	if again, err := h.o.ApplyAdminEvent(context.Background(), models.TransitionRequest{TaskID: id, Event: models.EventAdminStop}); err != nil || !again.Duplicate {
		t.Fatalf("a repeated stop: %+v %v", again, err)
	}
	if _, err := h.o.ApplyAdminEvent(context.Background(), models.TransitionRequest{TaskID: id, Event: models.EventAgentStarted}); !errors.As(err, new(*models.Error)) {
		t.Fatalf("an illegal event: %v", err)
	}
}

// askAsync asks from a goroutine and waits until the question is open.
func (h *harness) askAsync(run models.Run, q string) (chan error, models.Question) {
	h.t.Helper()
	errc := make(chan error, 1)
	go func() { _, err := h.o.Ask(context.Background(), run, models.Ask{Question: q}); errc <- err }()
	// Each round is a chance for the ask to be recorded; the bound (a stall
	// limit) only turns a broken test into a failure.
	for deadline := time.Now().Add(progresstest.Stall()); time.Now().Before(deadline); {
		select {
		case err := <-errc:
			h.t.Fatalf("ask %q ended before it opened: %v", q, err)
		default:
		}
		h.settle()
		qs, _ := h.o.OpenQuestions(context.Background())
		for _, open := range qs {
			if open.Text == q {
				return errc, open
			}
		}
	}
	h.t.Fatal("the question never opened")
	return nil, models.Question{}
}

// TestRunEndingWhileWaitingKeepsTheTaskWaiting: a run stopped while its
// question waits (here: the daemon's shutdown of its runs, as a restart
// does) leaves the task WAITING_INPUT without a run, its question open
// and listed; the answer runs it again at once with the answer.
func TestRunEndingWhileWaitingKeepsTheTaskWaiting(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.InputTimeout = 10 * time.Hour })
	h.agent("a1", "command", "quiet", nil)
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "t"})["t"]
	run := h.running()
	errc, q := h.askAsync(run, "Which way?")
	h.o.endRuns([]int64{run.ID}, "the daemon is shutting down")
	if err := <-errc; err == nil {
		t.Fatal("the ask outlived its run")
	}
	h.waitEnd()
	h.settle()
	tk := h.task(id)
	if tk.Status != models.StatusWaitingInput {
		t.Fatalf("after the run ended mid-question: %s (%q)", tk.Status, tk.StatusReason)
	}
	if a, _ := h.st.GetAgent(context.Background(), "a1"); a.State != models.AgentIdle {
		t.Fatalf("the agent of the ended run is %s", a.State)
	}
	qs, _ := h.o.OpenQuestions(context.Background())
	if len(qs) != 1 || qs[0].ID != q.ID || qs[0].RunEndedAt == nil {
		t.Fatalf("the ended run's question is not open: %+v", qs)
	}
	// The answer runs the task again: a new run, not IN_PROGRESS without one.
	if _, err := h.o.AnswerQuestion(context.Background(), q.ID, "left", "alice"); err != nil {
		t.Fatal(err)
	}
	r2 := h.waitStart() // resumed as a new run
	if r2.Attempt != 2 {
		t.Fatalf("resumed run %+v", r2)
	}
	prompt, _ := os.ReadFile(filepath.Join(h.o.cfg.RunDir, id, "2.prompt"))
	if !strings.Contains(string(prompt), "Q: Which way?\nA: left") {
		t.Fatalf("the answer is not in the resumed prompt:\n%s", prompt)
	}
}

func TestStaleQuestionDoesNotTouchTheNextRun(t *testing.T) {
	t.Parallel()
	// The idle timeout is kept out of the way: the clock moves 30 minutes
	// (the default idle timeout) between the second run's start and its ask.
	h := newHarness(t, func(c *Config) { c.InputTimeout = time.Hour; c.IdleTimeout = 10 * time.Hour })
	h.heldAgent("a1")
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "t"})["t"]
	run1 := h.running()
	errc, _ := h.askAsync(run1, "first?")
	if _, err := h.o.ApplyAdminEvent(context.Background(), models.TransitionRequest{TaskID: id, Event: models.EventAdminRestart, Actor: "bob"}); err != nil {
		t.Fatal(err)
	}
	<-errc
	h.waitEnd()
	run2 := h.waitStart()
	h.settle()
	h.clock.Advance(30 * time.Minute)
	errc2, _ := h.askAsync(run2, "second?")
	h.clock.Advance(31 * time.Minute) // past the first question's deadline, not the second's
	h.settle()
	select {
	case err := <-errc2:
		t.Fatalf("the second ask ended at the first question's deadline: %v", err)
	default:
	}
	if st := h.task(id).Status; st != models.StatusWaitingInput {
		t.Fatalf("status %s", st)
	}
	if _, err := h.o.Ask(context.Background(), run1, models.Ask{Question: "from the old run"}); err == nil {
		t.Fatal("the replaced run asked again")
	}
}
