package discord

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/discord/discordtest"
	"github.com/agentqueued/agentqueued/internal/hooks"
	"github.com/agentqueued/agentqueued/internal/llm/llmtest"
	"github.com/agentqueued/agentqueued/internal/models"
)

// This file drives the /hook commands through the fake Discord against a
// real store and hook engine: the forms that create and change hooks, the
// refusals, and the messages hooks post.

// formInputs returns a modal's text inputs by id, in order.
func formInputs(t *testing.T, r discordtest.Response) ([]string, map[string]*discordgo.TextInput) {
	t.Helper()
	if r.Type != discordgo.InteractionResponseModal || r.Data == nil {
		t.Fatalf("answered with type %d (%+v), want a form", r.Type, r.Data)
	}
	var ids []string
	out := map[string]*discordgo.TextInput{}
	for _, row := range r.Data.Components {
		ar, ok := row.(*discordgo.ActionsRow)
		if !ok {
			t.Fatalf("form row %T", row)
		}
		for _, c := range ar.Components {
			in, ok := c.(*discordgo.TextInput)
			if !ok {
				t.Fatalf("form component %T", c)
			}
			ids = append(ids, in.CustomID)
			out[in.CustomID] = in
		}
	}
	return ids, out
}

// submitForm submits a modal with the given inputs; from is the message of
// the button that opened it, nil for a command's form.
func (h *harness) submitForm(user, channelID, customID string, from *discordgo.Message, values map[string]string) *discordtest.Interaction {
	h.t.Helper()
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var rows []discordgo.MessageComponent
	for _, k := range keys {
		rows = append(rows, &discordgo.ActionsRow{Components: []discordgo.MessageComponent{&discordgo.TextInput{CustomID: k, Value: values[k]}}})
	}
	i := &discordgo.Interaction{Type: discordgo.InteractionModalSubmit, ChannelID: channelID,
		Member: &discordgo.Member{User: &discordgo.User{ID: user}},
		Data:   discordgo.ModalSubmitInteractionData{CustomID: customID, Components: rows}}
	if from != nil {
		i.Message = &discordgo.Message{ID: from.ID, ChannelID: from.ChannelID}
	}
	return h.fake.Interact(i)
}

// hookCmd sends /hook <sub> from user in the control channel.
func (h *harness) hookCmd(user, sub string, opts ...opt) *discordtest.Interaction {
	h.t.Helper()
	return h.command(user, controlChannel, "hook", subOpt(sub, opts...))
}

