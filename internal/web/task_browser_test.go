package web_test

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/web/dag"
)

// TestBrowserLogHeadingFollowsANewAttempt: once a task's next attempt
// starts writing its log, the open page's log and its heading are the
// new attempt's.
func TestBrowserLogHeadingFollowsANewAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	b, _ := graphBrowser(t)
	ctx := context.Background()
	if _, err := e.store.RegisterAgent(ctx, models.Agent{ID: "a1", Name: "worker", AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "/bin/true"}}); err != nil {
		t.Fatal(err)
	}
	id := e.task("web", "Build")
	runAttempt := func(attempt int, log string) {
		t.Helper()
		run, _, err := e.store.ClaimTask(ctx, id, "a1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.StartRun(ctx, run.ID, 0, ""); err != nil {
			t.Fatal(err)
		}
		e.writeLog(id, attempt, log)
		if attempt > 1 {
			e.feed.Output(id)
			e.feed.Notify()
			return
		}
		b.Do("open the task's page", chromedp.Navigate(e.srv.URL+"/ui/tasks/"+id))
		b.WaitText("#log", "first attempt")
		if h := b.Text("#h-log"); h != "Log of attempt 1" {
			t.Fatalf("the log's heading: %q", h)
		}
		if _, err := e.store.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentFailed,
			Outcome: models.RunOutcomeFailed, Error: "tests failed"}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.ApplyEvent(ctx, models.TransitionRequest{TaskID: id, Event: models.EventRetry, Actor: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	runAttempt(1, "first attempt\n")
	runAttempt(2, "second attempt\n")
	b.WaitText("#log", "second attempt")
	b.WaitText("#h-log", "Log of attempt 2")
}

// TestBrowserTaskPageShowsLinesAndOneBlockedColour: a task's description
// reads with its line breaks, and a BLOCKED task's badge has the colours
// of its box in the graph.
func TestBrowserTaskPageShowsLinesAndOneBlockedColour(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	b, _ := graphBrowser(t)
	ctx := context.Background()
	if _, err := e.store.CreateProject(ctx, models.Project{ID: "web", Name: "web"}); err != nil {
		t.Fatal(err)
	}
	res, err := e.store.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", CreatedBy: "ana", Tasks: []models.BatchTask{
		{Title: "Stopped", Description: "First line\nsecond <b>line</b>"}}})
	if err != nil {
		t.Fatal(err)
	}
	id := res[0].TaskID
	for _, ev := range []models.TaskEvent{models.EventAssigned, models.EventAgentStarted, models.EventAdminStop} {
		if _, err := e.store.ApplyEvent(ctx, models.TransitionRequest{TaskID: id, Event: ev, AgentID: "a1", Actor: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	b.Do("open the task's page", chromedp.Navigate(e.srv.URL+"/ui/tasks/"+id), chromedp.WaitVisible(chromedp.CSS(`svg.dag`)))
	bctx, cancel := b.Context()
	defer cancel()
	text, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById('task-description').innerText`))
	if err != nil {
		t.Fatal(err)
	}
	if text != "First line\nsecond <b>line</b>" {
		t.Errorf("the description reads %q", text)
	}
	colours, err := chromedp.Run(bctx, chromedp.Evaluate[string](`(() => {
		const badge = getComputedStyle(document.getElementById('task-status'));
		const box = getComputedStyle(document.querySelector('svg.dag [data-status="BLOCKED"] rect'));
		return [badge.backgroundColor, badge.color, box.fill].join(' | ');
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	c := dag.StatusColor(models.StatusBlocked)
	if want := rgb(c.Fill) + " | " + rgb(c.Text) + " | " + rgb(c.Fill); colours != want {
		t.Errorf("BLOCKED badge background | text | box: %s, want %s", colours, want)
	}
}
