package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// statusPaths are the events that take a new READY task to each status.
var statusPaths = map[models.TaskStatus][]models.TaskEvent{
	models.StatusReady:            nil,
	models.StatusAssigned:         {models.EventAssigned},
	models.StatusInProgress:       {models.EventAssigned, models.EventAgentStarted},
	models.StatusWaitingInput:     {models.EventAssigned, models.EventAgentStarted, models.EventAgentQuestion},
	models.StatusPaused:           {models.EventAssigned, models.EventAgentStarted, models.EventTokensExhausted},
	models.StatusVerifying:        {models.EventAssigned, models.EventAgentStarted, models.EventAgentCompleted},
	models.StatusAwaitingApproval: {models.EventAssigned, models.EventAgentStarted, models.EventAgentCompleted, models.EventPRCreated},
	models.StatusCompleted:        storetest.ToCompleted,
	models.StatusFailed:           {models.EventAssigned, models.EventAgentStarted, models.EventAgentFailed},
	models.StatusBlocked:          storetest.ToBlocked,
}

// taskIn creates a task titled title in project p and takes it to want: a
// DEFINED task waits for a new upstream that has not finished.
func taskIn(t *testing.T, s *store.Store, p, title string, want models.TaskStatus) string {
	t.Helper()
	if want == models.StatusDefined {
		ids := storetest.Tasks(t, s, p, models.BatchTask{LocalID: "up", Title: title + " upstream"},
			models.BatchTask{LocalID: "t", Title: title, Dependencies: storetest.Deps("up")})
		return ids["t"]
	}
	id := storetest.Tasks(t, s, p, models.BatchTask{LocalID: "t", Title: title})["t"]
	storetest.Apply(t, s, id, statusPaths[want]...)
	if got := storetest.Status(t, s, id); got != want {
		t.Fatalf("task %s is %s, want %s", id, got, want)
	}
	return id
}

func ptr[T any](v T) *T { return &v }

// pausedWithOpenRun takes a new task of project p through a real claim and start on
// agent, then applies TOKENS_EXHAUSTED: the task is PAUSED while its run is
// still open (the process has not exited yet).
func pausedWithOpenRun(t *testing.T, s *store.Store, p, agent string) (taskID string, run models.Run) {
	t.Helper()
	ctx := context.Background()
	storetest.Agent(t, s, agent)
	taskID = storetest.Tasks(t, s, p, models.BatchTask{LocalID: "t", Title: "paused while its run ends"})["t"]
	run, _, err := s.ClaimTask(ctx, taskID, agent)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartRun(ctx, run.ID, 4242, "/work"); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(time.Hour)
	if _, err := s.ApplyEvent(ctx, models.TransitionRequest{TaskID: taskID, Event: models.EventTokensExhausted, ResumeAfter: &at}); err != nil {
		t.Fatal(err)
	}
	return taskID, run
}

func TestEditTaskByStatus(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	ctx := context.Background()
	tests := []struct {
		status models.TaskStatus
		ok     bool
	}{
		{models.StatusDefined, true},
		{models.StatusReady, true},
		{models.StatusPaused, true},
		{models.StatusFailed, true},
		{models.StatusBlocked, true},
		{models.StatusAssigned, false},
		{models.StatusInProgress, false},
		{models.StatusWaitingInput, false},
		{models.StatusVerifying, false},
		{models.StatusAwaitingApproval, false},
		{models.StatusCompleted, false},
	}
	for _, tc := range tests {
		t.Run(string(tc.status), func(t *testing.T) {
			t.Parallel()
			id := taskIn(t, s, "p", "edit when "+string(tc.status), tc.status)
			before, _ := s.GetTaskDetail(ctx, id)
			// The fields creation sets follow the same rule as the others.
			got, err := s.EditTask(ctx, id, models.TaskPatch{Title: ptr("renamed"), Priority: ptr(7), AgentType: ptr("codex"),
				Timeout: ptr(models.Duration(time.Hour)), ExpectedCount: ptr(3), Kind: ptr("edited"),
				Metadata: &map[string]string{"k": "v"}})
			after, _ := s.GetTaskDetail(ctx, id)
			if !tc.ok {
				if models.ErrorCodeOf(err) != models.CodeConflict || !strings.Contains(err.Error(), "is "+string(tc.status)) {
					t.Fatalf("edit of a %s task: %v; want a conflict naming the status", tc.status, err)
				}
				if after.Task.Title != before.Task.Title || after.Task.AgentType != "" || after.Task.Kind != "" ||
					!after.Task.UpdatedAt.Equal(before.Task.UpdatedAt) {
					t.Fatalf("a refused edit changed the task: %+v", after.Task)
				}
				return
			}
			if err != nil {
				t.Fatalf("edit of a %s task: %v", tc.status, err)
			}
			if got.Title != "renamed" || got.Priority != 7 || after.Task.Title != "renamed" || after.Task.Priority != 7 ||
				after.Task.AgentType != "codex" || after.Task.Timeout != models.Duration(time.Hour) || after.Task.ExpectedCount != 3 ||
				after.Task.Kind != "edited" || after.Task.Metadata["k"] != "v" || after.Task.Status != tc.status {
				t.Fatalf("after the edit: answered %+v, stored %+v", got, after.Task)
			}
			if len(after.Events) != len(before.Events) {
				t.Fatalf("an edit wrote events: %d → %d", len(before.Events), len(after.Events))
			}
		})
	}
}

