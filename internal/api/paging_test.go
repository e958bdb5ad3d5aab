package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// TestTaskListIsPaged: GET /api/v1/tasks answers at most DefaultPageSize
// tasks (a listing of every task once built answers of 100 MB), refuses a
// limit above MaxPageSize, and continues with the cursor it answers; the
// client follows the cursors, so callers still get every task they ask for.
func TestTaskListIsPaged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	ctx := context.Background()
	e.createProject("web")
	e.createProject("other")
	const total = api.MaxPageSize + 150
	batch := models.TaskBatch{ProjectID: "web"}
	for i := range total {
		batch.Tasks = append(batch.Tasks, models.BatchTask{Title: fmt.Sprintf("task %d", i)})
	}
	res, err := e.store.CreateTasks(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	e.createTasks(`{"project_id":"other","tasks":[{"title":"elsewhere"}]}`)
	ids := make([]string, len(res))
	for i, r := range res {
		ids[i] = r.TaskID
	}

	// Page by page with the default size, following next.
	var got []string
	after, pages := "", 0
	for {
		q := "?project=web"
		if after != "" {
			q += "&after=" + after
		}
		var tl api.TaskList
		e.do("GET", "/api/v1/tasks"+q, "").decode(t, http.StatusOK, &tl)
		pages++
		if len(tl.Tasks) > api.DefaultPageSize {
			t.Fatalf("page of %d tasks, more than the default %d", len(tl.Tasks), api.DefaultPageSize)
		}
		for _, task := range tl.Tasks {
			got = append(got, task.ID)
		}
		if tl.Next == "" {
			break
		}
		if len(tl.Tasks) != api.DefaultPageSize {
			t.Fatalf("a page of %d tasks with a next cursor", len(tl.Tasks))
		}
		after = tl.Next
	}
	if strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Fatalf("paged listing has %d tasks, want the %d in creation order", len(got), len(ids))
	}
	if want := (total + api.DefaultPageSize - 1) / api.DefaultPageSize; pages != want {
		t.Errorf("%d pages, want %d", pages, want)
	}

	// The largest page, and one past it.
	var tl api.TaskList
	e.do("GET", "/api/v1/tasks?limit="+strconv.Itoa(api.MaxPageSize), "").decode(t, http.StatusOK, &tl)
	if len(tl.Tasks) != api.MaxPageSize || tl.Next != tl.Tasks[api.MaxPageSize-1].ID {
		t.Fatalf("limit %d: %d tasks, next %q", api.MaxPageSize, len(tl.Tasks), tl.Next)
	}
	e.do("GET", "/api/v1/tasks?limit="+strconv.Itoa(api.MaxPageSize+1), "").wantError(t, http.StatusBadRequest, models.CodeInvalid,
		fmt.Sprintf("limit: must be an integer between 1 and %d", api.MaxPageSize))
	// The last page has no next; "next" is left out of the answer.
	r := e.do("GET", "/api/v1/tasks?project=web&after="+ids[total-2], "")
	r.decode(t, http.StatusOK, &tl)
	if len(tl.Tasks) != 1 || tl.Tasks[0].ID != ids[total-1] || strings.Contains(string(r.body), `"next"`) {
		t.Fatalf("last page %s", r.body)
	}
	e.do("GET", "/api/v1/tasks?after=ghost", "").wantError(t, http.StatusBadRequest, models.CodeInvalid, `after: no task "ghost"`)

	// The client gathers pages: everything, or up to the caller's limit.
	all, err := e.client.ListTasks(ctx, models.TaskFilter{ProjectID: "web"})
	if err != nil || len(all) != total || all[0].ID != ids[0] || all[total-1].ID != ids[total-1] {
		t.Fatalf("client ListTasks: %d tasks, %v; want %d", len(all), err, total)
	}
	some, err := e.client.ListTasks(ctx, models.TaskFilter{ProjectID: "web", Limit: api.MaxPageSize + 10, AfterID: ids[4]})
	if err != nil || len(some) != api.MaxPageSize+10 || some[0].ID != ids[5] || some[len(some)-1].ID != ids[api.MaxPageSize+14] {
		t.Fatalf("client ListTasks with a limit past one page: %d tasks, %v", len(some), err)
	}
	page, err := e.client.ListTasksPage(ctx, models.TaskFilter{ProjectID: "web", Limit: 3})
	if err != nil || len(page.Tasks) != 3 || page.Next != ids[2] {
		t.Fatalf("client ListTasksPage: %+v, %v", page.Next, err)
	}
}

