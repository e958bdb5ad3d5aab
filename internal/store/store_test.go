package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock"
	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

func f() *bool { b := false; return &b }

func TestProjectCRUD(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := context.Background()
	p, err := s.CreateProject(ctx, models.Project{ID: "web", Repo: &models.RepoConfig{SourceType: models.RepoClone, URL: "/srv/web.git"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.CreditWeight != 1 || p.MaxConcurrentAgents != 2 || p.Repo.DefaultBranch != "main" {
		t.Fatalf("defaults: %+v", p)
	}
	if _, err := s.CreateProject(ctx, models.Project{ID: "web"}); models.ErrorCodeOf(err) != models.CodeConflict {
		t.Fatalf("duplicate project: %v", err)
	}
	if _, err := s.CreateProject(ctx, models.Project{ID: "bad", Repo: &models.RepoConfig{SourceType: models.RepoLink}}); models.ErrorCodeOf(err) != models.CodeInvalid {
		t.Fatalf("invalid repo: %v", err)
	}
	name := "Web site"
	limit := int64(5000)
	got, err := s.UpdateProject(ctx, "web", models.ProjectPatch{Name: &name, BudgetLimit: &limit})
	if err != nil || got.Name != name || *got.BudgetLimit != 5000 || got.Repo == nil {
		t.Fatalf("update: %+v %v", got, err)
	}
	if _, err := s.UpdateProject(ctx, "nope", models.ProjectPatch{Name: &name}); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("update missing: %v", err)
	}
	list, err := s.ListProjects(ctx)
	if err != nil || len(list) != 1 || list[0].Name != name {
		t.Fatalf("list: %+v %v", list, err)
	}
	if _, err := s.GetProject(ctx, "bad"); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("invalid project was written: %v", err)
	}
}

func TestBatchCreatesReadyAndDefined(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	ids := storetest.Tasks(t, s, "p",
		models.BatchTask{LocalID: "a", Title: "A"},
		models.BatchTask{LocalID: "b", Title: "B", Dependencies: storetest.Deps("a")},
		models.BatchTask{LocalID: "c", Title: "C", Dependencies: storetest.Deps("a", "b")},
	)
	storetest.WantStatuses(t, s, map[string]models.TaskStatus{ids["a"]: models.StatusReady, ids["b"]: models.StatusDefined, ids["c"]: models.StatusDefined})
	for _, id := range ids {
		if !models.ValidTaskID(id) || strings.Count(id, "-") < 1 {
			t.Errorf("task id %q is not adjective-noun", id)
		}
	}
	// A new batch may depend on existing tasks by id.
	more := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "d", Title: "D", Dependencies: storetest.Deps(ids["c"])})
	d, err := s.GetTaskDetail(context.Background(), more["d"])
	if err != nil || len(d.Dependencies) != 1 || d.Dependencies[0].Upstream != ids["c"] || d.Dependencies[0].Resolution != models.EdgePending {
		t.Fatalf("detail: %+v %v", d, err)
	}
}

func TestBadBatchesWriteNothing(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	existing := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "x", Title: "X"})["x"]
	tests := []struct {
		name     string
		batch    models.TaskBatch
		code     models.ErrorCode
		contains string
	}{
		{"empty", models.TaskBatch{ProjectID: "p"}, models.CodeInvalid, "empty"},
		{"cycle", models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{
			{LocalID: "a", Title: "A", Dependencies: storetest.Deps("c")},
			{LocalID: "b", Title: "B", Dependencies: storetest.Deps("a")},
			{LocalID: "c", Title: "C", Dependencies: storetest.Deps("b")},
		}}, models.CodeInvalid, "dependency cycle: b -> a"},
		{"self", models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{{LocalID: "a", Title: "A", Dependencies: storetest.Deps("a")}}}, models.CodeInvalid, "itself"},
		{"unknown dependency", models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{{Title: "A", Dependencies: storetest.Deps("ghost")}}}, models.CodeNotFound, `"ghost"`},
		{"unknown project", models.TaskBatch{ProjectID: "nope", Tasks: []models.BatchTask{{Title: "A"}}}, models.CodeNotFound, `project "nope"`},
		{"no title", models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{{Title: "ok"}, {LocalID: "z"}}}, models.CodeInvalid, "tasks[1] (z): title"},
		{"duplicate local", models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{{LocalID: "a", Title: "A"}, {LocalID: "a", Title: "B"}}}, models.CodeInvalid, "already used"},
		{"bad dedupe status", models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{{Title: "A", Kind: "k", DedupeStrategy: []models.DedupeStrategy{{Status: "Sleeping"}}}}}, models.CodeInvalid, "Sleeping"},
		{"hash id out of range", models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{{LocalID: "a", Title: "A", Dependencies: storetest.Deps("#7")}}}, models.CodeInvalid, `"#7" is neither a task id`},
		{"hash id in range", models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{{Title: "A"}, {Title: "B", Dependencies: storetest.Deps("#0")}}}, models.CodeInvalid, `"#0" is neither`},
		{"depends on its own duplicate", models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{
			{LocalID: "a", Title: "A", Kind: "k", Dependencies: storetest.Deps("b")},
			{LocalID: "b", Title: "B", Kind: "k", DedupeStrategy: []models.DedupeStrategy{{Status: "Any"}}},
		}}, models.CodeInvalid, `"b" is a duplicate of this very task`},
		{"valid then unknown existing", models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{
			{LocalID: "a", Title: "A", Dependencies: storetest.Deps(existing)}, {LocalID: "b", Title: "B", Dependencies: storetest.Deps("zzz")},
		}}, models.CodeNotFound, "zzz"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.CreateTasks(context.Background(), tc.batch)
			if models.ErrorCodeOf(err) != tc.code || !strings.Contains(models.ErrorMessageOf(err), tc.contains) {
				t.Fatalf("got %v (code %s), want %s mentioning %q", err, models.ErrorCodeOf(err), tc.code, tc.contains)
			}
		})
	}
	all, err := s.ListTasks(context.Background(), models.TaskFilter{})
	if err != nil || len(all) != 1 {
		t.Fatalf("bad batches wrote tasks: %d %v", len(all), err)
	}
}

