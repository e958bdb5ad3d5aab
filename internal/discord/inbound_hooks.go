package discord

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds the /hook commands: listing, firing and deleting hooks,
// their runs, and the forms that create and change them; and the messages
// hooks post.

// hookRunsShown is how many runs /hook runs lists.
const hookRunsShown = 10

// hookFormTTL is how long a hook's form (and its retry after an error)
// waits for its submission.
const hookFormTTL = time.Hour

func hookOpt() *discordgo.ApplicationCommandOption { return str(optHook, "Hook id", true, true) }

func triggerTypeOpt(required bool) *discordgo.ApplicationCommandOption {
	o := str("trigger", "When the hook fires", required, false)
	for _, t := range models.HookTriggerTypes {
		o.Choices = append(o.Choices, &discordgo.ApplicationCommandOptionChoice{Name: string(t), Value: string(t)})
	}
	return o
}

func hookRunStatusOpt() *discordgo.ApplicationCommandOption {
	o := str("status", "Only runs in this status", false, false)
	for _, s := range models.HookRunStatuses {
		o.Choices = append(o.Choices, &discordgo.ApplicationCommandOptionChoice{Name: string(s), Value: string(s)})
	}
	return o
}

// hookCommandOptions are the subcommands of /hook.
func hookCommandOptions() []*discordgo.ApplicationCommandOption {
	schedule := func() *discordgo.ApplicationCommandOption {
		return str(optSchedule, "Seconds (periodic, e.g. 3600), a cron expression (e.g. 0 9 * * 1-5) or an event (task.failed)", false, true)
	}
	timezone := func() *discordgo.ApplicationCommandOption {
		return str("timezone", "Time zone of a cron schedule, e.g. Europe/Berlin (default UTC)", false, false)
	}
	return []*discordgo.ApplicationCommandOption{
		sub("list", "List hooks", project(false)),
		sub("create", "Create a hook; a form asks for its prompt and context steps", project(true),
			str("name", "Display name; the hook's id is made from it", true, false), triggerTypeOpt(true), schedule(), timezone(),
			integer("cooldown", "Least seconds between two runs (default 3600)", false)),
		sub("edit", "Change a hook; a form shows its name, prompt and context steps", hookOpt(),
			boolean("enabled", "Fire on its trigger (a disabled hook fires only by hand)"),
			integer("cooldown", "Least seconds between two runs", false), triggerTypeOpt(false), schedule(), timezone()),
		sub("fire", "Run a hook now", hookOpt()),
		sub("runs", "A hook's last runs", hookOpt(), hookRunStatusOpt()),
		sub("delete", "Delete a hook and its runs (admin)", hookOpt()),
	}
}

// scheduleSuggestions are the schedules offered for a trigger type: value
// and label.
func scheduleSuggestions(typ models.HookTriggerType) [][2]string {
	switch typ {
	case models.TriggerPeriodic:
		return [][2]string{{"300", "300 — every 5 minutes"}, {"3600", "3600 — every hour"},
			{"21600", "21600 — every 6 hours"}, {"86400", "86400 — every day"}}
	case models.TriggerCron:
		return [][2]string{{"0 9 * * 1-5", "0 9 * * 1-5 — weekdays at 09:00"}, {"0 9 * * 1", "0 9 * * 1 — Mondays at 09:00"},
			{"0 * * * *", "0 * * * * — every hour"}, {"@daily", "@daily — every day at midnight"}}
	case models.TriggerEvent:
		out := make([][2]string, len(models.HookEventTypes))
		for i, e := range models.HookEventTypes {
			out[i] = [2]string{e, e}
		}
		return out
	}
	return nil
}

// formOpener answers a command with a form.
type formOpener func(b *Bot, ctx context.Context, s *discordgo.Session, i *discordgo.Interaction, user string, opts options)

// formCommands are the commands answered with a form; a proposal cannot
// name them.
var formCommands = map[string]formOpener{
	"hook create": (*Bot).hookCreateForm,
	"hook edit":   (*Bot).hookEditForm,
}

// hookForm is a hook's form between the command that opened it and its
// successful submission: what the command's options said and what was
// typed so far, for a retry after an error.
type hookForm struct {
	user  string
	title string
	// create is the hook a /hook create's options describe.
	create models.Hook
	// hookID and patch are a /hook edit's hook and options; orig holds the
	// texts its form opened with.
	hookID string
	patch  models.HookPatch
	orig   map[string]string
	// fields are the form's inputs with the texts last typed.
	fields  []formField
	expires time.Time
}

