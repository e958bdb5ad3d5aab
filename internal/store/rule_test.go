package store_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
	"github.com/agentqueued/agentqueued/internal/workflow"
)

// rule decodes a rule the way the API and the configuration do.
func rule(t testing.TB, js string) models.Rule {
	t.Helper()
	var r models.Rule
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatalf("rule %s: %v", js, err)
	}
	return r
}

const capacity100 = `{"id": "ingest-cap", "type": "Capacity", "matcher": {"kind": "ingest", "status": "Running"}, "max_capacity": 100}`

func TestRulesPersistAcrossRestartsAndFollowTheConfigUntilSetThroughTheAPI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "aq.db")
	conc := rule(t, `{"id": "one-deploy", "type": "Concurency", "matcher": {"kind": "deploy"}, "max_concurency": 1}`)
	capRule := rule(t, capacity100)

	s := storetest.OpenAt(t, path)
	if rs, err := s.InitRules(ctx, nil); err != nil || len(rs.Rules) != 0 || rs.Source != "" {
		t.Fatalf("fresh store: %+v, %v", rs, err)
	}
	// The configuration's rules seed the set and are followed while it is theirs.
	if rs, err := s.InitRules(ctx, []models.Rule{conc}); err != nil || rs.Source != models.RulesFromConfig || len(rs.Rules) != 1 {
		t.Fatalf("seeded from the configuration: %+v, %v", rs, err)
	}
	if got := s.CurrentRules(); len(got) != 1 || got[0].ID != "one-deploy" || got[0].Type != models.RuleConcurrency {
		t.Fatalf("current rules %+v", got)
	}
	if rs, err := s.InitRules(ctx, []models.Rule{conc, capRule}); err != nil || len(rs.Rules) != 2 {
		t.Fatalf("the configuration changed: %+v, %v", rs, err)
	}

	// Set through the API: kept across a restart, whatever the file says.
	rs, err := s.ReplaceRules(ctx, []models.Rule{capRule}, "ops")
	if err != nil || rs.Source != models.RulesFromAPI || rs.UpdatedBy != "ops" || len(rs.Rules) != 1 {
		t.Fatalf("replace: %+v, %v", rs, err)
	}
	s.Close()
	s = storetest.OpenAt(t, path)
	if got := s.CurrentRules(); got != nil {
		t.Fatalf("rules in memory before InitRules: %+v", got)
	}
	rs, err = s.InitRules(ctx, []models.Rule{conc})
	if err != nil || rs.Source != models.RulesFromAPI || len(rs.Rules) != 1 || rs.Rules[0].ID != "ingest-cap" {
		t.Fatalf("after a restart: %+v, %v", rs, err)
	}
	got, err := s.Rules(ctx)
	if err != nil || len(got.Rules) != 1 || got.Rules[0].MaxCapacity != 100 || got.UpdatedBy != "ops" || got.UpdatedAt == nil {
		t.Fatalf("Rules: %+v, %v", got, err)
	}
	// An empty set is a set too: it stays empty.
	if _, err := s.ReplaceRules(ctx, nil, "ops"); err != nil {
		t.Fatal(err)
	}
	if rs, err := s.InitRules(ctx, []models.Rule{conc}); err != nil || len(rs.Rules) != 0 {
		t.Fatalf("emptied through the API, then restarted: %+v, %v", rs, err)
	}
}

func TestReplaceRulesIsValidatedAndAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	keep := rule(t, `{"id": "keep", "type": "Concurrency", "matcher": {"kind": "deploy"}, "max_concurrency": 1}`)
	if _, err := s.ReplaceRules(ctx, []models.Rule{keep}, "ops"); err != nil {
		t.Fatal(err)
	}
	ids := storetest.Tasks(t, s, "p",
		models.BatchTask{LocalID: "big", Title: "big", Kind: "crawl", ExpectedCount: 500},
		models.BatchTask{LocalID: "none", Title: "none", Kind: "index"})
	for _, tc := range []struct {
		name  string
		rules []string
		code  models.ErrorCode
		want  []string
	}{
		{"invalid rule named with its id", []string{capacity100, `{"id": "x", "type": "Capacity", "matcher": {"kind": "k"}}`},
			models.CodeInvalid, []string{"rules[1] (x)", "max_capacity: must be at least 1"}},
		{"an id twice", []string{capacity100, capacity100}, models.CodeInvalid, []string{"rules[1] (ingest-cap)", "already used by rules[0]"}},
		{"a waiting task larger than the capacity", []string{`{"type": "Capacity", "matcher": {"kind": "crawl"}, "max_capacity": 100}`},
			models.CodeConflict, []string{"rules[0]", "max_capacity 100", ids["big"] + " (expected_count 500)"}},
		{"a waiting task without expected_count", []string{`{"type": "Capacity", "project_id": "p", "matcher": {"kind": "index"}, "max_capacity": 10}`},
			models.CodeConflict, []string{ids["none"] + " (no expected_count)"}},
		{"a project that does not exist", []string{capacity100, `{"type": "Concurrency", "project_id": "ghost", "matcher": {"kind": "deploy"}, "max_concurrency": 1}`},
			models.CodeInvalid, []string{"rules[1].project_id", `no project "ghost" exists`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rules []models.Rule
			for _, js := range tc.rules {
				rules = append(rules, rule(t, js))
			}
			_, err := s.ReplaceRules(ctx, rules, "ops")
			if models.ErrorCodeOf(err) != tc.code {
				t.Fatalf("err = %v, want code %s", err, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, want it to name %q", err, w)
				}
			}
			rs, err := s.Rules(ctx)
			if err != nil || len(rs.Rules) != 1 || rs.Rules[0].ID != "keep" {
				t.Fatalf("a refused set changed the rules: %+v, %v", rs, err)
			}
			if got := s.CurrentRules(); len(got) != 1 || got[0].ID != "keep" {
				t.Fatalf("a refused set changed the rules in memory: %+v", got)
			}
		})
	}
}

func TestTasksUnderACapacityRuleMustFitIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	storetest.Project(t, s, "q")
	if _, err := s.ReplaceRules(ctx, []models.Rule{rule(t, capacity100),
		rule(t, `{"id": "q-only", "type": "Capacity", "project_id": "q", "matcher": {"fields": ["source"]}, "max_capacity": 10}`)}, "ops"); err != nil {
		t.Fatal(err)
	}
	ownCap := rule(t, `{"type": "Capacity", "matcher": {"kind": "other", "status": "Running"}, "max_capacity": 20}`)
	for _, tc := range []struct {
		name    string
		project string
		tasks   []models.BatchTask
		want    []string // empty: created
	}{
		{"no expected_count", "p", []models.BatchTask{{Title: "a", Kind: "ingest"}},
			[]string{"tasks[0]", "expected_count: required", "rules[0] (ingest-cap)", "max_capacity 100"}},
		{"larger than the capacity", "p", []models.BatchTask{{Title: "a", Kind: "ingest", ExpectedCount: 150}},
			[]string{"tasks[0]", "expected_count: 150 exceeds max_capacity 100", "rules[0] (ingest-cap)"}},
		{"one bad entry refuses the batch", "p", []models.BatchTask{
			{LocalID: "a", Title: "a", Kind: "ingest", ExpectedCount: 100},
			{LocalID: "b", Title: "b", Kind: "ingest", ExpectedCount: 101, Dependencies: storetest.Deps("a")}},
			[]string{"tasks[1] (b)", "101 exceeds max_capacity 100"}},
		{"a project-scoped rule matching on fields", "q", []models.BatchTask{{Title: "a", Kind: "anything", ExpectedCount: 11}},
			[]string{"11 exceeds max_capacity 10", "rules[1] (q-only)"}},
		{"the task's own Capacity rule", "p", []models.BatchTask{{Title: "a", Kind: "crawl", Rules: []models.Rule{ownCap}}},
			[]string{"rules[0]", "expected_count: required"}},
		{"own rule of another project", "p", []models.BatchTask{{Title: "a", Kind: "crawl", ExpectedCount: 5,
			Rules: []models.Rule{rule(t, `{"project_id": "q", "type": "Capacity", "matcher": {"kind": "crawl"}, "max_capacity": 20}`)}}},
			[]string{"project_id \"q\"", "its own project (p)"}},
		{"fits", "p", []models.BatchTask{{Title: "a", Kind: "ingest", ExpectedCount: 100}, {Title: "b", Kind: "crawl"}}, nil},
		{"a rule of another kind or project does not apply", "p", []models.BatchTask{{Title: "a", Kind: "anything"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, err := s.ListTasks(ctx, models.TaskFilter{ProjectID: tc.project})
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.CreateTasks(ctx, models.TaskBatch{ProjectID: tc.project, Tasks: tc.tasks})
			after, lerr := s.ListTasks(ctx, models.TaskFilter{ProjectID: tc.project})
			if lerr != nil {
				t.Fatal(lerr)
			}
			if len(tc.want) == 0 {
				if err != nil || len(after) != len(before)+len(tc.tasks) {
					t.Fatalf("err = %v; %d tasks before, %d after", err, len(before), len(after))
				}
				return
			}
			if models.ErrorCodeOf(err) != models.CodeInvalid {
				t.Fatalf("err = %v, want invalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, want it to name %q", err, w)
				}
			}
			if len(after) != len(before) {
				t.Fatalf("a refused batch created %d tasks", len(after)-len(before))
			}
		})
	}
}

func TestABatchEntryKeepsItsOwnRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	// The seed's batch format: an array of entries, each with its rules.
	ids := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "c", Title: "cluster", Kind: "clustering", ExpectedCount: 40,
		Metadata: map[string]string{"projectId": "7"},
		Rules: []models.Rule{
			rule(t, `{"type": "Concurency", "max_concurency": 1, "matcher": {"status": "Running", "kind": "clustering", "fields": ["projectId"]}}`),
			rule(t, `{"type": "Capacity", "max_capacity": 500, "matcher": {"status": "Running", "kind": "clustering", "fields": ["projectId"]}}`),
		}})
	task, err := s.GetTask(ctx, ids["c"])
	if err != nil {
		t.Fatal(err)
	}
	if len(task.Rules) != 2 || task.Rules[0].Type != models.RuleConcurrency || task.Rules[0].MaxConcurrency != 1 ||
		task.Rules[0].ProjectID != "p" || task.Rules[1].MaxCapacity != 500 || task.Rules[1].ProjectID != "p" {
		t.Fatalf("stored rules %+v", task.Rules)
	}
}

func TestProgressCountsAreStoredOnTheTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openClocked(t)
	storetest.Project(t, s, "p")
	storetest.Agent(t, s, "a1")
	ids := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "t", Title: "t", Kind: "ingest", ExpectedCount: 100},
		models.BatchTask{LocalID: "u", Title: "u"})
	run, _, err := s.ClaimTask(ctx, ids["t"], "a1")
	if err != nil {
		t.Fatal(err)
	}
	n := func(v int) *int { return &v }
	for _, tc := range []struct {
		name             string
		succeeded, fail  *int
		wantOK, wantFail int
		wantErr          string
	}{
		{"both", n(10), n(2), 10, 2, ""},
		{"cumulative, not added", n(30), nil, 30, 2, ""},
		{"the same again changes nothing", n(30), n(2), 30, 2, ""},
		{"failed only", nil, n(5), 30, 5, ""},
		{"beyond expected_count", n(96), nil, 30, 5, "96 + 5 = 101 exceeds the task's expected_count 100"},
		{"all of it", n(95), n(5), 95, 5, ""},
	} {
		task, err := s.SetTaskProgress(ctx, run.ID, tc.succeeded, tc.fail)
		if tc.wantErr != "" {
			if models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("%s: err = %v, want %q", tc.name, err, tc.wantErr)
			}
		} else if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		stored, err := s.GetTask(ctx, ids["t"])
		if err != nil {
			t.Fatal(err)
		}
		if stored.SuccessCount != tc.wantOK || stored.FailureCount != tc.wantFail {
			t.Fatalf("%s: stored %d/%d, want %d/%d", tc.name, stored.SuccessCount, stored.FailureCount, tc.wantOK, tc.wantFail)
		}
		if tc.wantErr == "" && (task.SuccessCount != tc.wantOK || task.FailureCount != tc.wantFail) {
			t.Fatalf("%s: answered %d/%d", tc.name, task.SuccessCount, task.FailureCount)
		}
	}
	if _, err := s.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventRecovery, ExpectFrom: models.StatusAssigned,
		Reason: "test", Outcome: "recovered"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetTaskProgress(ctx, run.ID, n(1), nil); models.ErrorCodeOf(err) != models.CodeConflict {
		t.Fatalf("counts for an ended run: %v", err)
	}
}

// ingestFlow discovers feeds and loads each, counting the rows of each
// feed as its load's expected_count.
const ingestFlow = `name: load
project: web
steps:
  - name: discover
    title: Find feeds
    kind: ingest
    expected_count: 1
  - name: load
    title: "Load {{item.url}}"
    kind: ingest
    depends_on: [discover]
    foreach: discover.outputs.feeds
    expected_count: "{{item.rows}}"
`