func TestCompletionPromotesInSameTransactionAndIsIdempotent(t *testing.T) {
	t.Parallel()
	var wakes int
	var mu sync.Mutex
	s := storetest.Open(t, storetest.WithOnChange(func() { mu.Lock(); wakes++; mu.Unlock() }))
	storetest.Project(t, s, "p")
	ids := storetest.Tasks(t, s, "p",
		models.BatchTask{LocalID: "a", Title: "A"},
		models.BatchTask{LocalID: "b", Title: "B", Dependencies: storetest.Deps("a")},
		models.BatchTask{LocalID: "c", Title: "C", Dependencies: storetest.Deps("a", "b")},
	)
	storetest.Apply(t, s, ids["a"], storetest.ToCompleted[:3]...)
	mu.Lock()
	before := wakes
	mu.Unlock()
	res := storetest.Apply(t, s, ids["a"], models.EventVerifyPassed)
	if !slices.Equal(res.Promoted, []string{ids["b"]}) || res.To != models.StatusCompleted {
		t.Fatalf("result %+v", res)
	}
	mu.Lock()
	if wakes != before+1 {
		t.Errorf("completion did not signal a wake-up")
	}
	mu.Unlock()
	storetest.WantStatuses(t, s, map[string]models.TaskStatus{ids["b"]: models.StatusReady, ids["c"]: models.StatusDefined})
	d, _ := s.GetTaskDetail(context.Background(), ids["b"])
	if d.Dependencies[0].Resolution != models.EdgeSatisfied || d.Dependencies[0].ResolvingEventID == nil {
		t.Fatalf("edge fact not recorded: %+v", d.Dependencies)
	}
	resolvedBy := *d.Dependencies[0].ResolvingEventID

	// The same completion again: a duplicate, nothing changes.
	dup, err := s.ApplyEvent(context.Background(), models.TransitionRequest{TaskID: ids["a"], Event: models.EventVerifyPassed, ExpectFrom: models.StatusVerifying})
	if err != nil || !dup.Duplicate || len(dup.Promoted) != 0 {
		t.Fatalf("duplicate completion: %+v %v", dup, err)
	}
	dup, err = s.ApplyEvent(context.Background(), models.TransitionRequest{TaskID: ids["a"], Event: models.EventVerifyPassed})
	if err != nil || !dup.Duplicate {
		t.Fatalf("duplicate completion without expect_from: %+v %v", dup, err)
	}
	d2, _ := s.GetTaskDetail(context.Background(), ids["b"])
	if *d2.Dependencies[0].ResolvingEventID != resolvedBy {
		t.Fatal("edge satisfied twice")
	}
	da, _ := s.GetTaskDetail(context.Background(), ids["a"])
	if len(da.Events) != 5 { // DEPS_MET at creation, then four
		t.Fatalf("want 5 events on a, got %d", len(da.Events))
	}
	// A different illegal event is a conflict with the statemachine's message.
	_, err = s.ApplyEvent(context.Background(), models.TransitionRequest{TaskID: ids["c"], Event: models.EventAssigned, AgentID: "a1"})
	if models.ErrorCodeOf(err) != models.CodeConflict || models.ErrorMessageOf(err) != "Invalid transition: (DEFINED, ASSIGNED)" {
		t.Fatalf("illegal: %v", err)
	}
}