func TestHookCommands(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	h.project("api")
	eng := h.hookEngine(hooks.Config{})
	ctx := context.Background()
	hook := func() models.Hook {
		t.Helper()
		hk, err := h.st.GetHook(ctx, "daily-counts")
		if err != nil {
			t.Fatalf("hook daily-counts: %v", err)
		}
		return hk
	}

	// /hook create checks its options, then asks for the prompt and steps.
	r, _ := h.answer(h.hookCmd(alice, "create", strOpt("project", "web"), strOpt("name", "Daily counts"),
		strOpt("trigger", "cron"), strOpt("schedule", "0 9 * * 1-5"), strOpt("timezone", "Europe/Berlin"), intOpt("cooldown", 600)), 1)
	ids, inputs := formInputs(t, r)
	if !slices.Equal(ids, []string{"prompt", "steps"}) || r.Data.Title != "New hook daily-counts" ||
		!strings.HasPrefix(r.Data.CustomID, "aq|hook-form|") || inputs["prompt"].Required || inputs["steps"].Value != "" {
		t.Fatalf("create form: %q %q inputs %v", r.Data.Title, r.Data.CustomID, ids)
	}
	if _, err := h.st.GetHook(ctx, "daily-counts"); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("the hook exists before its form was sent: %v", err)
	}
	r, text := h.answer(h.submitForm(alice, controlChannel, r.Data.CustomID, nil,
		map[string]string{"prompt": "", "steps": `[{"type":"db_query","query":"task_counts"}]`}), 1)
	want := "🪝 Hook `daily-counts` created by <@" + alice + ">.\n🪝 `daily-counts` **Daily counts** · project `web` · " +
		"cron `0 9 * * 1-5` (`Europe/Berlin`) · 1 context step(s) · no LLM call · cooldown 10m"
	if ephemeralFlag(r) || text != want {
		t.Errorf("create answered %q (ephemeral %v), want %q", text, ephemeralFlag(r), want)
	}
	if hk := hook(); hk.ProjectID != "web" || hk.Name != "Daily counts" || !hk.Enabled || hk.CooldownSeconds != 600 ||
		hk.Trigger.Type != "cron" || hk.Trigger.Expr != "0 9 * * 1-5" || hk.Trigger.Timezone != "Europe/Berlin" ||
		len(hk.ContextSteps) != 1 || hk.ContextSteps[0] != (models.HookStep{Type: "db_query", Query: "task_counts"}) || hk.PromptTemplate != "" {
		t.Errorf("created hook: %+v", hk)
	}

	h.runSteps(t, []cmdStep{
		{name: "list", cmd: "hook", sub: subOpt("list"), want: []string{"🪝 `daily-counts` **Daily counts** · project `web`"}},
		{name: "list of another project", cmd: "hook", sub: subOpt("list", strOpt("project", "api")),
			want: []string{"Project `api` has no hooks yet."}},
		{name: "runs before any", cmd: "hook", sub: subOpt("runs", strOpt("hook", "daily-counts")),
			want: []string{"Hook `daily-counts` has no runs yet."}},
		{name: "fire", cmd: "hook", sub: subOpt("fire", strOpt("hook", "daily-counts")),
			want:  []string{"🪝 Hook `daily-counts` fired by <@" + alice + ">: run `daily-counts.1` is running.", "`/hook runs hook:daily-counts`"},
			check: func(t *testing.T, _ discordtest.Response) { eng.Wait() }},
		{name: "runs", cmd: "hook", sub: subOpt("runs", strOpt("hook", "daily-counts")),
			want: []string{"**Last runs of `daily-counts`**", "✅ `daily-counts.1` completed · manual: fired by <@" + alice + "> · 0 tokens · <t:"}},
		{name: "runs that failed", cmd: "hook", sub: subOpt("runs", strOpt("hook", "daily-counts"), strOpt("status", "failed")),
			want: []string{"No failed runs of `daily-counts`."}},
		{name: "runs of no hook", cmd: "hook", sub: subOpt("runs", strOpt("hook", "nope")), ephemeral: true, want: []string{"nope"}},
	})

	// /hook edit shows the hook in its form; its options go with it.
	r, _ = h.answer(h.hookCmd(alice, "edit", strOpt("hook", "daily-counts"), boolOpt("enabled", false), intOpt("cooldown", 60)), 1)
	ids, inputs = formInputs(t, r)
	steps := "[\n  {\"type\":\"db_query\",\"query\":\"task_counts\"}\n]"
	if !slices.Equal(ids, []string{"name", "prompt", "steps"}) || r.Data.Title != "Edit hook daily-counts" ||
		inputs["name"].Value != "Daily counts" || !inputs["name"].Required || inputs["prompt"].Value != "" || inputs["steps"].Value != steps {
		t.Fatalf("edit form %q: %v, name %+v prompt %+v steps %+v", r.Data.Title, ids, inputs["name"], inputs["prompt"], inputs["steps"])
	}
	r, text = h.answer(h.submitForm(alice, controlChannel, r.Data.CustomID, nil,
		map[string]string{"name": "Daily numbers", "prompt": "Summarise: {{step_0}}", "steps": steps}), 1)
	want = "✏️ Hook `daily-counts` changed by <@" + alice + "> (name, enabled, prompt_template, cooldown_seconds).\n" +
		"⏸️ `daily-counts` **Daily numbers** · project `web` · cron `0 9 * * 1-5` (`Europe/Berlin`) · 1 context step(s) · " +
		"asks the LLM · cooldown 1m · **disabled**"
	if ephemeralFlag(r) || text != want {
		t.Errorf("edit answered %q, want %q", text, want)
	}
	if hk := hook(); hk.Name != "Daily numbers" || hk.Enabled || hk.CooldownSeconds != 60 || hk.PromptTemplate != "Summarise: {{step_0}}" ||
		len(hk.ContextSteps) != 1 || hk.Trigger.Expr != "0 9 * * 1-5" {
		t.Errorf("edited hook: %+v", hk)
	}
	// A new schedule keeps the trigger's time zone; steps cleared are none.
	r, _ = h.answer(h.hookCmd(alice, "edit", strOpt("hook", "daily-counts"), strOpt("schedule", "30 8 * * *")), 1)
	_, inputs = formInputs(t, r)
	_, text = h.answer(h.submitForm(alice, controlChannel, r.Data.CustomID, nil,
		map[string]string{"name": inputs["name"].Value, "prompt": "", "steps": ""}), 1)
	if !strings.Contains(text, "(trigger, context_steps, prompt_template)") || !strings.Contains(text, "cron `30 8 * * *` (`Europe/Berlin`) · 0 context step(s)") {
		t.Errorf("second edit: %q", text)
	}
	// A form sent unchanged changes nothing.
	r, _ = h.answer(h.hookCmd(alice, "edit", strOpt("hook", "daily-counts")), 1)
	_, inputs = formInputs(t, r)
	r, text = h.answer(h.submitForm(alice, controlChannel, r.Data.CustomID, nil,
		map[string]string{"name": inputs["name"].Value, "prompt": inputs["prompt"].Value, "steps": inputs["steps"].Value}), 1)
	if !ephemeralFlag(r) || text != "Nothing to change in hook `daily-counts`." {
		t.Errorf("unchanged form: %q (ephemeral %v)", text, ephemeralFlag(r))
	}

	// Deleting takes an admin and a confirmation.
	_, text = h.confirmDestructive(t, "hook", subOpt("delete", strOpt("hook", "daily-counts")), "Really delete hook `daily-counts`?")
	if want := "🗑️ Hook `daily-counts` deleted by <@" + root + ">, with its runs."; text != want {
		t.Errorf("delete confirmed: %q, want %q", text, want)
	}
	if _, err := h.st.GetHook(ctx, "daily-counts"); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Errorf("deleted hook: %v", err)
	}
	noRefusals(t, h)
}

