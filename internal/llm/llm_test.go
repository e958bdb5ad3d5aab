package llm_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/agentqueued/agentqueued/internal/llm"
	"github.com/agentqueued/agentqueued/internal/llm/llmtest"
)

const (
	testKey   = "k-test"
	testModel = "test-model"
)

func newFake(t *testing.T) *llmtest.Server {
	t.Helper()
	fake := llmtest.New(llmtest.Options{APIKey: testKey, Model: testModel})
	t.Cleanup(fake.Close)
	return fake
}

func chatRequest() openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{Model: testModel,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hi"}}}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"2", 2 * time.Second},
		{"1.5", 1500 * time.Millisecond},
		{"0", 0},
		{"-3", 0},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
	}
	for _, tt := range tests {
		if got := llm.ParseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("ParseRetryAfter(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestChat(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	// Trailing slashes of the base URL are dropped.
	c := llm.New(llm.Config{BaseURL: fake.URL() + "//", APIKey: testKey})
	if c.BaseURL() != fake.URL() {
		t.Errorf("BaseURL() = %q, want %q", c.BaseURL(), fake.URL())
	}
	fake.Enqueue(llmtest.RateLimited(2*time.Second), llmtest.Reply{Content: "hello"})
	if _, err := c.Chat(context.Background(), chatRequest()); err == nil {
		t.Fatal("a rate-limited call succeeded")
	}
	if got := c.RetryAfter(); got != 2*time.Second {
		t.Errorf("RetryAfter() after a 429 = %s, want 2s", got)
	}
	resp, err := c.Chat(context.Background(), chatRequest())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 1 || resp.Choices[0].Message.Content != "hello" {
		t.Errorf("answer %+v, want one choice saying hello", resp.Choices)
	}
	if got := c.RetryAfter(); got != 0 {
		t.Errorf("RetryAfter() after a call that succeeded = %s, want 0", got)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 || reqs[1].Authorization != "Bearer "+testKey {
		t.Errorf("requests %+v, want two carrying the key", reqs)
	}
}

func TestListModels(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	ids, err := llm.New(llm.Config{BaseURL: fake.URL(), APIKey: testKey}).ListModels(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != testModel {
		t.Errorf("ListModels() = %v, want [%s]", ids, testModel)
	}
	if got := llm.New(llm.Config{}).BaseURL(); got != "https://api.openai.com/v1" {
		t.Errorf("default BaseURL() = %q", got)
	}
}

// TestClassifyDescribe checks the errors of the real client against the
// fake endpoint: their status, whether they are worth another try, and
// what a user reads.
func TestClassifyDescribe(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	closed := llmtest.New(llmtest.Options{})
	closed.Close()
	tests := []struct {
		name      string
		cfg       llm.Config
		reply     *llmtest.Reply
		stream    bool
		status    int
		retryable bool
		api       bool   // answered in OpenAI's error shape
		want      string // prefix of Describe
	}{
		{name: "rate limited", cfg: llm.Config{BaseURL: fake.URL(), APIKey: testKey}, reply: new(llmtest.RateLimited(time.Second)),
			status: 429, retryable: true, api: true, want: "the endpoint answered 429: Rate limit reached"},
		{name: "server error", cfg: llm.Config{BaseURL: fake.URL(), APIKey: testKey}, reply: new(llmtest.ServerError()),
			status: 500, retryable: true, api: true, want: "the endpoint answered 500: "},
		{name: "wrong key", cfg: llm.Config{BaseURL: fake.URL(), APIKey: "wrong"},
			status: 401, retryable: false, api: true, want: "the endpoint answered 401: "},
		{name: "unreachable", cfg: llm.Config{BaseURL: closed.URL()},
			status: 0, retryable: true, want: "the endpoint could not be reached: "},
		{name: "timeout", cfg: llm.Config{BaseURL: fake.URL(), APIKey: testKey, Timeout: time.Nanosecond},
			status: 0, retryable: true, want: "the endpoint did not answer in time"},
		{name: "refused by the client", cfg: llm.Config{BaseURL: fake.URL(), APIKey: testKey}, stream: true,
			status: 0, retryable: false, want: "the request was refused before it was sent: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Not parallel: the fake's replies are one queue.
			if tt.reply != nil {
				fake.Enqueue(*tt.reply)
			}
			req := chatRequest()
			req.Stream = tt.stream
			_, err := llm.New(tt.cfg).Chat(context.Background(), req)
			if err == nil {
				t.Fatal("the call succeeded")
			}
			status, retryable := llm.Classify(err)
			if status != tt.status || retryable != tt.retryable {
				t.Errorf("Classify(%v) = %d, %v; want %d, %v", err, status, retryable, tt.status, tt.retryable)
			}
			if apiStatus, msg, ok := llm.APIError(err); ok != tt.api || ok && (apiStatus != tt.status || msg == "") {
				t.Errorf("APIError(%v) = %d, %q, %v; want %d, a message, %v", err, apiStatus, msg, ok, tt.status, tt.api)
			}
			if got := llm.Describe(err, status); !strings.HasPrefix(got, tt.want) {
				t.Errorf("Describe(%v) = %q, want it to start with %q", err, got, tt.want)
			}
		})
	}
}
