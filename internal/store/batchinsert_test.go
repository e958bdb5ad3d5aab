package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
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
	// A chain of n tasks, of narrow tasks that share their other columns,
	// or (wide) of tasks that each set a column of their own.
	chain := func(n int, wide bool) models.TaskBatch {
		b := models.TaskBatch{ProjectID: "p"}
		for i := range n {
			bt := models.BatchTask{LocalID: fmt.Sprintf("t%d", i), Title: fmt.Sprintf("task %d", i)}
			if i > 0 {
				bt.Dependencies = storetest.Deps(fmt.Sprintf("t%d", i-1))
			}
			if wide {
				bt.AcceptanceCriteria = []string{fmt.Sprintf("criterion %d", i)}
			}
			b.Tasks = append(b.Tasks, bt)
		}
		return b
	}
	// Batches of each statement twice first (statements a first
	// transaction missed are cached after it): of 102 narrow tasks (the
	// shared rows' INSERT), of 3 (too few to share: single rows) and of
	// 102 wide tasks (a full INSERT and single rows), each with its edges.
	for range 2 {
		for _, b := range []models.TaskBatch{chain(102, false), chain(3, false), chain(102, true)} {
			if _, err := s.CreateTasks(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := compiled()
	for _, n := range []int{1, 2, 37, 99, 100, 102, 150, 233} {
		for _, wide := range []bool{false, true} {
			if _, err := s.CreateTasks(ctx, chain(n, wide)); err != nil {
				t.Fatalf("batch of %d: %v", n, err)
			}
		}
	}
	if got := compiled() - before; got != 0 {
		t.Fatalf("batches of other sizes compiled statements again (%d authorizer calls), want none", got)
	}
}

// A batch runs a few statements, however many tasks it has: its tasks are
// named, inserted, given their edges and their first statuses many at a
// time. A task that starts DEFINED is not evaluated (nothing could change
// it), one ready at once is inserted READY and its promotion's event
// written with the others', and the answer's statuses are read together.
func TestBatchStatementsDoNotGrowWithItsTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	statements := store.CountStatementsForTest(s)
	done := storetest.Task(t, s, "p", "done")
	storetest.Apply(t, s, done, storetest.ToCompleted...)
	waiting := storetest.Task(t, s, "p", "waiting")
	for _, tc := range []struct {
		name  string
		entry func(i int) models.BatchTask
	}{
		{"a chain", func(i int) models.BatchTask {
			bt := models.BatchTask{LocalID: fmt.Sprintf("t%d", i), Title: "chained"}
			if i > 0 {
				bt.Dependencies = storetest.Deps(fmt.Sprintf("t%d", i-1))
			}
			return bt
		}},
		{"without dependencies", func(int) models.BatchTask { return models.BatchTask{Title: "alone"} }},
		{"on existing tasks", func(int) models.BatchTask {
			return models.BatchTask{Title: "after", Dependencies: storetest.Deps(done, waiting)}
		}},
	} {
		cost := func(n int) int64 {
			b := models.TaskBatch{ProjectID: "p"}
			for i := range n {
				b.Tasks = append(b.Tasks, tc.entry(i))
			}
			before := statements()
			if _, err := s.CreateTasks(ctx, b); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			return statements() - before
		}
		// Tasks are inserted 100 rows per statement: a statement more per
		// 100 tasks, and a look-up more or two for names that collide
		// more often, but nothing more per task.
		small, large := cost(100), cost(1000)
		if grew := large - small; grew > 9+3 {
			t.Errorf("%s: %d statements for 100 tasks, %d for 1,000: %d more, want at most 12 (one per 100 tasks, a few names)",
				tc.name, small, large, grew)
		}
	}
}

// Each edge of a batch to a task outside it starts as that task's state
// decides (PENDING while it runs, SATISFIED or BROKEN once it finished,
// with how it ended), and each new task starts as its edges decide, those
// to the batch's own entries after them: READY through a promotion's
// event, BLOCKED through the cascade from the task that failed, with one
// notice naming the tasks it blocked.
func TestBatchEdgesToTasksOutsideIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	open := storetest.Task(t, s, "p", "open")
	done := storetest.Task(t, s, "p", "done")
	storetest.Apply(t, s, done, storetest.ToCompleted...)
	skipped := storetest.Task(t, s, "p", "skipped")
	storetest.Apply(t, s, skipped, append(storetest.ToBlocked, models.EventAdminSkip)...)
	stopped := storetest.Task(t, s, "p", "stopped")
	storetest.Apply(t, s, stopped, storetest.ToBlocked...)

	soft := func(id string) models.BatchDependency {
		return models.BatchDependency{ID: id, RequiresSuccess: new(false)}
	}
	type edge struct {
		up      string
		res     models.EdgeResolution
		outcome models.EdgeOutcome
	}
	cases := []struct {
		entry models.BatchTask
		want  models.TaskStatus
		edges []edge // by upstream; a local id stands for its task
	}{
		{models.BatchTask{LocalID: "on-open", Dependencies: storetest.Deps(open)},
			models.StatusDefined, []edge{{open, models.EdgePending, ""}}},
		{models.BatchTask{LocalID: "on-done", Dependencies: storetest.Deps(done)},
			models.StatusReady, []edge{{done, models.EdgeSatisfied, models.OutcomeSuccess}}},
		{models.BatchTask{LocalID: "on-skipped", Dependencies: storetest.Deps(skipped)},
			models.StatusReady, []edge{{skipped, models.EdgeSatisfied, models.OutcomeSkipped}}},
		{models.BatchTask{LocalID: "hard-on-stopped", Dependencies: storetest.Deps(stopped)},
			models.StatusBlocked, []edge{{stopped, models.EdgeBroken, models.OutcomeFailed}}},
		{models.BatchTask{LocalID: "soft-on-stopped", Dependencies: []models.BatchDependency{soft(stopped)}},
			models.StatusReady, []edge{{stopped, models.EdgeSatisfied, models.OutcomeFailed}}},
		{models.BatchTask{LocalID: "behind-hard", Dependencies: storetest.Deps("hard-on-stopped")},
			models.StatusBlocked, []edge{{"hard-on-stopped", models.EdgeBroken, models.OutcomeFailed}}},
		{models.BatchTask{LocalID: "soft-behind-hard", Dependencies: []models.BatchDependency{soft("hard-on-stopped")}},
			models.StatusReady, []edge{{"hard-on-stopped", models.EdgeSatisfied, models.OutcomeFailed}}},
		{models.BatchTask{LocalID: "on-open-and-done", Dependencies: storetest.Deps(open, done)},
			models.StatusDefined, []edge{{open, models.EdgePending, ""}, {done, models.EdgeSatisfied, models.OutcomeSuccess}}},
		{models.BatchTask{LocalID: "none"}, models.StatusReady, nil},
	}
	b := models.TaskBatch{ProjectID: "p"}
	for _, c := range cases {
		c.entry.Title = c.entry.LocalID
		b.Tasks = append(b.Tasks, c.entry)
	}
	res, err := s.CreateTasks(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, r := range res {
		ids[r.LocalID] = r.TaskID
	}
	for i, c := range cases {
		name := c.entry.LocalID
		d, err := s.GetTaskDetail(ctx, res[i].TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if res[i].Status != c.want || d.Task.Status != c.want {
			t.Errorf("%s: answered %s, stored %s, want %s", name, res[i].Status, d.Task.Status, c.want)
		}
		if len(d.Dependencies) != len(c.edges) {
			t.Errorf("%s: %d edges, want %d", name, len(d.Dependencies), len(c.edges))
			continue
		}
		for _, want := range c.edges {
			up := want.up
			if id, ok := ids[up]; ok {
				up = id
			}
			i := slices.IndexFunc(d.Dependencies, func(e models.Dependency) bool { return e.Upstream == up })
			if i < 0 {
				t.Errorf("%s: no edge to %s", name, want.up)
				continue
			}
			if got := d.Dependencies[i]; got.Resolution != want.res || got.UpstreamOutcome != want.outcome ||
				(got.ResolvedAt == nil) != (want.res == models.EdgePending) {
				t.Errorf("%s: edge to %s is %s (%q, resolved at %v), want %s (%q)", name, want.up, got.Resolution,
					got.UpstreamOutcome, got.ResolvedAt, want.res, want.outcome)
			}
		}
		var events []string
		for _, e := range d.Events {
			events = append(events, fmt.Sprintf("%s->%s %s by %s: %s", e.From, e.To, e.Event, e.Actor, e.Reason))
		}
		var wantEvents []string
		switch c.want {
		case models.StatusReady:
			wantEvents = []string{"DEFINED->READY DEPS_MET by system: all dependencies satisfied"}
			if d.Task.StatusReason != "all dependencies satisfied" {
				t.Errorf("%s: status reason %q", name, d.Task.StatusReason)
			}
		case models.StatusBlocked:
			wantEvents = []string{"DEFINED->BLOCKED UPSTREAM_FAILED by system: " + d.Task.StatusReason}
			if d.Task.CascadeRootID != stopped || !strings.Contains(d.Task.StatusReason, stopped) {
				t.Errorf("%s: cascade root %q, reason %q: want %s", name, d.Task.CascadeRootID, d.Task.StatusReason, stopped)
			}
		}
		if !slices.Equal(events, wantEvents) {
			t.Errorf("%s: events %q, want %q", name, events, wantEvents)
		}
	}
	notices, err := s.PendingOutbox(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	var chains []string
	for _, n := range notices {
		if n.Kind == models.NoticeChainBroken {
			chains = append(chains, n.Payload)
		}
	}
	if len(chains) != 1 || !strings.Contains(chains[0], ids["hard-on-stopped"]) || !strings.Contains(chains[0], ids["behind-hard"]) {
		t.Errorf("chain notices %q, want one naming %s and %s", chains, ids["hard-on-stopped"], ids["behind-hard"])
	}
}

// A dependency listed twice by one entry is refused, naming the second,
// whether the entry has a few dependencies or many.
func TestBatchRefusesADependencyListedTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	for _, tc := range []struct {
		deps, repeatAt, first int
	}{
		{deps: 5, repeatAt: 3, first: 1},
		{deps: 2, repeatAt: 1, first: 0},
		{deps: 40, repeatAt: 31, first: 12},
		{deps: 40, repeatAt: 39, first: 38},
	} {
		b := models.TaskBatch{ProjectID: "p"}
		for i := range tc.deps {
			b.Tasks = append(b.Tasks, models.BatchTask{LocalID: fmt.Sprintf("u%d", i), Title: "upstream"})
		}
		last := models.BatchTask{LocalID: "last", Title: "downstream"}
		for i := range tc.deps {
			id := fmt.Sprintf("u%d", i)
			if i == tc.repeatAt {
				id = fmt.Sprintf("u%d", tc.first)
			}
			last.Dependencies = append(last.Dependencies, models.BatchDependency{ID: id})
		}
		b.Tasks = append(b.Tasks, last)
		_, err := s.CreateTasks(ctx, b)
		want := fmt.Sprintf(`tasks[%d].dependencies[%d]: "u%d" is listed twice`, tc.deps, tc.repeatAt, tc.first)
		if models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), want) {
			t.Errorf("%d dependencies, repeated at %d: %v, want %q", tc.deps, tc.repeatAt, err, want)
		}
	}
}

