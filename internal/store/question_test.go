package store_test

import (
	"context"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// TestAskingSignalsAChange: a question moves its task to WAITING_INPUT,
// and whoever follows commits through OnChange hears of it.
func TestAskingSignalsAChange(t *testing.T) {
	t.Parallel()
	var wakes atomic.Int64
	s := storetest.Open(t, storetest.WithOnChange(func() { wakes.Add(1) }))
	ctx := context.Background()
	storetest.Project(t, s, "web")
	storetest.Agent(t, s, "a")
	ids := storetest.Tasks(t, s, "web", models.BatchTask{LocalID: "q", Title: "Ask"})
	run, _, err := s.ClaimTask(ctx, ids["q"], "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartRun(ctx, run.ID, 1, ""); err != nil {
		t.Fatal(err)
	}
	before := wakes.Load()
	if _, err := s.AskQuestion(ctx, run.ID, "Which database?"); err != nil {
		t.Fatal(err)
	}
	if got := wakes.Load(); got != before+1 {
		t.Fatalf("asking signalled %d changes, want 1", got-before)
	}
}

// askedWithClock opens a store on a fake clock, and a task whose run asked
// a question with an hour to its expiry.
func askedWithClock(t *testing.T, settings models.ProjectSettings) (*store.Store, *clocktest.Fake, string, models.Question) {
	t.Helper()
	clock := clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := storetest.Open(t, storetest.WithClock(clock))
	ctx := context.Background()
	if _, err := s.CreateProject(ctx, models.Project{ID: "web", Settings: settings}); err != nil {
		t.Fatal(err)
	}
	storetest.Agent(t, s, "a")
	id := storetest.Tasks(t, s, "web", models.BatchTask{LocalID: "q", Title: "Ask"})["q"]
	run, _, err := s.ClaimTask(ctx, id, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartRun(ctx, run.ID, 1, ""); err != nil {
		t.Fatal(err)
	}
	q, err := s.AskQuestionWith(ctx, run.ID, models.Ask{Question: "Which database?"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return s, clock, id, q
}

// TestAnswerRefusals: an answer to a question that cannot take one is
// refused with what happened to it, and writes nothing: the question and
// the task are as they were.
func TestAnswerRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		before func(t *testing.T, s *store.Store, clock *clocktest.Fake, id string, q models.Question)
		answer string
		code   models.ErrorCode
		want   string
	}{
		{"a megabyte", nil, strings.Repeat("x", 1<<20), models.CodeInvalid, "answer: at most 16000 characters"},
		{"empty", nil, " \n", models.CodeInvalid, "answer: required"},
		{"answered twice", func(t *testing.T, s *store.Store, _ *clocktest.Fake, _ string, q models.Question) {
			if _, err := s.AnswerQuestion(ctx, q.ID, "SQLite", "ana"); err != nil {
				t.Fatal(err)
			}
		}, "Postgres", models.CodeConflict, "already answered by ana"},
		{"expired", func(t *testing.T, s *store.Store, clock *clocktest.Fake, _ string, q models.Question) {
			clock.Advance(time.Hour)
			if res, err := s.ExpireQuestion(ctx, q.ID); err != nil || res.Outcome != models.ExpiryPaused {
				t.Fatalf("expire: %+v %v", res, err)
			}
		}, "SQLite", models.CodeConflict, "expired unanswered at 2026-03-01T13:00:00Z"},
		{"closed by a cancel", func(t *testing.T, s *store.Store, _ *clocktest.Fake, id string, _ models.Question) {
			if _, err := s.ApplyEvent(ctx, models.TransitionRequest{TaskID: id, Event: models.EventAdminCancel, Actor: "bob"}); err != nil {
				t.Fatal(err)
			}
		}, "SQLite", models.CodeConflict, "was closed: its task was cancelled"},
		{"closed by a restart", func(t *testing.T, s *store.Store, _ *clocktest.Fake, id string, _ models.Question) {
			if _, err := s.ApplyEvent(ctx, models.TransitionRequest{TaskID: id, Event: models.EventAdminRestart, Actor: "bob"}); err != nil {
				t.Fatal(err)
			}
		}, "SQLite", models.CodeConflict, "was closed: its task was restarted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, clock, id, q := askedWithClock(t, models.ProjectSettings{})
			if tc.before != nil {
				tc.before(t, s, clock, id, q)
			}
			qBefore, err := s.GetQuestion(ctx, q.ID)
			if err != nil {
				t.Fatal(err)
			}
			tBefore, err := s.GetTask(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.AnswerQuestion(ctx, q.ID, tc.answer, "carl")
			if models.ErrorCodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("answer: %v; want %s %q", err, tc.code, tc.want)
			}
			qAfter, _ := s.GetQuestion(ctx, q.ID)
			tAfter, _ := s.GetTask(ctx, id)
			if !reflect.DeepEqual(qBefore, qAfter) || tBefore.Status != tAfter.Status || !tBefore.UpdatedAt.Equal(tAfter.UpdatedAt) {
				t.Fatalf("a refused answer wrote something:\nquestion %+v\n      -> %+v\ntask %s -> %s", qBefore, qAfter,
					tBefore.Status, tAfter.Status)
			}
		})
	}
}

// TestARunEndingWhileItsQuestionWaits: the run that asked ends (the daemon
// stopped, the agent gave up): the task stays WAITING_INPUT without a run
// and frees its agent, the question stays open, and its answer makes the
// task READY (REPLY_REQUEUED), preferring the agent that asked.
func TestARunEndingWhileItsQuestionWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _, id, q := askedWithClock(t, models.ProjectSettings{})
	res, err := s.FinishRun(ctx, models.RunEnd{RunID: q.RunID, Event: models.EventRecovery, Reason: "the daemon restarted",
		Outcome: models.RunOutcomeRecovered})
	if err != nil || res.To != models.StatusWaitingInput {
		t.Fatalf("finish: %+v %v", res, err)
	}
	if a, _ := s.GetAgent(ctx, "a"); a.State != models.AgentIdle || a.CurrentTaskID != nil {
		t.Fatalf("the agent of the ended run: %+v", a)
	}
	open, err := s.OpenQuestions(ctx)
	if err != nil || len(open) != 1 || open[0].RunEndedAt == nil {
		t.Fatalf("open questions: %+v %v", open, err)
	}
	if _, err := s.AnswerQuestion(ctx, q.ID, "SQLite", "ana"); err != nil {
		t.Fatal(err)
	}
	tk, _ := s.GetTask(ctx, id)
	if tk.Status != models.StatusReady || !strings.Contains(tk.StatusReason, "runs again with the answer") {
		t.Fatalf("after the answer: %s (%q)", tk.Status, tk.StatusReason)
	}
	ready, err := s.ReadyTasks(ctx, models.ReadyQuery{ProjectID: "web", Now: time.Now(), Limit: 10})
	if err != nil || len(ready) != 1 || ready[0].PreferAgentID != "a" {
		t.Fatalf("ready %+v %v", ready, err)
	}
}

// TestACompletionWhileItsQuestionWaitsIsNotTheOutcome: an agent that
// reported completion and ended while its question still waited leaves its
// task waiting for the answer: nothing of the run becomes the task's result
// or the start of its verification.
func TestACompletionWhileItsQuestionWaitsIsNotTheOutcome(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _, id, q := askedWithClock(t, models.ProjectSettings{})
	res, err := s.FinishRun(ctx, models.RunEnd{RunID: q.RunID, Event: models.EventAgentCompleted, ExpectFrom: models.StatusInProgress,
		Outcome: models.RunOutcomeCompleted, Result: &models.Completion{Summary: "done without the answer"},
		Verification: &models.Verification{TaskID: id, Attempt: 1, Phase: models.PhaseChecks}})
	if err != nil || res.To != models.StatusWaitingInput {
		t.Fatalf("finish: %+v %v", res, err)
	}
	d, err := s.GetTaskDetail(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if d.Task.Status != models.StatusWaitingInput || d.Result != nil {
		t.Fatalf("after the run: %s, result %+v", d.Task.Status, d.Result)
	}
	if _, found, err := s.GetVerification(ctx, id); err != nil || found {
		t.Fatalf("a verification was recorded for a task waiting for its answer: %v %v", found, err)
	}
}
