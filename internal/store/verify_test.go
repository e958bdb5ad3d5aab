package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

func TestPlanIsCreatedWhenItsTaskCompletes(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := context.Background()
	storetest.Project(t, s, "web")
	ids := storetest.Tasks(t, s, "web", models.BatchTask{LocalID: "root", Title: "Build the feature"})
	root := ids["root"]
	storetest.Apply(t, s, root, models.EventAssigned, models.EventAgentStarted)
	// A bad plan is refused and nothing is kept.
	if _, err := s.SavePlan(ctx, root, "agent", []models.BatchTask{{Title: ""}}); err == nil {
		t.Fatal("a plan with an untitled subtask was accepted")
	}
	if _, err := s.SavePlan(ctx, root, "agent", []models.BatchTask{{LocalID: "a", Title: "A", Dependencies: storetest.Deps("b")},
		{LocalID: "b", Title: "B", Dependencies: storetest.Deps("a")}}); err == nil || !strings.Contains(err.Error(), "ycl") {
		t.Fatalf("a cyclic plan: %v", err)
	}
	if _, ok, _ := s.PendingPlan(ctx, root); ok {
		t.Fatal("a refused plan is pending")
	}
	before, _ := s.ListTasks(ctx, models.TaskFilter{ProjectID: "web"})
	// A valid plan is pending; its subtasks exist only after completion.
	if _, err := s.SavePlan(ctx, root, "agent", []models.BatchTask{{Title: "Model"}, {Title: "API"}, {Title: "Docs"}}); err != nil {
		t.Fatal(err)
	}
	if after, _ := s.ListTasks(ctx, models.TaskFilter{ProjectID: "web"}); len(after) != len(before) {
		t.Fatalf("validating the plan created tasks: %d → %d", len(before), len(after))
	}
	p, ok, err := s.PendingPlan(ctx, root)
	if err != nil || !ok || len(p.Tasks) != 3 || p.Tasks[2].Dependencies[0].ID != p.Tasks[1].LocalID {
		t.Fatalf("pending plan %+v %v %v", p, ok, err)
	}
	storetest.Apply(t, s, root, models.EventAgentCompleted, models.EventVerifyPassed)
	subs, err := s.ListTasks(ctx, models.TaskFilter{ProjectID: "web"})
	if err != nil {
		t.Fatal(err)
	}
	byTitle := map[string]models.Task{}
	for _, st := range subs {
		byTitle[st.Title] = st
	}
	for title, want := range map[string]models.TaskStatus{"Model": models.StatusReady, "API": models.StatusDefined,
		"Docs": models.StatusDefined} {
		st := byTitle[title]
		if st.Status != want || !st.IsPlanSubtask || st.ParentTaskID == nil || *st.ParentTaskID != root {
			t.Errorf("subtask %s: %+v", title, st)
		}
	}
	if _, ok, _ := s.PendingPlan(ctx, root); ok {
		t.Fatal("the plan is still pending after its creation")
	}
	// Completing the chain runs the subtasks in order.
	storetest.Apply(t, s, byTitle["Model"].ID, storetest.ToCompleted...)
	storetest.WantStatuses(t, s, map[string]models.TaskStatus{byTitle["API"].ID: models.StatusReady, byTitle["Docs"].ID: models.StatusDefined})
}

