package discord

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/discord/discordtest"
	"github.com/agentqueued/agentqueued/internal/models"
)

func TestRegistersCommandsAndRefusesStrangers(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var names []string
	for _, c := range h.fake.Commands() {
		names = append(names, c.Name)
	}
	slices.Sort(names)
	if want := []string{"agent", "budget", "hook", "project", "questions", "run", "status", "task", "workflow"}; !slices.Equal(names, want) {
		t.Errorf("registered %v, want %v", names, want)
	}

	h.project("web")
	i := h.command(mallory, controlChannel, "task", subOpt("add", strOpt("title", "sneaky")))
	r, text := h.answer(i, 1)
	if !ephemeralFlag(r) || !strings.Contains(text, "not allowed") {
		t.Errorf("stranger got %q (ephemeral %v)", text, ephemeralFlag(r))
	}
	if ts, _ := h.st.ListTasks(context.Background(), models.TaskFilter{}); len(ts) != 0 {
		t.Errorf("a stranger's command created %d tasks", len(ts))
	}
	// Autocomplete tells strangers nothing either.
	ac := h.fake.Interact(&discordgo.Interaction{Type: discordgo.InteractionApplicationCommandAutocomplete, ChannelID: controlChannel,
		Member: &discordgo.Member{User: &discordgo.User{ID: mallory}},
		Data: discordgo.ApplicationCommandInteractionData{Name: "project", Options: []*discordgo.ApplicationCommandInteractionDataOption{
			subOpt("show", &discordgo.ApplicationCommandInteractionDataOption{Name: "project", Type: discordgo.ApplicationCommandOptionString, Value: "", Focused: true})}}})
	if r, _ := h.answer(ac, 1); r.Data == nil || len(r.Data.Choices) != 0 {
		t.Errorf("stranger's autocomplete: %+v", r.Data)
	}
}

func TestTaskAddListShowAndBadOptions(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web", &models.RepoConfig{SourceType: models.RepoInit})
	up := h.task("web", "Upstream")

	// In the project's channel the project is inferred.
	i := h.command(alice, projectChannel, "task", subOpt("add", strOpt("title", "Write the docs"), strOpt("description", "All of them"),
		intOpt("priority", 5), strOpt("depends_on", up), strOpt("test_commands", "go test ./...; go vet ./..."),
		strOpt("verification", "HUMAN"), boolOpt("requires_approval", true)))
	r, text := h.answer(i, 1)
	if ephemeralFlag(r) || !strings.Contains(text, "Added `") || !strings.Contains(text, "to `web`") {
		t.Fatalf("task add answered %q", text)
	}
	ts, err := h.st.ListTasks(context.Background(), models.TaskFilter{ProjectID: "web"})
	if err != nil {
		t.Fatal(err)
	}
	var added models.Task
	for _, x := range ts {
		if x.Title == "Write the docs" {
			added = x
		}
	}
	if added.ID == "" || added.Priority != 5 || added.Status != models.StatusDefined || added.VerificationType != models.VerifyHuman ||
		!added.RequiresApproval || !slices.Equal(added.TestCommands, []string{"go test ./...", "go vet ./..."}) ||
		added.CreatedBy != "discord:"+alice {
		t.Errorf("added task: %+v", added)
	}

	_, text = h.answer(h.command(alice, controlChannel, "task", subOpt("show", strOpt("task", added.ID))), 1)
	for _, want := range []string{added.ID, "Write the docs", "DEFINED", "waits for: `" + up + "`"} {
		if !strings.Contains(text, want) {
			t.Errorf("task show lacks %q:\n%s", want, text)
		}
	}
	_, text = h.answer(h.command(alice, controlChannel, "task", subOpt("list", strOpt("project", "web"))), 1)
	if !strings.Contains(text, added.ID) || !strings.Contains(text, up) {
		t.Errorf("task list:\n%s", text)
	}

	cases := []struct {
		name string
		opts []*discordgo.ApplicationCommandInteractionDataOption
		want string
	}{
		{"unknown dependency", []*discordgo.ApplicationCommandInteractionDataOption{strOpt("title", "x"), strOpt("depends_on", "no-such-task")}, "no-such-task"},
		{"empty title", []*discordgo.ApplicationCommandInteractionDataOption{strOpt("title", "  ")}, "title"},
		{"unknown project", []*discordgo.ApplicationCommandInteractionDataOption{strOpt("title", "x"), strOpt("project", "nope")}, "nope"},
	}
	for _, c := range cases {
		r, text := h.answer(h.command(alice, projectChannel, "task", subOpt("add", c.opts...)), 1)
		if !ephemeralFlag(r) || !strings.Contains(text, c.want) || strings.Contains(text, "went wrong") {
			t.Errorf("%s: answered %q (ephemeral %v)", c.name, text, ephemeralFlag(r))
		}
	}
	// Outside any project's channel with two projects, the project must be named.
	h.project("api")
	if _, text := h.answer(h.command(alice, controlChannel, "task", subOpt("add", strOpt("title", "x"))), 1); !strings.Contains(text, "name the project") {
		t.Errorf("no project inferred: %q", text)
	}
}

