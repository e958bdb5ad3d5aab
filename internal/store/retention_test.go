package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
	"github.com/agentqueued/agentqueued/internal/workflow"
)

const day = 24 * time.Hour

// completeTask runs a task to COMPLETED through a run of agent a1 and
// records token use against it.
func completeTask(t *testing.T, s *store.Store, id string) models.Run {
	t.Helper()
	ctx := context.Background()
	run, _, err := s.ClaimTask(ctx, id, "a1")
	if err != nil {
		t.Fatalf("claim %s: %v", id, err)
	}
	if _, err := s.StartRun(ctx, run.ID, 1, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordTokenUsage(ctx, models.TokenUsage{ProjectID: "p", TaskID: id, AgentID: "a1", Input: 100, Output: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentCompleted, Outcome: "completed"}); err != nil {
		t.Fatal(err)
	}
	storetest.Apply(t, s, id, models.EventVerifyPassed)
	return run
}

func archive(t *testing.T, s *store.Store, before time.Time) []string {
	t.Helper()
	ids, err := s.ArchiveTasks(context.Background(), before, 100)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func sameIDs(got []string, want ...string) bool {
	if len(got) != len(want) {
		return false
	}
	set := map[string]bool{}
	for _, g := range got {
		set[g] = true
	}
	for _, w := range want {
		if !set[w] {
			return false
		}
	}
	return true
}

// TestArchiveTasks: finished tasks older than the window leave the working
// tables for the archive, stay readable (detail and listing), keep their
// token ledger rows, and a task something live still needs (a dependent
// waiting on it, a subtask) stays until that has gone too.
func TestArchiveTasks(t *testing.T) {
	t.Parallel()
	s, clock := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "p")
	storetest.Agent(t, s, "a1")
	ids := storetest.Tasks(t, s, "p",
		models.BatchTask{LocalID: "up", Title: "up"},
		models.BatchTask{LocalID: "down", Title: "down", Dependencies: storetest.Deps("up")},
		models.BatchTask{LocalID: "gate", Title: "gate"},
		models.BatchTask{LocalID: "behind", Title: "behind", Dependencies: storetest.Deps("gate")},
		models.BatchTask{LocalID: "parent", Title: "parent"},
	)
	child := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "child", Title: "child", ParentTaskID: ids["parent"]})["child"]
	completeTask(t, s, ids["up"])
	storetest.Apply(t, s, ids["gate"], models.EventAdminCancel) // gate BLOCKED, behind BLOCKED by the cascade
	storetest.Apply(t, s, ids["parent"], models.EventAdminCancel)
	tokens := func() int64 {
		n, err := s.TokensUsedSince(ctx, "p", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := tokens()

	if got := archive(t, s, clock.Now().Add(-30*day)); len(got) != 0 {
		t.Fatalf("archived %v inside the window", got)
	}
	clock.Advance(31 * day)
	fresh := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "fresh", Title: "fresh"})["fresh"]
	storetest.Apply(t, s, fresh, models.EventAdminCancel) // finished, but inside the window
	cutoff := clock.Now().Add(-30 * day)
	// First round: up (its dependent is satisfied), behind (nothing depends
	// on it); gate waits for behind, parent for its subtask.
	if got := archive(t, s, cutoff); !sameIDs(got, ids["up"], ids["behind"]) {
		t.Fatalf("first round archived %v, want up %s and behind %s", got, ids["up"], ids["behind"])
	}
	if got := archive(t, s, cutoff); !sameIDs(got, ids["gate"]) {
		t.Fatalf("second round archived %v, want gate %s", got, ids["gate"])
	}
	if got := archive(t, s, cutoff); len(got) != 0 {
		t.Fatalf("third round archived %v", got)
	}
	storetest.Apply(t, s, child, models.EventAdminCancel)
	clock.Advance(31 * day)
	if got := archive(t, s, clock.Now().Add(-30*day)); !sameIDs(got, child, fresh) {
		t.Fatalf("archived %v, want the subtask %s and %s", got, child, fresh)
	}
	if got := archive(t, s, clock.Now().Add(-30*day)); !sameIDs(got, ids["parent"]) {
		t.Fatalf("archived %v, want the parent %s once its subtask went", got, ids["parent"])
	}

	// Readable: the detail says archived and keeps the events and runs.
	if _, err := s.GetTask(ctx, ids["up"]); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("archived task still in the working tables: %v", err)
	}
	d, err := s.GetTaskDetail(ctx, ids["up"])
	if err != nil {
		t.Fatal(err)
	}
	if d.ArchivedAt == nil || d.Task.Status != models.StatusCompleted || len(d.Events) == 0 || len(d.Runs) != 1 {
		t.Fatalf("archived detail: archived_at %v, status %s, %d events, %d runs", d.ArchivedAt, d.Task.Status,
			len(d.Events), len(d.Runs))
	}
	list, err := s.ListTasks(ctx, models.TaskFilter{Archived: true, ProjectID: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 6 {
		t.Errorf("archived listing has %d tasks, want 6", len(list))
	}
	blocked, err := s.ListTasks(ctx, models.TaskFilter{Archived: true, Statuses: []models.TaskStatus{models.StatusCompleted}})
	if err != nil {
		t.Fatal(err)
	}
	if len(blocked) != 1 || blocked[0].ID != ids["up"] {
		t.Errorf("archived COMPLETED: %+v", blocked)
	}
	live, _ := s.ListTasks(ctx, models.TaskFilter{ProjectID: "p"})
	if len(live) != 1 || live[0].ID != ids["down"] || live[0].Status != models.StatusReady {
		t.Errorf("working tables hold %+v, want only down READY", live)
	}
	if got := tokens(); got != before {
		t.Errorf("ledger total %d after archiving, want %d", got, before)
	}

	// A new dependency on an archived task: met when it completed (or for
	// a soft edge), refused when it requires the success of a blocked one.
	late := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "late", Title: "late", Dependencies: storetest.Deps(ids["up"])})["late"]
	if got, _ := s.GetTask(ctx, late); got.Status != models.StatusReady {
		t.Errorf("a task depending on an archived COMPLETED task is %s, want READY", got.Status)
	}
	soft := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "soft", Title: "soft",
		Dependencies: []models.BatchDependency{{ID: ids["gate"], RequiresSuccess: f()}}})["soft"]
	if got, _ := s.GetTask(ctx, soft); got.Status != models.StatusReady {
		t.Errorf("a soft dependent of an archived BLOCKED task is %s, want READY", got.Status)
	}
	_, err = s.CreateTasks(ctx, models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{{Title: "hard", Dependencies: storetest.Deps(ids["gate"])}}})
	if models.ErrorCodeOf(err) != models.CodeConflict {
		t.Errorf("a hard dependency on an archived BLOCKED task: %v, want a conflict", err)
	}
}

