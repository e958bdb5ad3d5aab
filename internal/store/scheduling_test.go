package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// TestWaitingReasonsAreWrittenOnlyWhenTheyChange: a round writes reasons
// for a whole backlog; repeating an unchanged reason writes no row, and a
// status change clears it.
func TestWaitingReasonsAreWrittenOnlyWhenTheyChange(t *testing.T) {
	t.Parallel()
	s, clock := openClocked(t)
	ctx := context.Background()
	mustProject(t, s, "p")
	later := clock.Now().Add(time.Hour)
	ids := create(t, s, "p", models.BatchTask{LocalID: "a", Title: "a"}, models.BatchTask{LocalID: "b", Title: "b"},
		models.BatchTask{LocalID: "later", Title: "later", NotBefore: &later})
	all := models.WaitingUpdate{ProjectID: "p", Scope: models.WaitAll, Code: models.WaitingSlots, Reason: "all 2 slots of project p are busy"}
	future := models.WaitingUpdate{ProjectID: "p", Scope: models.WaitFuture, Now: clock.Now(), Code: models.WaitingNotBefore, Reason: "not before "}
	one := models.WaitingUpdate{ProjectID: "p", Scope: models.WaitTasks, TaskIDs: []string{ids["a"]}, Code: models.WaitingQueued, Reason: "queued"}
	for _, tc := range []struct {
		name    string
		updates []models.WaitingUpdate
		want    int64
	}{
		{"a whole project", []models.WaitingUpdate{all}, 3},
		{"the same again", []models.WaitingUpdate{all}, 0},
		{"another count of slots", []models.WaitingUpdate{{ProjectID: "p", Scope: models.WaitAll, Code: models.WaitingSlots,
			Reason: "all 3 slots of project p are busy"}}, 3},
		{"future-dated tasks", []models.WaitingUpdate{future}, 1},
		{"future-dated tasks again", []models.WaitingUpdate{future}, 0},
		{"one task", []models.WaitingUpdate{one}, 1},
		{"one task again", []models.WaitingUpdate{one}, 0},
	} {
		n, err := s.SetWaiting(ctx, tc.updates)
		if err != nil || n != tc.want {
			t.Fatalf("%s: %d rows written (%v), want %d", tc.name, n, err, tc.want)
		}
	}
	if got := getTask(t, s, ids["later"]); got.WaitingCode != models.WaitingNotBefore || got.WaitingReason != "not before 2026-03-01T13:00:00Z" {
		t.Fatalf("future-dated task: %q %q", got.WaitingCode, got.WaitingReason)
	}
	mustAgent(t, s, "a1")
	if _, _, err := s.ClaimTask(ctx, ids["a"], "a1"); err != nil {
		t.Fatal(err)
	}
	if got := getTask(t, s, ids["a"]); got.WaitingCode != "" || got.WaitingReason != "" {
		t.Fatalf("a started task keeps its waiting reason %q %q", got.WaitingCode, got.WaitingReason)
	}
	if got := getTask(t, s, ids["b"]); got.WaitingCode != models.WaitingSlots {
		t.Fatalf("another task lost its reason: %q", got.WaitingCode)
	}
}

func getTask(t *testing.T, s interface {
	GetTask(context.Context, string) (models.Task, error)
}, id string) models.Task {
	t.Helper()
	tk, err := s.GetTask(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}
