package store_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// TestWaitingReasonsAreWrittenOnlyWhenTheyChange: a round writes reasons
// for a whole backlog; repeating an unchanged reason writes no row, and a
// status change clears it.
func TestWaitingReasonsAreWrittenOnlyWhenTheyChange(t *testing.T) {
	t.Parallel()
	s, clock := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "p")
	later := clock.Now().Add(time.Hour)
	ids := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "a", Title: "a"}, models.BatchTask{LocalID: "b", Title: "b"},
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
	storetest.Agent(t, s, "a1")
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

// TestReadyTasksLeaveOutWhatCannotStart: the READY read leaves out tasks
// dated later and the groups it is told to, exactly as
// ReadyExclusion.Matches describes them, and pages in start order.
func TestReadyTasksLeaveOutWhatCannotStart(t *testing.T) {
	t.Parallel()
	s, clock := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "p")
	later := clock.Now().Add(time.Minute)
	one, two := 1, 2
	ids := storetest.Tasks(t, s, "p",
		models.BatchTask{LocalID: "plain", Title: "plain", Priority: &two},
		models.BatchTask{LocalID: "later", Title: "later", Priority: &one, NotBefore: &later},
		models.BatchTask{LocalID: "ingest-a", Title: "a", Priority: &one, Kind: "ingest", Metadata: map[string]string{"src": "a"}},
		models.BatchTask{LocalID: "ingest-b", Title: "b", Priority: &one, Kind: "ingest", Metadata: map[string]string{"src": "b"}},
		models.BatchTask{LocalID: "ingest-none", Title: "none", Priority: &one, Kind: "ingest"},
		models.BatchTask{LocalID: "big", Title: "big", Priority: &one, Kind: "batch", ExpectedCount: 10},
		models.BatchTask{LocalID: "small", Title: "small", Priority: &one, Kind: "batch", ExpectedCount: 2},
	)
	a, five := "a", 5
	for _, tc := range []struct {
		name    string
		exclude []models.ReadyExclusion
		want    []string
	}{
		{"nothing excluded", nil, []string{"ingest-a", "ingest-b", "ingest-none", "big", "small", "plain"}},
		{"a kind", []models.ReadyExclusion{{Kind: "ingest"}}, []string{"big", "small", "plain"}},
		{"a field's value", []models.ReadyExclusion{{Kind: "ingest", Fields: map[string]*string{"src": &a}}},
			[]string{"ingest-b", "ingest-none", "big", "small", "plain"}},
		{"a missing field", []models.ReadyExclusion{{Kind: "ingest", Fields: map[string]*string{"src": nil}}},
			[]string{"ingest-a", "ingest-b", "big", "small", "plain"}},
		{"more work than is left", []models.ReadyExclusion{{Kind: "batch", MaxRemaining: &five}},
			[]string{"ingest-a", "ingest-b", "ingest-none", "small", "plain"}},
		{"another project", []models.ReadyExclusion{{ProjectID: "q"}}, []string{"ingest-a", "ingest-b", "ingest-none", "big", "small", "plain"}},
	} {
		got, err := s.ReadyTasks(ctx, models.ReadyQuery{ProjectID: "p", Now: clock.Now(), Exclude: tc.exclude, Limit: 100})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var names []string
		for _, tk := range got {
			for name, id := range ids {
				if id == tk.ID {
					names = append(names, name)
				}
			}
			for _, e := range tc.exclude {
				if e.Matches(tk) {
					t.Errorf("%s: %s read, though %+v matches it", tc.name, tk.ID, e)
				}
			}
		}
		slices.Sort(names)
		slices.Sort(tc.want)
		if strings.Join(names, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: read %v, want %v", tc.name, names, tc.want)
		}
	}
	// Pages follow the start order (priority, submission); the future-dated
	// task comes once due.
	all, _ := s.ReadyTasks(ctx, models.ReadyQuery{ProjectID: "p", Now: later, Limit: 100})
	first, _ := s.ReadyTasks(ctx, models.ReadyQuery{ProjectID: "p", Now: later, Limit: 2})
	last := first[len(first)-1]
	rest, _ := s.ReadyTasks(ctx, models.ReadyQuery{ProjectID: "p", Now: later, Limit: 100,
		After: &models.ReadyCursor{Priority: last.Priority, SubmissionSeq: last.SubmissionSeq}})
	paged := append(first, rest...)
	if len(all) != 7 || len(paged) != 7 || all[6].ID != ids["plain"] {
		t.Fatalf("all %d tasks, paged %d; want 7, the priority 2 task last", len(all), len(paged))
	}
	for i := range all {
		if all[i].ID != paged[i].ID || (i > 0 && all[i-1].SubmissionSeq >= all[i].SubmissionSeq && all[i-1].Priority == all[i].Priority) {
			t.Fatalf("paged order differs or is not by submission at %d", i)
		}
	}
}