// value returns the text of one of the form's inputs, and whether the
// form has that input.
func (f hookForm) value(id string) (string, bool) {
	for _, fl := range f.fields {
		if fl.ID == id {
			return fl.Value, true
		}
	}
	return "", false
}

// saveForm keeps a form under a new token and returns the token.
func (b *Bot) saveForm(f hookForm) string {
	var tb [8]byte
	_, _ = rand.Read(tb[:])
	token := hex.EncodeToString(tb[:])
	b.putForm(token, f)
	return token
}

// putForm keeps a form under token for hookFormTTL, dropping expired ones.
func (b *Bot) putForm(token string, f hookForm) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.cfg.Clock.Now()
	for k, v := range b.forms {
		if now.After(v.expires) {
			delete(b.forms, k)
		}
	}
	f.fields = slices.Clone(f.fields)
	f.expires = now.Add(hookFormTTL)
	b.forms[token] = f
}

// form returns a copy of a form; take also removes it, so one submission
// acts at a time.
func (b *Bot) form(token string, take bool) (hookForm, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, ok := b.forms[token]
	if !ok || b.cfg.Clock.Now().After(f.expires) {
		delete(b.forms, token)
		return hookForm{}, false
	}
	if take {
		delete(b.forms, token)
	}
	f.fields = slices.Clone(f.fields)
	return f, true
}

// formGone answers a form that is no longer kept.
const formGone = "This form was used already or has expired; run the command again."

func promptField(v string) formField {
	return formField{ID: "prompt", Label: "Prompt template (empty: no LLM call)", Paragraph: true, Value: v,
		Placeholder: "What the LLM is asked. {{step_0}} is the first step's output, {{event}} the event."}
}

func stepsField(v string) formField {
	return formField{ID: "steps", Label: "Context steps as JSON (empty: none)", Paragraph: true, Value: v,
		Placeholder: `[{"type":"db_query","query":"task_counts"}]`}
}

// hookCreateForm checks /hook create's options and opens the form for the
// hook's prompt and context steps.
func (b *Bot) hookCreateForm(ctx context.Context, s *discordgo.Session, i *discordgo.Interaction, user string, opts options) {
	t, err := buildTrigger(models.HookTriggerType(opts.str("trigger")), opts.str(optSchedule), opts.str("timezone"))
	spec := models.HookSpec{ProjectID: opts.str(optProject), Name: opts.str("name"), Trigger: t}
	if n, ok := opts.int("cooldown"); ok {
		c := int(n)
		spec.CooldownSeconds = &c
	}
	h := spec.Hook()
	if err == nil && h.ID == "" {
		err = models.Errorf(models.CodeInvalid, "name: needs a letter or a digit (the hook's id is made from it)")
	}
	if err == nil {
		err = h.Validate()
	}
	if err == nil {
		err = b.checkNewHook(ctx, h)
	}
	if err != nil {
		b.respondNow(s, i, b.errorReply("hook create", err))
		return
	}
	f := hookForm{user: user, title: "New hook " + h.ID, create: h, fields: []formField{promptField(""), stepsField("")}}
	b.respondForm(s, i, customID("hook-form", b.saveForm(f)), f.title, f.fields...)
}

// checkNewHook tells at once of an unknown project or a hook id taken,
// before anything is typed into the form. The look-ups are bounded so the
// form still opens in time; what they miss, creating the hook tells.
func (b *Bot) checkNewHook(ctx context.Context, h models.Hook) error {
	lctx, done := b.lookupContext(ctx)
	defer done()
	if _, err := b.svc.GetProject(lctx, h.ProjectID); models.ErrorCodeOf(err) == models.CodeNotFound {
		return err
	}
	if _, err := b.svc.GetHook(lctx, h.ID); err == nil {
		return models.Errorf(models.CodeConflict, "hook %s exists already: choose another name", h.ID)
	}
	return nil
}