// A task's runner labels are kept through both ways a batch is inserted
// (an entry with them is not narrow) and read back by the task's readers
// and by a scheduling round's page of READY tasks.
func TestRunnerLabelsOfATask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	res, err := s.CreateTasks(ctx, models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{
		{Title: "on a gpu", RunnerLabels: []string{"gpu", "linux"}},
		{Title: "anywhere"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{res[0].TaskID: {"gpu", "linux"}, res[1].TaskID: nil}
	for id, labels := range want {
		task, err := s.GetTask(ctx, id)
		if err != nil || !slices.Equal(task.RunnerLabels, labels) {
			t.Errorf("task %s: runner labels %q (%v), want %q", id, task.RunnerLabels, err, labels)
		}
	}
	ready, err := s.ReadyTasks(ctx, models.ReadyQuery{ProjectID: "p", Limit: 10})
	if err != nil || len(ready) != 2 {
		t.Fatalf("ready tasks: %d, %v", len(ready), err)
	}
	for _, task := range ready {
		if !slices.Equal(task.RunnerLabels, want[task.ID]) {
			t.Errorf("ready task %s: runner labels %q, want %q", task.ID, task.RunnerLabels, want[task.ID])
		}
	}
	// A bad label is refused with the entry and the field named, and
	// nothing is written.
	_, err = s.CreateTasks(ctx, models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{
		{Title: "fine"}, {Title: "bad", RunnerLabels: []string{"GPU!"}}}})
	if models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), `tasks[1]: runner_labels[0]: "GPU!" is not a label`) {
		t.Fatalf("a bad label: %v", err)
	}
	if all, err := s.ListTasks(ctx, models.TaskFilter{}); err != nil || len(all) != 2 {
		t.Fatalf("after a refused batch: %d tasks (%v)", len(all), err)
	}
}
