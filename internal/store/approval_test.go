package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// A task that requires approval is refused, with the reason, in a project
// that has no repository: nothing of it could wait for a person's approval.
// Every way a task is created or made to require approval is checked.
func TestRequiresApprovalNeedsARepository(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := context.Background()
	storetest.Project(t, s, "bare")
	if _, err := s.CreateProject(ctx, models.Project{ID: "code", Repo: &models.RepoConfig{SourceType: models.RepoInit}}); err != nil {
		t.Fatal(err)
	}
	plain := storetest.Tasks(t, s, "bare", models.BatchTask{LocalID: "p", Title: "Plain"})["p"]
	const why = `requires_approval: project "bare" has no repository`
	tests := []struct {
		name string
		do   func() error
		// refused is true when the call must be refused with why.
		refused bool
	}{
		{"batch in a project without a repository", func() error {
			_, err := s.CreateTasks(ctx, models.TaskBatch{ProjectID: "bare", Tasks: []models.BatchTask{
				{Title: "Fine"}, {Title: "Gated", RequiresApproval: true}}})
			return err
		}, true},
		{"entry naming a project without a repository", func() error {
			_, err := s.CreateTasks(ctx, models.TaskBatch{ProjectID: "code", Tasks: []models.BatchTask{
				{Title: "Gated here", RequiresApproval: true}, {Title: "Gated there", ProjectID: "bare", RequiresApproval: true}}})
			return err
		}, true},
		{"edit that requires approval", func() error {
			_, err := s.EditTask(ctx, plain, models.TaskPatch{RequiresApproval: ptr(true)})
			return err
		}, true},
		{"batch in a project with a repository", func() error {
			_, err := s.CreateTasks(ctx, models.TaskBatch{ProjectID: "code", Tasks: []models.BatchTask{
				{Title: "Gated", RequiresApproval: true}}})
			return err
		}, false},
		{"edit of another field in a project without a repository", func() error {
			_, err := s.EditTask(ctx, plain, models.TaskPatch{Title: ptr("Renamed")})
			return err
		}, false},
	}
	for _, tc := range tests {
		err := tc.do()
		switch {
		case tc.refused && (models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), why)):
			t.Errorf("%s: %v; want invalid, %q", tc.name, err, why)
		case !tc.refused && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// Nothing of a refused batch was written.
	ts, err := s.ListTasks(ctx, models.TaskFilter{ProjectID: "bare"})
	if err != nil || len(ts) != 1 || ts[0].RequiresApproval {
		t.Fatalf("tasks of the project without a repository: %+v %v", ts, err)
	}
}
