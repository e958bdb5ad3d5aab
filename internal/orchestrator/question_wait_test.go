package orchestrator

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
)

// askWith asks ask from a goroutine and waits until the question is open.
func (h *harness) askWith(run models.Run, ask models.Ask) (chan askResult, models.Question) {
	h.t.Helper()
	res := make(chan askResult, 1)
	go func() { a, err := h.o.Ask(context.Background(), run, ask); res <- askResult{a, err} }()
	for deadline := time.Now().Add(progresstest.Stall()); time.Now().Before(deadline); {
		select {
		case r := <-res:
			h.t.Fatalf("ask %q ended before it opened: %+v", ask.Question, r)
		default:
		}
		h.settle()
		qs, _ := h.o.OpenQuestions(context.Background())
		for _, open := range qs {
			if open.Text == ask.Question {
				return res, open
			}
		}
	}
	h.t.Fatal("the question never opened")
	return nil, models.Question{}
}

// settings sets the harness project's settings.
func (h *harness) settings(s models.ProjectSettings) {
	h.t.Helper()
	if _, err := h.st.UpdateProject(context.Background(), "p", models.ProjectPatch{Settings: &s}); err != nil {
		h.t.Fatal(err)
	}
}

// stillRunning fails unless the run is under way and its ask has not
// returned, after a round at the clock's time.
func (h *harness) stillRunning(runID int64, asked chan askResult, when string) {
	h.t.Helper()
	h.settle()
	select {
	case r := <-asked:
		h.t.Fatalf("%s: the ask returned %+v", when, r)
	default:
	}
	ar, err := h.o.active(runID)
	if err != nil {
		h.t.Fatalf("%s: the run ended: %v", when, err)
	}
	ar.mu.Lock()
	ending := ar.endReason
	ar.mu.Unlock()
	if ending != "" {
		h.t.Fatalf("%s: the run is being ended: %s", when, ending)
	}
}

// TestWaitingStopsTheClocks: while a run waits for an answer its time
// limits are suspended, and they count again from the answer — a heartbeat
// timeout of 3 s with an answer after 8 s used to fail the run in the
// second of the answer; a task timeout of 4 s ended the run while it
// waited. max_runtime counts the run's time without its waits.
func TestWaitingStopsTheClocks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		agent  func(*models.Agent)
		task   func(*models.BatchTask)
		limit  time.Duration // the limit, counted from the answer
		reason string
	}{
		{"heartbeat_timeout", func(a *models.Agent) { a.HeartbeatTimeout = models.Duration(3 * time.Second) }, nil,
			3 * time.Second, "no heartbeat for 3s"},
		{"task timeout", nil, func(b *models.BatchTask) { b.Timeout = models.Duration(4 * time.Second) },
			4 * time.Second, "ran longer than the task's timeout of 4s"},
		{"max_runtime", func(a *models.Agent) { a.MaxRuntime = models.Duration(5 * time.Second) }, nil,
			5 * time.Second, "ran longer than 5s"},
		{"idle_timeout", func(a *models.Agent) { a.IdleTimeout = models.Duration(6 * time.Second) }, nil,
			6 * time.Second, "no output and no report for 6s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(c *Config) { c.InputTimeout = time.Hour })
			h.agent("a1", "command", "quiet", tc.agent)
			bt := models.BatchTask{LocalID: "t", Title: "t"}
			if tc.task != nil {
				tc.task(&bt)
			}
			id := h.tasks(bt)["t"]
			run := h.running()
			asked, q := h.askWith(run, models.Ask{Question: "Which way?"})
			h.clock.Advance(8 * time.Second) // longer than the limit: waiting stops it
			h.stillRunning(run.ID, asked, "8 s into the wait")
			if st := h.task(id).Status; st != models.StatusWaitingInput {
				t.Fatalf("while waiting: %s", st)
			}
			if _, err := h.o.AnswerQuestion(context.Background(), q.ID, "left", "ana"); err != nil {
				t.Fatal(err)
			}
			if r := <-asked; r.err != nil || r.answer != "left" {
				t.Fatalf("the answer: %+v", r)
			}
			h.clock.Advance(tc.limit - time.Second)
			h.stillRunning(run.ID, asked, "a second before the limit, counted from the answer")
			h.clock.Advance(time.Second)
			h.waitEnd()
			h.settle()
			if tk := h.task(id); tk.Status != models.StatusFailed || !strings.Contains(tk.StatusReason, tc.reason) {
				t.Fatalf("at the limit: %s (%q), want FAILED for %q", tk.Status, tk.StatusReason, tc.reason)
			}
		})
	}
}