// TestQuestionListIsPaged: open questions are listed a page at a time too.
func TestQuestionListIsPaged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	ctx := context.Background()
	e.createProject("web")
	var want []int64
	for i := range 5 {
		id := e.createTasks(`{"project_id":"web","tasks":[{"title":"ask"}]}`)[0].TaskID
		agentID := fmt.Sprintf("a%d", i)
		if _, err := e.store.RegisterAgent(ctx, models.Agent{ID: agentID, AgentType: "command",
			AgentSettings: models.AgentSettings{Command: "/bin/true"}}); err != nil {
			t.Fatal(err)
		}
		run, _, err := e.store.ClaimTask(ctx, id, agentID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.StartRun(ctx, run.ID, 1, ""); err != nil {
			t.Fatal(err)
		}
		q, err := e.store.AskQuestion(ctx, run.ID, fmt.Sprintf("question %d?", i))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, q.ID)
	}
	var got []int64
	after := ""
	for {
		var ql api.QuestionList
		e.do("GET", "/api/v1/questions?limit=2"+after, "").decode(t, http.StatusOK, &ql)
		if len(ql.Questions) > 2 {
			t.Fatalf("page of %d questions with limit 2", len(ql.Questions))
		}
		for _, q := range ql.Questions {
			got = append(got, q.ID)
		}
		if ql.Next == "" {
			break
		}
		after = "&after=" + ql.Next
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("paged questions %v, want %v", got, want)
	}
	e.do("GET", "/api/v1/questions?after=x", "").wantError(t, 400, models.CodeInvalid, `after: "x" is not a cursor`)
	e.do("GET", "/api/v1/questions?after=99999", "").wantError(t, 400, models.CodeInvalid, "after: no question 99999")
	e.do("GET", "/api/v1/questions?limit=501", "").wantError(t, 400, models.CodeInvalid, "between 1 and 500")
	qs, err := e.client.OpenQuestions(ctx)
	if err != nil || len(qs) != len(want) {
		t.Fatalf("client OpenQuestions: %d, %v", len(qs), err)
	}
}

// TestHookRunListIsPaged: a hook's runs are listed a page at a time.
func TestHookRunListIsPaged(t *testing.T) {
	t.Parallel()
	e, engine := newHookEnv(t)
	ctx := context.Background()
	e.createProject("web")
	e.do("POST", "/api/v1/hooks", reportHook).decode(t, http.StatusCreated, &models.Hook{})
	var want []string
	for range 5 {
		run, err := e.client.FireHook(ctx, "nightly-report", api.FireRequest{})
		if err != nil {
			t.Fatal(err)
		}
		engine.Wait()
		want = append([]string{run.ID}, want...) // newest first
	}
	var got []string
	after := ""
	for {
		var rl api.HookRunList
		e.do("GET", "/api/v1/hooks/nightly-report/runs?limit=2"+after, "").decode(t, http.StatusOK, &rl)
		for _, r := range rl.Runs {
			got = append(got, r.ID)
		}
		if rl.Next == "" {
			break
		}
		if len(rl.Runs) != 2 {
			t.Fatalf("a page of %d runs with a next cursor", len(rl.Runs))
		}
		after = "&after=" + rl.Next
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("paged runs %v, want %v", got, want)
	}
	e.do("GET", "/api/v1/hooks/nightly-report/runs?after=ghost", "").wantError(t, 400, models.CodeInvalid, `after: no hook run "ghost"`)
	e.do("GET", "/api/v1/hooks/nightly-report/runs?limit=501", "").wantError(t, 400, models.CodeInvalid, "between 1 and 500")
	for _, tc := range []struct{ limit, want int }{{0, 5}, {3, 3}} {
		runs, err := e.client.HookRuns(ctx, "nightly-report", "", tc.limit)
		if err != nil || len(runs) != tc.want || runs[0].ID != want[0] {
			t.Fatalf("client HookRuns limit %d: %d runs, %v", tc.limit, len(runs), err)
		}
	}
}