func TestHookFormRefusalsAndRetry(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	ctx := context.Background()
	noHooks := func(t *testing.T, _ discordtest.Response) {
		t.Helper()
		if hs, err := h.st.ListHooks(ctx, ""); err != nil || len(hs) != 0 {
			t.Errorf("hooks: %+v, %v; want none", hs, err)
		}
	}
	create := func(opts ...opt) opt {
		return subOpt("create", append([]opt{strOpt("project", "web"), strOpt("name", "Watcher")}, opts...)...)
	}
	// What the options get wrong is told before the form opens, naming the field.
	h.runSteps(t, []cmdStep{
		{name: "bad cron", cmd: "hook", sub: create(strOpt("trigger", "cron"), strOpt("schedule", "every monday")), ephemeral: true,
			want: []string{"⚠️ trigger.expr: \"every monday\" is not a cron expression"}, check: noHooks},
		{name: "bad time zone", cmd: "hook", sub: create(strOpt("trigger", "cron"), strOpt("schedule", "@daily"), strOpt("timezone", "Mars/Olympus")),
			ephemeral: true, want: []string{"trigger.timezone"}, check: noHooks},
		{name: "short interval", cmd: "hook", sub: create(strOpt("trigger", "periodic"), strOpt("schedule", "10")), ephemeral: true,
			want: []string{"trigger.interval_seconds: must be between 60 and"}, check: noHooks},
		{name: "unknown event", cmd: "hook", sub: create(strOpt("trigger", "event"), strOpt("schedule", "task.exploded")), ephemeral: true,
			want: []string{"trigger.event_type"}, check: noHooks},
		{name: "no schedule", cmd: "hook", sub: create(strOpt("trigger", "cron")), ephemeral: true,
			want: []string{"schedule: a cron hook needs a cron expression"}, check: noHooks},
		{name: "unknown project", cmd: "hook", sub: subOpt("create", strOpt("project", "nope"), strOpt("name", "x"), strOpt("trigger", "manual")),
			ephemeral: true, want: []string{"nope"}, check: noHooks},
		{name: "name without letters", cmd: "hook", sub: subOpt("create", strOpt("project", "web"), strOpt("name", "!!!"), strOpt("trigger", "manual")),
			ephemeral: true, want: []string{"name: needs a letter or a digit"}, check: noHooks},
		{name: "edit of no hook", cmd: "hook", sub: subOpt("edit", strOpt("hook", "nope")), ephemeral: true, want: []string{"nope"}},
	})

	// A form refused says why, with a button that opens it again as typed.
	r, _ := h.answer(h.hookCmd(alice, "create", strOpt("project", "web"), strOpt("name", "Watcher"), strOpt("trigger", "periodic"),
		strOpt("schedule", "1h")), 1)
	formID := r.Data.CustomID
	typed := map[string]string{"prompt": "Look at {{step_1}}", "steps": `{“type”:“db_query”,“query”:“failed_tasks”}`}
	r, text := h.answer(h.submitForm(alice, controlChannel, formID, nil, typed), 1)
	if !ephemeralFlag(r) || !strings.HasPrefix(text, "⚠️ prompt_template: {{step_1}}: the hook has 1 context steps") || r.Message == nil {
		t.Fatalf("refused form: %q (ephemeral %v)", text, ephemeralFlag(r))
	}
	noHooks(t, r)
	retry := h.buttonID(r.Message, "aq|hook-retry|")
	// A stranger can neither send it nor open it again; someone else
	// gets nothing either.
	if r, text := h.answer(h.submitForm(mallory, controlChannel, formID, nil, typed), 1); !ephemeralFlag(r) || !strings.Contains(text, "not allowed") {
		t.Errorf("stranger's submission: %q", text)
	}
	if r, text := h.answer(h.press(mallory, r.Message, retry), 1); !ephemeralFlag(r) || !strings.Contains(text, "not allowed") {
		t.Errorf("stranger's retry: %q", text)
	}
	if _, text := h.answer(h.submitForm(root, controlChannel, formID, nil, typed), 1); text != formGone {
		t.Errorf("another person's submission: %q", text)
	}
	noHooks(t, r)
	refusal := r.Message
	r, _ = h.answer(h.press(alice, refusal, retry), 1)
	_, inputs := formInputs(t, r)
	if r.Data.CustomID != formID || inputs["prompt"].Value != typed["prompt"] || inputs["steps"].Value != typed["steps"] {
		t.Fatalf("form opened again: %q prompt %+v steps %+v", r.Data.CustomID, inputs["prompt"], inputs["steps"])
	}
	// Sent again still wrong: the refusal is replaced.
	typed["steps"] = `[{"type":"db_query","qurey":"failed_tasks"}]`
	r, text = h.answer(h.submitForm(alice, controlChannel, formID, refusal, typed), 1)
	if r.Type != discordgo.InteractionResponseUpdateMessage || !strings.Contains(text, "context_steps:") || !strings.Contains(text, "qurey") {
		t.Errorf("second refusal: type %d %q", r.Type, text)
	}
	typed["steps"], typed["prompt"] = `{"type":"db_query","query":"failed_tasks"}`, "Look at {{step_0}}"
	r, text = h.answer(h.submitForm(alice, controlChannel, formID, refusal, typed), 1)
	if ephemeralFlag(r) || r.Type != discordgo.InteractionResponseChannelMessageWithSource ||
		!strings.HasPrefix(text, "🪝 Hook `watcher` created by <@"+alice+">.") || !strings.Contains(text, "every 1h") {
		t.Errorf("form fixed: type %d %q (ephemeral %v)", r.Type, text, ephemeralFlag(r))
	}
	hk, err := h.st.GetHook(ctx, "watcher")
	if err != nil || hk.Trigger.IntervalSeconds != 3600 || hk.PromptTemplate != "Look at {{step_0}}" || len(hk.ContextSteps) != 1 ||
		hk.ContextSteps[0].Query != "failed_tasks" || hk.CooldownSeconds != models.DefaultHookCooldown {
		t.Errorf("created hook: %+v, %v", hk, err)
	}
	// A form used is gone.
	if _, text := h.answer(h.submitForm(alice, controlChannel, formID, nil, typed), 1); text != formGone {
		t.Errorf("form sent twice: %q", text)
	}
	if _, text := h.answer(h.press(alice, refusal, retry), 1); text != formGone {
		t.Errorf("used form opened again: %q", text)
	}
	// A name taken is told before the form opens.
	r, text = h.answer(h.hookCmd(alice, "create", strOpt("project", "web"), strOpt("name", "Watcher"), strOpt("trigger", "manual")), 1)
	if !ephemeralFlag(r) || !strings.Contains(text, "hook watcher exists already") {
		t.Errorf("name taken: %q", text)
	}

	// Strangers are refused everywhere; only admins delete.
	h.hookEngine(hooks.Config{})
	for _, sub := range []opt{subOpt("list"), subOpt("fire", strOpt("hook", "watcher")), subOpt("edit", strOpt("hook", "watcher")),
		create(strOpt("trigger", "manual"))} {
		if r, text := h.answer(h.hookCmd(mallory, sub.Name, sub.Options...), 1); !ephemeralFlag(r) || !strings.Contains(text, "not allowed") {
			t.Errorf("stranger's /hook %s: %q", sub.Name, text)
		}
	}
	if r, text := h.answer(h.hookCmd(alice, "delete", strOpt("hook", "watcher")), 1); !ephemeralFlag(r) || !strings.Contains(text, "needs an admin") {
		t.Errorf("alice's delete: %q", text)
	}
	if runs, err := h.st.ListHookRuns(ctx, models.HookRunFilter{HookID: "watcher"}); err != nil || len(runs) != 0 {
		t.Errorf("runs after the strangers: %+v, %v", runs, err)
	}
	if _, err := h.st.GetHook(ctx, "watcher"); err != nil {
		t.Errorf("hook after the refusals: %v", err)
	}
	noRefusals(t, h)
}