// A workflow's tasks are counted by the Capacity rules that apply to
// them: a step declares its tasks' expected_count, a fan-out's filled in
// for each task; a workflow whose step a rule applies to without one is
// refused when saved, and its run when started under a rule added since.
func TestAWorkflowsTasksAreCountedByCapacityRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("each task carries its count", func(t *testing.T) {
		t.Parallel()
		e := newWFEnv(t, ingestFlow)
		if _, err := e.s.ReplaceRules(ctx, []models.Rule{rule(t, capacity100)}, "ops"); err != nil {
			t.Fatal(err)
		}
		r := e.start("load")
		e.complete(e.tasks(r.ID)["discover"].ID, `{"feeds":[{"url":"a","rows":5},{"url":"b","rows":100}]}`)
		ts := e.tasks(r.ID)
		if got := e.names(r.ID); got != "discover=COMPLETED load[0]=READY load[1]=READY" {
			t.Fatalf("tasks after discovery: %s", got)
		}
		if ts["discover"].ExpectedCount != 1 || ts["load[0]"].ExpectedCount != 5 || ts["load[1]"].ExpectedCount != 100 {
			t.Errorf("expected counts: discover %d, load[0] %d, load[1] %d", ts["discover"].ExpectedCount,
				ts["load[0]"].ExpectedCount, ts["load[1]"].ExpectedCount)
		}
	})
	t.Run("a count beyond the rule stops the step", func(t *testing.T) {
		t.Parallel()
		e := newWFEnv(t, ingestFlow)
		if _, err := e.s.ReplaceRules(ctx, []models.Rule{rule(t, capacity100)}, "ops"); err != nil {
			t.Fatal(err)
		}
		r := e.start("load")
		e.complete(e.tasks(r.ID)["discover"].ID, `{"feeds":[{"url":"a","rows":5},{"url":"b","rows":500}]}`)
		ts := e.tasks(r.ID)
		want := "fan-out failed: load[1].expected_count: 500 exceeds max_capacity 100 of the Capacity rule rules[0] (ingest-cap)"
		if got := e.names(r.ID); got != "discover=COMPLETED load=BLOCKED" || !strings.HasPrefix(ts["load"].StatusReason, want) {
			t.Fatalf("tasks after discovery: %s, load's reason %q; want it stopped with %q", got, ts["load"].StatusReason, want)
		}
		if got := e.run(r.ID); got.Status != models.RunFailed {
			t.Errorf("run %s, want failed", got.Status)
		}
	})
	t.Run("a step without a count is refused", func(t *testing.T) {
		t.Parallel()
		bare := strings.ReplaceAll(ingestFlow, "    expected_count: \"{{item.rows}}\"\n", "")
		e := newWFEnv(t, bare) // saved before the rule
		if _, err := e.s.ReplaceRules(ctx, []models.Rule{rule(t, capacity100)}, "ops"); err != nil {
			t.Fatal(err)
		}
		const why = "steps[1] (load).expected_count: required: the Capacity rule rules[0] (ingest-cap) (max_capacity 100) applies to the step's tasks (project web, kind ingest)"
		_, _, err := e.s.StartWorkflowRun(ctx, models.RunRequest{Workflow: "load", Trigger: models.TriggerByHand, TriggeredBy: "t", FireKey: "k"})
		if models.ErrorCodeOf(err) != models.CodeConflict || !strings.Contains(err.Error(), why) ||
			!strings.Contains(err.Error(), "the rules in force refuse the tasks of workflow load") {
			t.Fatalf("run started under a rule its step breaks: %v", err)
		}
		if rs, err := e.s.ListWorkflowRuns(ctx, models.RunFilter{}); err != nil || len(rs) != 0 {
			t.Fatalf("a refused start left runs %v (%v)", rs, err)
		}
		w, err := workflow.Parse("flow.yaml", []byte(bare))
		if err != nil {
			t.Fatal(err)
		}
		w.Origin = models.WorkflowFromFile
		if _, err := e.s.SaveWorkflow(ctx, w); models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), why) {
			t.Fatalf("workflow saved under a rule its step breaks: %v", err)
		}
	})
}

// The configuration file's rules are taken as they are; waiting tasks a
// Capacity rule of the file could never start are logged, naming them.
func TestConfigRulesThatStrandWaitingTasksAreReported(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var logs strings.Builder
	s := storetest.Open(t, storetest.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	storetest.Project(t, s, "p")
	id := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "big", Title: "big", Kind: "ingest", ExpectedCount: 500})["big"]
	rs, err := s.InitRules(ctx, []models.Rule{rule(t, capacity100)})
	if err != nil || len(rs.Rules) != 1 {
		t.Fatalf("InitRules: %+v, %v", rs, err)
	}
	if !strings.Contains(logs.String(), "could never start") || !strings.Contains(logs.String(), id+" (expected_count 500)") {
		t.Fatalf("logs:\n%s", logs.String())
	}
}
