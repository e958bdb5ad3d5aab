package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/web/webtest"
)

// browserAgentScript plays the part each task's title asks for: [gate]
// reports progress and waits for the test to open its gate (a FIFO),
// [ask] asks a question and completes with the answer, [commit] commits
// a file for approval, [hold] waits on a FIFO nobody writes until it is
// cancelled.
const browserAgentScript = `#!/bin/sh
set -eu
prompt=$(cat)
case "$prompt" in
*"[gate]"*)
  echo "working on $AQ_TASK_ID"
  "$WORKER_BIN" agent progress "halfway there"
  cat "$GATE_DIR/gate" > /dev/null
  "$WORKER_BIN" agent complete --summary "through the gate"
  ;;
*"[ask]"*)
  answer=$("$WORKER_BIN" agent ask "Which colour?")
  "$WORKER_BIN" agent complete --summary "colour: $answer"
  ;;
*"[commit]"*)
  echo "approved work" > gated.txt
  git add gated.txt
  git -c user.name=agent -c user.email=agent@localhost -c commit.gpgsign=false commit -q -m "Gated work"
  "$WORKER_BIN" agent complete --summary "wrote gated.txt"
  ;;
*"[hold]"*)
  echo "holding"
  cat "$GATE_DIR/hold" > /dev/null
  "$WORKER_BIN" agent complete --summary "held"
  ;;
esac
`