// TestArchiveStatementsUseIndexes: no statement of an archiving
// transaction, nor a check or cascade of the foreign keys it runs, scans a
// whole table: each would be paid once per task archived.
func TestArchiveStatementsUseIndexes(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	fullScan := regexp.MustCompile(`(?m)^SCAN (\w+)$`)
	// The tasks of a batch are looked up by id, never found among all the
	// finished tasks by their status.
	byStatus := regexp.MustCompile(`(?m)^SEARCH \w+ USING (COVERING )?INDEX tasks_status .*$`)
	for name, q := range store.ArchiveQueriesForTest() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			args := make([]any, strings.Count(q, "?"))
			for i := range args {
				args[i] = "x"
			}
			plan, err := store.QueryPlanForTest(s, q, args...)
			if err != nil {
				t.Fatal(err)
			}
			if m := fullScan.FindString(plan); m != "" {
				t.Fatalf("full table scan (%s):\n%s", m, plan)
			}
			if m := byStatus.FindString(plan); m != "" {
				t.Fatalf("a walk of every task of a status (%s):\n%s", m, plan)
			}
		})
	}
}

// TestArchiveSkipsWhatChangedSinceItsRead: a batch is read without the
// writer, so a task can change before the batch is written. One that did
// stays in the working tables (for a later batch, as it is then); the rest
// of the batch is archived.
func TestArchiveSkipsWhatChangedSinceItsRead(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// change changes task id between the read and the write.
		change func(t *testing.T, s *store.Store, id string)
		// later says whether a later batch archives it.
		later bool
	}{
		{"restarted", func(t *testing.T, s *store.Store, id string) {
			storetest.Apply(t, s, id, models.EventAdminRestart)
		}, false},
		{"a new dependent", func(t *testing.T, s *store.Store, id string) {
			storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "new", Title: "new", Dependencies: []models.BatchDependency{{ID: id}}})
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, clock := openClocked(t)
			ctx := context.Background()
			storetest.Project(t, s, "p")
			storetest.Agent(t, s, "a1")
			ids := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "changed", Title: "changed"},
				models.BatchTask{LocalID: "kept", Title: "kept"})
			completeTask(t, s, ids["changed"])
			completeTask(t, s, ids["kept"])
			clock.Advance(31 * day)
			cutoff := clock.Now().Add(-30 * day)
			changes := 0
			store.SetAfterArchiveReadForTest(s, func() {
				if changes++; changes == 1 {
					tt.change(t, s, ids["changed"])
				}
			})
			if got := archive(t, s, cutoff); !sameIDs(got, ids["kept"]) {
				t.Fatalf("archived %v, want only %s (the other changed after the read)", got, ids["kept"])
			}
			d, err := s.GetTaskDetail(ctx, ids["changed"])
			if err != nil {
				t.Fatal(err)
			}
			if d.ArchivedAt != nil {
				t.Fatalf("the changed task was read from the archive: %+v", d.Task)
			}
			got := archive(t, s, cutoff)
			if !tt.later {
				if len(got) != 0 {
					t.Fatalf("archived %v, want nothing: the changed task is no longer finished", got)
				}
				return
			}
			if !sameIDs(got, ids["changed"]) {
				t.Fatalf("the next batch archived %v, want %s", got, ids["changed"])
			}
			d, err = s.GetTaskDetail(ctx, ids["changed"])
			if err != nil {
				t.Fatal(err)
			}
			if d.ArchivedAt == nil || len(d.Dependents) != 1 {
				t.Fatalf("archived detail: archived at %v, dependents %+v; want archived with its new dependent", d.ArchivedAt, d.Dependents)
			}
		})
	}
}