// TestWorkflowRunListIsPaged: workflow runs are listed a page at a time.
func TestWorkflowRunListIsPaged(t *testing.T) {
	t.Parallel()
	e := newWorkflowEnv(t)
	ctx := context.Background()
	e.postWorkflow("name: backup\nproject: web\nsteps:\n  - name: check\n    title: Check\n", "application/yaml").
		decode(t, http.StatusCreated, &models.Workflow{})
	var want []string
	for range 5 {
		run, err := e.client.StartRun(ctx, "backup", "")
		if err != nil {
			t.Fatal(err)
		}
		want = append([]string{run.ID}, want...) // newest first
	}
	var got []string
	after := ""
	for {
		var rl api.WorkflowRunList
		e.do("GET", "/api/v1/runs?workflow=backup&limit=2"+after, "").decode(t, http.StatusOK, &rl)
		for _, r := range rl.Runs {
			got = append(got, r.ID)
		}
		if rl.Next == "" {
			break
		}
		after = "&after=" + rl.Next
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("paged runs %v, want %v", got, want)
	}
	e.do("GET", "/api/v1/runs?after=ghost", "").wantError(t, 400, models.CodeInvalid, `after: no run "ghost"`)
	for _, tc := range []struct{ limit, want int }{{0, 5}, {4, 4}} {
		runs, err := e.client.ListWorkflowRuns(ctx, models.RunFilter{Workflow: "backup", Limit: tc.limit})
		if err != nil || len(runs) != tc.want || runs[0].ID != want[0] {
			t.Fatalf("client ListWorkflowRuns limit %d: %d runs, %v", tc.limit, len(runs), err)
		}
	}
}

// TestTaskListIsBoundedInBytes: a page of tasks with long descriptions was
// built whole however large (500 tasks of 200,000 characters: 100 MB in
// memory per request). A page now ends early, with "next", before its
// answer passes the byte budget, and following next still reaches every
// task once, in order.
func TestTaskListIsBoundedInBytes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		budget      int // 0: api.DefaultMaxListBytes
		tasks, desc int
		limit       int
		minPages    int
	}{
		{"default budget, longest descriptions", 0, 30, models.MaxDescriptionLen, api.MaxPageSize, 2},
		{"small budget across read chunks", 60_000, 130, 2_000, api.MaxPageSize, 4},
		{"limit before budget", 0, 12, 100, 5, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, api.Config{MaxListBytes: tt.budget})
			budget := tt.budget
			if budget == 0 {
				budget = api.DefaultMaxListBytes
			}
			e.createProject("web")
			batch := models.TaskBatch{ProjectID: "web"}
			for i := range tt.tasks {
				batch.Tasks = append(batch.Tasks, models.BatchTask{Title: fmt.Sprintf("task %d", i),
					Description: strings.Repeat(string(rune('a'+i%26)), tt.desc)})
			}
			res, err := e.store.CreateTasks(context.Background(), batch)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			after, pages := "", 0
			for {
				q := "?project=web&limit=" + strconv.Itoa(tt.limit)
				if after != "" {
					q += "&after=" + after
				}
				r := e.do("GET", "/api/v1/tasks"+q, "")
				if len(r.body) > budget {
					t.Fatalf("page %d: %d bytes, over the budget of %d", pages, len(r.body), budget)
				}
				var tl api.TaskList
				r.decode(t, http.StatusOK, &tl)
				pages++
				if len(tl.Tasks) == 0 || len(tl.Tasks) > tt.limit {
					t.Fatalf("page %d: %d tasks (limit %d)", pages, len(tl.Tasks), tt.limit)
				}
				for _, task := range tl.Tasks {
					if len(task.Description) != tt.desc {
						t.Fatalf("task %s: description of %d characters, want %d", task.ID, len(task.Description), tt.desc)
					}
					got = append(got, task.ID)
				}
				if tl.Next == "" {
					break
				}
				after = tl.Next
			}
			if pages < tt.minPages {
				t.Errorf("%d pages, want at least %d", pages, tt.minPages)
			}
			if len(got) != len(res) {
				t.Fatalf("paging reached %d tasks, want %d", len(got), len(res))
			}
			for i, r := range res {
				if got[i] != r.TaskID {
					t.Fatalf("task %d: %s, want %s", i, got[i], r.TaskID)
				}
			}
		})
	}
}
