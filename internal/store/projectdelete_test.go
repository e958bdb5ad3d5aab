package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// TestDeleteProject: a project is deleted with its tasks, and only its
// own; live work, dependents elsewhere and recorded token use refuse it
// with the reason named.
func TestDeleteProject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name  string
		setup func(t *testing.T, s *store.Store, ids map[string]string)
		code  models.ErrorCode
		err   string
	}{
		{"finished and waiting work", func(t *testing.T, s *store.Store, ids map[string]string) {
			storetest.Apply(t, s, ids["a"], storetest.ToCompleted...)
			storetest.Apply(t, s, ids["c"], storetest.ToBlocked...)
		}, "", ""},
		{"a task being worked on", func(t *testing.T, s *store.Store, ids map[string]string) {
			storetest.Apply(t, s, ids["a"], models.EventAssigned, models.EventAgentStarted)
		}, models.CodeConflict, "project p: its tasks " + "%a" + " are being worked on"},
		{"a dependent in another project", func(t *testing.T, s *store.Store, ids map[string]string) {
			res, err := s.CreateTasks(ctx, models.TaskBatch{ProjectID: "q", Tasks: []models.BatchTask{{Title: "Y", Dependencies: storetest.Deps(ids["a"])}}})
			if err != nil {
				t.Skipf("a task may not depend on another project's: %v", err)
			}
			ids["y"] = res[0].TaskID
		}, models.CodeConflict, "project p: tasks of other projects (%y) depend on its tasks"},
		{"recorded token use", func(t *testing.T, s *store.Store, ids map[string]string) {
			if err := s.RecordTokenUsage(ctx, models.TokenUsage{ProjectID: "p", Input: 3}); err != nil {
				t.Fatal(err)
			}
		}, models.CodeConflict, "project p has recorded token use (1 ledger entries), which the token ledger keeps: archive it instead"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := storetest.Open(t)
			storetest.Project(t, s, "p")
			storetest.Project(t, s, "q")
			ids := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "a", Title: "A"}, models.BatchTask{LocalID: "b", Title: "B", Dependencies: storetest.Deps("a")},
				models.BatchTask{LocalID: "c", Title: "C"})
			other := storetest.Tasks(t, s, "q", models.BatchTask{LocalID: "x", Title: "X"})
			tt.setup(t, s, ids)
			err := s.DeleteProject(ctx, "p")
			if tt.err != "" {
				want := strings.NewReplacer("%a", ids["a"], "%y", ids["y"]).Replace(tt.err)
				if models.ErrorCodeOf(err) != tt.code || !strings.Contains(err.Error(), want) {
					t.Fatalf("DeleteProject = %v; want %s %q", err, tt.code, want)
				}
				if _, err := s.GetProject(ctx, "p"); err != nil {
					t.Fatalf("the refused project is gone: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.GetProject(ctx, "p"); models.ErrorCodeOf(err) != models.CodeNotFound {
				t.Fatalf("GetProject after delete: %v", err)
			}
			for _, id := range ids {
				if _, err := s.GetTask(ctx, id); models.ErrorCodeOf(err) != models.CodeNotFound {
					t.Errorf("task %s after delete: %v", id, err)
				}
			}
			if got := storetest.Status(t, s, other["x"]); got != models.StatusReady {
				t.Errorf("the other project's task is %s", got)
			}
			if err := s.DeleteProject(ctx, "p"); models.ErrorCodeOf(err) != models.CodeNotFound {
				t.Errorf("deleting it again: %v", err)
			}
		})
	}
}
