package service

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/hooks"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/repo"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// hookCommands returns the service over a fresh store with a real hook
// engine; the test waits for the engine's runs before it ends.
func hookCommands(t *testing.T) (*Service, *hooks.Engine) {
	t.Helper()
	st := storetest.Open(t)
	ws, err := repo.New(repo.Config{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	engine, err := hooks.New(hooks.Config{}, st, st, ws)
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(engine.Wait) // before the store closes
	return New(Config{Store: st, Hooks: engine}), engine
}

func TestHookCommandsRedactTheAPIKey(t *testing.T) {
	t.Parallel()
	const secret = "sk-secret"
	c, engine := hookCommands(t)
	ctx := context.Background()
	if _, err := c.CreateProject(ctx, models.Project{ID: "web"}); err != nil {
		t.Fatal(err)
	}
	spec := models.HookSpec{ProjectID: "web", Name: "Own model", Trigger: models.HookTrigger{Type: models.TriggerManual},
		LLMConfig: &models.HookLLMConfig{Model: "m", BaseURL: "http://127.0.0.1:1/v1", APIKey: secret}}
	answers := map[string]any{}
	created, err := c.CreateHook(ctx, spec.Hook())
	if err != nil {
		t.Fatal(err)
	}
	answers["CreateHook"] = created
	if answers["GetHook"], err = c.GetHook(ctx, created.ID); err != nil {
		t.Fatal(err)
	}
	if answers["ListHooks"], err = c.ListHooks(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if answers["ListHooks of the project"], err = c.ListHooks(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	name := "Renamed"
	if answers["UpdateHook"], err = c.UpdateHook(ctx, created.ID, models.HookPatch{Name: &name}); err != nil {
		t.Fatal(err)
	}
	for what, v := range answers {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), secret) || !strings.Contains(string(data), `"api_key":"[redacted]"`) {
			t.Errorf("%s answered %s; want the key redacted", what, data)
		}
	}
	stored, err := c.store.GetHook(ctx, created.ID)
	if err != nil || stored.LLMConfig == nil || stored.LLMConfig.APIKey != secret || stored.Name != "Renamed" {
		t.Fatalf("stored %+v, %v; want the key kept", stored, err)
	}

	run, err := c.FireHook(ctx, created.ID, "alice", models.HookFire{})
	if err != nil || run.HookID != created.ID || run.TriggerReason != models.TriggerReasonManual || run.TriggerDetail != "fired by alice" {
		t.Fatalf("FireHook: %+v, %v", run, err)
	}
	engine.Wait()
	if _, err := c.ListHooks(ctx, "ghost"); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Errorf("ListHooks of an unknown project: %v; want not_found", err)
	}
}

func TestHookCommandsCheckStepsBeforeSaving(t *testing.T) {
	t.Parallel()
	c, _ := hookCommands(t)
	ctx := context.Background()
	if _, err := c.CreateProject(ctx, models.Project{ID: "web", Settings: models.ProjectSettings{HookCommands: []string{"make lint"}}}); err != nil {
		t.Fatal(err)
	}
	spec := func(command string) models.Hook {
		return models.HookSpec{ProjectID: "web", Name: "Lint", Trigger: models.HookTrigger{Type: models.TriggerManual},
			ContextSteps: []models.HookStep{{Type: models.StepRunCommand, Command: command}}}.Hook()
	}
	if _, err := c.CreateHook(ctx, spec("rm -rf /")); models.ErrorCodeOf(err) != models.CodeInvalid ||
		!strings.Contains(err.Error(), "context_steps[0].command") {
		t.Fatalf("a command off the project's list: %v", err)
	}
	if _, err := c.CreateHook(ctx, spec("make lint")); err != nil {
		t.Fatalf("a listed command: %v", err)
	}
	steps := []models.HookStep{{Type: models.StepHTTPGet, URL: "https://example.com/status"}}
	if _, err := c.UpdateHook(ctx, "lint", models.HookPatch{ContextSteps: &steps}); models.ErrorCodeOf(err) != models.CodeInvalid ||
		!strings.Contains(err.Error(), "context_steps[0].url") {
		t.Fatalf("an http_get of a host off the allow list: %v", err)
	}
	if h, err := c.store.GetHook(ctx, "lint"); err != nil || h.ContextSteps[0].Type != models.StepRunCommand {
		t.Fatalf("a refused edit changed the hook: %+v, %v", h, err)
	}
}
