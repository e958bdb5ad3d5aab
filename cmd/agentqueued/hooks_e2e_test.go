package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/llm/llmtest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// finishingAgent completes its task at once.
const finishingAgent = `#!/bin/sh
set -eu
cat > /dev/null
"$WORKER_BIN" agent complete --summary "Shipped."
`

// TestHookFiredByATaskEventCreatesATask runs the whole daemon: a task of
// kind feature completes through a command agent; its task.completed event
// fires the project's hook, whose context step and prompt reach a fake
// OpenAI-compatible model through the real client; the model files a
// follow-up task and posts a message. The daemon's LLM key reaches no log
// and no answer.
func TestHookFiredByATaskEventCreatesATask(t *testing.T) {
	t.Parallel()
	const key = "sk-e2e-secret-key"
	llm := llmtest.New(llmtest.Options{APIKey: key, Model: "small"})
	t.Cleanup(llm.Close)
	llm.SetResponder(func(req llmtest.Request) llmtest.Reply {
		if last := req.Messages[len(req.Messages)-1]; last.Role == "tool" {
			return llmtest.Reply{Content: "Filed the release notes.", Usage: llmtest.Usage{PromptTokens: 400, CompletionTokens: 12}}
		}
		return llmtest.Reply{ToolCalls: []llmtest.ToolCall{
			{Name: "create_task", Arguments: `{"title":"Write release notes for the checkout","description":"The checkout shipped."}`},
			{Name: "post_message", Arguments: `{"text":"The checkout shipped; release notes are filed."}`},
		}, Usage: llmtest.Usage{PromptTokens: 300, CompletionTokens: 40}}
	})

	bin := agentqueuedBinary(t)
	dir := t.TempDir()
	script := writeFile(t, dir, "agent.sh", finishingAgent)
	cfg := writeFile(t, dir, "config.yaml", `
llm:
  base_url: `+llm.URL()+`
  api_key: `+key+`
  model: small
hooks:
  poll_interval: 1m
agents:
  - name: worker
    type: command
    command: /bin/sh
    args: ["`+script+`"]
    env: {WORKER_BIN: "`+bin+`"}
`)
	dataDir := filepath.Join(dir, "data")
	ended := make(chan models.HookRun, 10)
	d, err := startMainWith(t, func(m *Main) { m.OnHookRunEnd = func(r models.HookRun) { ended <- r } },
		"run", "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := d.watch.Context()
	c, err := api.NewClient("http://"+d.m.Addr(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateProject(ctx, models.ProjectSpec{ID: "shop"}.Project()); err != nil {
		t.Fatal(err)
	}
	var spec models.HookSpec
	if err := json.Unmarshal([]byte(`{"project_id":"shop","name":"Release notes","cooldown_seconds":0,
		"trigger":{"type":"event","event_type":"task.completed","filters":{"kind":"feature"}},
		"context_steps":[{"type":"db_query","query":"recent_events","since":"1h"}],
		"prompt_template":"{{event.title}} was completed ({{step_0.count}} recent changes). File its release notes.",
		"llm_config":{"temperature":0}}`), &spec); err != nil {
		t.Fatal(err)
	}
	hk, err := c.CreateHook(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTasks(ctx, models.TaskBatch{ProjectID: "shop", Tasks: []models.BatchTask{
		{Title: "Ship the checkout", Kind: "feature"}}}); err != nil {
		t.Fatal(err)
	}
	var ran models.HookRun
	select {
	case ran = <-ended:
	case <-ctx.Done():
		t.Fatalf("no hook run ended\n%s", d.logs)
	}
	if got, err := c.GetHookRun(ctx, ran.ID); err != nil || got.Status != models.HookRunCompleted || got.HookID != hk.ID {
		t.Fatalf("run over the API: %+v, %v", got, err)
	}
	if err := d.m.Close(); err != nil {
		t.Fatal(err)
	}
	st := storetest.OpenAt(t, filepath.Join(dataDir, "agentqueued.db"))
	r, err := st.GetHookRun(context.Background(), ran.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != models.HookRunCompleted || r.TokensUsed != 752 || deref(r.LLMResponse) != "Filed the release notes." ||
		!strings.HasPrefix(deref(r.PromptSent), "Ship the checkout was completed (") || r.TriggerReason != "event:task.completed" || !strings.HasPrefix(r.TriggerDetail, "event task.completed of task ") {
		t.Fatalf("run %+v", r)
	}
	tasks, err := st.ListTasks(context.Background(), models.TaskFilter{ProjectID: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	var notes *models.Task
	for i := range tasks {
		if tasks[i].Title == "Write release notes for the checkout" {
			notes = &tasks[i]
		}
	}
	if len(tasks) != 2 || notes == nil || notes.CreatedBy != "hook:release-notes" || notes.Metadata["hook_run_id"] != r.ID {
		t.Fatalf("tasks %+v", tasks)
	}
	msgs, err := st.PendingOutbox(context.Background(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	posted := 0
	for _, m := range msgs {
		if m.Kind == "hook.message" && strings.Contains(m.Payload, "release notes are filed") {
			posted++
		}
	}
	if posted != 1 {
		t.Fatalf("%d hook messages in the outbox", posted)
	}
	reqs := llm.Requests()
	if len(reqs) != 2 || reqs[0].Model != "small" {
		t.Fatalf("%d LLM requests", len(reqs))
	}
	if strings.Contains(d.logs.String(), key) {
		t.Fatalf("the LLM key is in the logs:\n%s", d.logs)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
