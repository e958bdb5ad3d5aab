package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// TestTasksAreOrderedBySubmission: a batch's tasks share their created_at
// and have random ids; READY pages (and their cursors) and listings give
// them in the order they were submitted, after priority, and a task's
// number is never given again.
func TestTasksAreOrderedBySubmission(t *testing.T) {
	t.Parallel()
	s, clock := openClocked(t) // the clock moves only when told
	ctx := context.Background()
	storetest.Project(t, s, "p")
	const n = 12
	var entries []models.BatchTask
	for i := range n {
		entries = append(entries, models.BatchTask{LocalID: fmt.Sprint(i), Title: fmt.Sprintf("task %d", i)})
	}
	urgent := 5
	entries = append(entries, models.BatchTask{LocalID: "urgent", Title: "urgent", Priority: &urgent})
	ids := storetest.Tasks(t, s, "p", entries...)
	var submitted []string
	for i := range n {
		submitted = append(submitted, ids[fmt.Sprint(i)])
	}
	clock.Advance(time.Second)
	later := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "later", Title: "later"})["later"]

	// READY pages: priority first, then submission; pages of two continue
	// from their cursor.
	want := append(append([]string{ids["urgent"]}, submitted...), later)
	var paged []string
	var after *models.ReadyCursor
	for {
		page, err := s.ReadyTasks(ctx, models.ReadyQuery{ProjectID: "p", Now: clock.Now(), After: after, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range page {
			paged = append(paged, tk.ID)
		}
		if len(page) < 2 {
			break
		}
		last := page[len(page)-1]
		after = &models.ReadyCursor{Priority: last.Priority, SubmissionSeq: last.SubmissionSeq}
	}
	if !slices.Equal(paged, want) {
		t.Fatalf("READY pages: %v\nwant %v", paged, want)
	}

	// Listings: submission order, pages continuing after a task.
	wantList := append(append(slices.Clone(submitted), ids["urgent"]), later)
	var listed []string
	for afterID := ""; ; {
		ts, err := s.ListTasks(ctx, models.TaskFilter{ProjectID: "p", AfterID: afterID, Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range ts {
			listed = append(listed, tk.ID)
		}
		if len(ts) < 5 {
			break
		}
		afterID = ts[len(ts)-1].ID
	}
	if !slices.Equal(listed, wantList) {
		t.Fatalf("listing: %v\nwant %v", listed, wantList)
	}

	// A deleted task's number is not given again.
	last, err := s.GetTask(ctx, later)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTask(ctx, later); err != nil {
		t.Fatal(err)
	}
	next, err := s.GetTask(ctx, storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "next", Title: "next"})["next"])
	if err != nil {
		t.Fatal(err)
	}
	if next.SubmissionSeq != last.SubmissionSeq+1 {
		t.Fatalf("after %d was deleted, the next task got %d", last.SubmissionSeq, next.SubmissionSeq)
	}
}

// TestMigrationNumbersExistingTasks opens a database an older agentqueued
// left: its tasks are numbered by created_at, then by the order they were
// inserted, and new tasks follow them.
func TestMigrationNumbersExistingTasks(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "old.db")
	if err := store.MigrateForTest(path, 31); err != nil {
		t.Fatal(err)
	}
	// Inserted out of created_at order; zeta and alpha share theirs.
	err := store.ExecAtForTest(path, `
		INSERT INTO projects (id, name, credit_weight, max_concurrent_agents, status, created_at, updated_at)
			VALUES ('p', 'p', 1, 1, 'ACTIVE', 0, 0);
		INSERT INTO tasks (id, project_id, title, status, verification_type, created_at, updated_at) VALUES
			('late', 'p', 'late', 'READY', 'AUTO_TEST', 30, 30),
			('zeta', 'p', 'zeta', 'READY', 'AUTO_TEST', 20, 20),
			('alpha', 'p', 'alpha', 'READY', 'AUTO_TEST', 20, 20),
			('early', 'p', 'early', 'COMPLETED', 'AUTO_TEST', 10, 10);`)
	if err != nil {
		t.Fatal(err)
	}
	s := storetest.OpenAt(t, path)
	ctx := context.Background()
	added := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "new", Title: "new"})["new"]
	want := []string{"early", "zeta", "alpha", "late", added}
	ts, err := s.ListTasks(ctx, models.TaskFilter{ProjectID: "p"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, tk := range ts {
		got = append(got, tk.ID)
		if tk.SubmissionSeq != int64(i+1) {
			t.Errorf("task %s numbered %d, want %d", tk.ID, tk.SubmissionSeq, i+1)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
	page, err := s.ReadyTasks(ctx, models.ReadyQuery{ProjectID: "p", Now: time.Now(), Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var ready []string
	for _, tk := range page {
		ready = append(ready, tk.ID)
	}
	if want := []string{"zeta", "alpha", "late", added}; !slices.Equal(ready, want) {
		t.Fatalf("READY page %v, want %v", ready, want)
	}
	// A task inserted without a number gets the next one from the insert
	// trigger, and the store's next batch follows it.
	if err := store.ExecAtForTest(path, `INSERT INTO tasks (id, project_id, title, status, verification_type, created_at, updated_at)
		VALUES ('raw', 'p', 'raw', 'DEFINED', 'AUTO_TEST', 40, 40)`); err != nil {
		t.Fatal(err)
	}
	after := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "after", Title: "after"})["after"]
	for id, want := range map[string]int64{"raw": 6, after: 7} {
		if tk, err := s.GetTask(ctx, id); err != nil || tk.SubmissionSeq != want {
			t.Errorf("task %s numbered %d (%v), want %d", id, tk.SubmissionSeq, err, want)
		}
	}
}