// TestOnExpiry: an unanswered question expires after the input timeout
// (the project's, else the daemon's) with the project's on_expiry outcome,
// and every expiry uses one of the task's retries; one that finds none left
// blocks the task, so a task whose agent always asks cannot loop.
func TestOnExpiry(t *testing.T) {
	t.Parallel()
	proposed := "the left one"
	for _, tc := range []struct {
		name       string
		onExpiry   string
		def        *string
		maxRetries int
		want       models.TaskStatus
		retries    int
		answer     string // the ask's answer, "" for an error
		reason     string
	}{
		{"pause", models.OnExpiryPause, nil, 3, models.StatusPaused, 1, "", "on_expiry: pause"},
		{"pause is the default", "", &proposed, 3, models.StatusPaused, 1, "", "on_expiry: pause"},
		{"fail", models.OnExpiryFail, nil, 3, models.StatusFailed, 0, "", "on_expiry: fail"},
		{"default", models.OnExpiryDefault, &proposed, 3, models.StatusInProgress, 1, proposed, "answered with the agent's default"},
		{"default without one pauses", models.OnExpiryDefault, nil, 3, models.StatusPaused, 1, "", "proposed no default answer"},
		{"no retry left blocks (pause)", models.OnExpiryPause, nil, 0, models.StatusBlocked, 0, "", "no retry left"},
		{"no retry left blocks (fail)", models.OnExpiryFail, nil, 0, models.StatusBlocked, 0, "", "no retry left"},
		{"no retry left blocks (default)", models.OnExpiryDefault, &proposed, 0, models.StatusBlocked, 0, "", "no retry left"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(c *Config) { c.InputTimeout = 10 * time.Hour })
			h.settings(models.ProjectSettings{OnExpiry: tc.onExpiry, InputTimeout: models.Duration(time.Hour)})
			h.agent("a1", "command", "quiet", nil)
			id := h.tasks(models.BatchTask{LocalID: "t", Title: "t", MaxRetries: &tc.maxRetries})["t"]
			run := h.running()
			asked, q := h.askWith(run, models.Ask{Question: "Which way?", Default: tc.def})
			if !q.ExpiresAt.Equal(q.AskedAt.Add(time.Hour)) {
				t.Fatalf("the question expires at %v, asked at %v: want the project's hour", q.ExpiresAt, q.AskedAt)
			}
			h.clock.Advance(time.Hour - time.Second)
			h.stillRunning(run.ID, asked, "before the expiry")
			h.clock.Advance(time.Second)
			r := <-asked
			if tc.answer != "" && (r.err != nil || r.answer != tc.answer) || tc.answer == "" && r.err == nil {
				t.Fatalf("the ask returned %+v, want the answer %q", r, tc.answer)
			}
			if tc.want != models.StatusInProgress {
				h.waitEnd()
			}
			h.settle()
			tk := h.task(id)
			if tk.Status != tc.want || tk.RetryCount != tc.retries || !strings.Contains(tk.StatusReason, tc.reason) {
				t.Fatalf("after the expiry: %s, %d retries used (%q); want %s, %d, %q", tk.Status, tk.RetryCount,
					tk.StatusReason, tc.want, tc.retries, tc.reason)
			}
			if qs, _ := h.o.OpenQuestions(context.Background()); len(qs) != 0 {
				t.Fatalf("the expired question is still open: %+v", qs)
			}
			if _, err := h.o.AnswerQuestion(context.Background(), q.ID, "late", "ana"); models.ErrorCodeOf(err) != models.CodeConflict {
				t.Fatalf("an answer after the expiry: %v", err)
			}
		})
	}
}

// TestRepeatedExpiriesAreBounded: a task whose agent asks on every run and
// is never answered pauses once per retry, then is blocked: the expiries
// count toward max_retries.
func TestRepeatedExpiriesAreBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.InputTimeout = time.Hour })
	h.agent("a1", "command", "quiet", nil)
	one := 1
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "t", MaxRetries: &one})["t"]
	run := h.running()
	asked, _ := h.askWith(run, models.Ask{Question: "first?"})
	h.clock.Advance(time.Hour)
	<-asked
	h.waitEnd()
	h.settle()
	if tk := h.task(id); tk.Status != models.StatusPaused || tk.RetryCount != 1 {
		t.Fatalf("after the first expiry: %s, %d retries", tk.Status, tk.RetryCount)
	}
	h.clock.Advance(time.Hour) // the pause ends: the task runs again and asks again
	run2 := h.waitStart()
	asked, _ = h.askWith(run2, models.Ask{Question: "second?"})
	h.clock.Advance(time.Hour)
	<-asked
	h.waitEnd()
	h.settle()
	tk := h.task(id)
	if tk.Status != models.StatusBlocked || !strings.Contains(tk.StatusReason, "no retry left") {
		t.Fatalf("after the second expiry: %s (%q)", tk.Status, tk.StatusReason)
	}
	if got := h.events(id); got[len(got)-1] != string(models.EventMaxRetries) {
		t.Fatalf("events %v", got)
	}
}