// hookEditForm opens the form that changes a hook, filled with its name,
// prompt and context steps; /hook edit's options go with what is typed.
func (b *Bot) hookEditForm(ctx context.Context, s *discordgo.Session, i *discordgo.Interaction, user string, opts options) {
	id := opts.str(optHook)
	lctx, done := b.lookupContext(ctx)
	cur, err := b.svc.GetHook(lctx, id)
	err = lookupErr(lctx, err)
	done()
	if err != nil {
		b.respondNow(s, i, b.errorReply("hook edit", err))
		return
	}
	var p models.HookPatch
	if v, ok := opts.bool("enabled"); ok {
		p.Enabled = &v
	}
	if n, ok := opts.int("cooldown"); ok {
		c := int(n)
		p.CooldownSeconds = &c
	}
	if opts.has("trigger") || opts.has(optSchedule) || opts.has("timezone") {
		typ, schedule, tz := models.HookTriggerType(opts.str("trigger")), opts.str(optSchedule), opts.str("timezone")
		if typ == "" {
			typ = cur.Trigger.Type
		}
		if typ == cur.Trigger.Type {
			// What the options leave out stays as it is.
			if schedule == "" {
				schedule = scheduleText(cur.Trigger)
			}
			if tz == "" {
				tz = cur.Trigger.Timezone
			}
		}
		t, err := buildTrigger(typ, schedule, tz)
		if err != nil {
			b.respondNow(s, i, b.errorReply("hook edit", err))
			return
		}
		if typ == models.TriggerEvent && cur.Trigger.Type == models.TriggerEvent {
			t.Filters = cur.Trigger.Filters
		}
		p.Trigger = &t
	}
	next := p.Apply(cur, b.cfg.Clock.Now())
	if err := next.Validate(); err != nil {
		b.respondNow(s, i, b.errorReply("hook edit", err))
		return
	}
	steps := stepsText(cur.ContextSteps)
	f := hookForm{user: user, title: "Edit hook " + cur.ID, hookID: cur.ID, patch: p,
		orig:   map[string]string{"name": cur.Name, "prompt": cur.PromptTemplate, "steps": steps},
		fields: []formField{{ID: "name", Label: "Name", Value: cur.Name, Required: true, MaxLength: models.MaxNameLen}}}
	// A text longer than a form holds is left out, and left as it is.
	if utf8.RuneCountInString(cur.PromptTemplate) <= maxFormText {
		f.fields = append(f.fields, promptField(cur.PromptTemplate))
	}
	if utf8.RuneCountInString(steps) <= maxFormText {
		f.fields = append(f.fields, stepsField(steps))
	}
	b.respondForm(s, i, customID("hook-form", b.saveForm(f)), f.title, f.fields...)
}

// reopenHookForm opens a form again, with what was typed, after its
// submission was refused.
func (b *Bot) reopenHookForm(s *discordgo.Session, i *discordgo.Interaction, token, user string) {
	f, ok := b.form(token, false)
	if !ok || f.user != user {
		b.respondNow(s, i, ephemeral(formGone))
		return
	}
	b.respondForm(s, i, customID("hook-form", token), f.title, f.fields...)
}

// submitHookForm creates or changes a hook with a submitted form. A form
// refused comes back with a button that opens it again as it was typed.
func (b *Bot) submitHookForm(ctx context.Context, token, user string, values map[string]string) reply {
	f, ok := b.form(token, true)
	if !ok || f.user != user {
		if ok {
			b.putForm(token, f)
		}
		return ephemeral(formGone)
	}
	for k, fl := range f.fields {
		if v, ok := values[fl.ID]; ok {
			f.fields[k].Value = v
		}
	}
	var (
		r   reply
		err error
	)
	if f.hookID == "" {
		r, err = b.createFromForm(ctx, f, user)
	} else {
		r, err = b.editFromForm(ctx, f, user)
	}
	if err != nil {
		b.putForm(token, f)
		r = b.errorReply("hook form", err)
		r.Components = buttons(button("Fix and send again", discordgo.PrimaryButton, customID("hook-retry", token)))
	}
	return r
}

func (b *Bot) createFromForm(ctx context.Context, f hookForm, user string) (reply, error) {
	h := f.create
	prompt, _ := f.value("prompt")
	h.PromptTemplate = strings.TrimSpace(prompt)
	stepsJSON, _ := f.value("steps")
	steps, err := parseSteps(stepsJSON)
	if err != nil {
		return reply{}, err
	}
	h.ContextSteps = steps
	h, err = b.svc.CreateHook(ctx, h)
	if err != nil {
		return reply{}, err
	}
	return text(fmt.Sprintf("🪝 Hook `%s` created by %s.\n%s", h.ID, mention(user), renderHook(h))), nil
}

