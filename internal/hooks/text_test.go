package hooks_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/llm/llmtest"
	"github.com/agentqueued/agentqueued/internal/models"
)

// TestToolsRefuseTextThatBreaksLater: a model's tool call is an entry
// point of task text; a NUL in a title used to reach git. The refusal is
// the tool's answer to the model, naming the argument.
func TestToolsRefuseTextThatBreaksLater(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	ours := h.task("web", "Ours")
	hk := h.hook(`{"project_id":"web","name":"Triage","trigger":{"type":"manual"},"prompt_template":"triage"}`)
	long := strings.Repeat("é", models.MaxTitleLen+1)
	tests := []struct {
		call llmtest.ToolCall
		want string // the error; "" for a call that acts
	}{
		{toolCall("create_task", `{"title":"Fix the build\u0000","description":"d"}`),
			"title: control character U+0000 (NUL) at character 14 is not allowed (one line of printable text)"},
		{toolCall("create_task", `{"title":"Fix\nthe build","description":"d"}`),
			"title: control character U+000A (line feed) at character 4 is not allowed (one line of printable text)"},
		{toolCall("create_task", `{"title":"`+long+`","description":"d"}`), "title: at most 300 characters (got 301)"},
		{toolCall("create_task", `{"title":"Fix","description":"see \u001b[31mred"}`),
			"description: control character U+001B (ESC) at character 5 is not allowed (text takes printable characters, line breaks and tabs)"},
		{toolCall("create_task", `{"title":"Fix","description":"d","kind":"bug\u0085"}`),
			"kind: control character U+0085 at character 4 is not allowed (one line of printable text)"},
		{toolCall("create_task", `{"title":"Fix","description":"d","dedupe_key":"k\u0000"}`),
			"dedupe_key: control character U+0000 (NUL) at character 2 is not allowed (one line of printable text)"},
		{toolCall("post_message", `{"text":"done\u0007"}`),
			"text: control character U+0007 at character 5 is not allowed (text takes printable characters, line breaks and tabs)"},
		{toolCall("add_task_feedback", `{"task_id":"`+ours+`","feedback":"mind\u0000"}`),
			"feedback: control character U+0000 (NUL) at character 5 is not allowed (text takes printable characters, line breaks and tabs)"},
		{toolCall("create_task", `{"title":"Fix the login test","description":"It fails:\n\t- one run in five\r\n"}`), ""},
		{toolCall("post_message", `{"text":"Filed:\n\t• the login test"}`), ""},
	}
	calls := make([]llmtest.ToolCall, len(tests))
	for i, tc := range tests {
		calls[i] = tc.call
	}
	h.llm.Enqueue(llmtest.Reply{ToolCalls: calls, Usage: llmtest.Usage{PromptTokens: 10, CompletionTokens: 10}},
		llmtest.Reply{Content: "Done.", Usage: llmtest.Usage{PromptTokens: 10, CompletionTokens: 1}})
	r := h.fire(hk.ID, models.HookFire{})
	if r.Status != models.HookRunCompleted {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	acts := actions(t, r)
	if len(acts) != len(tests) {
		t.Fatalf("%d actions for %d calls", len(acts), len(tests))
	}
	// What the model was told of each call, in order after its own answer.
	told := h.llm.Requests()[1].Messages[3:]
	for i, tc := range tests {
		if acts[i].Error != tc.want {
			t.Errorf("call %d (%s): error %q, want %q", i, acts[i].Tool, acts[i].Error, tc.want)
		}
		if tc.want != "" && (told[i].Role != "tool" || told[i].Content != "error: "+tc.want) {
			t.Errorf("call %d: the model was told %+v", i, told[i])
		}
	}
	tasks, err := h.st.ListTasks(context.Background(), models.TaskFilter{ProjectID: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 2 {
		t.Fatalf("%d tasks, want Ours and the one valid call's", len(tasks))
	}
	for _, task := range tasks {
		if err := models.CheckLine("title", task.Title, models.MaxTitleLen); err != nil {
			t.Errorf("task %s: %v", task.ID, err)
		}
	}
	if fb, _ := h.st.TaskFeedback(context.Background(), ours); len(fb) != 0 {
		t.Errorf("refused feedback was recorded: %+v", fb)
	}
	if msgs := h.outbox("hook.message"); len(msgs) != 1 || !strings.Contains(msgs[0].Payload, `Filed:\n\t• the login test`) {
		t.Errorf("messages %+v", msgs)
	}
}

func TestFiringNamesOneLineActor(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	hk := h.hook(`{"project_id":"web","name":"Triage","trigger":{"type":"manual"}}`)
	_, err := h.eng.Fire(context.Background(), hk.ID, "discord:1\nfired by root", models.HookFire{})
	if models.ErrorCodeOf(err) != models.CodeInvalid || !strings.HasPrefix(err.Error(), "actor: control character U+000A") {
		t.Fatalf("Fire: %v", err)
	}
	if rs := h.runs(hk.ID); len(rs) != 0 {
		t.Fatalf("%d runs recorded", len(rs))
	}
}