func TestCascadeBlocksChainAndAdminRepairsIt(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	ids := storetest.Tasks(t, s, "p",
		models.BatchTask{LocalID: "root", Title: "root"},
		models.BatchTask{LocalID: "mid", Title: "mid", Dependencies: storetest.Deps("root")},
		models.BatchTask{LocalID: "leaf", Title: "leaf", Dependencies: storetest.Deps("mid")},
		models.BatchTask{LocalID: "soft", Title: "soft", Dependencies: []models.BatchDependency{{ID: "root", RequiresSuccess: f()}}},
		models.BatchTask{LocalID: "other", Title: "other"},
		models.BatchTask{LocalID: "both", Title: "both", Dependencies: storetest.Deps("other", "leaf")},
	)
	res := storetest.Apply(t, s, ids["root"], storetest.ToBlocked...)
	if !slices.Equal(res.Blocked, []string{ids["mid"], ids["leaf"], ids["both"]}) || !slices.Equal(res.Promoted, []string{ids["soft"]}) {
		t.Fatalf("cascade result %+v", res)
	}
	storetest.WantStatuses(t, s, map[string]models.TaskStatus{
		ids["mid"]: models.StatusBlocked, ids["leaf"]: models.StatusBlocked, ids["both"]: models.StatusBlocked,
		ids["soft"]: models.StatusReady, ids["other"]: models.StatusReady,
	})
	leaf, _ := s.GetTask(context.Background(), ids["leaf"])
	if leaf.CascadeRootID != ids["root"] || !strings.Contains(leaf.StatusReason, "root cause "+ids["root"]) {
		t.Fatalf("leaf does not name the root cause: %+v", leaf)
	}
	// Restarting the root reopens the whole chain.
	res = storetest.Apply(t, s, ids["root"], models.EventAdminRestart)
	if !slices.Equal(res.Reopened, []string{ids["mid"], ids["leaf"], ids["both"]}) {
		t.Fatalf("reopen result %+v", res)
	}
	storetest.WantStatuses(t, s, map[string]models.TaskStatus{ids["root"]: models.StatusReady, ids["mid"]: models.StatusDefined, ids["leaf"]: models.StatusDefined, ids["both"]: models.StatusDefined})
	// Block again, then skip: the chain reopens and mid becomes READY at once.
	storetest.Apply(t, s, ids["root"], storetest.ToBlocked...)
	res = storetest.Apply(t, s, ids["root"], models.EventAdminSkip)
	if !slices.Contains(res.Promoted, ids["mid"]) {
		t.Fatalf("skip did not promote mid: %+v", res)
	}
	storetest.WantStatuses(t, s, map[string]models.TaskStatus{ids["mid"]: models.StatusReady, ids["leaf"]: models.StatusDefined})
	msgs, err := s.PendingOutbox(context.Background(), 100)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []models.NoticeKind
	for _, m := range msgs {
		kinds = append(kinds, m.Kind)
	}
	if !slices.Contains(kinds, "chain.broken") || !slices.Contains(kinds, "task.blocked") || !slices.Contains(kinds, "task.completed") {
		t.Fatalf("outbox kinds %v", kinds)
	}
}

func TestDependingOnBlockedTaskBlocksAtCreation(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	up := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "u", Title: "u"})["u"]
	storetest.Apply(t, s, up, storetest.ToBlocked...)
	ids := storetest.Tasks(t, s, "p",
		models.BatchTask{LocalID: "hard", Title: "hard", Dependencies: storetest.Deps(up)},
		models.BatchTask{LocalID: "after", Title: "after", Dependencies: storetest.Deps("hard")},
		models.BatchTask{LocalID: "soft", Title: "soft", Dependencies: []models.BatchDependency{{ID: up, RequiresSuccess: f()}}},
	)
	storetest.WantStatuses(t, s, map[string]models.TaskStatus{ids["hard"]: models.StatusBlocked, ids["after"]: models.StatusBlocked, ids["soft"]: models.StatusReady})
	msgs, _ := s.PendingOutbox(context.Background(), 100)
	var notice string
	for _, m := range msgs {
		if m.Kind == "chain.broken" && m.TaskID == ids["hard"] {
			notice = m.Payload
		}
	}
	if !strings.Contains(notice, ids["after"]) || !strings.Contains(notice, up) {
		t.Fatalf("no chain.broken notice for tasks created blocked: %q", notice)
	}
}