// TestReadyGenerationMovesWithTheReadyTasks: the count a round compares to
// skip writing unchanged waiting reasons moves when a task becomes READY
// or a READY task changes, and not when a waiting reason is written or a
// task leaves READY.
func TestReadyGenerationMovesWithTheReadyTasks(t *testing.T) {
	t.Parallel()
	s, clock := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "p")
	storetest.Agent(t, s, "a1", "p")
	gen := func() int64 {
		t.Helper()
		st, err := s.SchedulingState(ctx, clock.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return st.ReadyGeneration
	}
	var id string
	var run models.Run
	two := 2
	for _, tc := range []struct {
		name  string
		do    func()
		moves bool
	}{
		{"a READY task created", func() { id = storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "a", Title: "a"})["a"] }, true},
		{"a DEFINED task created", func() {
			storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "d", Title: "d", Dependencies: storetest.Deps(id)})
		}, false},
		{"its waiting reason written", func() {
			if _, err := s.SetWaiting(ctx, []models.WaitingUpdate{{ProjectID: "p", Scope: models.WaitAll,
				Code: models.WaitingSlots, Reason: "busy"}}); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"a READY task edited", func() {
			if _, err := s.EditTask(ctx, id, models.TaskPatch{Priority: &two}); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"a task claimed", func() {
			var err error
			if run, _, err = s.ClaimTask(ctx, id, "a1"); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"a task returned to READY", func() {
			if _, err := s.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventExecutionError,
				ExpectFrom: models.StatusAssigned, Outcome: "execution_error", Reason: "test"}); err != nil {
				t.Fatal(err)
			}
		}, true},
	} {
		before := gen()
		tc.do()
		if moved := gen() != before; moved != tc.moves {
			t.Fatalf("%s: the generation moved %v, want %v", tc.name, moved, tc.moves)
		}
	}
}

// TestReadyPageCarriesWhatARoundUses: a READY page has, for each task, the
// fields a scheduling round uses, as GetTask reads them, and not the task's
// text (title, description, criteria, test commands).
func TestReadyPageCarriesWhatARoundUses(t *testing.T) {
	t.Parallel()
	s, clock := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "p")
	earlier := clock.Now().Add(-time.Minute)
	three := 3
	ids := storetest.Tasks(t, s, "p",
		models.BatchTask{LocalID: "plain", Title: "plain"},
		models.BatchTask{LocalID: "full", Title: "full", Description: "a long description", Priority: &three, Kind: "bug",
			Metadata: map[string]string{"area": "db"}, CreatedBy: "ann", NotBefore: &earlier, ExpectedCount: 4,
			AcceptanceCriteria: []string{"works"}, TestCommands: []string{"go test"},
			Rules: []models.Rule{{Type: models.RuleConcurrency, Matcher: models.RuleMatcher{Kind: "bug"}, MaxConcurrency: 1}}})
	if _, err := s.SetWaiting(ctx, []models.WaitingUpdate{{ProjectID: "p", Scope: models.WaitAll,
		Code: models.WaitingSlots, Reason: "all slots are busy"}}); err != nil {
		t.Fatal(err)
	}
	page, err := s.ReadyTasks(ctx, models.ReadyQuery{ProjectID: "p", Now: clock.Now(), Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 2 {
		t.Fatalf("page of %d tasks, want 2", len(page))
	}
	for _, got := range page {
		full, err := s.GetTask(ctx, got.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := models.Task{ID: full.ID, ProjectID: full.ProjectID, Priority: full.Priority, Status: full.Status,
			Kind: full.Kind, Metadata: full.Metadata, CreatedBy: full.CreatedBy, NotBefore: full.NotBefore,
			ExpectedCount: full.ExpectedCount, SuccessCount: full.SuccessCount, FailureCount: full.FailureCount,
			CreatedAt: full.CreatedAt, RunID: full.RunID, StepName: full.StepName, StepConcurrency: full.StepConcurrency,
			Rules: full.Rules, WaitingCode: full.WaitingCode, WaitingReason: full.WaitingReason, SubmissionSeq: full.SubmissionSeq}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("READY page task %s:\n got %+v\nwant %+v", got.ID, got, want)
		}
	}
	if ids["full"] == "" || page[0].ID != ids["plain"] && page[1].ID != ids["plain"] {
		t.Fatalf("page %v lacks the tasks created", page)
	}
}