// TestAnAskGivenUpRightAfterItsQuestionIsRecorded forces the interleaving
// that left a task WAITING_INPUT with a run going on without its answer:
// the agent's CLI gave up on the call just after the question was written,
// while the ask was looking for an answer that came early (that read used
// the caller's context, failed, and returned without ending the run). An
// ask abandoned at any point must end its run; the task waits on for the
// answer without it, and the answer runs it again.
func TestAnAskGivenUpRightAfterItsQuestionIsRecorded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.InputTimeout = time.Hour })
	h.agent("a1", "command", "quiet", nil)
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "t"})["t"]
	run := h.running()
	ctx, cancel := context.WithCancel(context.Background())
	h.o.afterAsk = func(models.Question) { cancel() } // the CLI gives up now
	_, err := h.o.Ask(ctx, run, models.Ask{Question: "Which way?"})
	if err == nil {
		t.Fatal("the abandoned ask returned no error")
	}
	h.waitEnd()
	h.settle()
	tk := h.task(id)
	if tk.Status != models.StatusWaitingInput {
		t.Fatalf("after the abandoned ask: %s (%q)", tk.Status, tk.StatusReason)
	}
	if _, err := h.o.active(run.ID); err == nil {
		t.Fatal("the run goes on without the answer")
	}
	qs, _ := h.o.OpenQuestions(context.Background())
	if len(qs) != 1 || qs[0].RunEndedAt == nil {
		t.Fatalf("open questions: %+v", qs)
	}
	if _, err := h.o.AnswerQuestion(context.Background(), qs[0].ID, "left", "ana"); err != nil {
		t.Fatal(err)
	}
	if r2 := h.waitStart(); r2.Attempt != 2 || r2.AgentID != "a1" {
		t.Fatalf("the run after the answer: %+v", r2)
	}
}

// TestARestartKeepsTheQuestionWaiting: the daemon stops while a question
// waits (its runs end) and starts again: the question stays open and
// listed, the task waits for it without a run (no pause, no resume timer)
// and holds no agent, and the answer runs the task again at once, on the
// agent that asked (its session resumes), with the answer in its prompt.
func TestARestartKeepsTheQuestionWaiting(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.InputTimeout = time.Hour })
	h.agent("a1", "command", "quiet", nil)
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "t"})["t"]
	run := h.running()
	asked, q := h.askWith(run, models.Ask{Question: "Which way?"})
	h.restart() // a planned stop (the runs end), and a new daemon
	<-asked
	// An agent registered meanwhile comes first in ID order: only the
	// preference for the agent that asked sends the task back to a1.
	h.agent("a0", "command", "quiet", nil)
	h.start()
	h.settle()
	tk := h.task(id)
	if tk.Status != models.StatusWaitingInput || tk.ResumeAfter != nil {
		t.Fatalf("after the restart: %s until %v (%q)", tk.Status, tk.ResumeAfter, tk.StatusReason)
	}
	qs, _ := h.o.OpenQuestions(context.Background())
	if len(qs) != 1 || qs[0].ID != q.ID {
		t.Fatalf("open questions after the restart: %+v", qs)
	}
	for _, a := range []string{"a0", "a1"} {
		if ag, _ := h.st.GetAgent(context.Background(), a); ag.State != models.AgentIdle {
			t.Fatalf("agent %s is %s while the task waits for its answer", a, ag.State)
		}
	}
	if _, err := h.o.AnswerQuestion(context.Background(), q.ID, "left", "ana"); err != nil {
		t.Fatal(err)
	}
	r2 := h.waitStart()
	if r2.Attempt != 2 || r2.AgentID != run.AgentID {
		t.Fatalf("the run after the answer: %+v; want attempt 2 on %s", r2, run.AgentID)
	}
	prompt, _ := os.ReadFile(filepath.Join(h.o.cfg.RunDir, id, "2.prompt"))
	if !strings.Contains(string(prompt), "Q: Which way?\nA: left") {
		t.Fatalf("the answer is not in the prompt:\n%s", prompt)
	}
	events := h.events(id)
	if events[len(events)-3] != string(models.EventReplyRequeued) {
		t.Fatalf("events %v", events)
	}
}