func TestTaskRepoMustBelongToItsProject(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := context.Background()
	for _, id := range []string{"p", "q"} {
		if _, err := s.CreateProject(ctx, models.Project{ID: id, Repo: &models.RepoConfig{SourceType: models.RepoInit}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateTasks(ctx, models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{{Title: "a", RepoID: "p"}}}); err != nil {
		t.Fatalf("own repo: %v", err)
	}
	for _, repo := range []string{"q", "ghost"} {
		_, err := s.CreateTasks(ctx, models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{{Title: "a", RepoID: repo}}})
		if models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), "repo_id") {
			t.Fatalf("repo %s: %v", repo, err)
		}
	}
}

func TestNewerSchemaIsRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "aq.db")
	s := storetest.OpenAt(t, path)
	if err := store.ExecForTest(s, "INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, '0999_future.sql', 0)"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := store.Open(context.Background(), store.Config{Path: path})
	if err == nil || !strings.Contains(err.Error(), "schema version 999") {
		t.Fatalf("opening a newer database: %v", err)
	}
}

func TestDedupeSkipsExistingTask(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	strategy := []models.DedupeStrategy{{Kind: "ingest", Status: "Unfinished", Fields: []string{"source"}}}
	first := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "i", Title: "ingest", Kind: "ingest", Metadata: map[string]string{"source": "s3", "n": "1"}})["i"]
	res, err := s.CreateTasks(context.Background(), models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{
		{LocalID: "i2", Title: "ingest again", Kind: "ingest", Metadata: map[string]string{"source": "s3", "n": "2"}, DedupeStrategy: strategy},
		{LocalID: "j", Title: "other source", Kind: "ingest", Metadata: map[string]string{"source": "gcs"}, DedupeStrategy: strategy},
		{LocalID: "after", Title: "after", Dependencies: storetest.Deps("i2")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Skipped || res[0].TaskID != first || res[1].Skipped || res[2].Skipped {
		t.Fatalf("results %+v", res)
	}
	d, _ := s.GetTaskDetail(context.Background(), res[2].TaskID)
	if d.Dependencies[0].Upstream != first {
		t.Fatalf("dependency on a deduped entry must point at the existing task: %+v", d.Dependencies)
	}
	// Once the first is finished, the strategy (Unfinished) no longer matches.
	storetest.Apply(t, s, first, storetest.ToCompleted...)
	res, err = s.CreateTasks(context.Background(), models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{
		{Title: "ingest later", Kind: "ingest", Metadata: map[string]string{"source": "s3"}, DedupeStrategy: strategy},
	}})
	if err != nil || res[0].Skipped {
		t.Fatalf("finished task still deduped: %+v %v", res, err)
	}
}

func TestTransitionFieldEffects(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	id := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "a", Title: "A", MaxRetries: new(int)})["a"]
	ctx := context.Background()
	if _, err := s.ApplyEvent(ctx, models.TransitionRequest{TaskID: id, Event: models.EventAssigned}); models.ErrorCodeOf(err) != models.CodeInvalid {
		t.Fatalf("ASSIGNED without agent: %v", err)
	}
	res := storetest.Apply(t, s, id, models.EventAssigned, models.EventAgentStarted)
	if res.Task.AssignedAgentID == nil || *res.Task.AssignedAgentID != "a1" {
		t.Fatalf("agent not recorded: %+v", res.Task)
	}
	if _, err := s.ApplyEvent(ctx, models.TransitionRequest{TaskID: id, Event: models.EventTokensExhausted}); models.ErrorCodeOf(err) != models.CodeInvalid {
		t.Fatalf("pause without resume_after: %v", err)
	}
	res = storetest.Apply(t, s, id, models.EventTokensExhausted)
	if res.Task.ResumeAfter == nil || res.Task.AssignedAgentID != nil {
		t.Fatalf("pause effects: %+v", res.Task)
	}
	res = storetest.Apply(t, s, id, models.EventResumeTimer, models.EventAssigned, models.EventAgentStarted, models.EventAgentFailed)
	if res.Task.ResumeAfter != nil || res.Task.Status != models.StatusFailed {
		t.Fatalf("resume effects: %+v", res.Task)
	}
	// max_retries is 0: RETRY would break retry_count ≤ max_retries.
	if _, err := s.ApplyEvent(ctx, models.TransitionRequest{TaskID: id, Event: models.EventRetry}); models.ErrorCodeOf(err) != models.CodeConflict ||
		!strings.Contains(err.Error(), "MAX_RETRIES") {
		t.Fatalf("retry over limit: %v", err)
	}
	storetest.Apply(t, s, id, models.EventMaxRetries)
	if _, err := s.ApplyEvent(ctx, models.TransitionRequest{TaskID: "no-such", Event: models.EventAdminSkip}); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("missing task: %v", err)
	}
	if _, err := s.ApplyEvent(ctx, models.TransitionRequest{TaskID: id, Event: "FINISH"}); models.ErrorCodeOf(err) != models.CodeInvalid {
		t.Fatalf("unknown event: %v", err)
	}
	if _, err := s.ApplyEvent(ctx, models.TransitionRequest{TaskID: id, Event: models.EventAdminRestart, ExpectFrom: models.StatusFailed}); models.ErrorCodeOf(err) != models.CodeConflict {
		t.Fatalf("stale expect_from: %v", err)
	}
}