// TestArchiveKeepsEdgesWithinABatch: tasks archived in one batch keep in
// their archived detail the edges between them, as they were when
// archived, whichever of them was archived first.
func TestArchiveKeepsEdgesWithinABatch(t *testing.T) {
	t.Parallel()
	s, clock := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "p")
	storetest.Agent(t, s, "a1")
	ids := storetest.Tasks(t, s, "p",
		models.BatchTask{LocalID: "up", Title: "up"},
		models.BatchTask{LocalID: "down", Title: "down", Dependencies: storetest.Deps("up")},
	)
	completeTask(t, s, ids["up"])
	completeTask(t, s, ids["down"])
	clock.Advance(31 * day)
	if got := archive(t, s, clock.Now().Add(-30*day)); !sameIDs(got, ids["up"], ids["down"]) {
		t.Fatalf("archived %v, want up %s and down %s in one batch", got, ids["up"], ids["down"])
	}
	tests := []struct {
		name, id  string
		edges     func(models.TaskDetail) []models.Dependency
		direction string
	}{
		{"up's dependent", ids["up"], func(d models.TaskDetail) []models.Dependency { return d.Dependents }, "dependents"},
		{"down's dependency", ids["down"], func(d models.TaskDetail) []models.Dependency { return d.Dependencies }, "dependencies"},
	}
	for _, tt := range tests {
		d, err := s.GetTaskDetail(ctx, tt.id)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if d.ArchivedAt == nil {
			t.Fatalf("%s: task %s not archived", tt.name, tt.id)
		}
		edges := tt.edges(d)
		if len(edges) != 1 || edges[0].Upstream != ids["up"] || edges[0].Downstream != ids["down"] {
			t.Errorf("%s: archived %s = %+v, want the edge %s -> %s", tt.name, tt.direction, edges, ids["up"], ids["down"])
		}
	}
}