// TestDashboardInABrowser drives the dashboard in headless Chromium
// against the whole daemon with a command agent: logging in, watching a
// task move through its statuses and its log grow without reloading,
// answering a question, approving with the diff on the page, cancelling
// a run, and a cross-site form refused.
func TestDashboardInABrowser(t *testing.T) {
	t.Parallel()
	webtest.Chromium(t) // skips (or fails under CI) before anything starts
	bin := agentqueuedBinary(t)
	dir := t.TempDir()
	origin := filepath.Join(dir, "origin.git")
	bareOrigin(t, origin)
	for _, fifo := range []string{"gate", "hold"} {
		if err := syscall.Mkfifo(filepath.Join(dir, fifo), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	script := writeFile(t, dir, "agent.sh", browserAgentScript)
	cfg := writeFile(t, dir, "config.yaml", `
api:
  token: ${AQ_TEST_TOKEN}
agents:
  - name: worker
    type: command
    command: /bin/sh
    args: ["`+script+`"]
    env: {WORKER_BIN: "`+bin+`", GATE_DIR: "`+dir+`"}
`)
	const token = "browser-test-token"
	d, err := startMainWith(t, func(m *Main) { m.Getenv = envOf(map[string]string{"AQ_TEST_TOKEN": token}) },
		"run", "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.logs)
		}
	})
	ctx := d.watch.Context()
	base := "http://" + d.m.Addr()
	c, err := api.NewClient(base, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateProject(ctx, models.ProjectSpec{ID: "plain"}.Project()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateProject(ctx, models.ProjectSpec{ID: "gated", Settings: models.ProjectSettings{PRMode: models.PRNever},
		Repo: &models.RepoConfig{SourceType: models.RepoClone, URL: origin}}.Project()); err != nil {
		t.Fatal(err)
	}
	addTask := func(project, title string, approval bool) string {
		t.Helper()
		res, err := c.CreateTasks(ctx, models.TaskBatch{ProjectID: project, Tasks: []models.BatchTask{{Title: title, RequiresApproval: approval}}})
		if err != nil {
			t.Fatal(err)
		}
		return res[0].TaskID
	}
	b := webtest.Start(t, ctx)
	status := func(id string) models.TaskStatus {
		t.Helper()
		td, err := c.GetTask(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return td.Task.Status
	}

	var pages string // the session's pages' URL, with its path secret
	{
		t.Log("step: log in")
		b.Do("open the overview", chromedp.Navigate(base+"/ui/overview"))
		b.WaitText("h1", "Log in")
		b.Do("log in with a wrong token", chromedp.WaitVisible("#token"), chromedp.SendKeys("#token", "wrong"), chromedp.Submit("#token"))
		b.WaitText("main", "wrong token")
		b.Do("log in", chromedp.WaitVisible("#token"), chromedp.SendKeys("#token", token), chromedp.Submit("#token"))
		b.WaitText("h1", "Overview")
		b.WaitText("#ov-agents", "worker")
		tab, cancel := b.Context()
		loc, err := chromedp.Run(tab, chromedp.Location())
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		// The session's pages are under a path of its own.
		m := regexp.MustCompile(`^` + regexp.QuoteMeta(base) + `(/ui/s/[A-Za-z0-9_-]+)/overview$`).FindStringSubmatch(loc)
		if m == nil {
			t.Fatalf("the login led to %s, not the overview under the session's own path", loc)
		}
		pages = base + m[1]
	}

	{
		t.Log("step: the keyboard and a phone's screen")
		b.Do("press Tab", chromedp.KeyEvent("\t"))
		b.WaitFor("the skip link focused first", `document.activeElement && document.activeElement.textContent === "Skip to content"`)
		b.Do("narrow the screen", chromedp.EmulateViewport(375, 800), chromedp.Navigate(pages+"/queue?status=all"))
		b.WaitText("h1", "Queue")
		b.WaitFor("no sideways scrolling at 375 px", "document.documentElement.scrollWidth <= document.documentElement.clientWidth")
		b.Do("widen the screen", chromedp.ResetViewport())
	}

	{
		t.Log("step: a task moves through its statuses live")
		id := addTask("plain", "Walk [gate]", false)
		b.Do("open the task", chromedp.Navigate(pages+"/tasks/"+id))
		b.WaitText("h1", "Walk [gate]")
		b.WaitFor("the page's mark", "(window.__unreloaded = true)")
		b.WaitText("#task-status", "IN_PROGRESS")
		b.WaitText("#log", "halfway there")
		if err := os.WriteFile(filepath.Join(dir, "gate"), []byte("go\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		b.WaitText("#task-status", "COMPLETED")
		b.WaitText("#task-result", "through the gate")
		b.WaitText("#task-events", "AGENT_STARTED")
		b.WaitFor("the same page, never reloaded", "window.__unreloaded === true")
	}

	{
		t.Log("step: answer a question")
		id := addTask("plain", "Choose [ask]", false)
		b.Do("open the task", chromedp.Navigate(pages+"/tasks/"+id))
		b.WaitText("#task-questions", "Which colour?")
		b.WaitText("#task-status", "WAITING_INPUT")
		b.Do("answer", chromedp.WaitVisible("#task-questions textarea"), chromedp.SendKeys("#task-questions textarea", "teal"), chromedp.Submit("#task-questions textarea"))
		b.WaitText("main", "Answer sent.")
		b.WaitText("#task-status", "COMPLETED")
		b.WaitText("#task-result", "colour: teal")
	}

	{
		t.Log("step: approve with the diff shown")
		id := addTask("gated", "Gate [commit]", true)
		b.Do("open the task", chromedp.Navigate(pages+"/tasks/"+id))
		b.WaitText("#task-status", "AWAITING_APPROVAL")
		b.WaitText("#diff", "+++ b/gated.txt")
		b.WaitText("#diff", "+approved work")
		b.Do("approve", chromedp.WaitVisible("#note"), chromedp.SendKeys("#note", "looks right"), chromedp.Click("#approve"))
		b.WaitText("main", "Approved")
		b.WaitText("#task-status", "COMPLETED")
		if got := status(id); got != models.StatusCompleted {
			t.Fatalf("the approved task is %s", got)
		}
	}

	{
		t.Log("step: cancel a run")
		id := addTask("plain", "Hold [hold]", false)
		b.Do("open the task", chromedp.Navigate(pages+"/tasks/"+id))
		b.WaitText("#task-status", "IN_PROGRESS")
		b.WaitText("#log", "holding")
		b.Do("cancel", chromedp.Click("#cancel"))
		b.WaitText("main", "cancelled")
		b.WaitText("#task-status", "BLOCKED")
		b.WaitText("#task-runs", "stopped")
	}

	{
		t.Log("step: a cross-site form is refused")
		id := addTask("plain", "Target [hold]", false)
		b.Do("open the task", chromedp.Navigate(pages+"/tasks/"+id))
		b.WaitText("#task-status", "IN_PROGRESS")
		// Another site (another port of the same host: same-site, so the
		// SameSite cookie goes along) posts the cancel form with a
		// CSRF token taken from the page: the Origin check refuses it.
		tab, cancel := b.Context()
		csrf, err := chromedp.Run(tab, chromedp.Value(`input[name="csrf"]`))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s/tasks/%s/cancel">`+
				`<input type="hidden" name="csrf" value="%s"><button id="go">go</button></form>`, pages, id, csrf)
		}))
		defer evil.Close()
		b.Do("open the other site", chromedp.Navigate(evil.URL))
		b.Do("post its form", chromedp.Click("#go"))
		b.WaitText("body", "cross-origin request refused")
		if got := status(id); got != models.StatusInProgress {
			t.Fatalf("after the cross-site form the task is %s, want IN_PROGRESS", got)
		}
		if _, err := c.SendEvent(ctx, id, api.EventRequest{Event: models.EventAdminCancel}); err != nil {
			t.Fatal(err)
		}
	}
}
