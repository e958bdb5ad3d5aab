package hooks

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// recordTimeout bounds the writes that record a run's end, which happen
// even after the engine was told to stop; finishTries is how many times
// the end is tried.
const (
	recordTimeout = 10 * time.Second
	finishTries   = 5
)

// execute performs a claimed run and records its end.
func (e *Engine) execute(ctx context.Context, h models.Hook, r models.HookRun) {
	log := e.log.With("hook_id", h.ID, "project_id", h.ProjectID, "run_id", r.ID)
	defer func() {
		if p := recover(); p != nil {
			log.Error("hook run panicked", "panic", p)
			r.Status, r.Error = models.HookRunFailed, "internal error (see the daemon's log)"
			e.finish(ctx, log, r)
		}
	}()
	r = e.perform(ctx, h, r)
	e.finish(ctx, log, r)
}

// finish records the end of a run.
func (e *Engine) finish(ctx context.Context, log *slog.Logger, r models.HookRun) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	// A run left running would hold a place under the cap until the next
	// start: the end is recorded again after a failure, while time allows.
	var (
		done bool
		err  error
	)
	for try := 0; try < finishTries; try++ {
		if done, err = e.store.FinishHookRun(rctx, r); err == nil || rctx.Err() != nil {
			break
		}
		log.Error("recording the end of a hook run failed; trying again", "err", err)
		select {
		case <-rctx.Done():
		case <-e.cfg.Clock.After(time.Duration(try+1) * 100 * time.Millisecond):
		}
	}
	switch {
	case err != nil:
		log.Error("recording the end of a hook run failed", "err", err)
	case !done:
		log.Info("hook run ended after it was closed elsewhere (the hook was deleted, or the run closed at a restart)")
	default:
		attrs := []any{"status", r.Status, "tokens", r.TokensUsed}
		if r.Error != "" {
			attrs = append(attrs, "error", r.Error)
		}
		if r.SkippedReason != nil {
			attrs = append(attrs, "reason", *r.SkippedReason)
		}
		log.Info("hook run ended", attrs...)
	}
	e.ended(r)
}

// perform runs the steps, renders the prompt and talks to the LLM,
// returning the run with its final status and everything it recorded.
func (e *Engine) perform(ctx context.Context, h models.Hook, r models.HookRun) models.HookRun {
	fail := func(format string, args ...any) models.HookRun {
		r.Status, r.Error = models.HookRunFailed, fmt.Sprintf(format, args...)
		return r
	}
	p, err := e.store.GetProject(ctx, h.ProjectID)
	if err != nil {
		return fail("project %s: %s", h.ProjectID, models.ErrorMessageOf(err))
	}
	var event *models.HookEvent
	if r.EventData != nil {
		event = &models.HookEvent{}
		if err := json.Unmarshal([]byte(*r.EventData), event); err != nil {
			return fail("event_data: %v", err)
		}
	}
	results, skip, err := e.gather(ctx, h, p)
	r.ContextResults = jsonText(results)
	if err != nil {
		return fail("%s", err)
	}
	if skip != "" {
		r.Status, r.SkippedReason = models.HookRunSkipped, &skip
		return r
	}
	if h.FileTask != nil {
		return e.fileTask(ctx, h, r, results, event)
	}
	if strings.TrimSpace(h.PromptTemplate) == "" {
		r.Status = models.HookRunCompleted
		return r
	}
	prompt, err := Render("prompt_template", h.PromptTemplate, results, event)
	if err != nil {
		return fail("%s", err)
	}
	r.PromptSent = &prompt
	if err := e.store.SaveHookRun(ctx, r); err != nil {
		e.log.Warn("saving a hook run's context failed", "run_id", r.ID, "err", err)
	}
	return e.converse(ctx, h, r, prompt)
}

// jsonText is v as JSON text.
func jsonText(v any) *string {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	s := string(b)
	return &s
}

// fileTask files the hook's task, its templates filled with the run's
// step results and event, as the model's create_task tool would (the
// same checks, the same dedupe): the action is recorded in the run.
func (e *Engine) fileTask(ctx context.Context, h models.Hook, r models.HookRun, results []models.StepResult, event *models.HookEvent) models.HookRun {
	t := *h.FileTask
	title, err := Render("file_task.title", t.Title, results, event)
	if err == nil {
		t.Description, err = Render("file_task.description", t.Description, results, event)
	}
	if err != nil {
		r.Status, r.Error = models.HookRunFailed, models.ErrorMessageOf(err)
		return r
	}
	// A command's output filled in is cleaned and cut, not refused: the
	// title to one line, the description to what a tool may file (the
	// run keeps the whole output in its context results).
	t.Title = models.CleanLine(title, models.MaxTitleLen)
	t.Description = models.CleanText(t.Description, maxToolText)
	args, _ := json.Marshal(t)
	a := models.HookAction{Tool: "file_task", Arguments: args}
	a.Result, err = e.createTask(ctx, h, r, t.Title, t.Description, t.Kind, "", t.Priority)
	if err != nil {
		a.Error = models.ErrorMessageOf(err)
		r.Status, r.Error = models.HookRunFailed, "file_task: "+a.Error
	} else {
		r.Status = models.HookRunCompleted
	}
	r.ActionsTaken = jsonText([]models.HookAction{a})
	return r
}

// Render fills the template of field (prompt_template, file_task.title,
// file_task.description): {{step_N}} with step N's output,
// {{step_N.field}} with one of its fields, {{event}} with the event as
// JSON and {{event.field}} with one of its fields. A placeholder that
// names nothing this run has is an error naming it: no broken prompt is
// ever sent.
func Render(field, tmpl string, results []models.StepResult, event *models.HookEvent) (string, error) {
	ps, err := models.ParsePlaceholders(field, tmpl)
	if err != nil {
		return "", err
	}
	values := make(map[string]string, len(ps))
	for _, p := range ps {
		if _, done := values[p.Text]; done {
			continue
		}
		var (
			v  string
			ok bool
		)
		switch {
		case p.Step < 0 && event == nil:
			return "", models.Errorf(models.CodeInvalid, "%s: %s: this run has no event (it was fired by hand without one)", field, p.Text)
		case p.Step < 0 && p.Field == "":
			b, _ := json.MarshalIndent(event, "", "  ")
			v, ok = string(b), true
		case p.Step < 0:
			v, ok = event.Field(p.Field)
		case p.Step >= len(results):
			return "", models.Errorf(models.CodeInvalid, "%s: %s: the run has %d step results", field, p.Text, len(results))
		default:
			v, ok = results[p.Step].Field(p.Field)
		}
		if !ok {
			return "", models.Errorf(models.CodeInvalid, "%s: %s: no such field in this run", field, p.Text)
		}
		values[p.Text] = v
	}
	return models.FillTemplate(tmpl, func(m models.TemplateMatch) string { return values[m.Text] }), nil
}