// TestArchivedDetailIsTheLiveDetail: a task's archived detail is the
// detail it showed just before it was archived — task, edges both ways,
// events, result and runs — for tasks of several shapes archived in one
// batch.
func TestArchivedDetailIsTheLiveDetail(t *testing.T) {
	t.Parallel()
	s, clock := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "p")
	storetest.Agent(t, s, "a1")
	ids := storetest.Tasks(t, s, "p",
		models.BatchTask{LocalID: "up", Title: "up"},
		models.BatchTask{LocalID: "down", Title: "down", Dependencies: storetest.Deps("up")},
		models.BatchTask{LocalID: "timedout", Title: "timed out"},
		models.BatchTask{LocalID: "alone", Title: "alone", Description: "cancelled before it started"},
	)
	completeTask(t, s, ids["up"])
	completeTask(t, s, ids["down"])
	storetest.Apply(t, s, ids["timedout"], models.EventAssigned) // BLOCKED without a run
	storetest.Apply(t, s, ids["timedout"], models.EventTimeout)
	storetest.Apply(t, s, ids["alone"], models.EventAdminCancel)
	clock.Advance(31 * day)

	live := map[string]models.TaskDetail{}
	for name, id := range ids {
		d, err := s.GetTaskDetail(ctx, id)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		live[name] = d
	}
	if got := archive(t, s, clock.Now().Add(-30*day)); len(got) != len(ids) {
		t.Fatalf("archived %v, want all %d tasks in one batch", got, len(ids))
	}
	for name, id := range ids {
		t.Run(name, func(t *testing.T) {
			d, err := s.GetTaskDetail(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if d.ArchivedAt == nil {
				t.Fatal("not archived")
			}
			d.ArchivedAt = nil
			want, err := json.Marshal(live[name])
			if err != nil {
				t.Fatal(err)
			}
			have, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			if string(have) != string(want) {
				t.Errorf("archived detail\n%s\nwant the live one\n%s", have, want)
			}
		})
	}
}

// TestRunFilesDue: an ended run's files fall due once the window has
// passed, and not again once marked pruned.
func TestRunFilesDue(t *testing.T) {
	t.Parallel()
	s, clock := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "p")
	storetest.Agent(t, s, "a1")
	id := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "x", Title: "x"})["x"]
	run := completeTask(t, s, id)
	due := func() []store.RunFiles {
		r, err := s.RunFilesDue(ctx, clock.Now().Add(-7*day), 10)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if got := due(); len(got) != 0 {
		t.Fatalf("due inside the window: %+v", got)
	}
	clock.Advance(8 * day)
	got := due()
	if len(got) != 1 || got[0].RunID != run.ID || got[0].TaskID != id || got[0].Attempt != run.Attempt || got[0].Kind != models.RunWork {
		t.Fatalf("due %+v, want run %d of %s", got, run.ID, id)
	}
	if err := s.MarkRunFilesPruned(ctx, []int64{run.ID}); err != nil {
		t.Fatal(err)
	}
	if got := due(); len(got) != 0 {
		t.Fatalf("due again after pruning: %+v", got)
	}
}

