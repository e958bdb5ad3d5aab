package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/orchestrator"
	"github.com/agentqueued/agentqueued/internal/web/dag"
)

// TestQueueFilters lists tasks by project, status, creator and kind.
func TestQueueFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	ctx := context.Background()
	for _, p := range []string{"web", "api"} {
		if _, err := e.store.CreateProject(ctx, models.Project{ID: p, Name: p}); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range []models.TaskBatch{
		{ProjectID: "web", CreatedBy: "ana", Tasks: []models.BatchTask{{Title: "Web upgrade", Kind: "upgrade"}, {Title: "Web docs"}}},
		{ProjectID: "api", CreatedBy: "bo", Tasks: []models.BatchTask{{Title: "Api upgrade", Kind: "upgrade"}}},
	} {
		if _, err := e.store.CreateTasks(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	done := e.task("api", "Api done")
	for _, ev := range []models.TaskEvent{models.EventAdminCancel, models.EventAdminSkip} {
		if _, err := e.store.ApplyEvent(ctx, models.TransitionRequest{TaskID: done, Event: ev, Actor: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	all := []string{"Web upgrade", "Web docs", "Api upgrade", "Api done"}
	tests := []struct {
		query string
		want  []string
	}{
		{"", []string{"Web upgrade", "Web docs", "Api upgrade"}},
		{"?status=all", all},
		{"?status=COMPLETED", []string{"Api done"}},
		{"?project=web", []string{"Web upgrade", "Web docs"}},
		{"?kind=upgrade", []string{"Web upgrade", "Api upgrade"}},
		{"?creator=bo&status=all", []string{"Api upgrade"}},
		{"?creator=ana&kind=upgrade&project=web", []string{"Web upgrade"}},
	}
	for _, tc := range tests {
		p := e.get("/ui/queue" + tc.query)
		if p.status != http.StatusOK {
			t.Fatalf("%s: %d\n%s", tc.query, p.status, p.body)
		}
		list := p.body[strings.Index(p.body, `id="queue-tasks"`):]
		for _, title := range all {
			if got, want := strings.Contains(list, ">"+title+"<"), contains(tc.want, title); got != want {
				t.Errorf("queue%s: %q listed %v, want %v", tc.query, title, got, want)
			}
		}
	}
	if p := e.get("/ui/queue?status=DONE"); p.status != http.StatusBadRequest || !strings.Contains(p.body, "unknown task status") {
		t.Errorf("an unknown status: %d\n%s", p.status, p.body)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestTaskPageMarksTheCascadesRootCause: a task blocked by its upstream's
// cancellation lists that upstream as the root cause, coloured by status,
// and offers the forms its status allows.
func TestTaskPageMarksTheCascadesRootCause(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	ctx := context.Background()
	if _, err := e.store.CreateProject(ctx, models.Project{ID: "web"}); err != nil {
		t.Fatal(err)
	}
	res, err := e.store.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{
		{LocalID: "a", Title: "Build"}, {LocalID: "b", Title: "Ship", Dependencies: []models.BatchDependency{{ID: "a"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := res[0].TaskID, res[1].TaskID
	csrf := e.csrf("/ui/tasks/" + a)
	if p := e.post("/ui/tasks/"+a+"/cancel", url.Values{"csrf": {csrf}}); p.status != http.StatusSeeOther {
		t.Fatalf("cancel: %d\n%s", p.status, p.body)
	}
	up := e.get("/ui/tasks/" + a)
	if !strings.Contains(up.body, "The task was cancelled: it is BLOCKED.") || !strings.Contains(up.body, `<a href="/ui/tasks/`+b+`">Ship</a> <span class="status s-BLOCKED">`) {
		t.Errorf("the cancelled task's page:\n%s", up.body)
	}
	p := e.get("/ui/tasks/" + b)
	for _, want := range []string{
		`<li class="root-cause"><a href="/ui/tasks/` + a + `">Build</a> <span class="status s-BLOCKED">BLOCKED</span>`,
		`id="task-status">BLOCKED<`,
		`action="/ui/tasks/` + b + `/restart"`,
	} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the page of %s lacks %s:\n%s", b, want, p.body)
		}
	}
	if regexp.MustCompile(`action="/ui/tasks/` + b + `/(cancel|approve)"`).MatchString(p.body) {
		t.Errorf("the page of a BLOCKED task offers cancel or approve:\n%s", p.body)
	}
	if nf := e.get("/ui/tasks/no-such-task"); nf.status != http.StatusNotFound || !strings.Contains(nf.body, "no-such-task") {
		t.Errorf("an unknown task: %d\n%s", nf.status, nf.body)
	}
}

// TestOverviewShowsAgentsAndShares: an agent's task and last log line,
// and each project's share of agent time against its share of weight.
func TestOverviewShowsAgentsAndShares(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	ctx := context.Background()
	for _, p := range []models.Project{{ID: "web", Name: "Web", CreditWeight: 3}, {ID: "api", Name: "Api", CreditWeight: 1}} {
		if _, err := e.store.CreateProject(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.store.RegisterAgent(ctx, models.Agent{ID: "a1", Name: "worker", AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "/bin/true"}}); err != nil {
		t.Fatal(err)
	}
	id := e.task("web", "Build the site")
	e.task("api", "Idle work")
	run, _, err := e.store.ClaimTask(ctx, id, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.StartRun(ctx, run.ID, 0, ""); err != nil {
		t.Fatal(err)
	}
	e.writeLog(id, 1, "reading the code\nwriting the tests\n\n")
	p := e.get("/ui/overview")
	for _, want := range []string{
		`<a href="/ui/tasks/` + id + `">Build the site</a> <span class="status s-IN_PROGRESS">IN_PROGRESS</span>`,
		`<span class="muted">writing the tests</span>`,
		`<span title="share of agent time in the window">100%</span> / <span title="share of the active projects' weights">75%</span>`,
		`<span title="share of agent time in the window">0%</span> / <span title="share of the active projects' weights">25%</span>`,
	} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the overview lacks %s:\n%s", want, p.body)
		}
	}
}

// TestQueueAndTaskPageSayWhatHappensNext: a FAILED task's row in the queue
// and its page say when it is retried, with the daemon's default backoff
// after its failure, and a PAUSED task's when it resumes and why.
func TestQueueAndTaskPageSayWhatHappensNext(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	ctx := context.Background()
	failed, paused, ready := e.task("web", "Flaky build"), e.task("web", "Rate limited"), e.task("web", "Not yet")
	if _, err := e.store.RegisterAgent(ctx, models.Agent{ID: "a1", AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "/bin/true"}}); err != nil {
		t.Fatal(err)
	}
	resume := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	for id, end := range map[string]models.RunEnd{
		failed: {Event: models.EventAgentFailed, Reason: "go test failed", Outcome: "failed", Error: "go test failed"},
		paused: {Event: models.EventTokensExhausted, Reason: "rate limited until " + resume.Format(time.RFC3339),
			ResumeAfter: &resume, Outcome: "rate_limited"},
	} {
		r, _, err := e.store.ClaimTask(ctx, id, "a1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.StartRun(ctx, r.ID, 1000, "/tmp"); err != nil {
			t.Fatal(err)
		}
		end.RunID, end.ExpectFrom = r.ID, models.StatusInProgress
		if _, err := e.store.FinishRun(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	f, err := e.store.GetTask(ctx, failed)
	if err != nil {
		t.Fatal(err)
	}
	retryAt := f.UpdatedAt.Add(orchestrator.DefaultRetryBackoff).UTC().Format(time.RFC3339)
	retry := "retry 1 of 3 at " + retryAt + " (backoff 30s after the failure)"
	resumes := "resumes at " + resume.Format(time.RFC3339) + ": rate limited until " + resume.Format(time.RFC3339)

	queue := e.get("/ui/queue?project=web")
	list := queue.body[strings.Index(queue.body, `id="queue-tasks"`):]
	for _, want := range []string{retry, resumes + ` <span class="muted">(in 59m`} {
		if !strings.Contains(list, want) {
			t.Errorf("the queue lacks %q:\n%s", want, list)
		}
	}
	if n := strings.Count(list, "retry 1 of 3") + strings.Count(list, "resumes at"); n != 2 {
		t.Errorf("the queue names %d next events, want 2 (none for the READY task):\n%s", n, list)
	}
	for id, want := range map[string]string{failed: retry, paused: resumes} {
		p := e.get("/ui/tasks/" + id)
		if !strings.Contains(p.body, `<dt>Next</dt><dd id="task-next">`+want+` <span class="muted">(`) {
			t.Errorf("the page of %s lacks its next event %q:\n%s", id, want, p.body)
		}
	}
	if p := e.get("/ui/tasks/" + ready); strings.Contains(p.body, `id="task-next"`) {
		t.Errorf("a READY task's page names a next event:\n%s", p.body)
	}
}

// TestOverviewShowsTheDesk: the overview shows the desk — a question whose
// run ended, a change a person verifies, each with whose it is (a link to
// its task), how long it has waited, when it expires, where on the
// dashboard it ends (the task's answer or approve form) and its command —
// and not a task cancelled on purpose; its counts say that no agent works
// while one change waits to be verified, and its projects' table counts
// the verifying task as waiting to land, not as working.
func TestOverviewShowsTheDesk(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	ctx := context.Background()
	asks, checked, gone := e.task("web", "Pick a <b>database</b>"), e.task("web", "Check by hand"), e.task("web", "Cancelled")
	late := e.task("web", "Asked long ago")
	if _, err := e.store.RegisterAgent(ctx, models.Agent{ID: "a1", AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "/bin/true"}}); err != nil {
		t.Fatal(err)
	}
	run := func(id string) models.Run {
		t.Helper()
		r, _, err := e.store.ClaimTask(ctx, id, "a1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.StartRun(ctx, r.ID, 1, ""); err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := run(asks)
	q, err := e.store.AskQuestionWith(ctx, r.ID, models.Ask{Question: "Postgres or <i>SQLite</i>?"}, 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.FinishRun(ctx, models.RunEnd{RunID: r.ID, Event: models.EventRecovery, Outcome: models.RunOutcomeRecovered}); err != nil {
		t.Fatal(err)
	}
	r = run(late)
	if _, err := e.store.AskQuestionWith(ctx, r.ID, models.Ask{Question: "Still there?"}, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.FinishRun(ctx, models.RunEnd{RunID: r.ID, Event: models.EventRecovery, Outcome: models.RunOutcomeRecovered}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // past the question's expiry, on the server's real clock
	r = run(checked)
	if _, err := e.store.FinishRun(ctx, models.RunEnd{RunID: r.ID, Event: models.EventAgentCompleted, ExpectFrom: models.StatusInProgress,
		Outcome: models.RunOutcomeCompleted, Verification: &models.Verification{TaskID: checked, Attempt: 1, Phase: models.PhaseHuman}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.ApplyEvent(ctx, models.TransitionRequest{TaskID: gone, Event: models.EventAdminCancel, Actor: "ana"}); err != nil {
		t.Fatal(err)
	}

	p := e.get("/ui/overview")
	if p.status != http.StatusOK {
		t.Fatalf("GET /ui/overview: %d\n%s", p.status, p.body)
	}
	desk := p.body[strings.Index(p.body, `id="ov-attention"`):strings.Index(p.body, `id="ov-agents"`)]
	for _, want := range []string{
		`Waiting on you (3)`,
		`Agents working <strong>0</strong> · Waiting to land or verify <strong>1</strong>`,
		`<strong>Question</strong>`,
		`<a href="/ui/tasks/` + asks + `">Pick a &lt;b&gt;database&lt;/b&gt;</a> <span class="muted">web/` + asks + `</span>`,
		`Postgres or &lt;i&gt;SQLite&lt;/i&gt;?`,
		`(its run ended: the answer starts a new one)`,
		`expires in 1h59m`,
		fmt.Sprintf(`<a href="/ui/tasks/%s#answer-%d">Answer on the task page</a>`, asks, q.ID),
		fmt.Sprintf(`<code>agentqueued ctl question answer %d ANSWER...</code>`, q.ID),
		`<strong>Verification</strong>`,
		`<a href="/ui/tasks/` + checked + `#approve">Approve or reject on the task page</a>`,
		`<code>agentqueued ctl task approve ` + checked + `</code>`,
		`Still there?`,
		`, expired</span>`,
	} {
		if !strings.Contains(desk, want) {
			t.Errorf("the desk lacks %s:\n%s", want, desk)
		}
	}
	if strings.Contains(desk, gone) {
		t.Errorf("the desk shows %s, cancelled on purpose:\n%s", gone, desk)
	}
	// web: Open 4 (one BLOCKED), Ready 0, Working 0, To land 1, Waiting 2
	// (the questions), Blocked 1.
	if want := `<td class="num">4</td><td class="num">0</td><td class="num">0</td><td class="num">1</td><td class="num">2</td><td class="num">1</td>`; !strings.Contains(p.body, want) {
		t.Errorf("the projects' table lacks %s:\n%s", want, p.body)
	}
}

// TestOverviewShowsTokens: the overview's Tokens section and the projects'
// Tokens column show the use in the window against the budgets.
func TestOverviewShowsTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	ctx := context.Background()
	limit := int64(5000)
	if _, err := e.store.CreateProject(ctx, models.Project{ID: "web", Name: "Web", BudgetLimit: &limit}); err != nil {
		t.Fatal(err)
	}
	if err := e.store.RecordTokenUsage(ctx, models.TokenUsage{ProjectID: "web", Input: 1200, Output: 34,
		CreatedAt: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	p := e.get("/ui/overview")
	if p.status != http.StatusOK {
		t.Fatalf("GET /ui/overview: %d\n%s", p.status, p.body)
	}
	budget := p.body[strings.Index(p.body, `id="ov-budget"`):]
	for _, want := range []string{
		`<p>1,234 tokens in the last `,
		`<tr><td>Web</td><td class="num">1,234</td><td class="num">1,234</td><td class="num">5,000</td></tr>`,
	} {
		if !strings.Contains(budget, want) {
			t.Errorf("the Tokens section lacks %s:\n%s", want, budget)
		}
	}
	projects := p.body[strings.Index(p.body, `id="ov-projects"`):strings.Index(p.body, `id="ov-budget"`)]
	if want := `<td class="num">1,234</td>`; !strings.Contains(projects, want) {
		t.Errorf("the projects' Tokens column lacks %s:\n%s", want, projects)
	}
}

// TestQueueSaysWhatEachTaskWaitsFor: a DEFINED task's row names the
// upstreams it still waits for (not those already done), and a task
// waiting for approval says it waits for yours, or for its pull request.
func TestQueueSaysWhatEachTaskWaitsFor(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	ctx := context.Background()
	if _, err := e.store.CreateProject(ctx, models.Project{ID: "web", Name: "web"}); err != nil {
		t.Fatal(err)
	}
	res, err := e.store.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", CreatedBy: "ana", Tasks: []models.BatchTask{
		{LocalID: "base", Title: "Base"},
		{LocalID: "lint", Title: "Lint <fast>"},
		{LocalID: "test", Title: "Test"},
		{LocalID: "ship", Title: "Ship", Dependencies: []models.BatchDependency{{ID: "base"}, {ID: "lint"}, {ID: "test"}}},
		{LocalID: "gate", Title: "Gated"},
		{LocalID: "pr", Title: "Through GitHub"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, r := range res {
		ids[r.LocalID] = r.TaskID
	}
	apply := func(name string, events ...models.TaskEvent) {
		t.Helper()
		for _, ev := range events {
			if _, err := e.store.ApplyEvent(ctx, models.TransitionRequest{TaskID: ids[name], Event: ev, AgentID: "a1", Actor: "test"}); err != nil {
				t.Fatalf("%s %s: %v", name, ev, err)
			}
		}
	}
	work := []models.TaskEvent{models.EventAssigned, models.EventAgentStarted, models.EventAgentCompleted}
	apply("base", append(work, models.EventVerifyPassed)...)
	apply("lint", models.EventAssigned, models.EventAgentStarted)
	apply("gate", append(work, models.EventApprovalRequested)...)
	apply("pr", append(work, models.EventPRCreated)...)
	if _, err := e.store.SavePullRequest(ctx, models.PullRequest{TaskID: ids["pr"], Owner: "o", Repo: "r", Number: 7,
		URL: "https://github.com/o/r/pull/7", Branch: "aq/pr"}); err != nil {
		t.Fatal(err)
	}
	list := e.get("/ui/queue").body
	list = list[strings.Index(list, `id="queue-tasks"`):]
	row := func(name string) string {
		t.Helper()
		i := strings.Index(list, `<a href="/ui/tasks/`+ids[name]+`">`)
		if i < 0 {
			t.Fatalf("%s is not listed:\n%s", name, list)
		}
		return list[i : i+strings.Index(list[i:], "</tr>")]
	}
	for name, want := range map[string]string{
		"ship": `<td><a href="/ui/tasks/` + ids["lint"] + `">Lint &lt;fast&gt;</a> <span class="status s-IN_PROGRESS">IN_PROGRESS</span>, ` +
			`<a href="/ui/tasks/` + ids["test"] + `">Test</a> <span class="status s-READY">READY</span></td>`,
		"gate": `<td><a href="/ui/tasks/` + ids["gate"] + `#approve">your approval</a></td>`,
		"pr":   `<td>the merge of <a href="https://github.com/o/r/pull/7" rel="noreferrer">its pull request</a></td>`,
	} {
		if r := row(name); !strings.Contains(r, want) {
			t.Errorf("the row of %s lacks %s:\n%s", name, want, r)
		}
	}
	if r := row("ship"); strings.Contains(r, ">Base<") {
		t.Errorf("ship's row names base, which completed:\n%s", r)
	}
}

// TestTaskDescriptionKeepsItsLines: a task's description keeps its line
// breaks, its markup escaped.
func TestTaskDescriptionKeepsItsLines(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	ctx := context.Background()
	if _, err := e.store.CreateProject(ctx, models.Project{ID: "web", Name: "web"}); err != nil {
		t.Fatal(err)
	}
	res, err := e.store.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", CreatedBy: "ana", Tasks: []models.BatchTask{
		{Title: "Steps", Description: "First line\n  - an <b>indented</b> item\n\nLast line"}}})
	if err != nil {
		t.Fatal(err)
	}
	p := e.get("/ui/tasks/" + res[0].TaskID)
	want := `<p class="description" id="task-description">First line` + "\n" + `  - an &lt;b&gt;indented&lt;/b&gt; item` + "\n\n" + `Last line</p>`
	if !strings.Contains(p.body, want) {
		t.Errorf("the task page lacks %q:\n%s", want, p.body)
	}
	css := e.get("/ui/static/style.css").body
	if !regexp.MustCompile(`\.description \{[^}]*white-space: pre-wrap`).MatchString(css) {
		t.Errorf("the stylesheet does not keep a description's line breaks:\n%s", css)
	}
}

// TestProjectsPageNamesAProjectOnce: a project whose name is its id is
// named once; another shows its id beside its name.
func TestProjectsPageNamesAProjectOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	ctx := context.Background()
	for _, p := range []models.Project{{ID: "web"}, {ID: "api", Name: "The API"}} {
		if _, err := e.store.CreateProject(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	p := e.get("/ui/projects")
	for _, want := range []string{
		`<td><a href="/ui/queue?project=web">web</a></td>`,
		`<td><a href="/ui/queue?project=api">The API</a> <span class="muted">api</span></td>`,
	} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the projects page lacks %s:\n%s", want, p.body)
		}
	}
}

// TestBlockedBadgeIsTheGraphsColour: the BLOCKED badge is drawn in the
// colours of a BLOCKED box in the graphs.
func TestBlockedBadgeIsTheGraphsColour(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	css := e.get("/ui/static/style.css").body
	rule := regexp.MustCompile(`\.s-BLOCKED \{([^}]*)\}`).FindStringSubmatch(css)
	if rule == nil {
		t.Fatalf("no .s-BLOCKED rule:\n%s", css)
	}
	c := dag.StatusColor(models.StatusBlocked)
	for _, want := range []string{"background: " + c.Fill + ";", "color: " + c.Text + ";"} {
		if !strings.Contains(rule[1], want) {
			t.Errorf(".s-BLOCKED {%s} lacks %q", rule[1], want)
		}
	}
	if regexp.MustCompile(`\.s-BLOCKED[^{]*,|, *\.s-BLOCKED`).MatchString(css) {
		t.Errorf("another rule colours BLOCKED too:\n%s", css)
	}
}