func TestHookAutocomplete(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	h.project("api")
	ctx := context.Background()
	for _, hk := range []models.Hook{
		{ID: "nightly", ProjectID: "web", Name: "Nightly report", Trigger: models.HookTrigger{Type: "cron", Expr: "@daily"}},
		{ID: "on-failure", ProjectID: "api", Name: "Failure triage", Trigger: models.HookTrigger{Type: "event", EventType: "task.failed"}},
	} {
		if _, err := h.st.CreateHook(ctx, models.HookSpec{ID: hk.ID, ProjectID: hk.ProjectID, Name: hk.Name, Trigger: hk.Trigger}.Hook()); err != nil {
			t.Fatal(err)
		}
	}
	suggest := func(user, sub string, focused string, typed string, others ...opt) []string {
		t.Helper()
		o := &discordgo.ApplicationCommandInteractionDataOption{Name: focused, Type: discordgo.ApplicationCommandOptionString, Value: typed, Focused: true}
		i := h.fake.Interact(&discordgo.Interaction{Type: discordgo.InteractionApplicationCommandAutocomplete, ChannelID: controlChannel,
			Member: &discordgo.Member{User: &discordgo.User{ID: user}},
			Data: discordgo.ApplicationCommandInteractionData{Name: "hook", Options: []*discordgo.ApplicationCommandInteractionDataOption{
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
	if got := suggest(alice, "fire", "hook", ""); !slices.Equal(got, []string{"on-failure", "nightly"}) {
		t.Errorf("hooks suggested %v", got)
	}
	if got := suggest(alice, "runs", "hook", "report"); !slices.Equal(got, []string{"nightly"}) {
		t.Errorf("typed report: %v", got)
	}
	if got := suggest(mallory, "fire", "hook", ""); len(got) != 0 {
		t.Errorf("a stranger was told %v", got)
	}
	// Schedules are suggested for the trigger chosen (or the hook's).
	if got := suggest(alice, "create", "schedule", "fail", strOpt("trigger", "event")); !slices.Equal(got, []string{"fail", "task.failed"}) {
		t.Errorf("event schedules for fail: %v", got)
	}
	if got := suggest(alice, "edit", "schedule", "", strOpt("hook", "nightly")); !slices.Contains(got, "0 9 * * 1-5") {
		t.Errorf("cron schedules for nightly: %v", got)
	}
}

func TestHookMessagesArePostedOnceToTheProjectChannel(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	ctx := context.Background()
	llm := llmtest.New(llmtest.Options{APIKey: "hook-key", Model: "hook-model"})
	t.Cleanup(llm.Close)
	eng := h.hookEngine(hooks.Config{LLM: hooks.LLMConfig{BaseURL: llm.URL(), APIKey: "hook-key", Model: "hook-model"}})
	said := "All green @everyone — see [the board](https://evil.example) <@" + root + "> **now** {thread}"
	llm.Enqueue(llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "post_message", Arguments: toJSON(map[string]string{"text": said})}}},
		llmtest.Reply{Content: "Posted."})
	if _, err := h.st.CreateHook(ctx, models.HookSpec{ProjectID: "web", Name: "Greeter", Trigger: models.HookTrigger{Type: "manual"},
		PromptTemplate: "Say how the project is doing."}.Hook()); err != nil {
		t.Fatal(err)
	}

	_, text := h.answer(h.hookCmd(alice, "fire", strOpt("hook", "greeter")), 1)
	if !strings.Contains(text, "run `greeter.1` is running") {
		t.Fatalf("fire: %q", text)
	}
	posted := h.waitMessage(projectChannel, "🪝 **Greeter**")
	want := hookMessageParts(models.HookMessage{HookID: "greeter", HookName: "Greeter", RunID: "greeter.1", ProjectID: "web", Text: said})[0].Content
	if posted.Content != want {
		t.Errorf("posted %q, want %q", posted.Content, want)
	}
	for _, bad := range []string{"@everyone", "](", "<@" + root + ">", "**now**"} {
		if strings.Contains(posted.Content, bad) {
			t.Errorf("the hook's text was not escaped (%q): %q", bad, posted.Content)
		}
	}
	if posted.Flags&discordgo.MessageFlagsSuppressEmbeds == 0 {
		t.Errorf("the hook's message shows previews of its links (flags %d)", posted.Flags)
	}
	if posted.MentionEveryone || len(posted.Mentions) != 0 {
		t.Errorf("the hook's message mentions: everyone %v, %v", posted.MentionEveryone, posted.Mentions)
	}

	// A project without a channel of its own: the control channel.
	if _, err := h.st.CreateProject(ctx, models.Project{ID: "ops", Name: "Ops"}); err != nil {
		t.Fatal(err)
	}
	if err := h.st.Notify(ctx, "hook-message-ops", models.NewHookMessageNotice(models.HookMessage{HookID: "pager", HookName: "Pager",
		RunID: "pager.3", ProjectID: "ops", Text: "Disk almost full"})); err != nil {
		t.Fatal(err)
	}
	h.bot.Wake()
	h.waitMessage(controlChannel, "🪝 **Pager** (`pager.3`)\nDisk almost full")

	eng.Wait()
	runs, err := h.st.ListHookRuns(ctx, models.HookRunFilter{HookID: "greeter"})
	if err != nil || len(runs) != 1 || runs[0].Status != models.HookRunCompleted {
		t.Errorf("runs: %+v, %v", runs, err)
	}
	h.stop() // finishes the pass under way
	if pending, err := h.st.PendingOutbox(ctx, 100); err != nil || len(pending) != 0 {
		t.Errorf("still pending: %+v, %v", pending, err)
	}
	for ch, n := range map[string]int{projectChannel: 1, controlChannel: 0} {
		counts, _ := countIn(h.fake.Messages(ch), []string{"🪝 **Greeter**"})
		if counts[0] != n {
			t.Errorf("the hook's message is in channel %s %d times, want %d", ch, counts[0], n)
		}
	}
	noRefusals(t, h)
}

func TestHookMessageFitsOneMessage(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("*@_ ", 1500) // 6,000 characters, twice that escaped
	parts := hookMessageParts(models.HookMessage{HookID: "big", HookName: "Big *talker*", RunID: "big.1", Text: long})
	if len(parts) != 1 {
		t.Fatalf("%d parts", len(parts))
	}
	p := parts[0]
	if n := utf8.RuneCountInString(p.Content); n > messageLimit {
		t.Errorf("%d characters", n)
	}
	if !strings.HasPrefix(p.Content, "🪝 **Big \\*talker\\*** (`big.1`)\n\\*@\u200b\\_ ") ||
		!strings.HasSuffix(p.Content, "…\n*(full text attached)*") {
		t.Errorf("content starts %q, ends %q", cut(p.Content, 40), p.Content[len(p.Content)-40:])
	}
	if p.File == nil || p.File.Body != strings.TrimSpace(long) {
		t.Errorf("attachment: %+v", p.File)
	}
	// The cut never splits an escape: what is left is whole escapes.
	body := strings.TrimSuffix(strings.SplitN(p.Content, "\n", 2)[1], "…\n*(full text attached)*")
	if rest := strings.NewReplacer("\\*", "", "@\u200b", "", "\\_", "", " ", "").Replace(body); rest != "" {
		t.Errorf("escapes split: %q left", cut(rest, 40))
	}
	short := hookMessageParts(models.HookMessage{HookID: "small", RunID: "small.2", Text: "  fine\n"})
	if len(short) != 1 || short[0].Content != "🪝 **small** (`small.2`)\nfine" || short[0].File != nil {
		t.Errorf("short message: %+v", short)
	}
	if _, err := decodeNotice(models.NoticeHookMessage, `{"run_id": 7}`); err == nil {
		t.Error("a hook message with a numeric run id decoded")
	}
}

func TestHookFormsAreNotProposed(t *testing.T) {
	t.Parallel()
	got := proposable()
	for path, want := range map[string]bool{"hook create": false, "hook edit": false, "hook list": true, "hook runs": true, "hook fire": true} {
		if got[path] != want {
			t.Errorf("/%s proposable %v, want %v", path, got[path], want)
		}
	}
}
