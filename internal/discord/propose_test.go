package discord

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/discord/discordtest"
	"github.com/agentqueued/agentqueued/internal/llm/llmtest"
	"github.com/agentqueued/agentqueued/internal/models"
)

func TestMentionProposesACommandThatRunsOnlyOnRun(t *testing.T) {
	t.Parallel()
	llm := llmtest.New(llmtest.Options{APIKey: "llm-key", Model: "test-model"})
	t.Cleanup(llm.Close)
	propose := func(args string) llmtest.Reply {
		return llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "propose_command", Arguments: args}},
			Usage: llmtest.Usage{PromptTokens: 420, CompletionTokens: 30}}
	}
	llm.Enqueue(
		propose(`{"command":"task add","options":{"title":"Fix the login bug","priority":3}}`),
		propose(`{"command":"task add","options":{"title":"Another"}}`),
		llmtest.Reply{Status: 500, ErrorMessage: "upstream trouble"},
		propose(`{"command":"rm -rf","options":{}}`),
	)
	proposer, err := NewOpenAIProposer(OpenAIConfig{BaseURL: llm.URL(), APIKey: "llm-key", Model: "test-model"})
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
	req := llm.Requests()[0]
	if req.Model != "test-model" || !strings.Contains(toJSON(req.Messages), "fix the login bug") ||
		!strings.Contains(toJSON(req.Messages), "/task add") || !strings.Contains(toJSON(req.Tools), "propose_command") {
		t.Errorf("request to the model: %s", req.Raw)
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