func TestPlanAwaitingApprovalIsRejectedByRestart(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := context.Background()
	storetest.Project(t, s, "web")
	root := storetest.Tasks(t, s, "web", models.BatchTask{LocalID: "r", Title: "Plan it"})["r"]
	storetest.Apply(t, s, root, models.EventAssigned, models.EventAgentStarted)
	if _, err := s.SavePlan(ctx, root, "agent", []models.BatchTask{{Title: "Only step"}}); err != nil {
		t.Fatal(err)
	}
	storetest.Apply(t, s, root, models.EventAgentCompleted, models.EventApprovalRequested)
	fb := &models.Feedback{Source: "ana", Verdict: models.VerdictReject, Text: "split the API step"}
	if _, err := s.ApplyEvent(ctx, models.TransitionRequest{TaskID: root, Event: models.EventAdminRestart, Actor: "ana",
		Reason: "plan rejected", Feedback: fb}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.PendingPlan(ctx, root); ok {
		t.Fatal("a rejected plan is still pending")
	}
	all, _ := s.ListTasks(ctx, models.TaskFilter{ProjectID: "web"})
	if len(all) != 1 {
		t.Fatalf("a rejected plan created tasks: %d", len(all))
	}
	got, err := s.TaskFeedback(ctx, root)
	if err != nil || len(got) != 1 || got[0].Text != "split the API step" || got[0].Source != "ana" {
		t.Fatalf("feedback %+v %v", got, err)
	}
}

func TestRunUsageCountsGrowthOnlyAndSessionsResume(t *testing.T) {
	t.Parallel()
	s, _ := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "web")
	storetest.Agent(t, s, "a1")
	id := storetest.Tasks(t, s, "web", models.BatchTask{LocalID: "t", Title: "t"})["t"]
	run, _, err := s.ClaimTask(ctx, id, "a1")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []models.TokenUsage{{Input: 100, Output: 10}, {Input: 100, Output: 10}, {Input: 250, Output: 40, CacheRead: 5},
		{Input: 200}} { // a repeat and a smaller figure add nothing
		if _, err := s.RecordRunUsage(ctx, run.ID, u); err != nil {
			t.Fatal(err)
		}
	}
	p, _ := s.GetProject(ctx, "web")
	if p.TotalTokensUsed != 295 {
		t.Fatalf("project total %d, want 295 (250+40+5)", p.TotalTokensUsed)
	}
	if err := s.RecordRunSession(ctx, run.ID, "sess-1"); err != nil {
		t.Fatal(err)
	}
	sid, u, err := s.LastSession(ctx, id, "a1")
	if err != nil || sid != "sess-1" || u.Input != 250 || u.Output != 40 {
		t.Fatalf("last session %q %+v %v", sid, u, err)
	}
	// A second run of the session: what the session booked is the sum of
	// its runs, so a CLI reporting the session's running total is not
	// counted twice on a third run.
	if _, err := s.FinishRun(ctx, models.RunEnd{RunID: run.ID, Outcome: "failed"}); err != nil {
		t.Fatal(err)
	}
	storetest.Apply(t, s, id, models.EventAgentStarted, models.EventAgentFailed, models.EventRetry)
	run2, _, err := s.ClaimTask(ctx, id, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordRunUsage(ctx, run2.ID, models.TokenUsage{Input: 50, Output: 5}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordRunSession(ctx, run2.ID, "sess-1"); err != nil {
		t.Fatal(err)
	}
	if sid, u, _ := s.LastSession(ctx, id, "a1"); sid != "sess-1" || u.Input != 300 || u.Output != 45 || u.CacheRead != 5 {
		t.Fatalf("two runs of the session: %q %+v", sid, u)
	}
	if sid, _, _ := s.LastSession(ctx, id, "other"); sid != "" {
		t.Fatalf("another agent resumes %q", sid)
	}
	if err := s.ForgetSessions(ctx, id, "a1"); err != nil {
		t.Fatal(err)
	}
	if sid, _, _ := s.LastSession(ctx, id, "a1"); sid != "" {
		t.Fatalf("forgotten session still resumed: %q", sid)
	}
}

func TestReviewRunsAreNotAttempts(t *testing.T) {
	t.Parallel()
	s, _ := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "web")
	storetest.Agent(t, s, "worker")
	storetest.Agent(t, s, "qa")
	id := storetest.Tasks(t, s, "web", models.BatchTask{LocalID: "t", Title: "t", VerificationType: models.VerifyQAAgent})["t"]
	if _, _, err := s.ClaimReview(ctx, id, "qa"); err == nil {
		t.Fatal("a READY task was claimed for review")
	}
	run, _, err := s.ClaimTask(ctx, id, "worker")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartRun(ctx, run.ID, 1, "/w"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentCompleted, ExpectFrom: models.StatusInProgress,
		Outcome: "completed"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ClaimReview(ctx, id, "qa"); err == nil {
		t.Fatal("a review was claimed before the verification asked for one")
	}
	if err := s.SetVerification(ctx, models.Verification{TaskID: id, Attempt: 1, Phase: models.PhaseReview, Source: "/w"}); err != nil {
		t.Fatal(err)
	}
	rev, token, err := s.ClaimReview(ctx, id, "qa")
	if err != nil || rev.Kind != models.RunReview || rev.Attempt != 1 || token == "" {
		t.Fatalf("review claim %+v %v", rev, err)
	}
	if _, _, err := s.ClaimReview(ctx, id, "qa"); err == nil {
		t.Fatal("a busy reviewer was claimed twice")
	}
	if got, err := s.RunByToken(ctx, token); err != nil || got.ID != rev.ID || got.Kind != models.RunReview {
		t.Fatalf("review token: %+v %v", got, err)
	}
	if _, err := s.StartRun(ctx, rev.ID, 2, "/verify"); err != nil {
		t.Fatal(err)
	}
	if st := storetest.Status(t, s, id); st != models.StatusVerifying {
		t.Fatalf("starting a review moved the task to %s", st)
	}
	if _, err := s.FinishRun(ctx, models.RunEnd{RunID: rev.ID, Outcome: "approved"}); err != nil {
		t.Fatal(err)
	}
	if a := agentState(t, s, "qa"); a.State != models.AgentIdle || a.CurrentTaskID != nil {
		t.Fatalf("reviewer after the review: %+v", a)
	}
	last, ok, err := s.LastWorkRun(ctx, id)
	if err != nil || !ok || last.ID != run.ID {
		t.Fatalf("last work run %+v %v %v", last, ok, err)
	}
}

func TestResultsReachDependents(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := context.Background()
	storetest.Project(t, s, "web")
	ids := storetest.Tasks(t, s, "web", models.BatchTask{LocalID: "up", Title: "Up"}, models.BatchTask{LocalID: "down", Title: "Down",
		Dependencies: storetest.Deps("up")})
	if err := s.SaveResult(ctx, ids["up"], 1, models.Completion{Summary: "did it", FilesChanged: []string{"a.go"},
		Outputs: []byte(`{"n":3}`)}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.UpstreamResults(ctx, ids["down"]); len(got) != 0 {
		t.Fatalf("results of an unfinished upstream: %+v", got)
	}
	storetest.Apply(t, s, ids["up"], storetest.ToCompleted...)
	got, err := s.UpstreamResults(ctx, ids["down"])
	if err != nil || len(got) != 1 || got[0].Summary != "did it" || got[0].FilesChanged[0] != "a.go" || string(got[0].Outputs) != `{"n":3}` {
		t.Fatalf("upstream results %+v %v", got, err)
	}
}

func TestFailedOrSkippedAttemptDiscardsItsPlan(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := context.Background()
	storetest.Project(t, s, "web")
	for _, end := range [][]models.TaskEvent{{models.EventAgentFailed}, {models.EventAdminStop, models.EventAdminSkip}} {
		id := storetest.Tasks(t, s, "web", models.BatchTask{LocalID: "r", Title: "Plan it"})["r"]
		storetest.Apply(t, s, id, models.EventAssigned, models.EventAgentStarted)
		if _, err := s.SavePlan(ctx, id, "agent", []models.BatchTask{{Title: "sub of " + id}}); err != nil {
			t.Fatal(err)
		}
		storetest.Apply(t, s, id, end...)
		if _, ok, _ := s.PendingPlan(ctx, id); ok {
			t.Fatalf("after %v the plan is still pending", end)
		}
		all, _ := s.ListTasks(ctx, models.TaskFilter{ProjectID: "web"})
		for _, tk := range all {
			if tk.IsPlanSubtask {
				t.Fatalf("after %v a subtask exists: %+v", end, tk)
			}
		}
	}
}

func TestPausedAttemptKeepsItsPlan(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := context.Background()
	storetest.Project(t, s, "web")
	id := storetest.Tasks(t, s, "web", models.BatchTask{LocalID: "r", Title: "Plan it"})["r"]
	storetest.Apply(t, s, id, models.EventAssigned, models.EventAgentStarted)
	if _, err := s.SavePlan(ctx, id, "agent", []models.BatchTask{{Title: "the step"}}); err != nil {
		t.Fatal(err)
	}
	// Rate limited, resumed, recovered: the same attempt's work goes on.
	storetest.Apply(t, s, id, models.EventTokensExhausted, models.EventResumeTimer, models.EventAssigned, models.EventAgentStarted,
		models.EventRecovery, models.EventAssigned, models.EventAgentStarted)
	if _, ok, _ := s.PendingPlan(ctx, id); !ok {
		t.Fatal("a pause or a recovery discarded the plan")
	}
	storetest.Apply(t, s, id, models.EventAgentCompleted, models.EventVerifyPassed)
	all, _ := s.ListTasks(ctx, models.TaskFilter{ProjectID: "web"})
	if len(all) != 2 {
		t.Fatalf("%d tasks after the accepted work, want the plan's step too", len(all))
	}
}

// TestTaskDetailShowsThePendingPlan: a task's detail carries the plan its
// agent proposed while it is pending, and not once it was created.
func TestTaskDetailShowsThePendingPlan(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := context.Background()
	storetest.Project(t, s, "web")
	root := storetest.Tasks(t, s, "web", models.BatchTask{LocalID: "root", Title: "Build the feature"})["root"]
	storetest.Apply(t, s, root, models.EventAssigned, models.EventAgentStarted)
	if _, err := s.SavePlan(ctx, root, "agent", []models.BatchTask{{Title: "Model"}, {Title: "API"}}); err != nil {
		t.Fatal(err)
	}
	d, err := s.GetTaskDetail(ctx, root)
	if err != nil || d.Plan == nil || d.Plan.Status != "pending" || len(d.Plan.Tasks) != 2 || d.Plan.Tasks[1].Title != "API" {
		t.Fatalf("detail of a task with a pending plan: plan %+v, err %v", d.Plan, err)
	}
	storetest.Apply(t, s, root, models.EventAgentCompleted, models.EventVerifyPassed)
	if d, err := s.GetTaskDetail(ctx, root); err != nil || d.Plan != nil {
		t.Fatalf("detail after the plan was created: plan %+v, err %v", d.Plan, err)
	}
}
