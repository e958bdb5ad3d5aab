package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// A batch larger than one INSERT statement's rows: every task and edge is
// written as a batch of one would be, in the order given.
func TestLargeBatchIsWrittenWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	existing := storetest.Task(t, s, "p", "existing")
	const n = 250
	b := models.TaskBatch{ProjectID: "p"}
	for i := range n {
		bt := models.BatchTask{LocalID: fmt.Sprintf("t%d", i), Title: fmt.Sprintf("task %d", i)}
		if i > 0 {
			bt.Dependencies = []models.BatchDependency{{ID: fmt.Sprintf("t%d", i-1), RequiresSuccess: new(i%2 == 0)}}
		}
		if i%50 == 7 {
			bt.Metadata = map[string]string{"n": fmt.Sprint(i)}
			bt.AcceptanceCriteria = []string{"works"}
			bt.ParentTaskID = existing
			bt.Dependencies = append(bt.Dependencies, models.BatchDependency{ID: existing})
		}
		b.Tasks = append(b.Tasks, bt)
	}
	res, err := s.CreateTasks(ctx, b)
	if err != nil || len(res) != n {
		t.Fatalf("%d results, %v", len(res), err)
	}
	var lastSeq int64
	for i, r := range res {
		d, err := s.GetTaskDetail(ctx, r.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		task := d.Task
		if task.Title != b.Tasks[i].Title || task.SubmissionSeq <= lastSeq {
			t.Fatalf("tasks[%d]: title %q, submission %d after %d", i, task.Title, task.SubmissionSeq, lastSeq)
		}
		lastSeq = task.SubmissionSeq
		want := models.StatusDefined
		if i == 0 {
			want = models.StatusReady
		}
		if r.Status != want || task.Status != want {
			t.Fatalf("tasks[%d]: status %s (result %s), want %s", i, task.Status, r.Status, want)
		}
		if i%50 == 7 {
			if task.Metadata["n"] != fmt.Sprint(i) || len(task.AcceptanceCriteria) != 1 ||
				task.ParentTaskID == nil || *task.ParentTaskID != existing {
				t.Fatalf("tasks[%d]: metadata %v, criteria %v, parent %v", i, task.Metadata, task.AcceptanceCriteria, task.ParentTaskID)
			}
		} else if len(task.Metadata) != 0 || len(task.AcceptanceCriteria) != 0 || task.ParentTaskID != nil {
			t.Fatalf("tasks[%d]: metadata %v, criteria %v, parent %v", i, task.Metadata, task.AcceptanceCriteria, task.ParentTaskID)
		}
		wantDeps := map[string]bool{}
		if i > 0 {
			wantDeps[res[i-1].TaskID] = i%2 == 0
		}
		if i%50 == 7 {
			wantDeps[existing] = true
		}
		if len(d.Dependencies) != len(wantDeps) {
			t.Fatalf("tasks[%d]: %d dependencies, want %d", i, len(d.Dependencies), len(wantDeps))
		}
		for _, dep := range d.Dependencies {
			required, ok := wantDeps[dep.Upstream]
			if !ok || dep.Downstream != r.TaskID || dep.RequiresSuccess != required ||
				dep.Resolution != models.EdgePending || dep.ResolvedAt != nil || dep.UpstreamOutcome != "" || dep.UpstreamAttempt != nil {
				t.Fatalf("tasks[%d]: edge %+v", i, dep)
			}
		}
	}
}

// A missing parent deep in a large batch is named by its entry, and the
// batch writes nothing.
func TestLargeBatchNamesTheEntryWithAMissingParent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	parent := storetest.Task(t, s, "p", "parent")
	b := models.TaskBatch{ProjectID: "p"}
	for i := range 250 {
		b.Tasks = append(b.Tasks, models.BatchTask{Title: fmt.Sprintf("task %d", i), ParentTaskID: parent})
	}
	b.Tasks[180].ParentTaskID = "no-such-task"
	_, err := s.CreateTasks(ctx, b)
	if models.ErrorCodeOf(err) != models.CodeNotFound ||
		!strings.Contains(models.ErrorMessageOf(err), `tasks[180]: parent_task_id "no-such-task" not found`) {
		t.Fatalf("got %v (code %s)", err, models.ErrorCodeOf(err))
	}
	all, err := s.ListTasks(ctx, models.TaskFilter{})
	if err != nil || len(all) != 1 {
		t.Fatalf("the refused batch wrote tasks: %d %v", len(all), err)
	}
}

// Batches of every size share the same few INSERT statements: a batch's
// last rows are not one statement text per count left over, which would
// fill the store's statement cache.
//
// Not parallel: the count of compiled statements is the package's, shared
// with every store opened by OpenCountingCompilesForTest.
func TestBatchesOfAnySizeCompileNoNewStatements(t *testing.T) {
	ctx := context.Background()
	s, compiled, err := store.OpenCountingCompilesForTest(ctx, filepath.Join(t.TempDir(), "aq.db"))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	storetest.Project(t, s, "p")
	chain := func(n int) models.TaskBatch {
		b := models.TaskBatch{ProjectID: "p"}
		for i := range n {
			bt := models.BatchTask{LocalID: fmt.Sprintf("t%d", i), Title: fmt.Sprintf("task %d", i)}
			if i > 0 {
				bt.Dependencies = storetest.Deps(fmt.Sprintf("t%d", i-1))
			}
			b.Tasks = append(b.Tasks, bt)
		}
		return b
	}
	// Two batches first (statements a first transaction missed are cached
	// after it), of 102 tasks and 101 edges: a full INSERT and a single row
	// each.
	for range 2 {
		if _, err := s.CreateTasks(ctx, chain(102)); err != nil {
			t.Fatal(err)
		}
	}
	before := compiled()
	for _, n := range []int{1, 2, 37, 99, 100, 102, 150, 233} {
		if _, err := s.CreateTasks(ctx, chain(n)); err != nil {
			t.Fatalf("batch of %d: %v", n, err)
		}
	}
	if got := compiled() - before; got != 0 {
		t.Fatalf("batches of other sizes compiled statements again (%d authorizer calls), want none", got)
	}
}