func (b *Bot) editFromForm(ctx context.Context, f hookForm, user string) (reply, error) {
	p := f.patch
	if v, ok := f.value("name"); ok && strings.TrimSpace(v) != f.orig["name"] {
		n := strings.TrimSpace(v)
		p.Name = &n
	}
	if v, ok := f.value("prompt"); ok && strings.TrimSpace(v) != strings.TrimSpace(f.orig["prompt"]) {
		t := strings.TrimSpace(v)
		p.PromptTemplate = &t
	}
	if v, ok := f.value("steps"); ok && strings.TrimSpace(v) != strings.TrimSpace(f.orig["steps"]) {
		steps, err := parseSteps(v)
		if err != nil {
			return reply{}, err
		}
		p.ContextSteps = &steps
	}
	fields := hookPatchFields(p)
	if len(fields) == 0 {
		return ephemeral(fmt.Sprintf("Nothing to change in hook `%s`.", f.hookID)), nil
	}
	h, err := b.svc.UpdateHook(ctx, f.hookID, p)
	if err != nil {
		return reply{}, err
	}
	return text(fmt.Sprintf("✏️ Hook `%s` changed by %s (%s).\n%s", h.ID, mention(user), strings.Join(fields, ", "), renderHook(h))), nil
}

// hookPatchFields names the fields a patch sets.
func hookPatchFields(p models.HookPatch) []string {
	var out []string
	for _, f := range []struct {
		name string
		set  bool
	}{{"name", p.Name != nil}, {"enabled", p.Enabled != nil}, {"trigger", p.Trigger != nil},
		{"context_steps", p.ContextSteps != nil}, {"prompt_template", p.PromptTemplate != nil},
		{"cooldown_seconds", p.CooldownSeconds != nil}} {
		if f.set {
			out = append(out, f.name)
		}
	}
	return out
}

// buildTrigger makes a trigger of a type from /hook's schedule and
// timezone options, and checks it.
func buildTrigger(typ models.HookTriggerType, schedule, timezone string) (models.HookTrigger, error) {
	t := models.HookTrigger{Type: typ, Timezone: timezone}
	switch typ {
	case models.TriggerPeriodic:
		if schedule == "" {
			return t, models.Errorf(models.CodeInvalid, "schedule: a periodic hook needs its interval in seconds, e.g. 3600")
		}
		n, err := parseSeconds(schedule)
		if err != nil {
			return t, models.Errorf(models.CodeInvalid, "trigger.interval_seconds: %q is neither seconds (3600) nor a duration (1h)", schedule)
		}
		t.IntervalSeconds = n
	case models.TriggerCron:
		if schedule == "" {
			return t, models.Errorf(models.CodeInvalid, "schedule: a cron hook needs a cron expression, e.g. 0 9 * * 1-5")
		}
		t.Expr = schedule
	case models.TriggerEvent:
		if schedule == "" {
			return t, models.Errorf(models.CodeInvalid, "schedule: an event hook needs the event it fires on: %s",
				strings.Join(models.HookEventTypes, ", "))
		}
		t.EventType = schedule
	case models.TriggerManual:
		if schedule != "" {
			return t, models.Errorf(models.CodeInvalid, "schedule: a manual hook has none (leave it empty)")
		}
	}
	return t, t.Validate()
}