func TestRacingTransitionsExactlyOneWins(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "aq.db")
	s1 := storetest.OpenAt(t, path)
	s2 := storetest.OpenAt(t, path) // a second connection pool: the race reaches SQLite itself
	storetest.Project(t, s1, "p")
	for round := 0; round < 20; round++ {
		id := storetest.Tasks(t, s1, "p", models.BatchTask{LocalID: "a", Title: "A"})["a"]
		storetest.Apply(t, s1, id, models.EventAssigned, models.EventAgentStarted)
		events := []models.TaskEvent{models.EventAgentCompleted, models.EventAgentFailed}
		errs := make([]error, 2)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, st := range []*store.Store{s1, s2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = st.ApplyEvent(context.Background(), models.TransitionRequest{TaskID: id, Event: events[i], ExpectFrom: models.StatusInProgress})
			}()
		}
		close(start)
		wg.Wait()
		wins := 0
		for _, err := range errs {
			if err == nil {
				wins++
			} else if models.ErrorCodeOf(err) != models.CodeConflict {
				t.Fatalf("loser got %v, want a conflict", err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d winners (%v)", round, wins, errs)
		}
		d, _ := s1.GetTaskDetail(context.Background(), id)
		if len(d.Events) != 4 {
			t.Fatalf("round %d: %d events, want 4", round, len(d.Events))
		}
	}
}

