package discord

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/discord/discordtest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/workflow"
)

// This file drives the /workflow and /run commands through the fake
// Discord against a real store and workflow engine, and the notices of
// runs that end with the Retry button of a failed one.

// Workflows of these tests.
const (
	nightlyDoc = `
name: nightly
project: web
schedule: "0 2 * * *"
timezone: Europe/Paris
steps:
  - name: build
    title: "Build {{run.id}}"
  - name: test
    title: "Test *everything*"
    depends_on: [build]
`
	fixDocsDoc = `
name: fix-docs
project: web
steps:
  - name: fix
    title: Fix the docs
`
	sweepDoc = `
name: sweep
project: api
schedule: "@daily"
schedule_enabled: false
steps:
  - name: sweep
    title: Sweep
`
)

// saveWorkflow reads a workflow document and saves it as one posted
// through the API.
func (h *harness) saveWorkflow(doc string) models.Workflow {
	h.t.Helper()
	w, err := workflow.Parse("w.yaml", []byte(doc))
	if err != nil {
		h.t.Fatal(err)
	}
	w.Origin = models.WorkflowFromAPI
	w, err = h.st.SaveWorkflow(context.Background(), w)
	if err != nil {
		h.t.Fatal(err)
	}
	return w
}

// startRun starts a run of a workflow as alice would.
func (h *harness) startRun(name string) models.WorkflowRun {
	h.t.Helper()
	r, err := h.svc.StartRun(context.Background(), name, actor(alice))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// runTask returns the task of a run with a name such as "build".
func (h *harness) runTask(runID, name string) models.Task {
	h.t.Helper()
	t, err := h.st.RunTaskByName(context.Background(), runID, name)
	if err != nil {
		h.t.Fatal(err)
	}
	return t.Task
}

// runStatus reads a run's status.
func (h *harness) runStatus(id string) models.WorkflowRunStatus {
	h.t.Helper()
	r, err := h.st.GetWorkflowRun(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return r.Status
}

// failRunTask runs a READY task of a run to BLOCKED: its run fails when
// nothing else can go on.
func (h *harness) failRunTask(runID, name string) models.Task {
	h.t.Helper()
	t := h.runTask(runID, name)
	h.apply(t.ID, models.EventAssigned, models.EventAgentStarted, models.EventMaxRetries)
	return t
}

// wantRunStatus checks a run's status in the store.
func (h *harness) wantRunStatus(t *testing.T, id string, want models.WorkflowRunStatus) {
	t.Helper()
	if got := h.runStatus(id); got != want {
		t.Errorf("run %s is %s, want %s", id, got, want)
	}
}

func TestWorkflowAndRunCommands(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	h.project("api")
	h.workflowEngine()
	ctx := context.Background()
	h.saveWorkflow(nightlyDoc)
	h.saveWorkflow(fixDocsDoc)
	h.saveWorkflow(sweepDoc)
	next := time.Date(2031, 5, 6, 0, 0, 0, 0, time.UTC)
	if err := h.st.SetWorkflowNextRun(ctx, "nightly", &next); err != nil {
		t.Fatal(err)
	}
	by := "<@" + alice + ">"
	var build, test models.Task

	h.runSteps(t, []cmdStep{
		{name: "workflow list", cmd: "workflow", sub: subOpt("list"), want: []string{
			"🔁 `fix-docs` · project `web` · 1 step(s) · by hand only\n" +
				fmt.Sprintf("🔁 `nightly` · project `web` · 2 step(s) · cron `0 2 * * *` (`Europe/Paris`) · next <t:%d:f> (<t:%d:R>)\n", next.Unix(), next.Unix()) +
				"⏸️ `sweep` · project `api` · 1 step(s) · cron `@daily` · schedule **disabled**"}},
		{name: "workflow list of a project", cmd: "workflow", sub: subOpt("list", strOpt("project", "api")),
			check: func(t *testing.T, r discordtest.Response) {
				if want := "⏸️ `sweep` · project `api` · 1 step(s) · cron `@daily` · schedule **disabled**"; r.Data.Content != want {
					t.Errorf("workflows of api: %q, want %q", r.Data.Content, want)
				}
			}},
		{name: "workflow list of a project without any", cmd: "workflow", sub: subOpt("list", strOpt("project", "ops")),
			want: []string{"Project `ops` has no workflows."}},
		{name: "run list before any", cmd: "run", sub: subOpt("list"), want: []string{"No runs yet. Start one with `/workflow run`."}},
		{name: "workflow run", cmd: "workflow", sub: subOpt("run", strOpt("workflow", "nightly")),
			want: []string{"⏳ Run `nightly-1` of **nightly** started by " + by + ": pending, 2 task(s).\nFollow it: `/run show run:nightly-1`"},
			check: func(t *testing.T, _ discordtest.Response) {
				r, err := h.st.GetWorkflowRun(ctx, "nightly-1")
				if err != nil || r.Trigger != models.TriggerByHand || r.TriggeredBy != actor(alice) || r.Status != models.RunPending {
					t.Errorf("started run: %+v, %v", r, err)
				}
				build, test = h.runTask("nightly-1", "build"), h.runTask("nightly-1", "test")
			}},
		{name: "run show", cmd: "run", sub: subOpt("show", strOpt("run", "nightly-1")),
			check: func(t *testing.T, r discordtest.Response) {
				want := "⏳ Run `nightly-1` of **nightly** — pending\nproject `web` · by " + by + " · started <t:"
				tasks := "tasks: defined 1 · ready 1\n**Tasks**\n" +
					"🟦 `build` · `" + build.ID + "` Build nightly-1 — READY\n" +
					"⏳ `test` · `" + test.ID + "` Test \\*everything\\* — DEFINED"
				if got := r.Data.Content; !strings.HasPrefix(got, want) || !strings.HasSuffix(got, tasks) {
					t.Errorf("run show:\n%s\nwant it to start %q and end %q", got, want, tasks)
				}
			}},
		{name: "another workflow run", cmd: "workflow", sub: subOpt("run", strOpt("workflow", "fix-docs")),
			want: []string{"Run `fix-docs-1` of **fix-docs** started by " + by + ": pending, 1 task(s)."}},
	})
	fix := h.failRunTask("fix-docs-1", "fix")
	h.wantRunStatus(t, "fix-docs-1", models.RunFailed)
	h.runSteps(t, []cmdStep{
		{name: "run list", cmd: "run", sub: subOpt("list"), want: []string{
			"**Last runs**, newest first\n❌ `fix-docs-1` **fix-docs** failed · by " + by + " · <t:",
			"\n↳ task " + fix.ID + " is BLOCKED \\(test max\\_retries\\); 1 of 1 tasks are BLOCKED\n" +
				"⏳ `nightly-1` **nightly** pending · by " + by + " · <t:"}},
		{name: "run list of a workflow", cmd: "run", sub: subOpt("list", strOpt("workflow", "nightly")),
			want: []string{"**Last runs** of `nightly`, newest first\n⏳ `nightly-1` **nightly** pending"},
			check: func(t *testing.T, r discordtest.Response) {
				if strings.Contains(r.Data.Content, "fix-docs") {
					t.Errorf("runs of nightly list another workflow's: %q", r.Data.Content)
				}
			}},
		{name: "run list by status", cmd: "run", sub: subOpt("list", strOpt("status", "failed")),
			want: []string{"**Last failed runs**, newest first\n❌ `fix-docs-1`"},
			check: func(t *testing.T, r discordtest.Response) {
				if strings.Contains(r.Data.Content, "nightly-1") {
					t.Errorf("failed runs list a pending one: %q", r.Data.Content)
				}
			}},
		{name: "run list of a workflow without runs", cmd: "run", sub: subOpt("list", strOpt("workflow", "sweep")),
			want: []string{"Workflow `sweep` has no runs yet."}},
		{name: "run retry", cmd: "run", sub: subOpt("retry", strOpt("run", "fix-docs-1")),
			want: []string{"🔁 Run `fix-docs-1` retried by " + by + ": now pending (ready 1)."},
			check: func(t *testing.T, _ discordtest.Response) {
				h.wantRunStatus(t, "fix-docs-1", models.RunPending)
				h.wantStatus(t, fix.ID, models.StatusReady)
			}},
		{name: "run retry with nothing to retry", cmd: "run", sub: subOpt("retry", strOpt("run", "fix-docs-1")), ephemeral: true,
			want: []string{"⚠️ run fix-docs-1 is pending: only a failed or cancelled run is retried"}},
	})

	// Cancelling takes an admin and a confirmation; its tasks are stopped.
	_, text := h.confirmDestructive(t, "run", subOpt("cancel", strOpt("run", "nightly-1")), "Really cancel run `nightly-1`?")
	if want := "🛑 Run `nightly-1` of **nightly** cancelled by <@" + root + ">: blocked 2."; text != want {
		t.Errorf("cancel confirmed: %q, want %q", text, want)
	}
	h.wantRunStatus(t, "nightly-1", models.RunCancelled)
	h.wantStatus(t, build.ID, models.StatusBlocked)
	h.wantStatus(t, test.ID, models.StatusBlocked)
	// Cancelled again: nothing is done, and the person is told why.
	r, _ := h.answer(h.command(root, controlChannel, "run", subOpt("cancel", strOpt("run", "nightly-1"))), 1)
	r, text = h.answer(h.press(root, r.Message, h.buttonID(r.Message, "aq|confirm|run-cancel|nightly-1")), 1)
	if !ephemeralFlag(r) || !strings.HasPrefix(text, "Nothing done: run `nightly-1` is cancelled now (cancelled by <@"+root+">, since <t:") {
		t.Errorf("second cancel: %q (ephemeral %v)", text, ephemeralFlag(r))
	}
	runs, err := h.st.ListWorkflowRuns(ctx, models.RunFilter{})
	if err != nil || len(runs) != 2 {
		t.Errorf("runs: %+v, %v; want nightly-1 and fix-docs-1", runs, err)
	}
	noRefusals(t, h)
}

func TestRunCommandRefusals(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	h.workflowEngine()
	ctx := context.Background()
	h.saveWorkflow(fixDocsDoc)
	h.startRun("fix-docs")
	noNewRuns := func(t *testing.T, _ discordtest.Response) {
		t.Helper()
		if runs, err := h.st.ListWorkflowRuns(ctx, models.RunFilter{}); err != nil || len(runs) != 1 {
			t.Errorf("runs: %+v, %v; want fix-docs-1 only", runs, err)
		}
	}
	h.runSteps(t, []cmdStep{
		{name: "run of no workflow", cmd: "workflow", sub: subOpt("run", strOpt("workflow", "nope")), ephemeral: true,
			want: []string{`⚠️ workflow "nope" not found`}, check: noNewRuns},
		{name: "run of a bad name", cmd: "workflow", sub: subOpt("run", strOpt("workflow", "**Nope** @everyone")), ephemeral: true,
			want: []string{"⚠️ workflow: `**Nope** @everyone` is not a workflow name"}, check: noNewRuns},
		{name: "show of no run", cmd: "run", sub: subOpt("show", strOpt("run", "nope-1")), ephemeral: true,
			want: []string{`⚠️ run "nope-1" not found`}},
		{name: "show of a bad id", cmd: "run", sub: subOpt("show", strOpt("run", "fix-docs")), ephemeral: true,
			want: []string{"⚠️ run: `fix-docs` is not a run id (its workflow's name, - and a number, e.g. nightly-3)"}},
		{name: "runs of no workflow", cmd: "run", sub: subOpt("list", strOpt("workflow", "nope")), ephemeral: true,
			want: []string{`⚠️ workflow "nope" not found`}},
		{name: "retry of a pending run", cmd: "run", sub: subOpt("retry", strOpt("run", "fix-docs-1")), ephemeral: true,
			want: []string{"⚠️ run fix-docs-1 is pending: only a failed or cancelled run is retried"}},
	})

	// Strangers are refused everywhere; only admins cancel.
	for _, c := range []struct {
		cmd string
		sub opt
	}{
		{"workflow", subOpt("list")}, {"workflow", subOpt("run", strOpt("workflow", "fix-docs"))},
		{"run", subOpt("list")}, {"run", subOpt("show", strOpt("run", "fix-docs-1"))},
		{"run", subOpt("retry", strOpt("run", "fix-docs-1"))}, {"run", subOpt("cancel", strOpt("run", "fix-docs-1"))},
	} {
		r, text := h.answer(h.command(mallory, controlChannel, c.cmd, c.sub), 1)
		if !ephemeralFlag(r) || !strings.Contains(text, "not allowed") {
			t.Errorf("stranger's /%s %s: %q", c.cmd, c.sub.Name, text)
		}
	}
	if r, text := h.answer(h.command(alice, controlChannel, "run", subOpt("cancel", strOpt("run", "fix-docs-1"))), 1); !ephemeralFlag(r) ||
		!strings.Contains(text, "`/run cancel` needs an admin") {
		t.Errorf("alice's cancel: %q", text)
	}
	if r, text := h.answer(h.command(root, controlChannel, "run", subOpt("cancel", strOpt("run", "fix-docs"))), 1); !ephemeralFlag(r) ||
		!strings.Contains(text, "needs the id of what to act on") || r.Message == nil || len(customIDs(r.Message)) != 0 {
		t.Errorf("cancel of a bad id: %q", text)
	}
	// A cancel confirmed by someone who is not an admin does nothing.
	r, _ := h.answer(h.command(root, controlChannel, "run", subOpt("cancel", strOpt("run", "fix-docs-1"))), 1)
	if _, text := h.answer(h.press(alice, r.Message, h.buttonID(r.Message, "aq|confirm|")), 1); !strings.Contains(text, "needs an admin") {
		t.Errorf("alice's confirmation: %q", text)
	}
	noNewRuns(t, discordtest.Response{})
	h.wantRunStatus(t, "fix-docs-1", models.RunPending)
	noRefusals(t, h)
}

func TestWorkflowAndRunAutocomplete(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	h.project("api")
	h.workflowEngine()
	ctx := context.Background()
	h.saveWorkflow(nightlyDoc)
	h.saveWorkflow(fixDocsDoc)
	h.saveWorkflow(sweepDoc)
	h.startRun("nightly")  // nightly-1, cancelled below
	h.startRun("fix-docs") // fix-docs-1, failed below
	h.startRun("nightly")  // nightly-2, pending
	if _, err := h.svc.CancelRun(ctx, "nightly-1", actor(root)); err != nil {
		t.Fatal(err)
	}
	h.failRunTask("fix-docs-1", "fix")
	h.wantRunStatus(t, "fix-docs-1", models.RunFailed)

	suggest := func(user, cmd, sub, focused, typed string, others ...opt) []string {
		t.Helper()
		o := &discordgo.ApplicationCommandInteractionDataOption{Name: focused, Type: discordgo.ApplicationCommandOptionString, Value: typed, Focused: true}
		i := h.fake.Interact(&discordgo.Interaction{Type: discordgo.InteractionApplicationCommandAutocomplete, ChannelID: controlChannel,
			Member: &discordgo.Member{User: &discordgo.User{ID: user}},
			Data: discordgo.ApplicationCommandInteractionData{Name: cmd, Options: []*discordgo.ApplicationCommandInteractionDataOption{
				subOpt(sub, append(others, o)...)}}})
		r, _ := h.answer(i, 1)
		if r.Type != discordgo.InteractionApplicationCommandAutocompleteResult || r.Data == nil {
			t.Fatalf("autocomplete answered %+v", r)
		}
		var out []string
		for _, c := range r.Data.Choices {
			out = append(out, c.Value.(string))
		}
		return out
	}
	for _, c := range []struct {
		name                    string
		user, cmd, sub, focused string
		typed                   string
		want                    []string
	}{
		{"workflows", alice, "workflow", "run", "workflow", "", []string{"fix-docs", "nightly", "sweep"}},
		{"workflows of a project typed", alice, "workflow", "run", "workflow", "api", []string{"sweep"}},
		{"workflows to list runs of", alice, "run", "list", "workflow", "night", []string{"nightly"}},
		{"runs, recent first", alice, "run", "show", "run", "", []string{"nightly-2", "fix-docs-1", "nightly-1"}},
		{"runs typed", alice, "run", "show", "run", "fix", []string{"fix-docs-1"}},
		{"runs by status typed", alice, "run", "show", "run", "cancelled", []string{"nightly-1"}},
		{"runs to retry", alice, "run", "retry", "run", "", []string{"fix-docs-1", "nightly-1"}},
		{"runs to cancel", root, "run", "cancel", "run", "", []string{"nightly-2"}},
		{"a stranger's workflows", mallory, "workflow", "run", "workflow", "", nil},
		{"a stranger's runs", mallory, "run", "show", "run", "", nil},
	} {
		if got := suggest(c.user, c.cmd, c.sub, c.focused, c.typed); !slices.Equal(got, c.want) {
			t.Errorf("%s: suggested %v, want %v", c.name, got, c.want)
		}
	}
	// Runs of the workflow chosen in /run list.
	if got := suggest(alice, "run", "show", "run", "", strOpt("workflow", "nightly")); !slices.Equal(got, []string{"nightly-2", "nightly-1"}) {
		t.Errorf("runs of nightly: %v", got)
	}
}

func TestRunNoticesAndRetryButton(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	h.workflowEngine()
	ctx := context.Background()
	if _, err := h.st.CreateProject(ctx, models.Project{ID: "ops", Name: "Ops"}); err != nil {
		t.Fatal(err)
	}
	h.saveWorkflow(fixDocsDoc)
	h.saveWorkflow(strings.NewReplacer("fix-docs", "deploy", "project: web", "project: ops").Replace(fixDocsDoc))

	// A run that succeeds, in the project's channel.
	h.startRun("fix-docs")
	h.apply(h.runTask("fix-docs-1", "fix").ID, models.EventAssigned, models.EventAgentStarted, models.EventAgentCompleted,
		models.EventVerifyPassed)
	h.wantRunStatus(t, "fix-docs-1", models.RunSuccess)
	if m := h.waitMessage(projectChannel, "✅ Run `fix-docs-1`"); m.Content != "✅ Run `fix-docs-1` of **fix-docs** succeeded" ||
		len(m.Components) != 0 {
		t.Errorf("success notice: %q with %v", m.Content, customIDs(m))
	}

	// A run cancelled, in the control channel (its project has none).
	h.startRun("deploy")
	if _, err := h.svc.CancelRun(ctx, "deploy-1", actor(root)); err != nil {
		t.Fatal(err)
	}
	if m := h.waitMessage(controlChannel, "🛑 Run `deploy-1`"); m.Content != "🛑 Run `deploy-1` of **deploy** was cancelled: cancelled by <@"+root+">" ||
		len(m.Components) != 0 {
		t.Errorf("cancelled notice: %q with %v", m.Content, customIDs(m))
	}

	// A run that fails: its notice says why, with a Retry button.
	h.startRun("fix-docs")
	failed := h.failRunTask("fix-docs-2", "fix")
	notice := h.waitMessage(projectChannel, "❌ Run `fix-docs-2`")
	want := "❌ Run `fix-docs-2` of **fix-docs** failed: task " + failed.ID + " is BLOCKED \\(test max\\_retries\\); 1 of 1 tasks are BLOCKED"
	retry := customID("run-retry", "fix-docs-2", "failed")
	if notice.Content != want || !slices.Equal(customIDs(notice), []string{retry}) {
		t.Errorf("failed notice: %q with %v, want %q with %s", notice.Content, customIDs(notice), want, retry)
	}
	if notice.MentionEveryone || len(notice.Mentions) != 0 {
		t.Errorf("the notice mentions: everyone %v, %v", notice.MentionEveryone, notice.Mentions)
	}
	// A stranger's press does nothing.
	if r, text := h.answer(h.press(mallory, notice, retry), 1); !ephemeralFlag(r) || !strings.Contains(text, "not allowed") {
		t.Errorf("stranger's retry: %q", text)
	}
	h.wantRunStatus(t, "fix-docs-2", models.RunFailed)
	// Pressed: the run starts again and the notice says so, without its button.
	h.pressUpdates(t, notice, retry, "🔁 Run `fix-docs-2` retried by <@"+alice+">: now pending (ready 1).")
	h.wantRunStatus(t, "fix-docs-2", models.RunPending)
	h.wantStatus(t, failed.ID, models.StatusReady)
	// Pressed again: nothing is done, and the person is told why.
	r, text := h.answer(h.press(alice, notice, retry), 1)
	if !ephemeralFlag(r) || !strings.HasPrefix(text, "Nothing done: run `fix-docs-2` is pending now (since <t:") {
		t.Errorf("second press: %q (ephemeral %v)", text, ephemeralFlag(r))
	}
	h.wantStatus(t, failed.ID, models.StatusReady)

	// A press after the run moved on (retried from a command, then
	// cancelled) does nothing.
	h.startRun("fix-docs")
	third := h.failRunTask("fix-docs-3", "fix")
	notice = h.waitMessage(projectChannel, "❌ Run `fix-docs-3`")
	if _, text := h.answer(h.command(root, controlChannel, "run", subOpt("retry", strOpt("run", "fix-docs-3"))), 1); !strings.HasPrefix(text, "🔁 Run `fix-docs-3` retried by <@"+root+">") {
		t.Fatalf("retry: %q", text)
	}
	if _, err := h.svc.CancelRun(ctx, "fix-docs-3", actor(root)); err != nil {
		t.Fatal(err)
	}
	h.waitMessage(projectChannel, "🛑 Run `fix-docs-3` of **fix-docs** was cancelled: cancelled by <@"+root+">")
	r, text = h.answer(h.press(alice, notice, customID("run-retry", "fix-docs-3", "failed")), 1)
	if !ephemeralFlag(r) || !strings.HasPrefix(text, "Nothing done: run `fix-docs-3` is cancelled now (cancelled by <@"+root+">, since <t:") {
		t.Errorf("press after a retry and a cancel: %q (ephemeral %v)", text, ephemeralFlag(r))
	}
	h.wantRunStatus(t, "fix-docs-3", models.RunCancelled)
	// A broken button says so.
	if _, text := h.answer(h.press(alice, notice, "aq|run-retry|fix-docs-3|exploded"), 1); text != "⚠️ This button is broken." {
		t.Errorf("broken button: %q", text)
	}

	// The last notice: the cancelled run's task was stopped.
	h.waitMessageWith(projectChannel, "`"+third.ID+"` Fix the docs is blocked: cancelled by <@"+root+">")
	h.stop() // finishes the pass under way
	if pending, err := h.st.PendingOutbox(ctx, 100); err != nil || len(pending) != 0 {
		t.Errorf("still pending: %+v, %v", pending, err)
	}
	for ch, texts := range map[string][]string{
		projectChannel: {"✅ Run `fix-docs-1`", "❌ Run `fix-docs-2`", "❌ Run `fix-docs-3`", "🛑 Run `fix-docs-3`"},
		controlChannel: {"🛑 Run `deploy-1`"},
	} {
		counts, ordered := countIn(h.fake.Messages(ch), texts)
		for i, n := range counts {
			if n != 1 {
				t.Errorf("%q is in channel %s %d times, want once", texts[i], ch, n)
			}
		}
		if !ordered {
			t.Errorf("channel %s has the notices out of order", ch)
		}
	}
	noRefusals(t, h)
}

func TestRunShowFitsOneMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	h.workflowEngine()
	h.saveWorkflow(`
name: shards
project: web
steps:
  - name: shard
    title: "Shard {{index}} of {{count}}: ` + strings.Repeat("*long* title ", 8) + `"
    parallel: 300
`)
	h.startRun("shards")
	r, text := h.answer(h.command(alice, controlChannel, "run", subOpt("show", strOpt("run", "shards-1"))), 1)
	if ephemeralFlag(r) || utf8.RuneCountInString(text) > messageLimit || r.Message == nil || len(r.Message.Attachments) != 0 {
		t.Errorf("run show: ephemeral %v, %d characters, message %+v", ephemeralFlag(r), utf8.RuneCountInString(text), r.Message)
	}
	if !strings.HasPrefix(text, "⏳ Run `shards-1` of **shards** — pending") || !strings.Contains(text, "tasks: ready 300\n**Tasks**\n🟦 `shard[0]` · `") ||
		!strings.Contains(text, "Shard 0 of 300: \\*long\\* title") {
		t.Errorf("run show starts:\n%s", cut(text, 400))
	}
	shown := strings.Count(text, "\n🟦 `shard[")
	if want := fmt.Sprintf("\n*(%d more not shown)*", 300-shown); shown == 0 || !strings.HasSuffix(text, want) {
		t.Errorf("run show shows %d tasks and ends %q, want %q", shown, text[max(0, len(text)-40):], want)
	}
	noRefusals(t, h)
}

func TestRunRendering(t *testing.T) {
	t.Parallel()
	n, err := decodeNotice(models.NoticeRunFailed, `{"run_id":"w-2","workflow":"w","project_id":"web","status":"failed","reason":"why"}`)
	if err != nil || n.payload == nil || n.ProjectID != "web" || n.payload != (models.RunEndedNotice{RunID: "w-2", Workflow: "w", ProjectID: "web", Status: "failed", Reason: "why"}) {
		t.Errorf("decoded %+v (%+v), %v", n, n.payload, err)
	}
	if _, err := decodeNotice(models.NoticeRunSuccess, `{"run_id": 7}`); err == nil {
		t.Error("a run notice with a numeric run id decoded")
	}
	// A run id that cannot be a button's gets no button.
	long := strings.Repeat("a", 90) + "-1"
	if parts := runNoticeParts(models.NoticeRunFailed, models.RunEndedNotice{RunID: long, Workflow: "w"}); len(parts) != 1 || parts[0].Components != nil {
		t.Errorf("long run id: %+v", parts)
	}
	// /workflow run and /run retry may be proposed; /run cancel is
	// proposed only to be refused.
	got := proposable()
	for _, path := range []string{"workflow list", "workflow run", "run list", "run show", "run retry", "run cancel"} {
		if !got[path] {
			t.Errorf("/%s is not proposable", path)
		}
	}
	if !destructive["run cancel"] || destructive["run retry"] {
		t.Error("/run cancel must be the destructive one")
	}

	// A schedule's next time is the engine's, else the schedule's next
	// after now, read in its time zone.
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC) // a Monday
	w := models.Workflow{Name: "weekly", ProjectID: "web", Schedule: "0 9 * * 1", Timezone: "Europe/Paris", ScheduleEnabled: true,
		ScheduleFrom: now.Add(-time.Hour), Steps: make([]models.WorkflowStep, 2)}
	next := time.Date(2026, 3, 9, 8, 0, 0, 0, time.UTC)
	want := fmt.Sprintf("🔁 `weekly` · project `web` · 2 step(s) · cron `0 9 * * 1` (`Europe/Paris`) · next <t:%d:f> (<t:%d:R>)", next.Unix(), next.Unix())
	if got := renderWorkflow(w, now); got != want {
		t.Errorf("weekly: %q, want %q", got, want)
	}
	recorded := now.Add(time.Minute)
	w.NextRun = &recorded
	if got := renderWorkflow(w, now); !strings.HasSuffix(got, fmt.Sprintf("next <t:%d:f> (<t:%d:R>)", recorded.Unix(), recorded.Unix())) {
		t.Errorf("weekly with its next run recorded: %q", got)
	}
	// Who started a run.
	for _, c := range []struct {
		r    models.WorkflowRun
		want string
	}{
		{models.WorkflowRun{Trigger: models.TriggerByHand, TriggeredBy: "discord:" + alice}, "by <@" + alice + ">"},
		{models.WorkflowRun{Trigger: models.TriggerByHand, TriggeredBy: "api `x`"}, "by `api x`"},
		{models.WorkflowRun{Trigger: models.TriggerBySchedule, TriggeredBy: "schedule"}, "scheduled"},
		{models.WorkflowRun{Trigger: models.TriggerBySchedule, TriggeredBy: "schedule (catch-up after downtime: 3 earlier scheduled times missed)"},
			"schedule \\(catch-up after downtime: 3 earlier scheduled times missed\\)"},
	} {
		if got := renderRunTrigger(c.r); got != c.want {
			t.Errorf("trigger of %+v: %q, want %q", c.r, got, c.want)
		}
	}
}