func TestEditTaskFields(t *testing.T) {
	t.Parallel()
	s, clock := openClocked(t)
	ctx := context.Background()
	// A repository: the project's tasks may require approval.
	if _, err := s.CreateProject(ctx, models.Project{ID: "p", Repo: &models.RepoConfig{SourceType: models.RepoInit}}); err != nil {
		t.Fatal(err)
	}
	id := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "t", Title: "T", Description: "old", Kind: "k",
		AcceptanceCriteria: []string{"works"}, TestCommands: []string{"go test ./..."}, Metadata: map[string]string{"a": "b"}})["t"]
	created, _ := s.GetTask(ctx, id)
	clock.Advance(time.Minute)

	tests := []struct {
		name    string
		patch   models.TaskPatch
		check   func(models.Task) bool
		code    models.ErrorCode
		message string
	}{
		{"description and approval", models.TaskPatch{Description: ptr("new"), RequiresApproval: ptr(true)},
			func(t models.Task) bool { return t.Description == "new" && t.RequiresApproval }, "", ""},
		{"clear the lists", models.TaskPatch{AcceptanceCriteria: &[]string{}, TestCommands: &[]string{}},
			func(t models.Task) bool { return len(t.AcceptanceCriteria) == 0 && len(t.TestCommands) == 0 }, "", ""},
		{"replace the lists", models.TaskPatch{AcceptanceCriteria: &[]string{"a", "b"}, TestCommands: &[]string{"make"}},
			func(t models.Task) bool {
				return slices.Equal(t.AcceptanceCriteria, []string{"a", "b"}) && slices.Equal(t.TestCommands, []string{"make"})
			}, "", ""},
		{"verification and profile", models.TaskPatch{VerificationType: ptr(models.VerifyHuman), Profile: ptr("careful")},
			func(t models.Task) bool { return t.VerificationType == models.VerifyHuman && t.Profile == "careful" }, "", ""},
		{"clear the profile", models.TaskPatch{Profile: ptr("")}, func(t models.Task) bool { return t.Profile == "" }, "", ""},
		{"nothing", models.TaskPatch{}, nil, models.CodeInvalid, "nothing to change"},
		{"empty title", models.TaskPatch{Title: ptr("  ")}, nil, models.CodeInvalid, "title: required"},
		{"negative priority", models.TaskPatch{Priority: ptr(-1)}, nil, models.CodeInvalid, "priority"},
		{"unknown verification", models.TaskPatch{VerificationType: ptr(models.VerificationType("EYEBALL"))}, nil,
			models.CodeInvalid, "verification_type"},
		{"empty test command", models.TaskPatch{TestCommands: &[]string{"make", " "}}, nil, models.CodeInvalid, "test_commands[1]"},
		{"bad profile name", models.TaskPatch{Profile: ptr("No Such")}, nil, models.CodeInvalid, "profile"},
	}
	for _, tc := range tests {
		// Sequential: the cases edit one task in turn.
		got, err := s.EditTask(ctx, id, tc.patch)
		if tc.code != "" {
			if models.ErrorCodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("%s: %v; want %s containing %q", tc.name, err, tc.code, tc.message)
			}
			continue
		}
		stored, _ := s.GetTask(ctx, id)
		if err != nil || !tc.check(got) || !tc.check(stored) {
			t.Errorf("%s: answered %+v, stored %+v, %v", tc.name, got, stored, err)
		}
	}
	final, _ := s.GetTask(ctx, id)
	if !final.UpdatedAt.Equal(created.UpdatedAt.Add(time.Minute)) || !final.CreatedAt.Equal(created.CreatedAt) {
		t.Errorf("times after edits: created %v updated %v; want updated one minute after creation", final.CreatedAt, final.UpdatedAt)
	}
	if final.Title != "T" || final.Kind != "k" || final.Metadata["a"] != "b" || final.Status != models.StatusReady {
		t.Errorf("fields no patch named changed: %+v", final)
	}
	if _, err := s.EditTask(ctx, "no-such-task", models.TaskPatch{Title: ptr("x")}); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Errorf("edit of a missing task: %v", err)
	}
}

