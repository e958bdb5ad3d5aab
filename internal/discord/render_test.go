package discord

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/service/servicetest"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestNoticesGolden renders one notice of every kind the store writes, as
// a person reads them, against testdata/notices.golden.
func TestNoticesGolden(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := servicetest.New(t)
	st := k.Store
	b, err := New(Config{Token: "t", GuildID: "1", ControlChannelID: "2"}, &testService{Service: k.Service}, st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateProject(ctx, models.Project{ID: "web", Name: "Web"}); err != nil {
		t.Fatal(err)
	}
	res, err := st.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{
		{LocalID: "a", Title: "Fix the *login* page"},
		{LocalID: "b", Title: "Ship it", Dependencies: []models.BatchDependency{{ID: "a"}}},
		{LocalID: "c", Title: "Announce it", Dependencies: []models.BatchDependency{{ID: "b"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	a, bID, c := res[0].TaskID, res[1].TaskID, res[2].TaskID
	if _, err := st.SaveTaskThread(ctx, models.ChatThread{TaskID: a, ChannelID: "2", ThreadID: "900"}); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveResult(ctx, a, 0, models.Completion{Summary: "Fixed the form.\nIt validates emails now.",
		FilesChanged: []string{"login.go", "login_test.go"}}); err != nil {
		t.Logf("save result: %v", err) // the result table may require a run: the notice then says less
	}
	// Kinds whose notice is decoded from an outbox row's payload.
	payloads := map[models.NoticeKind]string{
		"hook.message": `{"hook_id":"triage","hook_name":"Failure *triage*","run_id":"triage.4","project_id":"web",` +
			`"text":"2 tasks failed @everyone <@123>:\n- [login](https://evil.example) {thread}\n# not a header"}`,
		"run.success": `{"run_id":"nightly_deps-3","workflow":"nightly_deps","project_id":"web","status":"success","reason":""}`,
		// legacy-import is no adjective-noun pair the store could draw as
		// one of the tasks' ids, which the placeholders below replace.
		"run.failed": `{"run_id":"nightly_deps-4","workflow":"nightly_deps","project_id":"web","status":"failed",` +
			`"reason":"task legacy-import is BLOCKED (max retries: ` + "`go test`" + ` *failed* @everyone); 1 of 3 tasks are BLOCKED"}`,
		"run.cancelled": `{"run_id":"nightly_deps-5","workflow":"nightly_deps","project_id":"web","status":"cancelled",` +
			`"reason":"cancelled by discord:400000000000000002"}`,
	}
	cases := []struct {
		kind models.NoticeKind
		n    notice
	}{
		{"task.started", change(bID, models.TransitionNotice{Title: "Ship it"})},
		{"task.started", change(a, models.TransitionNotice{Title: "Fix the *login* page"})},
		{"task.progress", notice{TaskID: a}},
		{"task.question", noticeOf(models.Notice{TaskID: a, Payload: models.Question{ID: 7, Text: "Which @everyone colour?\nPlease be quick."}})},
		{"task.completed", change(a, models.TransitionNotice{Title: "Fix the *login* page", Actor: "agent-1"})},
		{"task.failed", change(a, models.TransitionNotice{Title: "Fix the *login* page", Reason: "exit status 3: go test failed"})},
		{"task.blocked", change(a, models.TransitionNotice{Title: "Fix the *login* page", Reason: "max retries reached"})},
		{"task.blocked", change(bID, models.TransitionNotice{Title: "Ship it", Event: models.EventUpstreamFailed})},
		{"chain.broken", change(a, models.TransitionNotice{Title: "Fix the *login* page", Reason: "max retries reached", Blocked: []string{bID, c}})},
		{"task.paused", change(a, models.TransitionNotice{Title: "Fix the *login* page", Reason: "rate limited"})},
		{"task.awaiting_approval", change(a, models.TransitionNotice{Title: "Fix the *login* page", Reason: "plan proposed"})},
		{"task.approval_needed", noticeOf(models.Notice{TaskID: a, Payload: models.ApprovalNeededNotice{Title: "Fix the *login* page", Files: []string{"login.go"}}})},
		{"task.landing_waits", noticeOf(models.Notice{TaskID: a, Payload: models.LandingWaitsNotice{Title: "Fix the *login* page", Reason: "main is checked out in /home/ann/web " +
			"with local changes (README.md): nothing of them was touched and nothing was merged; commit or stash them; then " +
			"run `agentqueued land web`"}})},
		{"task.deleted", noticeOf(models.Notice{TaskID: c, Payload: models.TaskDeletedNotice{Title: "Announce it"}})},
		{"plan.failed", noticeOf(models.Notice{TaskID: a, Payload: models.PlanFailedNotice{Error: "tasks[1].title: required"}})},
		{"hook.message", notice{}},
		{"run.success", notice{}},
		{"run.failed", notice{}},
		{"run.cancelled", notice{}},
		{"unknown.kind", notice{TaskID: a}},
	}
	var out strings.Builder
	for _, k := range cases {
		var parts []part
		if k.kind == "task.progress" {
			parts = progressParts([]string{"reading the code", "running `go test`", "@here done"})
		} else {
			n := k.n
			if payload, ok := payloads[k.kind]; ok {
				if n, err = decodeNotice(k.kind, payload); err != nil {
					t.Fatalf("%s: %v", k.kind, err)
				}
			}
			parts, err = b.noticeParts(ctx, k.kind, n)
			if err != nil {
				t.Fatalf("%s: %v", k.kind, err)
			}
		}
		fmt.Fprintf(&out, "== %s\n", k.kind)
		for _, p := range parts {
			where := "channel"
			if p.Thread {
				where = "thread"
			}
			fmt.Fprintf(&out, "[%s] %s\n", where, p.Content)
			out.WriteString(renderButtons(p.Components))
			if p.File != nil {
				fmt.Fprintf(&out, "    attached %s (%d bytes)\n", p.File.Name, len(p.File.Body))
			}
		}
	}
	got := strings.NewReplacer(a, "<task-a>", bID, "<task-b>", c, "<task-c>").Replace(out.String())
	golden(t, "testdata/notices.golden", got)
}

// renderButtons lists a message's buttons: label and custom id (or URL).
func renderButtons(rows []discordgo.MessageComponent) string {
	var b strings.Builder
	for _, row := range rows {
		r, ok := row.(discordgo.ActionsRow)
		if !ok {
			continue
		}
		var labels []string
		for _, c := range r.Components {
			btn := c.(discordgo.Button)
			target := btn.CustomID
			if btn.URL != "" {
				target = btn.URL
			}
			labels = append(labels, fmt.Sprintf("(%s → %s)", btn.Label, target))
		}
		b.WriteString("    " + strings.Join(labels, " ") + "\n")
	}
	return b.String()
}

// golden compares got with a golden file (rewritten with -update).
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs:\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}

// change is the notice of a task's status change, as decoded.
func change(taskID string, c models.TransitionNotice) notice {
	c.TaskID = taskID
	return noticeOf(models.Notice{TaskID: taskID, Payload: c})
}

// TestEveryNoticeKindHasARenderer checks that every kind the store and the
// daemon write is posted by Discord, but for the deliberate exceptions.
func TestEveryNoticeKindHasARenderer(t *testing.T) {
	t.Parallel()
	notRendered := map[models.NoticeKind]string{
		models.NoticeTaskProgress:     "the delivery coalesces a task's progress lines itself (progressParts)",
		models.NoticeTaskWaitingInput: "the question's own notice (task.question) asks in the thread",
	}
	for _, k := range models.NoticeKinds() {
		_, rendered := noticeRenderers[k]
		if why, skipped := notRendered[k]; skipped {
			if rendered {
				t.Errorf("%s has a renderer but is listed as not rendered (%s)", k, why)
			}
			continue
		}
		if !rendered {
			t.Errorf("notice kind %s is written but Discord renders nothing for it", k)
		}
	}
	for k := range noticeRenderers {
		if !k.Known() {
			t.Errorf("renderer for unknown notice kind %s", k)
		}
	}
}
