package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

func TestOutboxKeepsEachTasksOrder(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := context.Background()
	for _, n := range []struct{ key, task string }{{"a1", "task-a"}, {"b1", "task-b"}, {"a2", "task-a"}, {"x", ""}} {
		if err := s.Notify(ctx, n.key, models.Notice{Kind: "test", ProjectID: "p", TaskID: n.task, Payload: map[string]string{"k": n.key}}); err != nil {
			t.Fatal(err)
		}
	}
	keys := func() []string {
		msgs, err := s.PendingOutbox(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range msgs {
			out = append(out, m.Key)
		}
		return out
	}
	first, _ := s.PendingOutbox(ctx, 1)
	if len(first) != 1 || first[0].Key != "a1" {
		t.Fatalf("first pending: %+v", first)
	}
	// a1 waits for a retry: a2 waits behind it; other tasks go on.
	if err := s.MarkOutboxFailed(ctx, first[0].ID, time.Now().Add(time.Hour), "boom"); err != nil {
		t.Fatal(err)
	}
	if got := keys(); len(got) != 2 || got[0] != "b1" || got[1] != "x" {
		t.Errorf("pending while a1 waits: %v", got)
	}
	// Given up, a1 no longer holds a2 back, and is not pending.
	if err := s.GiveUpOutbox(ctx, first[0].ID, "refused"); err != nil {
		t.Fatal(err)
	}
	if got := keys(); len(got) != 3 || got[0] != "b1" || got[1] != "a2" {
		t.Errorf("pending after giving up a1: %v", got)
	}
	// Parts delivered are remembered.
	msgs, _ := s.PendingOutbox(ctx, 100)
	if err := s.MarkOutboxPart(ctx, msgs[0].ID, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkOutboxPart(ctx, msgs[0].ID, 1); err != nil {
		t.Fatal(err)
	}
	msgs, _ = s.PendingOutbox(ctx, 100)
	if msgs[0].PartsDone != 2 {
		t.Errorf("parts done %d, want 2", msgs[0].PartsDone)
	}
}

func TestTaskThreads(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := context.Background()
	if _, ok, err := s.TaskThread(ctx, "task-a"); ok || err != nil {
		t.Fatalf("no thread yet: %v %v", ok, err)
	}
	th, err := s.SaveTaskThread(ctx, models.ChatThread{TaskID: "task-a", ChannelID: "1", ThreadID: "10"})
	if err != nil || th.ThreadID != "10" {
		t.Fatalf("save: %+v %v", th, err)
	}
	// A task keeps its first thread.
	if th, _ := s.SaveTaskThread(ctx, models.ChatThread{TaskID: "task-a", ChannelID: "1", ThreadID: "11"}); th.ThreadID != "10" {
		t.Errorf("second save replaced the thread: %+v", th)
	}
	if id, ok, _ := s.ThreadTask(ctx, "10"); !ok || id != "task-a" {
		t.Errorf("thread 10 belongs to %q %v", id, ok)
	}
	// Forgotten (deleted in chat), the next save wins.
	if err := s.ForgetTaskThread(ctx, "task-a", "10"); err != nil {
		t.Fatal(err)
	}
	if th, _ := s.SaveTaskThread(ctx, models.ChatThread{TaskID: "task-a", ChannelID: "1", ThreadID: "12"}); th.ThreadID != "12" {
		t.Errorf("after forgetting: %+v", th)
	}
	if _, err := s.SaveTaskThread(ctx, models.ChatThread{TaskID: "task-b"}); models.ErrorCodeOf(err) != models.CodeInvalid {
		t.Errorf("incomplete thread: %v", err)
	}
}

func TestTaskCounts(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := context.Background()
	storetest.Project(t, s, "web")
	if _, err := s.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{
		{LocalID: "a", Title: "a"}, {LocalID: "b", Title: "b", Dependencies: []models.BatchDependency{{ID: "a"}}}}}); err != nil {
		t.Fatal(err)
	}
	counts, err := s.TaskCounts(ctx)
	if err != nil || counts["web"][models.StatusReady] != 1 || counts["web"][models.StatusDefined] != 1 {
		t.Errorf("counts %v %v", counts, err)
	}
}