// TestEditTaskRouting edits the fields a task is created with that decide
// where and how it runs: agent_type, timeout, expected_count, kind and
// metadata, with the checks creation makes.
func TestEditTaskRouting(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	ctx := context.Background()
	if _, err := s.ReplaceRules(ctx, []models.Rule{
		rule(t, `{"id": "ingest-cap", "type": "Capacity", "matcher": {"kind": "ingest"}, "max_capacity": 12}`)}, "ops"); err != nil {
		t.Fatal(err)
	}
	ownCap := rule(t, `{"type": "Capacity", "matcher": {"kind": "crawl"}, "max_capacity": 20}`)
	// A task routed to a type no agent has, with a dependent: it waits, and
	// its dependent with it, until its type is changed.
	ids := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "t", Title: "typed", AgentType: "claude", Kind: "crawl",
		ExpectedCount: 10, Rules: []models.Rule{ownCap}, Metadata: map[string]string{"a": "b"}},
		models.BatchTask{LocalID: "d", Title: "dependent", Dependencies: storetest.Deps("t")})
	id := ids["t"]
	if _, err := s.SetWaiting(ctx, []models.WaitingUpdate{{ProjectID: "p", Scope: models.WaitTasks, TaskIDs: []string{id},
		Code: models.WaitingAgentType, Reason: "no agent of type claude works on project p"}}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		patch   models.TaskPatch
		check   func(models.Task) bool
		message string // a refusal (invalid) containing it
	}{
		{"another type", models.TaskPatch{AgentType: ptr("codex")},
			func(t models.Task) bool {
				return t.AgentType == "codex" && t.WaitingCode == "" && t.WaitingReason == ""
			}, ""},
		{"any agent", models.TaskPatch{AgentType: ptr("")}, func(t models.Task) bool { return t.AgentType == "" }, ""},
		{"a timeout", models.TaskPatch{Timeout: ptr(models.Duration(90 * time.Second))},
			func(t models.Task) bool { return t.Timeout == models.Duration(90*time.Second) }, ""},
		{"no timeout", models.TaskPatch{Timeout: ptr(models.Duration(0))}, func(t models.Task) bool { return t.Timeout == 0 }, ""},
		{"expected_count within the own rule", models.TaskPatch{ExpectedCount: ptr(20)},
			func(t models.Task) bool { return t.ExpectedCount == 20 }, ""},
		{"metadata replaced", models.TaskPatch{Metadata: &map[string]string{"x": "y"}},
			func(t models.Task) bool { return len(t.Metadata) == 1 && t.Metadata["x"] == "y" }, ""},
		{"metadata cleared", models.TaskPatch{Metadata: &map[string]string{}}, func(t models.Task) bool { return len(t.Metadata) == 0 }, ""},
		{"kind under the rule set's Capacity rule, count too large", models.TaskPatch{Kind: ptr("ingest")}, nil,
			"expected_count: 20 exceeds max_capacity 12 of the Capacity rule rules[0] (ingest-cap)"},
		{"kind under the rule set's Capacity rule, with a count that fits", models.TaskPatch{Kind: ptr("ingest"), ExpectedCount: ptr(12)},
			func(t models.Task) bool { return t.Kind == "ingest" && t.ExpectedCount == 12 }, ""},
		{"a count too large for the kind's rule", models.TaskPatch{ExpectedCount: ptr(13)}, nil, "13 exceeds max_capacity 12"},
		{"kind cleared", models.TaskPatch{Kind: ptr("")}, func(t models.Task) bool { return t.Kind == "" }, ""},
		{"unknown type", models.TaskPatch{AgentType: ptr("gpt")}, nil, `agent_type: "gpt" is not an agent type`},
		{"timeout too short", models.TaskPatch{Timeout: ptr(models.Duration(time.Millisecond))}, nil, "timeout: must be 0 (none) or between"},
		{"negative expected_count", models.TaskPatch{ExpectedCount: ptr(-1)}, nil, "expected_count: must not be negative"},
		{"expected_count over the own rule", models.TaskPatch{ExpectedCount: ptr(21)}, nil, "expected_count: 21 exceeds max_capacity 20"},
		{"no count left under the own rule", models.TaskPatch{ExpectedCount: ptr(0)}, nil, "expected_count: required"},
		{"empty metadata key", models.TaskPatch{Metadata: &map[string]string{"": "v"}}, nil, "metadata: a key must not be empty"},
		{"kind of two lines", models.TaskPatch{Kind: ptr("a\nb")}, nil, "kind"},
		{"runner labels", models.TaskPatch{RunnerLabels: &[]string{"gpu", "linux"}},
			func(t models.Task) bool { return slices.Equal(t.RunnerLabels, []string{"gpu", "linux"}) }, ""},
		{"a runner label twice", models.TaskPatch{RunnerLabels: &[]string{"gpu", "gpu"}}, nil,
			`runner_labels[1]: "gpu" is listed twice`},
		{"runner labels cleared", models.TaskPatch{RunnerLabels: &[]string{}},
			func(t models.Task) bool { return t.RunnerLabels == nil }, ""},
	}
	for _, tc := range tests {
		// Sequential: the cases edit one task in turn.
		before, _ := s.GetTask(ctx, id)
		got, err := s.EditTask(ctx, id, tc.patch)
		stored, _ := s.GetTask(ctx, id)
		if tc.message != "" {
			if models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("%s: %v; want invalid containing %q", tc.name, err, tc.message)
			}
			if stored.Kind != before.Kind || stored.ExpectedCount != before.ExpectedCount || stored.AgentType != before.AgentType {
				t.Errorf("%s: a refused edit changed the task: %+v", tc.name, stored)
			}
			continue
		}
		if err != nil || !tc.check(got) || !tc.check(stored) {
			t.Errorf("%s: answered %+v, stored %+v, %v", tc.name, got, stored, err)
		}
	}
	// The dependent is untouched and still waits for the task.
	if d, _ := s.GetTask(ctx, ids["d"]); d.Status != models.StatusDefined {
		t.Errorf("dependent is %s, want DEFINED", d.Status)
	}
}

