package discord

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/discord/discordtest"
	"github.com/agentqueued/agentqueued/internal/models"
)

// fakeLLM is an OpenAI-compatible chat completions endpoint that answers
// each request with the next queued reply: a tool call's arguments, or an
// HTTP status.
type fakeLLM struct {
	mu       sync.Mutex
	replies  []any // string: tool arguments; int: HTTP status
	requests []map[string]any
}

func (f *fakeLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer llm-key" {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	var req map[string]any
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	var reply any = 500
	if len(f.replies) > 0 {
		reply, f.replies = f.replies[0], f.replies[1:]
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if status, ok := reply.(int); ok {
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"error":{"message":"upstream trouble","type":"server_error"}}`))
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": req["model"],
		"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls", "message": map[string]any{
			"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "call_1", "type": "function",
				"function": map[string]any{"name": "propose_command", "arguments": reply}}}}}},
		"usage": map[string]any{"prompt_tokens": 420, "completion_tokens": 30, "total_tokens": 450},
	})
}

func TestMentionProposesACommandThatRunsOnlyOnRun(t *testing.T) {
	t.Parallel()
	llm := &fakeLLM{replies: []any{
		`{"command":"task add","options":{"title":"Fix the login bug","priority":3}}`,
		`{"command":"task add","options":{"title":"Another"}}`,
		500,
		`{"command":"rm -rf","options":{}}`,
	}}
	srv := httptest.NewServer(llm)
	t.Cleanup(srv.Close)
	proposer, err := NewOpenAIProposer(OpenAIConfig{BaseURL: srv.URL + "/v1", APIKey: "llm-key", Model: "test-model"})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *Config, _ *discordtest.Options) { c.Proposer = proposer })
	h.project("web")
	bot := &discordgo.User{ID: discordtest.DefaultBotUserID}
	mention := func(user, content string) *discordgo.Message {
		return h.fake.SendMessage(&discordgo.Message{ChannelID: projectChannel, Content: "<@" + bot.ID + "> " + content,
			Author: &discordgo.User{ID: user}, Mentions: []*discordgo.User{bot}})
	}

	mention(alice, "please add a task to fix the login bug, fairly urgent")
	offer := h.waitMessage(projectChannel, "Run this?")
	if !strings.Contains(offer.Content, "/task add priority:3 title:Fix the login bug") {
		t.Errorf("offer: %q", offer.Content)
	}
	if ts, _ := h.st.ListTasks(context.Background(), models.TaskFilter{}); len(ts) != 0 {
		t.Fatalf("a proposal ran before Run: %+v", ts)
	}
	// What the model saw: the request as data, and the command catalogue.
	llm.mu.Lock()
	req := llm.requests[0]
	llm.mu.Unlock()
	if req["model"] != "test-model" || !strings.Contains(toJSON(req["messages"]), "fix the login bug") ||
		!strings.Contains(toJSON(req["messages"]), "/task add") || !strings.Contains(toJSON(req["tools"]), "propose_command") {
		t.Errorf("request to the model: %s", toJSON(req))
	}

	// A stranger cannot run it.
	run := h.buttonID(offer, "aq|nl|run|")
	r, _ := h.answer(h.press(mallory, offer, run), 1)
	if !ephemeralFlag(r) {
		t.Errorf("stranger's Run: %+v", r)
	}
	_, text := h.answer(h.press(alice, offer, run), 1)
	if !strings.Contains(text, "Added `") {
		t.Errorf("Run: %q", text)
	}
	ts, _ := h.st.ListTasks(context.Background(), models.TaskFilter{ProjectID: "web"})
	if len(ts) != 1 || ts[0].Title != "Fix the login bug" || ts[0].Priority != 3 || ts[0].CreatedBy != "discord:"+alice {
		t.Fatalf("tasks after Run: %+v", ts)
	}
	// Pressed twice: runs once.
	if _, text := h.answer(h.press(alice, offer, run), 1); !strings.Contains(text, "was used") {
		t.Errorf("second Run: %q", text)
	}

	// Cancel runs nothing.
	mention(alice, "and another one")
	offer2 := h.waitMessage(projectChannel, "title:Another")
	if _, text := h.answer(h.press(alice, offer2, h.buttonID(offer2, "aq|nl|cancel|")), 1); !strings.Contains(text, "nothing was run") {
		t.Errorf("cancel: %q", text)
	}
	// Model failures and made-up commands are explained, never run.
	mention(alice, "third")
	h.waitMessage(projectChannel, "could not turn that into a command")
	mention(alice, "fourth")
	h.waitMessage(projectChannel, "does not exist")
	if ts, _ := h.st.ListTasks(context.Background(), models.TaskFilter{}); len(ts) != 1 {
		t.Errorf("%d tasks, want 1", len(ts))
	}
}

func TestMentionWithoutLLMAnswersHelp(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	bot := &discordgo.User{ID: discordtest.DefaultBotUserID}
	h.fake.SendMessage(&discordgo.Message{ChannelID: controlChannel, Content: "<@" + bot.ID + "> what can you do?",
		Author: &discordgo.User{ID: alice}, Mentions: []*discordgo.User{bot}})
	h.waitMessage(controlChannel, "/status")
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