// parseSeconds reads "3600" or "1h" as seconds.
func parseSeconds(s string) (int, error) {
	if n, err := strconv.Atoi(s); err == nil {
		return n, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d%time.Second != 0 {
		return 0, errors.New("not a number of seconds")
	}
	return int(d / time.Second), nil
}

// scheduleText is a trigger's schedule as /hook's schedule option gives it.
func scheduleText(t models.HookTrigger) string {
	switch t.Type {
	case models.TriggerPeriodic:
		return strconv.Itoa(t.IntervalSeconds)
	case models.TriggerCron:
		return t.Expr
	case models.TriggerEvent:
		return t.EventType
	}
	return ""
}

// smartQuotes are the quotes phone keyboards put in for straight ones.
var smartQuotes = strings.NewReplacer("“", `"`, "”", `"`, "„", `"`, "″", `"`)

// parseSteps reads context steps typed as JSON: a list of steps, or steps
// separated by commas; empty is none.
func parseSteps(s string) ([]models.HookStep, error) {
	s = strings.TrimSpace(smartQuotes.Replace(s))
	if s == "" {
		return []models.HookStep{}, nil
	}
	if strings.HasPrefix(s, "{") {
		s = "[" + s + "]"
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	var steps []models.HookStep
	if err := dec.Decode(&steps); err != nil {
		return nil, models.Errorf(models.CodeInvalid, "context_steps: not a JSON list of steps (%v)", err)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return nil, models.Errorf(models.CodeInvalid, "context_steps: not a JSON list of steps (text after the list)")
	}
	if steps == nil {
		steps = []models.HookStep{}
	}
	return steps, nil
}

// stepsText renders context steps as JSON to edit: one step a line.
func stepsText(steps []models.HookStep) string {
	if len(steps) == 0 {
		return ""
	}
	lines := make([]string, len(steps))
	for i, st := range steps {
		b, err := json.Marshal(st)
		if err != nil {
			return ""
		}
		lines[i] = "  " + string(b)
	}
	return "[\n" + strings.Join(lines, ",\n") + "\n]"
}

func (b *Bot) hookList(ctx context.Context, c call) reply {
	hs, err := b.svc.ListHooks(ctx, c.opts.str(optProject))
	if err != nil {
		return b.errorReply("hook list", err)
	}
	if len(hs) == 0 {
		if p := c.opts.str(optProject); p != "" {
			return text(fmt.Sprintf("Project `%s` has no hooks yet. Create one with `/hook create`.", p))
		}
		return text("No hooks yet. Create one with `/hook create`.")
	}
	lines := make([]string, len(hs))
	for i, h := range hs {
		lines[i] = renderHook(h)
	}
	return text(strings.Join(lines, "\n"))
}

func (b *Bot) hookFire(ctx context.Context, c call) reply {
	id := c.opts.str(optHook)
	r, err := b.svc.FireHook(ctx, id, actor(c.user), models.HookFire{})
	if err != nil {
		return b.errorReply("hook fire", err)
	}
	msg := fmt.Sprintf("🪝 Hook `%s` fired by %s: run `%s` is %s.", id, mention(c.user), r.ID, r.Status)
	if r.Status == models.HookRunSkipped {
		msg = fmt.Sprintf("🪝 Hook `%s` fired by %s: run `%s` was skipped", id, mention(c.user), r.ID)
		if r.SkippedReason != nil {
			msg += ": " + flat(*r.SkippedReason, 300)
		}
		msg += "."
	}
	return text(msg + fmt.Sprintf("\nHow it ends: `/hook runs hook:%s`", id))
}

func (b *Bot) hookRuns(ctx context.Context, c call) reply {
	id := c.opts.str(optHook)
	if _, err := b.svc.GetHook(ctx, id); err != nil {
		return b.errorReply("hook runs", err)
	}
	runs, err := b.svc.ListHookRuns(ctx, models.HookRunFilter{HookID: id, Status: models.HookRunStatus(c.opts.str("status")), Limit: hookRunsShown})
	if err != nil {
		return b.errorReply("hook runs", err)
	}
	if len(runs) == 0 {
		if st := c.opts.str("status"); st != "" {
			return text(fmt.Sprintf("No %s runs of `%s`.", st, id))
		}
		return text(fmt.Sprintf("Hook `%s` has no runs yet. Run it with `/hook fire`.", id))
	}
	lines := make([]string, len(runs))
	for i, r := range runs {
		lines[i] = renderHookRun(r)
	}
	return text(joinFitting(fmt.Sprintf("**Last runs of `%s`**, newest first", id), lines))
}

func (b *Bot) hookDelete(ctx context.Context, c call) reply {
	return b.deleteHook(ctx, c.opts.str(optHook), c.user)
}

func (b *Bot) deleteHook(ctx context.Context, id, user string) reply {
	if err := b.svc.DeleteHook(ctx, id); err != nil {
		return b.errorReply("hook delete", err)
	}
	return text(fmt.Sprintf("🗑️ Hook `%s` deleted by %s, with its runs.", id, mention(user)))
}

// renderHook renders a hook on one line.
func renderHook(h models.Hook) string {
	icon := "🪝"
	if !h.Enabled {
		icon = "⏸️"
	}
	parts := []string{fmt.Sprintf("%s `%s` **%s**", icon, h.ID, escape(cut(h.Name, 100))), "project `" + h.ProjectID + "`",
		triggerText(h.Trigger, true), fmt.Sprintf("%d context step(s)", len(h.ContextSteps))}
	if h.PromptTemplate == "" {
		parts = append(parts, "no LLM call")
	} else {
		parts = append(parts, "asks the LLM")
	}
	parts = append(parts, "cooldown "+humanSeconds(h.CooldownSeconds))
	if !h.Enabled {
		parts = append(parts, "**disabled**")
	}
	return strings.Join(parts, " · ")
}

// triggerText describes a trigger, in markdown or as plain text.
func triggerText(t models.HookTrigger, markdown bool) string {
	code := func(s string) string {
		if markdown {
			return "`" + strings.ReplaceAll(s, "`", "") + "`"
		}
		return s
	}
	switch t.Type {
	case models.TriggerPeriodic:
		return "every " + humanSeconds(t.IntervalSeconds)
	case models.TriggerCron:
		out := "cron " + code(t.Expr)
		if t.Timezone != "" {
			out += " (" + code(t.Timezone) + ")"
		}
		return out
	case models.TriggerEvent:
		out := "on " + code(t.EventType)
		if len(t.Filters) > 0 {
			keys := make([]string, 0, len(t.Filters))
			for k := range t.Filters {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for i, k := range keys {
				keys[i] = code(k + "=" + t.Filters[k])
			}
			out += " where " + strings.Join(keys, ", ")
		}
		return out
	case models.TriggerManual:
		return "by hand"
	}
	return code(string(t.Type))
}

// humanSeconds renders seconds in the largest whole unit.
func humanSeconds(n int) string {
	switch {
	case n == 0:
		return "none"
	case n%86400 == 0:
		return fmt.Sprintf("%dd", n/86400)
	case n%3600 == 0:
		return fmt.Sprintf("%dh", n/3600)
	case n%60 == 0:
		return fmt.Sprintf("%dm", n/60)
	}
	return fmt.Sprintf("%ds", n)
}

func hookRunIcon(status models.HookRunStatus) string {
	switch status {
	case models.HookRunRunning:
		return "▶️"
	case models.HookRunCompleted:
		return "✅"
	case models.HookRunFailed:
		return "❌"
	case models.HookRunSkipped:
		return "⏭️"
	}
	return "•"
}

// renderHookRun renders a run: what fired it, what it cost, and why it was
// skipped or failed.
func renderHookRun(r models.HookRun) string {
	l := fmt.Sprintf("%s `%s` %s · %s · %d tokens · <t:%d:R>", hookRunIcon(r.Status), r.ID, r.Status,
		renderTrigger(r), r.TokensUsed, r.StartedAt.Unix())
	if r.SkippedReason != nil && strings.TrimSpace(*r.SkippedReason) != "" {
		l += "\n↳ skipped: " + flat(*r.SkippedReason, 200)
	}
	if strings.TrimSpace(r.Error) != "" {
		l += "\n↳ error: " + flat(r.Error, 300)
	}
	return l
}

// renderTrigger renders why a run fired: its reason and its detail; a
// Discord user who fired it is shown as a mention.
func renderTrigger(r models.HookRun) string {
	if by, ok := r.FiredBy(); ok {
		if id, ok := strings.CutPrefix(by, "discord:"); ok && id != "" && strings.Trim(id, "0123456789") == "" {
			return flat(string(r.TriggerReason), 40) + ": fired by " + mention(id)
		}
	}
	if r.TriggerDetail == "" {
		return flat(string(r.TriggerReason), 120)
	}
	return flat(string(r.TriggerReason)+": "+r.TriggerDetail, 120)
}

// flat renders text from others on one line, escaped, without the
// credentials of URLs, and cut to n characters.
func flat(s string, n int) string {
	return escape(cut(strings.Join(strings.Fields(models.RedactURL(s)), " "), n))
}

// joinFitting joins a header and lines into one message: the lines that
// fit, and how many more there are.
func joinFitting(header string, lines []string) string {
	var b strings.Builder
	b.WriteString(header)
	size := utf8.RuneCountInString(header)
	for k, l := range lines {
		n := utf8.RuneCountInString(l) + 1
		if size+n > messageLimit-40 {
			fmt.Fprintf(&b, "\n*(%d more not shown)*", len(lines)-k)
			break
		}
		b.WriteString("\n" + l)
		size += n
	}
	return b.String()
}