func TestEditAndDeleteWaitForAnOpenRun(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	ctx := context.Background()
	id, run := pausedWithOpenRun(t, s, "p", "a1")
	want := fmt.Sprintf("run %d", run.ID)
	if _, err := s.EditTask(ctx, id, models.TaskPatch{Title: ptr("x")}); models.ErrorCodeOf(err) != models.CodeConflict ||
		!strings.Contains(err.Error(), want) {
		t.Fatalf("edit while the run is open: %v", err)
	}
	if err := s.DeleteTask(ctx, id); models.ErrorCodeOf(err) != models.CodeConflict || !strings.Contains(err.Error(), want) {
		t.Fatalf("delete while the run is open: %v", err)
	}
	if err := s.RemoveAgent(ctx, "a1"); models.ErrorCodeOf(err) != models.CodeConflict || !strings.Contains(err.Error(), "a1 is BUSY") {
		t.Fatalf("removing the agent of an open run: %v", err)
	}
	if _, err := s.FinishRun(ctx, models.RunEnd{RunID: run.ID, Outcome: "paused"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EditTask(ctx, id, models.TaskPatch{Title: ptr("x")}); err != nil {
		t.Fatalf("edit after the run ended: %v", err)
	}
	if err := s.DeleteTask(ctx, id); err != nil {
		t.Fatalf("delete after the run ended: %v", err)
	}
}

// depsEnv is a project with an upstream in each status a dependency can
// meet.
type depsEnv struct {
	s  *store.Store
	up map[models.TaskStatus]string
}

func newDepsEnv(t *testing.T) depsEnv {
	t.Helper()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	e := depsEnv{s: s, up: map[models.TaskStatus]string{}}
	for _, st := range []models.TaskStatus{models.StatusReady, models.StatusInProgress, models.StatusCompleted, models.StatusBlocked} {
		e.up[st] = taskIn(t, s, "p", "upstream "+string(st), st)
	}
	return e
}

func edgeOf(d []models.Dependency, up string) (models.Dependency, bool) {
	i := slices.IndexFunc(d, func(e models.Dependency) bool { return e.Upstream == up })
	if i < 0 {
		return models.Dependency{}, false
	}
	return d[i], true
}

func TestChangeDependenciesByStatus(t *testing.T) {
	t.Parallel()
	e := newDepsEnv(t)
	ctx := context.Background()
	tests := []struct {
		name   string
		status models.TaskStatus // of the task changed
		up     models.TaskStatus // of the upstream added
		soft   bool              // requires_success false
		want   models.TaskStatus // status after the change
		code   models.ErrorCode  // else the refusal
		msg    string
	}{
		{"DEFINED waits for a new pending upstream", models.StatusDefined, models.StatusInProgress, false,
			models.StatusDefined, "", ""},
		{"DEFINED is blocked by a required BLOCKED upstream", models.StatusDefined, models.StatusBlocked, false,
			models.StatusBlocked, "", ""},
		{"READY takes a COMPLETED upstream", models.StatusReady, models.StatusCompleted, false,
			models.StatusReady, "", ""},
		{"READY takes a BLOCKED upstream it does not need to succeed", models.StatusReady, models.StatusBlocked, true,
			models.StatusReady, "", ""},
		{"READY waits again for a pending upstream", models.StatusReady, models.StatusReady, false,
			models.StatusDefined, "", ""},
		{"READY is blocked by a required BLOCKED upstream", models.StatusReady, models.StatusBlocked, false,
			models.StatusBlocked, "", ""},
		{"PAUSED refuses a pending upstream", models.StatusPaused, models.StatusInProgress, false,
			"", models.CodeConflict, "no transition returns a PAUSED task to DEFINED"},
		{"FAILED takes a COMPLETED upstream", models.StatusFailed, models.StatusCompleted, false,
			models.StatusFailed, "", ""},
		{"a task BLOCKED by its own failure refuses a pending upstream", models.StatusBlocked, models.StatusReady, false,
			"", models.CodeConflict, "only a DEFINED or READY task can wait"},
		{"IN_PROGRESS keeps its dependencies", models.StatusInProgress, models.StatusCompleted, false,
			"", models.CodeConflict, "has started or finished"},
		{"AWAITING_APPROVAL keeps its dependencies", models.StatusAwaitingApproval, models.StatusCompleted, false,
			"", models.CodeConflict, "has started or finished"},
		{"COMPLETED keeps its dependencies", models.StatusCompleted, models.StatusCompleted, false,
			"", models.CodeConflict, "is COMPLETED"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id := taskIn(t, e.s, "p", tc.name, tc.status)
			up := models.BatchDependency{ID: e.up[tc.up]}
			if tc.soft {
				up.RequiresSuccess = ptr(false)
			}
			before := mustDetail(t, e.s, id)
			res, err := e.s.ChangeDependencies(ctx, id, models.DependencyChange{Add: []models.BatchDependency{up}})
			after := mustDetail(t, e.s, id)
			if tc.code != "" {
				if models.ErrorCodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("%v; want %s containing %q", err, tc.code, tc.msg)
				}
				if len(after.Dependencies) != len(before.Dependencies) || after.Task.Status != before.Task.Status {
					t.Fatalf("a refused change was written: %+v", after)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Task.Status != tc.want || after.Task.Status != tc.want {
				t.Fatalf("status answered %s, stored %s; want %s", res.Task.Status, after.Task.Status, tc.want)
			}
			if _, ok := edgeOf(after.Dependencies, up.ID); !ok || !slices.Equal(res.Added, []string{up.ID}) ||
				len(res.Dependencies) != len(after.Dependencies) {
				t.Fatalf("edges %+v, answer %+v", after.Dependencies, res)
			}
		})
	}
}

// A READY task given a dependency that is not met returns to DEFINED
// through the table (DEPS_ADDED, with its event row) and is promoted again
// by its new upstream's completion, as any waiting task is.
func TestAReadyTaskWaitsForANewDependency(t *testing.T) {
	t.Parallel()
	e := newDepsEnv(t)
	ctx := context.Background()
	ids := storetest.Tasks(t, e.s, "p",
		models.BatchTask{LocalID: "up", Title: "new upstream"},
		models.BatchTask{LocalID: "t", Title: "ready task"},
	)
	storetest.WantStatuses(t, e.s, map[string]models.TaskStatus{ids["t"]: models.StatusReady})
	res, err := e.s.ChangeDependencies(ctx, ids["t"], models.DependencyChange{Add: storetest.Deps(ids["up"])})
	if err != nil {
		t.Fatal(err)
	}
	if res.Task.Status != models.StatusDefined || !slices.Equal(res.Added, []string{ids["up"]}) || len(res.Promoted) != 0 {
		t.Fatalf("answer %+v; want the task DEFINED", res)
	}
	d := mustDetail(t, e.s, ids["t"])
	last := d.Events[len(d.Events)-1]
	if d.Task.Status != models.StatusDefined || last.Event != models.EventDepsAdded || last.From != models.StatusReady ||
		last.To != models.StatusDefined || !strings.Contains(last.Reason, ids["up"]) || !strings.Contains(d.Task.StatusReason, ids["up"]) {
		t.Fatalf("task %s (%q), last event %+v; want DEPS_ADDED from READY naming %s", d.Task.Status, d.Task.StatusReason, last, ids["up"])
	}
	// Adding the same edge again changes nothing.
	if res, err := e.s.ChangeDependencies(ctx, ids["t"], models.DependencyChange{Add: storetest.Deps(ids["up"])}); err != nil ||
		res.Task.Status != models.StatusDefined {
		t.Fatalf("repeated add: %+v, %v", res, err)
	}
	storetest.Apply(t, e.s, ids["up"], storetest.ToCompleted...)
	storetest.WantStatuses(t, e.s, map[string]models.TaskStatus{ids["t"]: models.StatusReady})
}

func TestRemovingTheLastUnmetDependencyPromotes(t *testing.T) {
	t.Parallel()
	e := newDepsEnv(t)
	ctx := context.Background()
	ids := storetest.Tasks(t, e.s, "p",
		models.BatchTask{LocalID: "pending", Title: "pending upstream"},
		models.BatchTask{LocalID: "t", Title: "waits", Dependencies: append(storetest.Deps("pending"), models.BatchDependency{ID: e.up[models.StatusCompleted]})},
	)
	res, err := e.s.ChangeDependencies(ctx, ids["t"], models.DependencyChange{Remove: []string{ids["pending"]}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Task.Status != models.StatusReady || !slices.Equal(res.Promoted, []string{ids["t"]}) ||
		!slices.Equal(res.Removed, []string{ids["pending"]}) || len(res.Dependencies) != 1 {
		t.Fatalf("answer %+v", res)
	}
	d, _ := e.s.GetTaskDetail(ctx, ids["t"])
	last := d.Events[len(d.Events)-1]
	if d.Task.Status != models.StatusReady || last.Event != models.EventDepsMet || last.From != models.StatusDefined ||
		last.Actor != "system" || last.Reason != "all dependencies satisfied" {
		t.Fatalf("promotion: %s, last event %+v; want the DEPS_MET row a completion writes", d.Task.Status, last)
	}
	// The removed upstream no longer names it as a dependent.
	if up, _ := e.s.GetTaskDetail(ctx, ids["pending"]); len(up.Dependents) != 0 {
		t.Fatalf("dependents of the removed upstream: %+v", up.Dependents)
	}
	// Repeating the removal: the edge is gone.
	if _, err := e.s.ChangeDependencies(ctx, ids["t"], models.DependencyChange{Remove: []string{ids["pending"]}}); models.ErrorCodeOf(err) != models.CodeNotFound ||
		!strings.Contains(err.Error(), "does not depend on") {
		t.Fatalf("removing a missing edge: %v", err)
	}
}

func TestAddingABlockedUpstreamCascades(t *testing.T) {
	t.Parallel()
	e := newDepsEnv(t)
	ctx := context.Background()
	ids := storetest.Tasks(t, e.s, "p",
		models.BatchTask{LocalID: "pending", Title: "pending upstream"},
		models.BatchTask{LocalID: "t", Title: "t", Dependencies: storetest.Deps("pending")},
		models.BatchTask{LocalID: "after", Title: "after t", Dependencies: storetest.Deps("t")},
	)
	blocked := e.up[models.StatusBlocked]
	res, err := e.s.ChangeDependencies(ctx, ids["t"], models.DependencyChange{Add: storetest.Deps(blocked)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Blocked, []string{ids["t"], ids["after"]}) || res.Task.Status != models.StatusBlocked {
		t.Fatalf("answer %+v", res)
	}
	for _, id := range []string{ids["t"], ids["after"]} {
		task, _ := e.s.GetTask(ctx, id)
		if task.Status != models.StatusBlocked || task.CascadeRootID != blocked || !strings.Contains(task.StatusReason, blocked) {
			t.Fatalf("task %s: %s, root %q, reason %q; want BLOCKED by %s", id, task.Status, task.CascadeRootID, task.StatusReason, blocked)
		}
	}
	n, err := store.CountForTest(e.s, "SELECT count(*) FROM outbox WHERE kind = 'chain.broken' AND key LIKE 'chain_broken:dependencies:%'")
	if err != nil || n != 1 {
		t.Fatalf("%d chain.broken notices, want 1: %v", n, err)
	}

	// Removing the broken edge repairs the chain: t and after return to
	// DEFINED, waiting for the pending upstream again.
	res, err = e.s.ChangeDependencies(ctx, ids["t"], models.DependencyChange{Remove: []string{blocked}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Reopened, []string{ids["t"], ids["after"]}) || res.Task.Status != models.StatusDefined {
		t.Fatalf("answer to the repair %+v", res)
	}
	storetest.WantStatuses(t, e.s, map[string]models.TaskStatus{ids["t"]: models.StatusDefined, ids["after"]: models.StatusDefined})
	storetest.Apply(t, e.s, ids["pending"], storetest.ToCompleted...)
	storetest.WantStatuses(t, e.s, map[string]models.TaskStatus{ids["t"]: models.StatusReady})
}

func TestCascadeBlockedTaskReopensWhenItsLastBrokenEdgeGoes(t *testing.T) {
	t.Parallel()
	e := newDepsEnv(t)
	ctx := context.Background()
	ids := storetest.Tasks(t, e.s, "p",
		models.BatchTask{LocalID: "root", Title: "root"},
		models.BatchTask{LocalID: "t", Title: "t", Dependencies: append(storetest.Deps("root"), models.BatchDependency{ID: e.up[models.StatusCompleted]})},
	)
	storetest.Apply(t, e.s, ids["root"], storetest.ToBlocked...)
	storetest.WantStatuses(t, e.s, map[string]models.TaskStatus{ids["t"]: models.StatusBlocked})
	// A cascade-blocked task may wait for a new pending upstream: it returns
	// to DEFINED when repaired.
	if _, err := e.s.ChangeDependencies(ctx, ids["t"], models.DependencyChange{Add: storetest.Deps(e.up[models.StatusReady])}); err != nil {
		t.Fatal(err)
	}
	storetest.WantStatuses(t, e.s, map[string]models.TaskStatus{ids["t"]: models.StatusBlocked})
	res, err := e.s.ChangeDependencies(ctx, ids["t"], models.DependencyChange{Remove: []string{ids["root"], e.up[models.StatusReady]}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Reopened, []string{ids["t"]}) || !slices.Equal(res.Promoted, []string{ids["t"]}) ||
		res.Task.Status != models.StatusReady || res.Task.CascadeRootID != "" {
		t.Fatalf("answer %+v; want t reopened and promoted", res)
	}
}

func TestChangeDependenciesRefusals(t *testing.T) {
	t.Parallel()
	e := newDepsEnv(t)
	ctx := context.Background()
	// c depends on b, b on a.
	ids := storetest.Tasks(t, e.s, "p",
		models.BatchTask{LocalID: "a", Title: "a", Dependencies: storetest.Deps(e.up[models.StatusInProgress])},
		models.BatchTask{LocalID: "b", Title: "b", Dependencies: storetest.Deps("a")},
		models.BatchTask{LocalID: "c", Title: "c", Dependencies: storetest.Deps("b")},
	)
	a, b, c := ids["a"], ids["b"], ids["c"]
	tests := []struct {
		name   string
		task   string
		change models.DependencyChange
		code   models.ErrorCode
		msg    string
	}{
		{"cycle", a, models.DependencyChange{Add: storetest.Deps(c)}, models.CodeInvalid,
			fmt.Sprintf("dependency cycle: %s -> %s -> %s -> %s", a, c, b, a)},
		{"cycle through a replaced edge", b, models.DependencyChange{Add: storetest.Deps(c), Remove: []string{a}}, models.CodeInvalid,
			fmt.Sprintf("dependency cycle: %s -> %s -> %s", b, c, b)},
		{"itself", a, models.DependencyChange{Add: storetest.Deps(a)}, models.CodeInvalid, "cannot depend on itself"},
		{"unknown upstream", a, models.DependencyChange{Add: storetest.Deps("no-such-task")}, models.CodeNotFound, `add[0]: task "no-such-task" not found`},
		{"edge that does not exist", a, models.DependencyChange{Remove: []string{c}}, models.CodeNotFound,
			fmt.Sprintf("remove[0]: task %s does not depend on %s", a, c)},
		{"unknown task", "no-such-task", models.DependencyChange{Add: storetest.Deps(a)}, models.CodeNotFound, `task "no-such-task" not found`},
		{"nothing", a, models.DependencyChange{}, models.CodeInvalid, "nothing to change"},
		{"listed twice", a, models.DependencyChange{Add: storetest.Deps(b, b)}, models.CodeInvalid, "already listed"},
		{"not a task id", a, models.DependencyChange{Remove: []string{"Not An ID"}}, models.CodeInvalid, "is not a task id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := e.s.ChangeDependencies(ctx, tc.task, tc.change)
			if models.ErrorCodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("%v; want %s containing %q", err, tc.code, tc.msg)
			}
		})
	}
	for id, want := range map[string][]string{a: {e.up[models.StatusInProgress]}, b: {a}, c: {b}} {
		d, _ := e.s.GetTaskDetail(ctx, id)
		var got []string
		for _, edge := range d.Dependencies {
			got = append(got, edge.Upstream)
		}
		if !slices.Equal(got, want) {
			t.Errorf("task %s depends on %v after refused changes, want %v", id, got, want)
		}
	}
}

func TestReplacingAnEdgeChangesRequiresSuccess(t *testing.T) {
	t.Parallel()
	e := newDepsEnv(t)
	ctx := context.Background()
	blocked := e.up[models.StatusBlocked]
	id := storetest.Tasks(t, e.s, "p", models.BatchTask{LocalID: "t", Title: "t",
		Dependencies: []models.BatchDependency{{ID: blocked, RequiresSuccess: ptr(false)}}})["t"]
	storetest.WantStatuses(t, e.s, map[string]models.TaskStatus{id: models.StatusReady})
	// The same edge again changes nothing.
	res, err := e.s.ChangeDependencies(ctx, id, models.DependencyChange{Add: []models.BatchDependency{{ID: blocked, RequiresSuccess: ptr(false)}}})
	if err != nil || len(res.Added) != 0 || len(res.Dependencies) != 1 {
		t.Fatalf("re-adding the same edge: %+v %v", res, err)
	}
	// Requiring success of a BLOCKED upstream: the READY task waits again
	// (DEPS_ADDED) and is blocked by the cascade at once.
	res, err = e.s.ChangeDependencies(ctx, id, models.DependencyChange{Add: storetest.Deps(blocked)})
	if err != nil || res.Task.Status != models.StatusBlocked || res.Task.CascadeRootID != blocked {
		t.Fatalf("requiring a BLOCKED upstream's success of a READY task: %+v %v", res.Task, err)
	}
	edge, _ := edgeOf(mustDetail(t, e.s, id).Dependencies, blocked)
	if !edge.RequiresSuccess || edge.Resolution != models.EdgeBroken {
		t.Fatalf("edge after the change: %+v", edge)
	}
	// Completed upstream: replace a soft edge by a hard one, listing it in
	// both lists.
	done := e.up[models.StatusCompleted]
	if _, err := e.s.ChangeDependencies(ctx, id, models.DependencyChange{Add: []models.BatchDependency{{ID: done, RequiresSuccess: ptr(false)}}}); err != nil {
		t.Fatal(err)
	}
	res, err = e.s.ChangeDependencies(ctx, id, models.DependencyChange{Add: storetest.Deps(done), Remove: []string{done}})
	if err != nil || !slices.Equal(res.Added, []string{done}) || len(res.Removed) != 0 {
		t.Fatalf("replacing an edge: %+v %v", res, err)
	}
	if edge, _ := edgeOf(res.Dependencies, done); !edge.RequiresSuccess || edge.Resolution != models.EdgeSatisfied {
		t.Fatalf("replaced edge: %+v", edge)
	}
}

func mustDetail(t *testing.T, s *store.Store, id string) models.TaskDetail {
	t.Helper()
	d, err := s.GetTaskDetail(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDeleteTaskRefusals(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	ctx := context.Background()
	for _, st := range []models.TaskStatus{models.StatusAssigned, models.StatusInProgress, models.StatusWaitingInput, models.StatusVerifying} {
		t.Run(string(st), func(t *testing.T) {
			t.Parallel()
			id := taskIn(t, s, "p", "delete when "+string(st), st)
			if err := s.DeleteTask(ctx, id); models.ErrorCodeOf(err) != models.CodeConflict || !strings.Contains(err.Error(), "is "+string(st)) {
				t.Fatalf("delete of a %s task: %v", st, err)
			}
			if storetest.Status(t, s, id) != st {
				t.Fatal("a refused delete changed the task")
			}
		})
	}
	t.Run("dependents", func(t *testing.T) {
		t.Parallel()
		ids := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "up", Title: "up"},
			models.BatchTask{LocalID: "d1", Title: "d1", Dependencies: storetest.Deps("up")},
			models.BatchTask{LocalID: "d2", Title: "d2", Dependencies: storetest.Deps("up")})
		err := s.DeleteTask(ctx, ids["up"])
		if models.ErrorCodeOf(err) != models.CodeConflict || !strings.Contains(err.Error(), ids["d1"]) || !strings.Contains(err.Error(), ids["d2"]) {
			t.Fatalf("delete of a task with dependents: %v; want both named", err)
		}
	})
	t.Run("subtasks", func(t *testing.T) {
		t.Parallel()
		parent := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "parent", Title: "parent"})["parent"]
		child := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "child", Title: "child", ParentTaskID: parent})["child"]
		if err := s.DeleteTask(ctx, parent); models.ErrorCodeOf(err) != models.CodeConflict || !strings.Contains(err.Error(), child) {
			t.Fatalf("delete of a parent: %v", err)
		}
		if err := s.DeleteTask(ctx, child); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteTask(ctx, parent); err != nil {
			t.Fatalf("delete of a parent without subtasks left: %v", err)
		}
	})
	t.Run("missing", func(t *testing.T) {
		t.Parallel()
		if err := s.DeleteTask(ctx, "no-such-task"); models.ErrorCodeOf(err) != models.CodeNotFound {
			t.Fatalf("delete of a missing task: %v", err)
		}
	})
}

func TestDeleteTaskRemovesItsRowsAndKeepsTheLedger(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	storetest.Agent(t, s, "a1")
	ctx := context.Background()
	ids := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "up", Title: "up"},
		models.BatchTask{LocalID: "t", Title: "doomed", Dependencies: storetest.Deps("up")})
	id := ids["t"]
	storetest.Apply(t, s, ids["up"], storetest.ToCompleted...)
	run, _, err := s.ClaimTask(ctx, id, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartRun(ctx, run.ID, 1, "/work"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordRunUsage(ctx, run.ID, models.TokenUsage{Input: 10, Output: 5}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SavePlan(ctx, id, "agent", []models.BatchTask{{Title: "later"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentFailed, ExpectFrom: models.StatusInProgress,
		Outcome: "failed", Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTask(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetTask(ctx, id); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("deleted task still found: %v", err)
	}
	for table, col := range map[string]string{"task_events": "task_id", "task_runs": "task_id", "plans": "task_id",
		"task_dependencies": "downstream"} {
		n, err := store.CountForTest(s, fmt.Sprintf("SELECT count(*) FROM %s WHERE %s = '%s'", table, col, id))
		if err != nil || n != 0 {
			t.Errorf("%s keeps %d rows of the deleted task: %v", table, n, err)
		}
	}
	if n, _ := store.CountForTest(s, "SELECT count(*) FROM token_ledger WHERE task_id = '"+id+"'"); n != 1 {
		t.Errorf("ledger rows of the deleted task: %d, want 1", n)
	}
	if p, _ := s.GetProject(ctx, "p"); p.TotalTokensUsed != 15 {
		t.Errorf("project usage after the delete: %d, want 15", p.TotalTokensUsed)
	}
	var payload map[string]string
	n, err := store.CountForTest(s, "SELECT count(*) FROM outbox WHERE kind = 'task.deleted' AND task_id = '"+id+"'")
	if err != nil || n != 1 {
		t.Fatalf("%d task.deleted notices: %v", n, err)
	}
	msgs, _ := s.PendingOutbox(ctx, 100)
	for _, m := range msgs {
		if m.Kind == "task.deleted" {
			_ = json.Unmarshal([]byte(m.Payload), &payload)
		}
	}
	if payload["task_id"] != id || payload["title"] != "doomed" || payload["status"] != "FAILED" {
		t.Errorf("task.deleted payload %v", payload)
	}
	if d := mustDetail(t, s, ids["up"]); len(d.Dependents) != 0 || d.Task.Status != models.StatusCompleted {
		t.Errorf("the upstream after its dependent was deleted: %+v", d)
	}
}

func TestRemoveAgentKeepsItsRuns(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	storetest.Agent(t, s, "a1")
	ctx := context.Background()
	id := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "t", Title: "t"})["t"]
	run, _, err := s.ClaimTask(ctx, id, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveAgent(ctx, "a1"); models.ErrorCodeOf(err) != models.CodeConflict || !strings.Contains(err.Error(), "STARTING with task "+id) {
		t.Fatalf("removing an agent that is starting a run: %v", err)
	}
	if _, err := s.StartRun(ctx, run.ID, 1, "/work"); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordRunSession(ctx, run.ID, "session-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordRunUsage(ctx, run.ID, models.TokenUsage{Input: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentFailed, ExpectFrom: models.StatusInProgress, Outcome: "failed"}); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveAgent(ctx, "a1"); err != nil {
		t.Fatalf("removing an idle agent: %v", err)
	}
	if _, err := s.GetAgent(ctx, "a1"); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("removed agent still found: %v", err)
	}
	if err := s.RemoveAgent(ctx, "a1"); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("removing it again: %v", err)
	}
	kept, err := s.GetRun(ctx, run.ID)
	if err != nil || kept.AgentID != "a1" || kept.Outcome != "failed" {
		t.Fatalf("the run after its agent was removed: %+v %v", kept, err)
	}
	if n, _ := store.CountForTest(s, "SELECT count(*) FROM token_ledger WHERE agent_id = 'a1'"); n != 1 {
		t.Fatalf("ledger rows of the removed agent: %d", n)
	}
	// Registered again under the same id, it starts afresh: no session of
	// the old agent is resumed.
	storetest.Agent(t, s, "a1")
	if sess, _, err := s.LastSession(ctx, id, "a1"); err != nil || sess != "" {
		t.Fatalf("session offered to the new agent: %q %v", sess, err)
	}
	storetest.Apply(t, s, id, models.EventRetry)
	if run2, _, err := s.ClaimTask(ctx, id, "a1"); err != nil || run2.Attempt != 2 {
		t.Fatalf("a new run on the re-registered agent: %+v %v", run2, err)
	}
}

func TestTokensUsedByProjectSince(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := context.Background()
	for _, p := range []string{"a", "b", "idle"} {
		storetest.Project(t, s, p)
	}
	now := time.Now()
	for _, u := range []models.TokenUsage{
		{ProjectID: "a", Input: 1, Output: 2, CacheRead: 3, CacheWrite: 4, CreatedAt: now.Add(-time.Minute)},
		{ProjectID: "a", Input: 100, CreatedAt: now.Add(-2 * time.Hour)},
		{ProjectID: "b", Output: 7, CreatedAt: now.Add(-30 * time.Minute)},
		{ProjectID: "b", Output: 1000, CreatedAt: now.Add(-25 * time.Hour)},
	} {
		if err := s.RecordTokenUsage(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		since time.Duration
		want  map[string]int64
	}{
		{time.Hour, map[string]int64{"a": 10, "b": 7}},
		{3 * time.Hour, map[string]int64{"a": 110, "b": 7}},
		{48 * time.Hour, map[string]int64{"a": 110, "b": 1007}},
		{time.Second, map[string]int64{}},
	}
	for _, tc := range tests {
		got, err := s.TokensUsedByProjectSince(ctx, now.Add(-tc.since))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(tc.want) {
			t.Errorf("since %s: %v, want %v", tc.since, got, tc.want)
		}
		for p, n := range tc.want {
			if got[p] != n {
				t.Errorf("since %s: %v, want %v", tc.since, got, tc.want)
			}
		}
	}
	plan, err := store.QueryPlanForTest(s, store.HotQueriesForTest()["qTokensPerProjectSince"], 0)
	if err != nil || !strings.Contains(plan, "SEARCH token_ledger USING INDEX token_ledger_time") {
		t.Fatalf("plan of the per-project usage:\n%s%v\nwant a range of the time index", plan, err)
	}
}

// TestMigrationFreesRunsFromTheirAgents opens a database an older
// agentqueued left (schema 5, runs referencing their agents) and checks
// that the rebuilt task_runs kept every row, its AUTOINCREMENT counter and
// its cascade from tasks, and no longer holds its agents.
func TestMigrationFreesRunsFromTheirAgents(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "old.db")
	if err := store.MigrateForTest(path, 5); err != nil {
		t.Fatal(err)
	}
	err := store.ExecAtForTest(path, `
		INSERT INTO projects (id, name, credit_weight, max_concurrent_agents, status, created_at, updated_at)
			VALUES ('p', 'p', 1, 1, 'ACTIVE', 0, 0);
		INSERT INTO tasks (id, project_id, title, status, verification_type, created_at, updated_at)
			VALUES ('old-task', 'p', 'old', 'FAILED', 'AUTO_TEST', 0, 0);
		INSERT INTO agents (id, name, agent_type, state, created_at) VALUES ('old-agent', 'old', 'command', 'IDLE', 0);
		INSERT INTO task_runs (task_id, agent_id, project_id, attempt, token_hash, started_at, last_activity_at, ended_at,
			outcome, session_id) VALUES ('old-task', 'old-agent', 'p', 1, 'h1', 1, 2, 3, 'failed', 's1');
		INSERT INTO task_runs (task_id, agent_id, project_id, attempt, token_hash, started_at, last_activity_at, ended_at)
			VALUES ('old-task', 'old-agent', 'p', 2, 'h2', 4, 5, 6);
		DELETE FROM task_runs WHERE attempt = 2;`)
	if err != nil {
		t.Fatal(err)
	}
	s := storetest.OpenAt(t, path)
	ctx := context.Background()
	r, err := s.GetRun(ctx, 1)
	if err != nil || r.AgentID != "old-agent" || r.Outcome != "failed" || r.SessionID != "s1" || r.EndedAt == nil {
		t.Fatalf("run 1 after the migration: %+v %v", r, err)
	}
	if n, err := store.CountForTest(s, "SELECT count(*) FROM pragma_foreign_key_list('task_runs') WHERE \"table\" = 'agents'"); err != nil || n != 0 {
		t.Fatalf("task_runs still references agents (%d): %v", n, err)
	}
	if err := s.RemoveAgent(ctx, "old-agent"); err != nil {
		t.Fatalf("removing an agent with runs: %v", err)
	}
	if r, _ := s.GetRun(ctx, 1); r.AgentID != "old-agent" || r.SessionID != "" {
		t.Fatalf("run 1 after its agent was removed: %+v", r)
	}
	storetest.Agent(t, s, "a1")
	storetest.Apply(t, s, "old-task", models.EventRetry)
	run, _, err := s.ClaimTask(ctx, "old-task", "a1")
	if err != nil || run.ID != 3 || run.Attempt != 2 {
		t.Fatalf("the next run: %+v %v; want id 3 (ids are not reused) and attempt 2", run, err)
	}
	for _, index := range []string{"task_runs_task", "task_runs_open", "task_runs_ended"} {
		if n, _ := store.CountForTest(s, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = '"+index+"'"); n != 1 {
			t.Errorf("index %s is missing", index)
		}
	}
	if _, err := s.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventExecutionError, ExpectFrom: models.StatusAssigned}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTask(ctx, "old-task"); err != nil {
		t.Fatal(err)
	}
	if n, _ := store.CountForTest(s, "SELECT count(*) FROM task_runs"); n != 0 {
		t.Fatalf("%d runs left after their task was deleted", n)
	}
}
