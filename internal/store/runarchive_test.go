package store_test

import (
	"context"
	"maps"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// buildAndTest builds, tests, then reports once per item the build found.
const buildAndTest = `
name: ship
project: web
steps:
  - name: build
    title: Build
  - name: test
    title: Test
    depends_on: [build]
  - name: report
    title: "Report {{item}}"
    depends_on: [build, test]
    foreach: build.outputs.items
`

// TestAFailedRunWhoseTasksWereArchivedIsNotRetried: once the tasks of a
// failed run are archived, the run still counts and lists them (marked
// archived), and a retry is refused naming the task archived BLOCKED —
// never a success of 0 of 0 tasks; once the archive has dropped them, a
// retry is refused naming the steps whose tasks are gone.
func TestAFailedRunWhoseTasksWereArchivedIsNotRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newWFEnv(t, buildAndTest)
	clock := e.clock
	r := e.start("ship")
	e.complete(e.tasks(r.ID)["build"].ID, `{"items":["a","b"]}`)
	testID := e.tasks(r.ID)["test"].ID
	e.fail(testID)
	if got := e.run(r.ID); got.Status != models.RunFailed {
		t.Fatalf("run %s, want failed", got.Status)
	}
	clock.Advance(31 * day)
	if ids := archive(t, e.s, clock.Now().Add(-30*day)); len(ids) != 2 {
		t.Fatalf("archived %v, want build and test", ids)
	}

	got := e.run(r.ID)
	if got.Status != models.RunFailed || got.ArchivedTasks != 2 || got.Tasks[models.StatusCompleted] != 1 ||
		got.Tasks[models.StatusBlocked] != 1 {
		t.Fatalf("run after the archive: %s, tasks %v, archived %d; want failed, 1 COMPLETED and 1 BLOCKED, both archived",
			got.Status, got.Tasks, got.ArchivedTasks)
	}
	// The list of runs counts them as the run does.
	if rs, err := e.s.ListWorkflowRuns(context.Background(), models.RunFilter{}); err != nil || len(rs) != 1 ||
		rs[0].ArchivedTasks != 2 || !maps.Equal(rs[0].Tasks, got.Tasks) {
		t.Fatalf("listed runs %+v, %v; want the run's counts %v, 2 archived", rs, err, got.Tasks)
	}
	ts := e.tasks(r.ID)
	if len(ts) != 2 || ts["build"].ArchivedAt == nil || ts["test"].ArchivedAt == nil || ts["test"].Status != models.StatusBlocked {
		t.Fatalf("tasks of the run after the archive: %+v", ts)
	}
	if byName, err := e.s.RunTaskByName(ctx, r.ID, "test"); err != nil || byName.ID != testID || byName.ArchivedAt == nil {
		t.Fatalf("RunTaskByName(test) = %+v, %v", byName, err)
	}

	_, err := e.s.RetryWorkflowRun(ctx, r.ID, "ann")
	if models.ErrorCodeOf(err) != models.CodeConflict || !strings.Contains(err.Error(), testID+" (test) were archived BLOCKED") ||
		!strings.Contains(err.Error(), "ctl workflow run ship") {
		t.Fatalf("retry of a run whose failed task is archived: %v, want a conflict naming %s and how to run again", err, testID)
	}
	if got := e.run(r.ID); got.Status != models.RunFailed || got.EndedAt == nil || got.Reason == "" {
		t.Fatalf("a refused retry changed the run: %+v", got)
	}

	if n, err := e.s.PruneArchive(ctx, clock.Now().Add(day), 10); err != nil || n != 2 {
		t.Fatalf("pruned %d (%v) from the archive, want 2", n, err)
	}
	_, err = e.s.RetryWorkflowRun(ctx, r.ID, "ann")
	if models.ErrorCodeOf(err) != models.CodeConflict || !strings.Contains(err.Error(), "the tasks of its steps build (1), test (1) are gone") {
		t.Fatalf("retry of a run whose tasks are gone: %v, want a conflict naming the steps", err)
	}
	if got := e.run(r.ID); got.Status != models.RunFailed {
		t.Fatalf("a refused retry changed the run to %s", got.Status)
	}
}