func TestReopenFindsEveryCommittedChange(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "aq.db")
	s := storetest.OpenAt(t, path)
	storetest.Project(t, s, "p")
	ids := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "a", Title: "A"}, models.BatchTask{LocalID: "b", Title: "B", Dependencies: storetest.Deps("a")})
	storetest.Apply(t, s, ids["a"], storetest.ToCompleted...)
	if _, err := s.RegisterAgent(context.Background(), models.Agent{ID: "a1", AgentType: "command", AgentSettings: models.AgentSettings{Command: "true"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordTokenUsage(context.Background(), models.TokenUsage{ProjectID: "p", Input: 10, Output: 5}); err != nil {
		t.Fatal(err)
	}
	before, _ := s.GetTaskDetail(context.Background(), ids["b"])
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := storetest.OpenAt(t, path)
	after, err := s2.GetTaskDetail(context.Background(), ids["b"])
	if err != nil || after.Task.Status != models.StatusReady || len(after.Events) != len(before.Events) ||
		after.Dependencies[0].Resolution != models.EdgeSatisfied {
		t.Fatalf("after reopen: %+v %v", after, err)
	}
	a, _ := s2.GetTaskDetail(context.Background(), ids["a"])
	if a.Task.Status != models.StatusCompleted || len(a.Events) != 5 {
		t.Fatalf("a after reopen: %+v", a)
	}
	agents, _ := s2.ListAgents(context.Background())
	p, _ := s2.GetProject(context.Background(), "p")
	if len(agents) != 1 || p.TotalTokensUsed != 15 {
		t.Fatalf("agents %v, tokens %d", agents, p.TotalTokensUsed)
	}
}

func TestLease(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := storetest.Open(t, storetest.WithClock(clock))
	ctx := context.Background()
	first := models.LeaseHolder{Owner: "one", Hostname: "other-host", PID: 4242}
	if err := s.AcquireLease(ctx, first, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	err := s.AcquireLease(ctx, models.LeaseHolder{Owner: "two", Hostname: "h", PID: 1}, 30*time.Second)
	if models.ErrorCodeOf(err) != models.CodeConflict || !strings.Contains(err.Error(), "owner one, host other-host, pid 4242") {
		t.Fatalf("second daemon: %v", err)
	}
	if err := s.RenewLease(ctx, "one", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.RenewLease(ctx, "two", 30*time.Second); models.ErrorCodeOf(err) != models.CodeConflict {
		t.Fatalf("renew by non-holder: %v", err)
	}
	clock.Advance(31 * time.Second)
	if err := s.AcquireLease(ctx, models.LeaseHolder{Owner: "two", Hostname: "h", PID: 1}, 30*time.Second); err != nil {
		t.Fatalf("expired lease not taken over: %v", err)
	}
	if err := s.RenewLease(ctx, "one", 30*time.Second); models.ErrorCodeOf(err) != models.CodeConflict {
		t.Fatalf("old owner renewed a lost lease: %v", err)
	}
	if err := s.ReleaseLease(ctx, "two"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LeaseHolder(ctx); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("released lease still held: %v", err)
	}
}

func TestLeaseOfCrashedProcessOnSameHostIsTakenOver(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := context.Background()
	// A pid that cannot exist: the holder is gone.
	if err := s.AcquireLease(ctx, models.LeaseHolder{Owner: "dead", Hostname: "h", PID: 1 << 30}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.AcquireLease(ctx, models.LeaseHolder{Owner: "new", Hostname: "h", PID: 2}, time.Hour); err != nil {
		t.Fatalf("crashed holder not replaced: %v", err)
	}
	h, _ := s.LeaseHolder(ctx)
	if h.Owner != "new" {
		t.Fatalf("holder %+v", h)
	}
}

func TestLeaseWithSameHostAndPIDIsNotTaken(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := context.Background()
	// Two containers given one hostname both run as pid 1: the holder may
	// be alive, so the newcomer waits for expiry.
	if err := s.AcquireLease(ctx, models.LeaseHolder{Owner: "first", Hostname: "box", PID: 1}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.AcquireLease(ctx, models.LeaseHolder{Owner: "second", Hostname: "box", PID: 1}, time.Hour); models.ErrorCodeOf(err) != models.CodeConflict {
		t.Fatalf("a possibly live lease was taken: %v", err)
	}
}

func TestTokenLedgerIsAppendOnly(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	ctx := context.Background()
	if err := s.RecordTokenUsage(ctx, models.TokenUsage{ProjectID: "p", Input: 3, Output: 4, CacheRead: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordTokenUsage(ctx, models.TokenUsage{ProjectID: "ghost", Input: 1}); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("unknown project: %v", err)
	}
	if err := s.RecordTokenUsage(ctx, models.TokenUsage{ProjectID: "p", Input: -1}); models.ErrorCodeOf(err) != models.CodeInvalid {
		t.Fatalf("negative usage: %v", err)
	}
	n, err := s.TokensUsedSince(ctx, "p", time.Time{})
	if err != nil || n != 8 {
		t.Fatalf("sum %d %v", n, err)
	}
	if err := store.ExecForTest(s, "UPDATE token_ledger SET input_tokens = 0"); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("ledger update allowed: %v", err)
	}
	if err := store.ExecForTest(s, "DELETE FROM token_ledger"); err == nil {
		t.Fatal("ledger delete allowed")
	}
}

func TestMigrationsAreRecordedOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "aq.db")
	first := storetest.OpenAt(t, path)
	before, err := store.CountForTest(first, "SELECT count(*) FROM schema_migrations")
	if err != nil || before < 2 {
		t.Fatalf("%d migrations recorded: %v", before, err)
	}
	first.Close()
	after, err := store.CountForTest(storetest.OpenAt(t, path), "SELECT count(*) FROM schema_migrations")
	if err != nil || after != before {
		t.Fatalf("reopening changed the recorded migrations from %d to %d: %v", before, after, err)
	}
}

func TestListTasksFilters(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	storetest.Project(t, s, "q")
	storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "a", Title: "A"}, models.BatchTask{LocalID: "b", Title: "B", Dependencies: storetest.Deps("a")})
	storetest.Tasks(t, s, "q", models.BatchTask{Title: "C"})
	if _, err := s.CreateTasks(context.Background(), models.TaskBatch{ProjectID: "q", CreatedBy: "ana",
		Tasks: []models.BatchTask{{Title: "D", Kind: "upgrade"}, {Title: "E"}}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		f    models.TaskFilter
		want []string
	}{
		{"project and status", models.TaskFilter{ProjectID: "p", Statuses: []models.TaskStatus{models.StatusReady}}, []string{"A"}},
		{"kind", models.TaskFilter{Kind: "upgrade"}, []string{"D"}},
		{"creator", models.TaskFilter{CreatedBy: "ana"}, []string{"D", "E"}},
		{"creator and project", models.TaskFilter{CreatedBy: "ana", ProjectID: "p"}, nil},
	} {
		got, err := s.ListTasks(ctx, tc.f)
		var titles []string
		for _, t := range got {
			titles = append(titles, t.Title)
		}
		if err != nil || !slices.Equal(titles, tc.want) {
			t.Errorf("%s: %v, %v; want %v", tc.name, titles, err, tc.want)
		}
	}
	page1, _ := s.ListTasks(ctx, models.TaskFilter{Limit: 2, ProjectID: "p"})
	page2, _ := s.ListTasks(ctx, models.TaskFilter{Limit: 2, AfterID: page1[1].ID})
	if len(page1) != 2 || len(page2) != 2 || page2[0].Title != "C" {
		t.Fatalf("paging: %d %d", len(page1), len(page2))
	}
	if _, err := s.ListTasks(ctx, models.TaskFilter{AfterID: "no-such-task"}); models.ErrorCodeOf(err) != models.CodeInvalid {
		t.Fatalf("paging after an unknown task: %v", err)
	}
	if _, err := s.ListTasks(ctx, models.TaskFilter{Statuses: []models.TaskStatus{"DONE"}}); models.ErrorCodeOf(err) != models.CodeInvalid {
		t.Fatalf("unknown status: %v", err)
	}
	if _, err := s.GetTask(ctx, "missing-task"); !errors.As(err, new(*models.Error)) {
		t.Fatalf("missing task: %v", err)
	}
}

func TestDedupeInsideOneBatch(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	strategy := []models.DedupeStrategy{{Fields: []string{"pkg"}}}
	res, err := s.CreateTasks(context.Background(), models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{
		{LocalID: "a", Title: "upgrade", Kind: "upgrade", Metadata: map[string]string{"pkg": "x"}, DedupeStrategy: strategy},
		{LocalID: "b", Title: "upgrade again", Kind: "upgrade", Metadata: map[string]string{"pkg": "x"}, DedupeStrategy: strategy},
		{LocalID: "c", Title: "after both", Dependencies: storetest.Deps("a", "b")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Skipped || !res[1].Skipped || res[1].TaskID != res[0].TaskID || res[1].LocalID != "b" {
		t.Fatalf("results %+v", res)
	}
	d, _ := s.GetTaskDetail(context.Background(), res[2].TaskID)
	if len(d.Dependencies) != 1 || d.Dependencies[0].Upstream != res[0].TaskID {
		t.Fatalf("edges to the same task were not merged: %+v", d.Dependencies)
	}
	all, _ := s.ListTasks(context.Background(), models.TaskFilter{ProjectID: "p"})
	if len(all) != 2 {
		t.Fatalf("%d tasks created, want 2", len(all))
	}
}

// TestContextCancelledInsideTransaction cancels the caller's context right
// after BEGIN (the store reads its clock there): the call must fail cleanly,
// write nothing, and leave the writer usable.
// cancellingClock is the real clock that calls onNow at each read.
type cancellingClock struct {
	clock.Real
	onNow func()
}

func (c cancellingClock) Now() time.Time { c.onNow(); return c.Real.Now() }

func TestContextCancelledInsideTransaction(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	var armed bool
	var mu sync.Mutex
	clock := cancellingClock{onNow: func() {
		mu.Lock()
		defer mu.Unlock()
		if armed {
			cancel()
		}
	}}
	s := storetest.Open(t, storetest.WithClock(clock))
	storetest.Project(t, s, "p")
	id := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "a", Title: "A"})["a"]
	mu.Lock()
	armed = true
	mu.Unlock()
	if _, err := s.ApplyEvent(ctx, models.TransitionRequest{TaskID: id, Event: models.EventAssigned, AgentID: "a1"}); err == nil {
		t.Fatal("a cancelled transition succeeded")
	}
	if _, err := s.CreateTasks(ctx, models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{{Title: "B"}}}); err == nil {
		t.Fatal("a cancelled batch succeeded")
	}
	mu.Lock()
	armed = false
	mu.Unlock()
	if got := storetest.Status(t, s, id); got != models.StatusReady {
		t.Fatalf("status %s after a cancelled transition", got)
	}
	storetest.Apply(t, s, id, models.EventAssigned) // the writer is still usable
}

func TestRestartedUpstreamDecidesAgainForDependentsNotStarted(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	ids := storetest.Tasks(t, s, "p",
		models.BatchTask{LocalID: "a", Title: "A"},
		models.BatchTask{LocalID: "c", Title: "C"},
		models.BatchTask{LocalID: "b", Title: "B", Dependencies: storetest.Deps("a", "c")},
		models.BatchTask{LocalID: "started", Title: "started", Dependencies: storetest.Deps("a")},
	)
	storetest.Apply(t, s, ids["a"], storetest.ToCompleted...)
	storetest.Apply(t, s, ids["started"], models.EventAssigned) // already running on a's first result
	storetest.Apply(t, s, ids["a"], models.EventAdminRestart)
	d, _ := s.GetTaskDetail(context.Background(), ids["b"])
	i := slices.IndexFunc(d.Dependencies, func(e models.Dependency) bool { return e.Upstream == ids["a"] })
	if i < 0 || d.Dependencies[i].Resolution != models.EdgePending {
		t.Fatalf("b's edges after a's restart: %+v; want the edge to a PENDING", d.Dependencies)
	}
	res := storetest.Apply(t, s, ids["a"], storetest.ToBlocked...)
	if !slices.Equal(res.Blocked, []string{ids["b"]}) {
		t.Fatalf("the re-run's failure must block b: %+v", res)
	}
	storetest.Apply(t, s, ids["c"], storetest.ToCompleted...)
	storetest.WantStatuses(t, s, map[string]models.TaskStatus{ids["b"]: models.StatusBlocked, ids["started"]: models.StatusAssigned})
	ds, _ := s.GetTaskDetail(context.Background(), ids["started"])
	if ds.Dependencies[0].Resolution != models.EdgeSatisfied {
		t.Fatalf("a dependent that had started lost its satisfied edge: %+v", ds.Dependencies[0])
	}
}

func TestPartialRepairNamesTheRemainingRoot(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	ids := storetest.Tasks(t, s, "p",
		models.BatchTask{LocalID: "r1", Title: "r1"},
		models.BatchTask{LocalID: "r2", Title: "r2"},
		models.BatchTask{LocalID: "c", Title: "c", Dependencies: storetest.Deps("r1", "r2")},
		models.BatchTask{LocalID: "d", Title: "d", Dependencies: storetest.Deps("c")},
	)
	storetest.Apply(t, s, ids["r1"], storetest.ToBlocked...)
	storetest.Apply(t, s, ids["r2"], storetest.ToBlocked...)
	storetest.Apply(t, s, ids["r1"], models.EventAdminRestart)
	for _, id := range []string{ids["c"], ids["d"]} {
		task, _ := s.GetTask(context.Background(), id)
		if task.Status != models.StatusBlocked || task.CascadeRootID != ids["r2"] || !strings.Contains(task.StatusReason, ids["r2"]) {
			t.Fatalf("task %s after r1's repair: root %q, reason %q; want root %s", id, task.CascadeRootID, task.StatusReason, ids["r2"])
		}
	}
	res := storetest.Apply(t, s, ids["r2"], models.EventAdminSkip)
	if !slices.Equal(res.Reopened, []string{ids["c"], ids["d"]}) {
		t.Fatalf("reopened %v", res.Reopened)
	}
}

func TestDedupeInsideOneBatchHonoursStatus(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	blocked := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "x", Title: "x"})["x"]
	storetest.Apply(t, s, blocked, storetest.ToBlocked...)
	tests := []struct {
		name     string
		first    models.BatchTask // the earlier entry
		status   string
		wantSkip bool
	}{
		{"READY entry, READY strategy", models.BatchTask{Title: "a", Kind: "k"}, "READY", true},
		{"DEFINED entry, READY strategy", models.BatchTask{Title: "a", Kind: "k", Dependencies: storetest.Deps("other")}, "READY", false},
		{"DEFINED entry, Pending strategy", models.BatchTask{Title: "a", Kind: "k", Dependencies: storetest.Deps("other")}, "Pending", true},
		{"BLOCKED entry, Pending strategy", models.BatchTask{Title: "a", Kind: "k", Dependencies: storetest.Deps(blocked)}, "Pending", false},
		{"BLOCKED entry, Finished strategy", models.BatchTask{Title: "a", Kind: "k", Dependencies: storetest.Deps(blocked)}, "Finished", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			meta := map[string]string{"pkg": tc.name} // no match with other cases' tasks
			tc.first.Metadata = meta
			res, err := s.CreateTasks(context.Background(), models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{
				{LocalID: "other", Title: "other"},
				tc.first,
				{Title: "b", Kind: "k", Metadata: meta, DedupeStrategy: []models.DedupeStrategy{{Status: tc.status, Fields: []string{"pkg"}}}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			if res[2].Skipped != tc.wantSkip || (tc.wantSkip && res[2].TaskID != res[1].TaskID) {
				t.Fatalf("first %s, second %+v; want skipped=%v", res[1].Status, res[2], tc.wantSkip)
			}
		})
	}
	_, err := s.CreateTasks(context.Background(), models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{{Title: "a", DedupeStrategy: []models.DedupeStrategy{{}}}}})
	if models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), "kind or fields") {
		t.Fatalf("empty strategy: %v", err)
	}
}