// TestPruneOutbox: notices older than the window go, delivered or not (a
// daemon without Discord delivers none), but, while a hook fires on
// events, none the hooks' event cursor has not passed; a notice inside the
// window stays.
func TestPruneOutbox(t *testing.T) {
	t.Parallel()
	s, clock := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "p")
	h := mustHook(t, s, `{"project_id":"p","name":"On done","trigger":{"type":"event","event_type":"task.completed"}}`)
	notify := func(key string) {
		t.Helper()
		if err := s.Notify(ctx, key, models.Notice{Kind: "test", ProjectID: "p", Payload: map[string]string{"k": key}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"a", "b", "c", "d"} {
		notify(k)
	}
	pending, err := s.PendingOutbox(ctx, 10)
	if err != nil || len(pending) != 4 {
		t.Fatalf("pending %d, %v", len(pending), err)
	}
	for _, m := range pending[:3] {
		if err := s.MarkOutboxDelivered(ctx, m.ID); err != nil {
			t.Fatal(err)
		}
	}
	// The hooks have read up to the second notice only.
	if err := s.SetEventCursor(ctx, models.HookEventCursor, pending[1].ID); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		n, err := store.CountForTest(s, "SELECT count(*) FROM outbox")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	prune := func(limit int) int64 {
		t.Helper()
		n, err := s.PruneOutbox(ctx, clock.Now().Add(-7*day), limit)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := prune(100); n != 0 {
		t.Fatalf("pruned %d inside the window", n)
	}
	clock.Advance(8 * day)
	notify("fresh")
	for _, want := range []int64{1, 1, 0} { // batches of one: the writer is released between them
		if n := prune(1); n != want {
			t.Fatalf("pruned %d, want %d", n, want)
		}
	}
	if got := count(); got != 3 {
		t.Errorf("%d notices left, want 3 (two the hooks have not read, one inside the window)", got)
	}
	// Without an enabled event hook the cursor stands still and holds nothing.
	if _, err := s.UpdateHook(ctx, h.ID, models.HookPatch{Enabled: f()}); err != nil {
		t.Fatal(err)
	}
	if n := prune(10); n != 2 {
		t.Fatalf("pruned %d with no event hook, want the delivered and the never delivered one", n)
	}
	if got := count(); got != 1 {
		t.Errorf("%d notices left, want the one inside the window", got)
	}
}

// TestPruneHookRuns: finished hook runs older than the window go, but a
// hook's newest run that counts for its cooldown and its newest scheduled
// firing stay, whatever their age.
func TestPruneHookRuns(t *testing.T) {
	t.Parallel()
	s, clock := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "web")
	h := mustHook(t, s, `{"project_id":"web","name":"Digest","trigger":{"type":"manual"}}`)
	fire := func(key string, scheduled bool) string {
		t.Helper()
		c := models.HookClaim{HookID: h.ID, FireKey: key, TriggerReason: "t", Manual: true}
		if scheduled {
			at := clock.Now()
			c.ScheduledAt = &at
		}
		res, err := s.ClaimHookRun(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.FinishHookRun(ctx, models.HookRun{ID: res.Run.ID, Status: models.HookRunCompleted}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(day)
		return res.Run.ID
	}
	old := fire("manual:1", false)
	scheduled := fire("schedule:1", true)
	older := fire("manual:2", false)
	newest := fire("manual:3", false)
	if n, err := s.PruneHookRuns(ctx, clock.Now().Add(-30*day), 100); err != nil || n != 0 {
		t.Fatalf("pruned %d (%v) inside the window", n, err)
	}
	clock.Advance(40 * day)
	if n, err := s.PruneHookRuns(ctx, clock.Now().Add(-30*day), 100); err != nil || n != 2 {
		t.Fatalf("pruned %d (%v), want 2", n, err)
	}
	for id, kept := range map[string]bool{old: false, older: false, scheduled: true, newest: true} {
		_, err := s.GetHookRun(ctx, id)
		if got := err == nil; got != kept {
			t.Errorf("hook run %s kept = %v, want %v (%v)", id, got, kept, err)
		}
	}
}

// TestPruneWorkflowRuns: an ended workflow run older than the window goes
// once its tasks have been archived, but never a workflow's newest run.
func TestPruneWorkflowRuns(t *testing.T) {
	t.Parallel()
	s, clock := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "web")
	w, err := workflow.Parse("flow.yaml", []byte("name: one\nproject: web\nsteps:\n  - name: only\n    title: Only\n"))
	if err != nil {
		t.Fatal(err)
	}
	w.Origin = models.WorkflowFromAPI
	if _, err := s.SaveWorkflow(ctx, w); err != nil {
		t.Fatal(err)
	}
	var runs []string
	for i := range 2 {
		r, _, err := s.StartWorkflowRun(ctx, models.RunRequest{Workflow: "one", Trigger: models.TriggerByHand,
			TriggeredBy: "t", FireKey: fmt.Sprintf("manual:%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CancelWorkflowRun(ctx, r.ID, "ann"); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r.ID)
		clock.Advance(time.Hour)
	}
	clock.Advance(31 * day)
	cutoff := clock.Now().Add(-30 * day)
	if n, err := s.PruneWorkflowRuns(ctx, cutoff, 100); err != nil || n != 0 {
		t.Fatalf("pruned %d (%v) while the runs' tasks are in the working tables", n, err)
	}
	if ids, err := s.ArchiveTasks(ctx, cutoff, 100); err != nil || len(ids) != 2 {
		t.Fatalf("archived %v (%v)", ids, err)
	}
	if n, err := s.PruneWorkflowRuns(ctx, cutoff, 100); err != nil || n != 1 {
		t.Fatalf("pruned %d (%v), want the older run", n, err)
	}
	if _, err := s.GetWorkflowRun(ctx, runs[0]); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Errorf("older run kept: %v", err)
	}
	if _, err := s.GetWorkflowRun(ctx, runs[1]); err != nil {
		t.Errorf("newest run pruned: %v", err)
	}
}

// TestDeleteProjectDeletesItsArchive: a deleted project's archived tasks
// go with it; another project's stay.
func TestDeleteProjectDeletesItsArchive(t *testing.T) {
	t.Parallel()
	s, clock := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "x")
	storetest.Project(t, s, "y")
	gone := storetest.Tasks(t, s, "x", models.BatchTask{LocalID: "a", Title: "a"})["a"]
	kept := storetest.Tasks(t, s, "y", models.BatchTask{LocalID: "b", Title: "b"})["b"]
	storetest.Apply(t, s, gone, models.EventAdminCancel)
	storetest.Apply(t, s, kept, models.EventAdminCancel)
	clock.Advance(2 * day)
	if ids := archive(t, s, clock.Now().Add(-day)); len(ids) != 2 {
		t.Fatalf("archived %v", ids)
	}
	if err := s.DeleteProject(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetTaskDetail(ctx, gone); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Errorf("archived task of a deleted project: %v", err)
	}
	if d, err := s.GetTaskDetail(ctx, kept); err != nil || d.ArchivedAt == nil {
		t.Errorf("another project's archived task: %v", err)
	}
}

// TestArchivedIDsAreNotReused: a new task never takes the id of an
// archived one (names are drawn at random, so the same draw comes again).
func TestArchivedIDsAreNotReused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "aq.db")
	clock := clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	open := func() *store.Store {
		return storetest.OpenAt(t, path, storetest.WithClock(clock), storetest.WithSeed(1, 2))
	}
	s := open()
	storetest.Project(t, s, "p")
	first := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "a", Title: "a"})["a"]
	storetest.Apply(t, s, first, models.EventAdminCancel)
	clock.Advance(2 * day)
	if ids := archive(t, s, clock.Now().Add(-day)); len(ids) != 1 {
		t.Fatalf("archived %v", ids)
	}
	s.Close()
	s = open() // the same draws again
	defer s.Close()
	again := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "b", Title: "b"})["b"]
	if again == first {
		t.Fatalf("a new task took the archived id %s", first)
	}
	storetest.Apply(t, s, again, models.EventAdminCancel)
	clock.Advance(2 * day)
	if ids := archive(t, s, clock.Now().Add(-day)); len(ids) != 1 {
		t.Fatalf("archived %v", ids)
	}
}