// TestARetriedRunReadsItsArchivedUpstream: a failed run whose completed
// task was archived (its failed one not yet) is retried: the failed task
// runs again, the step after it fans out over the archived task's outputs
// and depends on it as met, and the run succeeds counting the archived
// task with the rest.
func TestARetriedRunReadsItsArchivedUpstream(t *testing.T) {
	t.Parallel()
	e := newWFEnv(t, buildAndTest)
	clock := e.clock
	r := e.start("ship")
	buildID := e.tasks(r.ID)["build"].ID
	e.complete(buildID, `{"items":["a","b"]}`)
	clock.Advance(10 * day)
	testID := e.tasks(r.ID)["test"].ID
	e.fail(testID)
	if ids := archive(t, e.s, clock.Now().Add(-5*day)); !sameIDs(ids, buildID) {
		t.Fatalf("archived %v, want only build %s", ids, buildID)
	}

	if ev := e.retry(r.ID); ev["test"] != models.EventAdminRestart {
		t.Fatalf("retry: last events %v, want test restarted", ev)
	}
	e.complete(testID, "")
	ts := e.tasks(r.ID)
	for _, name := range []string{"report[0]", "report[1]"} {
		rt, ok := ts[name]
		if !ok || rt.Status != models.StatusReady || rt.Metadata["item"] != map[string]string{"report[0]": "a", "report[1]": "b"}[name] {
			t.Fatalf("%s after the retry: %+v (tasks %s)", name, rt, e.names(r.ID))
		}
		e.complete(rt.ID, "")
	}
	got := e.run(r.ID)
	if got.Status != models.RunSuccess || got.Tasks[models.StatusCompleted] != 4 || got.ArchivedTasks != 1 {
		t.Fatalf("run: %s, tasks %v, archived %d; want success with 4 COMPLETED, 1 archived", got.Status, got.Tasks, got.ArchivedTasks)
	}
	if ts := e.tasks(r.ID); ts["build"].ArchivedAt == nil || ts["test"].ArchivedAt != nil {
		t.Errorf("archived marks: build %v, test %v", ts["build"].ArchivedAt, ts["test"].ArchivedAt)
	}
}

// TestARetriedRunFailingAgainCountsItsArchivedTasks: a retried run whose
// task fails again says how many of all its tasks, the archived ones
// included, are BLOCKED.
func TestARetriedRunFailingAgainCountsItsArchivedTasks(t *testing.T) {
	t.Parallel()
	e := newWFEnv(t, buildAndTest)
	r := e.start("ship")
	buildID := e.tasks(r.ID)["build"].ID
	e.complete(buildID, `{"items":["a"]}`)
	e.clock.Advance(10 * day)
	testID := e.tasks(r.ID)["test"].ID
	e.fail(testID)
	if ids := archive(t, e.s, e.clock.Now().Add(-5*day)); !sameIDs(ids, buildID) {
		t.Fatalf("archived %v, want only build %s", ids, buildID)
	}
	e.retry(r.ID)
	e.fail(testID)
	got := e.run(r.ID)
	if want := "1 of 2 tasks are BLOCKED"; got.Status != models.RunFailed || !strings.HasSuffix(got.Reason, want) {
		t.Fatalf("run failing again: %s, %q; want failed, %q", got.Status, got.Reason, want)
	}
}

// TestRunArchiveQueriesUseIndexes: the reads of a run's archived tasks
// look them up by run, never scan the archive.
func TestRunArchiveQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	fullScan := regexp.MustCompile(`(?m)SCAN archived_tasks$`)
	for name, q := range store.RunArchiveQueriesForTest() {
		plan, err := store.QueryPlanForTest(s, q, "run-1", "step")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if m := fullScan.FindString(plan); m != "" {
			t.Errorf("%s scans the archive:\n%s", name, plan)
		}
	}
}

// TestArchivedRunTasksAreFilledInByTheMigration: tasks archived before
// the archive kept their run are given it when the database is migrated.
func TestArchivedRunTasksAreFilledInByTheMigration(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "old.db")
	if err := store.MigrateForTest(path, 32); err != nil {
		t.Fatal(err)
	}
	if err := store.ExecAtForTest(path, `INSERT INTO archived_tasks (id, project_id, status, created_at, updated_at, archived_at, task, detail)
		VALUES ('t1', 'web', 'COMPLETED', 1, 2, 3, '{"id":"t1","run_id":"ship-1","step_name":"build"}', '{}'),
		('t2', 'web', 'COMPLETED', 1, 2, 3, '{"id":"t2"}', '{}')`); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(context.Background(), store.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for q, want := range map[string]int{
		"SELECT count(*) FROM archived_tasks WHERE run_id = 'ship-1' AND step_name = 'build'": 1,
		"SELECT count(*) FROM archived_tasks WHERE run_id IS NULL AND step_name = ''":         1,
	} {
		if n, err := store.CountForTest(s, q); err != nil || n != want {
			t.Errorf("%s = %d (%v), want %d", q, n, err, want)
		}
	}
}
