package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// transitions records what a store's observer is told.
type transitions struct {
	mu  sync.Mutex
	log []string
}

func (r *transitions) Transitioned(t store.ObservedTransition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, fmt.Sprintf("%s %s -> %s by %s at %d", t.ProjectID, t.From, t.To, t.Event, t.At.UnixNano()))
}

func (r *transitions) RunEnded(store.ObservedRun) {}

func (r *transitions) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// twin is a store and what its observer was told.
type twin struct {
	s   *store.Store
	obs *transitions
}

// batchTables are the rows a batch writes, in a fixed order.
var batchTables = []string{
	"SELECT * FROM tasks ORDER BY submission_seq",
	"SELECT * FROM task_dependencies ORDER BY downstream, upstream",
	"SELECT * FROM task_events ORDER BY id",
	"SELECT * FROM outbox ORDER BY id",
	"SELECT * FROM ready_generation",
	"SELECT * FROM task_sequence",
	"SELECT id, status FROM archived_tasks ORDER BY id",
}

// A batch leaves the database as evaluating each of its new tasks in turn
// does (the way batches were first created): the same statuses, reasons
// and cascade roots, the same edges, the same events in the same order,
// the same notices, the same changes told to the observer and the same
// answer — whatever the batch's graph and the state of the existing tasks
// it depends on (unfinished, COMPLETED, BLOCKED, archived), whichever
// columns its tasks set, and for batches refused too.
func TestBatchLeavesWhatEvaluatingEachTaskLeaves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// Each case starts from a copy of one database with the project.
	template := filepath.Join(t.TempDir(), "template.db")
	ts := storetest.OpenAt(t, template)
	storetest.Project(t, ts, "p")
	if err := ts.Close(); err != nil { // the last connection folds the WAL into the file
		t.Fatal(err)
	}
	image, err := os.ReadFile(template)
	if err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(rt *rapid.T) {
		dir := t.TempDir()
		clk := clocktest.New(start)
		open := func(name string) twin {
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, image, 0o600); err != nil {
				rt.Fatal(err)
			}
			obs := &transitions{}
			// The same seed: both name their tasks alike.
			s, err := store.Open(ctx, store.Config{Path: path, Clock: clk, Observer: obs, Rand: rand.New(rand.NewPCG(4, 2))})
			if err != nil {
				rt.Fatal(err)
			}
			rt.Cleanup(func() { s.Close() })
			return twin{s, obs}
		}
		batched, oneByOne := open("batched.db"), open("one-by-one.db")
		both := func(what string, f func(s *store.Store) (any, error)) any {
			a, errA := f(batched.s)
			b, errB := f(oneByOne.s)
			if fmt.Sprint(a, errA) != fmt.Sprint(b, errB) {
				rt.Fatalf("%s: %v, %v; one by one: %v, %v", what, a, errA, b, errB)
			}
			return a
		}

		// Existing tasks in every kind of state a batch can depend on.
		var existing []string
		for i := range rapid.IntRange(0, 6).Draw(rt, "existing") {
			bt := models.BatchTask{Title: fmt.Sprintf("existing %d", i), Kind: "k"}
			if len(existing) > 0 && rapid.Bool().Draw(rt, "existing has a dependency") {
				bt.Dependencies = storetest.Deps(rapid.SampledFrom(existing).Draw(rt, "its upstream"))
			}
			res := both("create existing", func(s *store.Store) (any, error) {
				return s.CreateTasks(ctx, models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{bt}})
			}).([]models.BatchResult)
			id := res[0].TaskID
			existing = append(existing, id)
			if res[0].Status != models.StatusReady {
				continue
			}
			var events []models.TaskEvent
			switch rapid.IntRange(0, 4).Draw(rt, "state") {
			case 1:
				events = storetest.ToCompleted
			case 2:
				events = storetest.ToBlocked
			case 3:
				events = []models.TaskEvent{models.EventAssigned, models.EventAgentStarted}
			case 4:
				events = []models.TaskEvent{models.EventAdminSkip}
			}
			for _, ev := range events {
				both("apply "+string(ev), func(s *store.Store) (any, error) {
					r, err := s.ApplyEvent(ctx, models.TransitionRequest{TaskID: id, Event: ev, AgentID: "a1", Actor: "test"})
					return r.To, err
				})
			}
		}
		if rapid.Bool().Draw(rt, "archive") {
			clk.Advance(time.Hour)
			both("archive", func(s *store.Store) (any, error) {
				return s.ArchiveTasks(ctx, clk.Now(), 100)
			})
		}
		clk.Advance(time.Minute)

		// The batch: edges between its entries (acyclic unless a cycle is
		// drawn on purpose), to existing tasks and to missing ones.
		n := rapid.IntRange(1, 12).Draw(rt, "entries")
		order := rapid.Permutation(seq(n)).Draw(rt, "order")
		batch := models.TaskBatch{ProjectID: "p"}
		for k := range n {
			bt := models.BatchTask{LocalID: fmt.Sprintf("n%d", k), Title: fmt.Sprintf("new %d", k), Kind: "k"}
			switch rapid.IntRange(0, 5).Draw(rt, "a column most tasks leave alone") {
			case 1:
				bt.AcceptanceCriteria = []string{"it works"}
			case 2:
				bt.ExpectedCount = 3
			case 3:
				bt.Timeout = models.Duration(time.Hour)
			}
			if rapid.IntRange(0, 9).Draw(rt, "dedupe") == 0 {
				bt.DedupeStrategy = []models.DedupeStrategy{{Kind: "k",
					Status: rapid.SampledFrom([]string{"READY", "COMPLETED", "DEFINED", "BLOCKED", "finished"}).Draw(rt, "dedupe status")}}
			}
			for _, up := range order[:slices.Index(order, k)] {
				if rapid.IntRange(0, 2).Draw(rt, "local edge") == 0 {
					required := rapid.IntRange(0, 2).Draw(rt, "required") > 0
					bt.Dependencies = append(bt.Dependencies, models.BatchDependency{ID: fmt.Sprintf("n%d", up), RequiresSuccess: &required})
				}
			}
			for _, id := range existing {
				if rapid.IntRange(0, 2).Draw(rt, "existing edge") == 0 {
					required := rapid.IntRange(0, 2).Draw(rt, "required") > 0
					bt.Dependencies = append(bt.Dependencies, models.BatchDependency{ID: id, RequiresSuccess: &required})
				}
			}
			batch.Tasks = append(batch.Tasks, bt)
		}
		switch rapid.IntRange(0, 9).Draw(rt, "fault") {
		case 0:
			k := rapid.IntRange(0, n-1).Draw(rt, "entry with a missing upstream")
			batch.Tasks[k].Dependencies = append(batch.Tasks[k].Dependencies, models.BatchDependency{ID: "no-such-task"})
		case 1:
			if n > 1 { // a cycle through the batch's entries
				first, last := order[0], order[n-1]
				batch.Tasks[first].Dependencies = append(batch.Tasks[first].Dependencies, models.BatchDependency{ID: fmt.Sprintf("n%d", last)})
			}
		}

		resA, errA := batched.s.CreateTasks(ctx, batch)
		resB, errB := store.CreateTasksOneByOneForTest(ctx, oneByOne.s, batch)
		if fmt.Sprint(resA, errA) != fmt.Sprint(resB, errB) {
			rt.Fatalf("answer %v, %v; one by one %v, %v", resA, errA, resB, errB)
		}
		for _, q := range batchTables {
			a, err := store.RowsForTest(batched.s, q)
			if err != nil {
				rt.Fatal(err)
			}
			b, err := store.RowsForTest(oneByOne.s, q)
			if err != nil {
				rt.Fatal(err)
			}
			if !slices.Equal(a, b) {
				rt.Fatalf("%s:\n%s\none by one:\n%s", q, strings.Join(a, "\n"), strings.Join(b, "\n"))
			}
		}
		if a, b := batched.obs.all(), oneByOne.obs.all(); !slices.Equal(a, b) {
			rt.Fatalf("observed:\n%s\none by one:\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
		}
	})
}

// seq returns 0, 1, …, n-1.
func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
