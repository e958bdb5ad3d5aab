package store_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// TestAHooksFileTaskIsKept: a hook's file_task survives the round trip
// through the database, a patch replaces it, and clear_file_task removes it.
func TestAHooksFileTaskIsKept(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	storetest.Project(t, s, "web")
	ctx := context.Background()
	prio := 1
	want := &models.HookTask{Title: "Tests fail", Description: "{{step_0}}", Kind: "bug", Priority: &prio}
	spec := models.HookSpec{ProjectID: "web", Name: "morning", Trigger: models.HookTrigger{Type: models.TriggerManual},
		ContextSteps: []models.HookStep{{Type: models.StepRunCommand, Command: "true"}}, FileTask: want}
	h, err := s.CreateHook(ctx, spec.Hook())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetHook(ctx, h.ID); err != nil || !reflect.DeepEqual(got.FileTask, want) {
		t.Fatalf("stored file_task %+v, %v", got.FileTask, err)
	}
	other := &models.HookTask{Title: "Still failing"}
	if got, err := s.UpdateHook(ctx, h.ID, models.HookPatch{FileTask: other}); err != nil || !reflect.DeepEqual(got.FileTask, other) {
		t.Fatalf("patched file_task %+v, %v", got.FileTask, err)
	}
	if got, err := s.UpdateHook(ctx, h.ID, models.HookPatch{ClearFileTask: true}); err != nil || got.FileTask != nil {
		t.Fatalf("cleared file_task %+v, %v", got.FileTask, err)
	}
}