// TestPruneArchive: a task archived longer than the archive's window is
// deleted for good; its token ledger rows stay.
func TestPruneArchive(t *testing.T) {
	t.Parallel()
	s, clock := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "p")
	storetest.Agent(t, s, "a1")
	old := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "a", Title: "a"})["a"]
	completeTask(t, s, old)
	clock.Advance(2 * day)
	archive(t, s, clock.Now().Add(-day))
	clock.Advance(10 * day)
	recent := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "b", Title: "b"})["b"]
	storetest.Apply(t, s, recent, models.EventAdminCancel)
	clock.Advance(2 * day)
	archive(t, s, clock.Now().Add(-day))
	tokens, _ := s.TokensUsedSince(ctx, "p", time.Time{})
	if n, err := s.PruneArchive(ctx, clock.Now().Add(-5*day), 10); err != nil || n != 1 {
		t.Fatalf("pruned %d (%v), want the task archived 12 days ago", n, err)
	}
	if _, err := s.GetTaskDetail(ctx, old); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Errorf("expired archived task still readable: %v", err)
	}
	if d, err := s.GetTaskDetail(ctx, recent); err != nil || d.ArchivedAt == nil {
		t.Errorf("recently archived task: %v", err)
	}
	if after, _ := s.TokensUsedSince(ctx, "p", time.Time{}); after != tokens || tokens == 0 {
		t.Errorf("ledger %d after expiry, want %d", after, tokens)
	}
}

