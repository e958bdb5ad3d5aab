package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

func TestAgentRestIsStoredShownAndEndsByItself(t *testing.T) {
	t.Parallel()
	s, clock := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "p")
	storetest.Agent(t, s, "a1")
	storetest.Agent(t, s, "a2")
	ids := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "t", Title: "T"})
	until := clock.Now().Add(time.Hour)
	if err := s.RestAgent(ctx, "a1", until, "rate limited during task x"); err != nil {
		t.Fatal(err)
	}
	// An earlier rest does not shorten the one recorded.
	if err := s.RestAgent(ctx, "a1", clock.Now().Add(time.Minute), "rate limited again"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		after      time.Duration
		wantState  models.AgentState
		wantReason string
		claimErr   string
		resting    []string
	}{
		{"resting", 0, models.AgentPaused, "rate limited during task x", "rests until 2026-03-01T13:00:00Z: rate limited during task x", []string{"a1"}},
		{"a second before its end", time.Hour - time.Second, models.AgentPaused, "rate limited during task x", "rests until", []string{"a1"}},
		{"over", time.Second, models.AgentIdle, "", "", nil},
	}
	for _, tc := range tests { // in order: each moves the clock on
		clock.Advance(tc.after)
		a := agentState(t, s, "a1")
		if a.State != tc.wantState || a.RestReason != tc.wantReason || (tc.wantReason != "" && !a.RestUntil.Equal(until)) ||
			(tc.wantReason == "" && a.RestUntil != nil) {
			t.Fatalf("%s: agent %s rest %v %q", tc.name, a.State, a.RestUntil, a.RestReason)
		}
		list, err := s.ListAgents(ctx)
		if err != nil || len(list) != 2 || list[0].State != tc.wantState || list[1].State != models.AgentIdle || list[1].RestUntil != nil {
			t.Fatalf("%s: list %+v %v", tc.name, list, err)
		}
		resting, err := s.RestingAgents(ctx, clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range resting {
			got = append(got, r.ID)
		}
		if strings.Join(got, ",") != strings.Join(tc.resting, ",") {
			t.Fatalf("%s: resting %v, want %v", tc.name, got, tc.resting)
		}
		_, _, err = s.ClaimTask(ctx, ids["t"], "a1")
		if tc.claimErr != "" {
			if err == nil || models.ErrorCodeOf(err) != models.CodeConflict || !strings.Contains(err.Error(), tc.claimErr) {
				t.Fatalf("%s: claim by a resting agent: %v", tc.name, err)
			}
			if st := storetest.Status(t, s, ids["t"]); st != models.StatusReady {
				t.Fatalf("%s: the refused claim left the task %s", tc.name, st)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: claim after the rest: %v", tc.name, err)
		}
	}
	// The claim cleared the rest that was over.
	if rs, err := s.RestingAgents(ctx, clock.Now().Add(-48*time.Hour)); err != nil || len(rs) != 0 {
		t.Fatalf("rests left after the claim: %+v %v", rs, err)
	}
	// A person's resume ends a rest.
	if err := s.RestAgent(ctx, "a2", clock.Now().Add(time.Hour), "rate limited"); err != nil {
		t.Fatal(err)
	}
	if a := agentState(t, s, "a2"); a.State != models.AgentPaused {
		t.Fatalf("a2 rests as %s", a.State)
	}
	if a, err := s.SetAgentPaused(ctx, "a2", false); err != nil || a.State != models.AgentIdle || a.RestUntil != nil {
		t.Fatalf("after resume: %+v %v", a, err)
	}
	if rs, err := s.RestingAgents(ctx, clock.Now()); err != nil || len(rs) != 0 {
		t.Fatalf("rests left after the resume: %+v %v", rs, err)
	}
	if err := s.RestAgent(ctx, "nobody", until, "x"); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("rest of an unknown agent: %v", err)
	}
	if err := s.RestAgent(ctx, "a2", until, " "); models.ErrorCodeOf(err) != models.CodeInvalid {
		t.Fatalf("rest without a reason: %v", err)
	}
}

func TestClaimReviewRefusesARestingReviewer(t *testing.T) {
	t.Parallel()
	s, clock := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "web")
	storetest.Agent(t, s, "worker")
	storetest.Agent(t, s, "qa")
	id := storetest.Tasks(t, s, "web", models.BatchTask{LocalID: "t", Title: "t", VerificationType: models.VerifyQAAgent})["t"]
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
	if err := s.SetVerification(ctx, models.Verification{TaskID: id, Attempt: 1, Phase: models.PhaseReview, Source: "/w"}); err != nil {
		t.Fatal(err)
	}
	if err := s.RestAgent(ctx, "qa", clock.Now().Add(time.Minute), "rate limited"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ClaimReview(ctx, id, "qa"); models.ErrorCodeOf(err) != models.CodeConflict {
		t.Fatalf("a resting reviewer was claimed: %v", err)
	}
	clock.Advance(time.Minute)
	if _, _, err := s.ClaimReview(ctx, id, "qa"); err != nil {
		t.Fatalf("the reviewer after its rest: %v", err)
	}
	if rs, err := s.RestingAgents(ctx, clock.Now().Add(-time.Hour)); err != nil || len(rs) != 0 {
		t.Fatalf("the claim left the rest: %+v %v", rs, err)
	}
}