func TestAutocompleteSuggestsIDs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	a := h.task("web", "Alpha work")
	b := h.task("web", "Beta work")
	h.apply(b, models.EventAssigned, models.EventAgentStarted, models.EventAgentFailed)
	focused := func(cmd, sub, typed string) []*discordgo.ApplicationCommandOptionChoice {
		i := h.fake.Interact(&discordgo.Interaction{Type: discordgo.InteractionApplicationCommandAutocomplete, ChannelID: controlChannel,
			Member: &discordgo.Member{User: &discordgo.User{ID: alice}},
			Data: discordgo.ApplicationCommandInteractionData{Name: cmd, Options: []*discordgo.ApplicationCommandInteractionDataOption{
				subOpt(sub, &discordgo.ApplicationCommandInteractionDataOption{Name: "task", Type: discordgo.ApplicationCommandOptionString, Value: typed, Focused: true})}}})
		r, _ := h.answer(i, 1)
		if r.Type != discordgo.InteractionApplicationCommandAutocompleteResult {
			t.Fatalf("autocomplete answered with type %d", r.Type)
		}
		return r.Data.Choices
	}
	values := func(cs []*discordgo.ApplicationCommandOptionChoice) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Value.(string))
		}
		return out
	}
	if got := values(focused("task", "show", "")); !slices.Contains(got, a) || !slices.Contains(got, b) {
		t.Errorf("show suggests %v", got)
	}
	if got := values(focused("task", "show", "alpha")); !slices.Equal(got, []string{a}) {
		t.Errorf("typed alpha: %v", got)
	}
	// skip acts on failed and blocked tasks only.
	if got := values(focused("task", "skip", "")); !slices.Equal(got, []string{b}) {
		t.Errorf("skip suggests %v, want [%s]", got, b)
	}
}

func TestFailedNoticeButtonsAndDoublePress(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	id := h.task("web", "Flaky work")
	h.apply(id, models.EventAssigned, models.EventAgentStarted, models.EventAgentFailed)

	notice := h.waitMessage(projectChannel, "failed")
	if !strings.Contains(notice.Content, id) || !strings.Contains(notice.Content, "test agent\\_failed") {
		t.Errorf("failed notice: %q", notice.Content)
	}
	// The task's thread started at its first start carries the failure too.
	h.waitMessage(h.waitThread(id), "Failed")

	// View error is for the one who asked.
	r, text := h.answer(h.press(alice, notice, h.buttonID(notice, "aq|error|")), 1)
	if !ephemeralFlag(r) || !strings.Contains(text, "test agent_failed") {
		t.Errorf("view error: %q (ephemeral %v)", text, ephemeralFlag(r))
	}

	retry := h.buttonID(notice, "aq|event|ADMIN_RESTART|")
	r, text = h.answer(h.press(alice, notice, retry), 1)
	if r.Type != discordgo.InteractionResponseUpdateMessage || !strings.Contains(text, "Restarted `"+id+"`") {
		t.Errorf("retry answered type %d %q", r.Type, text)
	}
	if st := h.taskStatus(id); st != models.StatusReady {
		t.Fatalf("after retry %s is %s", id, st)
	}
	// Pressed again (the notice still has its button elsewhere, or a second person pressed it).
	r, text = h.answer(h.press(root, notice, retry), 1)
	if !ephemeralFlag(r) || !strings.Contains(text, "Nothing done") || !strings.Contains(text, "READY") || !strings.Contains(text, "<@"+alice+">") {
		t.Errorf("second press: %q", text)
	}
	events, _ := h.st.GetTaskDetail(context.Background(), id)
	restarts := 0
	for _, e := range events.Events {
		if e.Event == models.EventAdminRestart {
			restarts++
		}
	}
	if restarts != 1 {
		t.Errorf("%d restarts recorded, want 1", restarts)
	}
}

// runningTask claims and starts a task on a registered agent and returns its run.
func (h *harness) runningTask(projectID, title string) (string, models.Run) {
	h.t.Helper()
	ctx := context.Background()
	if _, err := h.st.RegisterAgent(ctx, models.AgentRegistration{ID: "agent-1", AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "true"}}.Agent()); err != nil && models.ErrorCodeOf(err) != models.CodeConflict {
		h.t.Fatal(err)
	}
	id := h.task(projectID, title)
	run, _, err := h.st.ClaimTask(ctx, id, "agent-1")
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.st.StartRun(ctx, run.ID, 0, h.t.TempDir()); err != nil {
		h.t.Fatal(err)
	}
	return id, run
}

func TestQuestionAnsweredByModalOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	id, run := h.runningTask("web", "Ask something")
	q, err := h.st.AskQuestion(context.Background(), run.ID, "Which colour?")
	if err != nil {
		t.Fatal(err)
	}
	thread := h.waitThread(id)
	asked := h.waitMessage(thread, "Which colour?")
	h.waitMessage(projectChannel, "waiting for your answer")

	r, _ := h.answer(h.press(alice, asked, h.buttonID(asked, "aq|answer|")), 1)
	if r.Type != discordgo.InteractionResponseModal || r.Data.CustomID == "" {
		t.Fatalf("Answer button answered %+v", r)
	}
	r, text := h.answer(h.submit(alice, thread, r.Data.CustomID, "Blue, please"), 1)
	if ephemeralFlag(r) || !strings.Contains(text, "answered question") || !strings.Contains(text, "Blue, please") {
		t.Errorf("modal submit answered %q", text)
	}
	qs, _ := h.st.TaskQuestions(context.Background(), id)
	if len(qs) != 1 || qs[0].ID != q.ID || qs[0].Answer == nil || *qs[0].Answer != "Blue, please" || qs[0].AnsweredBy != "discord:"+alice {
		t.Errorf("question after the modal: %+v", qs)
	}
	// A second press says who answered, without a modal.
	r, text = h.answer(h.press(root, asked, h.buttonID(asked, "aq|answer|")), 1)
	if r.Type == discordgo.InteractionResponseModal || !strings.Contains(text, "answered") {
		t.Errorf("second press: type %d %q", r.Type, text)
	}
	// A modal submitted twice (two open modals) answers once.
	r, text = h.answer(h.submit(root, thread, customID("answer", "1"), "Red"), 1)
	if !ephemeralFlag(r) || strings.Contains(text, "went wrong") {
		t.Errorf("second submit: %q", text)
	}
	if qs, _ := h.st.TaskQuestions(context.Background(), id); *qs[0].Answer != "Blue, please" {
		t.Errorf("the answer changed to %q", *qs[0].Answer)
	}
}

func TestThreadReplyAnswersQuestion(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	id, run := h.runningTask("web", "Ask in thread")
	if _, err := h.st.AskQuestion(context.Background(), run.ID, "Tabs or spaces?"); err != nil {
		t.Fatal(err)
	}
	h.waitMessage(projectChannel, "waiting for your answer")
	thread := h.waitThread(id)
	h.waitMessage(thread, "Tabs or spaces?")
	// A stranger's reply is ignored; an authorised person's answers.
	h.fake.SendMessage(&discordgo.Message{ChannelID: thread, Content: "tabs!", Author: &discordgo.User{ID: mallory}})
	h.fake.SendMessage(&discordgo.Message{ChannelID: thread, Content: "Spaces.", Author: &discordgo.User{ID: alice}})
	h.waitMessage(thread, "answered question")
	qs, _ := h.st.TaskQuestions(context.Background(), id)
	if len(qs) != 1 || qs[0].Answer == nil || *qs[0].Answer != "Spaces." {
		t.Errorf("questions: %+v", qs)
	}
}

// TestSlowOperationIsDeferredThenEdited holds an operation until the bot
// has deferred its answer. The bot's AckAfter timer and the fake's
// interaction deadline run on test clocks moved together, so the test also
// shows that the deferral (at AckAfter, the default) comes in time for
// Discord's 3 s.
func TestSlowOperationIsDeferredThenEdited(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.svc.gate = make(chan struct{})
	h.project("web")
	id := h.task("web", "Needs a person")
	h.apply(id, models.EventAssigned, models.EventAgentStarted, models.EventAgentCompleted, models.EventApprovalRequested)

	i := h.command(alice, controlChannel, "task", subOpt("approve", strOpt("task", id)))
	// The operation waits at the gate; the bot waits for AckAfter to pass.
	ackAfter := h.bot.cfg.AckAfter
	if err := h.botClock.WaitTimer(h.ctx(), ackAfter); err != nil {
		t.Fatalf("the bot started no AckAfter timer: %v", err)
	}
	if rs := i.Responses(); len(rs) != 0 {
		t.Fatalf("answered before AckAfter passed: %+v", rs)
	}
	h.advance(ackAfter)
	rs, err := i.Wait(h.ctx(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Kind != "callback" || rs[0].Type != discordgo.InteractionResponseDeferredChannelMessageWithSource || rs[0].Late ||
		!rs[0].At.Before(i.Deadline()) {
		t.Fatalf("first response %+v, want a deferred callback in time (deadline %v)", rs[0], i.Deadline())
	}
	close(h.svc.gate)
	r, text := h.answer(i, 2)
	if r.Kind != "edit" || !strings.Contains(text, "approved") {
		t.Errorf("then: %s %q", r.Kind, text)
	}
	if st := h.taskStatus(id); st != models.StatusCompleted {
		t.Errorf("task is %s", st)
	}
}

func TestConnectsWithoutTheMessageContentIntent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(_ *Config, o *discordtest.Options) { o.DenyPrivilegedIntents = true })
	if _, text := h.answer(h.command(alice, controlChannel, "project", subOpt("list")), 1); !strings.Contains(text, "No projects") {
		t.Errorf("project list: %q", text)
	}
	if n := h.fake.Sessions(); n != 1 {
		t.Errorf("%d sessions identified, want 1 (after the refused intent)", n)
	}
}