// TestCheckpointDoesNotWaitForTheWriter: a checkpoint copies the committed
// log into the database file while another connection holds the write
// lock (a passive checkpoint on a connection of its own).
func TestCheckpointDoesNotWaitForTheWriter(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "aq.db")
	s := storetest.OpenAt(t, path)
	ctx := progresstest.Context(t)
	storetest.Project(t, s, "p")
	for i := range 20 {
		storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "t", Title: fmt.Sprintf("task %d", i)})
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=60000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(context.Background(), "ROLLBACK") //nolint:errcheck // the test's end
	pages, copied, err := s.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pages == 0 || copied != pages {
		t.Fatalf("checkpoint with the write lock held elsewhere: %d of %d log pages copied, want all of them (and some)", copied, pages)
	}
}

// TestArchiveWriteWaitsForNoSync: an archive write returns at its commit,
// without waiting for a sync of the log — here while a durable write's
// sync is held — and the next sync covers it.
func TestArchiveWriteWaitsForNoSync(t *testing.T) {
	t.Parallel()
	s, clock := openClocked(t)
	storetest.Project(t, s, "p")
	storetest.Agent(t, s, "a1")
	ids := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "a", Title: "a"}, models.BatchTask{LocalID: "b", Title: "b"})
	completeTask(t, s, ids["a"])
	clock.Advance(31 * day)
	ctx := context.Background()
	b, err := s.ReadArchiveBatch(ctx, clock.Now().Add(-30*day), 1)
	if err != nil || b.Len() != 1 {
		t.Fatalf("read a batch: %d tasks, %v", b.Len(), err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	store.SetSyncForTest(s, func(next func() error) func() error {
		return func() error {
			once.Do(func() { close(entered); <-release })
			return next()
		}
	}, nil)
	durable := make(chan error, 1)
	go func() {
		durable <- s.Notify(ctx, "durable", models.NewProgressNotice("p", models.ProgressNotice{TaskID: ids["b"], Message: "m"}))
	}()
	<-entered
	syncs := s.Syncs()
	if got, _, err := s.WriteArchiveBatch(ctx, b); err != nil || len(got) != 1 {
		t.Fatalf("archive write while a sync is held: %v, %v", got, err)
	}
	if n := s.Syncs(); n != syncs {
		t.Fatalf("the archive write ran %d syncs, want none", n-syncs)
	}
	select {
	case err := <-durable:
		t.Fatalf("the durable write returned (%v) while its sync was held", err)
	default:
	}
	close(release)
	if err := <-durable; err != nil {
		t.Fatal(err)
	}
	if err := s.WaitDurable(ctx); err != nil {
		t.Fatal(err)
	}
}
