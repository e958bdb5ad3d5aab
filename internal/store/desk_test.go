package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// TestTheDeskListsWhatWaitsOnAPerson: one desk of everything that waits on
// a person — a question whose run ended (a restart), a landing held by
// local changes, the root of a blocked chain, a project out of budget, an
// agent in ERROR — and nothing that does not: a task a person cancelled on
// purpose, a task blocked behind another.
func TestTheDeskListsWhatWaitsOnAPerson(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := storetest.Open(t, storetest.WithClock(clock))
	if _, err := s.CreateProject(ctx, models.Project{ID: "web", Settings: models.ProjectSettings{
		EscalateAfter: models.Duration(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	if _, err := s.CreateProject(ctx, models.Project{ID: "broke", BudgetLimit: &zero}); err != nil {
		t.Fatal(err)
	}
	storetest.Agent(t, s, "a", "web")
	storetest.Agent(t, s, "b", "web")
	noRetry := 0
	ids := storetest.Tasks(t, s, "web",
		models.BatchTask{LocalID: "ask", Title: "Asks"},
		models.BatchTask{LocalID: "land", Title: "Lands"},
		models.BatchTask{LocalID: "root", Title: "Breaks", MaxRetries: &noRetry},
		models.BatchTask{LocalID: "behind", Title: "Behind", Dependencies: storetest.Deps("root")},
		models.BatchTask{LocalID: "gone", Title: "Cancelled"})
	storetest.Tasks(t, s, "broke", models.BatchTask{LocalID: "x", Title: "Waits for budget"})
	run := func(id, agent string) models.Run {
		t.Helper()
		r, _, err := s.ClaimTask(ctx, id, agent)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.StartRun(ctx, r.ID, 1, ""); err != nil {
			t.Fatal(err)
		}
		return r
	}
	// A question whose run ended: the daemon restarted.
	asking := run(ids["ask"], "a")
	q, err := s.AskQuestionWith(ctx, asking.ID, models.Ask{Question: "Which database?"}, 4*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.FinishRun(ctx, models.RunEnd{RunID: asking.ID, Event: models.EventRecovery, Outcome: models.RunOutcomeRecovered}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	// A landing held by local changes.
	landing := run(ids["land"], "b")
	if _, err := s.FinishRun(ctx, models.RunEnd{RunID: landing.ID, Event: models.EventAgentCompleted, ExpectFrom: models.StatusInProgress,
		Outcome: models.RunOutcomeCompleted, Verification: &models.Verification{TaskID: ids["land"], Attempt: 1,
			Phase: models.PhaseLanding}}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	// A root whose failure blocks its dependent, and an agent set aside.
	broken := run(ids["root"], "a")
	if _, err := s.FinishRun(ctx, models.RunEnd{RunID: broken.ID, Event: models.EventAgentFailed, ExpectFrom: models.StatusInProgress,
		Reason: "tests fail", Outcome: models.RunOutcomeFailed, AgentError: "start process"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyEvent(ctx, models.TransitionRequest{TaskID: ids["root"], Event: models.EventMaxRetries,
		Reason: "no retries left: tests fail", Actor: "system"}); err != nil {
		t.Fatal(err)
	}
	// A task a person cancelled on purpose.
	if _, err := s.ApplyEvent(ctx, models.TransitionRequest{TaskID: ids["gone"], Event: models.EventAdminCancel, Actor: "bob"}); err != nil {
		t.Fatal(err)
	}

	d, err := s.Desk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[models.DeskKind]models.DeskItem{}
	for _, it := range d.Items {
		if _, dup := got[it.Kind]; dup {
			t.Errorf("two items of kind %s: %+v", it.Kind, d.Items)
		}
		got[it.Kind] = it
		if it.TaskID == ids["gone"] || it.TaskID == ids["behind"] {
			t.Errorf("the desk lists %s, which waits on nobody: %+v", it.TaskID, it)
		}
		if it.Action.Command == "" || it.What == "" || it.Since.IsZero() {
			t.Errorf("an item without its action, what or since: %+v", it)
		}
	}
	question := got[models.DeskQuestion]
	if question.QuestionID != q.ID || !question.RunEnded || question.AskedBy != "a" || question.What != "Which database?" ||
		question.ExpiresAt == nil || !question.ExpiresAt.Equal(q.AskedAt.Add(4*time.Hour)) ||
		question.EscalatesAt == nil || !question.EscalatesAt.Equal(q.AskedAt.Add(time.Hour)) ||
		!strings.Contains(question.Action.Command, "question answer") {
		t.Errorf("the question: %+v", question)
	}
	if it := got[models.DeskLanding]; it.TaskID != ids["land"] || !strings.Contains(it.Action.Command, "agentqueued land web") {
		t.Errorf("the landing: %+v", it)
	}
	if it := got[models.DeskBlocked]; it.TaskID != ids["root"] || it.Behind != 1 || !strings.Contains(it.What, "tests fail") {
		t.Errorf("the blocked root: %+v", it)
	}
	if it := got[models.DeskBudget]; it.ProjectID != "broke" || it.EscalatesAt != nil {
		t.Errorf("the budget: %+v", it)
	}
	if it := got[models.DeskAgent]; it.AgentID != "a" || !strings.Contains(it.Action.Command, "agent resume a") {
		t.Errorf("the agent: %+v", it)
	}
	if len(d.Items) != 5 {
		t.Errorf("%d items, want 5: %+v", len(d.Items), d.Items)
	}
	for i := 1; i < len(d.Items); i++ {
		if d.Items[i].Since.Before(d.Items[i-1].Since) {
			t.Errorf("not oldest first: %v before %v", d.Items[i-1].Since, d.Items[i].Since)
		}
	}
}

// TestDeskForOneProject: a project's desk lists its items only (not the
// agents'), and an unknown project is not_found, naming it.
func TestDeskForOneProject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t)
	zero := int64(0)
	for _, p := range []models.Project{{ID: "web", BudgetLimit: &zero}, {ID: "docs", BudgetLimit: &zero}} {
		if _, err := s.CreateProject(ctx, p); err != nil {
			t.Fatal(err)
		}
		storetest.Tasks(t, s, p.ID, models.BatchTask{LocalID: "x", Title: "Waits for budget"})
	}
	tests := []struct {
		project string
		want    []string
	}{
		{"", []string{"budget:docs", "budget:web"}},
		{"web", []string{"budget:web"}},
		{"docs", []string{"budget:docs"}},
	}
	for _, tt := range tests {
		d, err := s.DeskFor(ctx, tt.project)
		if err != nil {
			t.Fatalf("DeskFor(%q): %v", tt.project, err)
		}
		var got []string
		for _, it := range d.Items {
			got = append(got, it.Key)
		}
		if slices.Sort(got); !slices.Equal(got, tt.want) {
			t.Errorf("DeskFor(%q) = %v, want %v", tt.project, got, tt.want)
		}
	}
	_, err := s.DeskFor(ctx, "nope")
	var e *models.Error
	if !errors.As(err, &e) || e.Code != models.CodeNotFound || !strings.Contains(e.Message, "nope") {
		t.Errorf("DeskFor(unknown) = %v, want not_found naming it", err)
	}
}

// TestTheDeskFindsABlockedRootBehindManyCancelled: tasks a person
// cancelled on purpose are left out before the desk's bound applies, so
// that a blocked root younger than MaxDeskItems cancelled tasks is still
// listed, with the tasks behind it counted.
func TestTheDeskFindsABlockedRootBehindManyCancelled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := storetest.Open(t, storetest.WithClock(clock))
	if _, err := s.CreateProject(ctx, models.Project{ID: "web"}); err != nil {
		t.Fatal(err)
	}
	batch := make([]models.BatchTask, store.MaxDeskItems+1)
	for i := range batch {
		batch[i] = models.BatchTask{LocalID: fmt.Sprint(i), Title: "Cancelled"}
	}
	for _, id := range storetest.Tasks(t, s, "web", batch...) {
		if _, err := s.ApplyEvent(ctx, models.TransitionRequest{TaskID: id, Event: models.EventAdminCancel, Actor: "ann"}); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(time.Minute)
	ids := storetest.Tasks(t, s, "web", models.BatchTask{LocalID: "root", Title: "Times out"},
		models.BatchTask{LocalID: "behind", Title: "Behind", Dependencies: storetest.Deps("root")})
	storetest.Apply(t, s, ids["root"], models.EventAssigned, models.EventTimeout)

	d, err := s.Desk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Items) != 1 || d.Items[0].TaskID != ids["root"] || d.Items[0].Behind != 1 || d.Truncated {
		t.Errorf("desk = %+v (truncated %v), want only %s with 1 task behind it", d.Items, d.Truncated, ids["root"])
	}
}
