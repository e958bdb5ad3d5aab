package llmtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/llm/llmtest"
	"github.com/agentqueued/agentqueued/internal/progresstest"
)

const (
	testKey   = "sk-test-0123456789"
	testModel = "gpt-4o-mini"
)

var testNow = time.Unix(1700000000, 0)

func newFake(t *testing.T, opts llmtest.Options) *llmtest.Server {
	t.Helper()
	if opts.Clock == nil {
		opts.Clock = clocktest.New(testNow)
	}
	f := llmtest.New(opts)
	t.Cleanup(f.Close)
	return f
}

func newClient(f *llmtest.Server, key string) *openai.Client {
	cfg := openai.DefaultConfig(key)
	cfg.BaseURL = f.URL()
	return openai.NewClientWithConfig(cfg)
}

func testContext(t *testing.T) context.Context { return progresstest.Context(t) }

func userRequest(text string) openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{
		Model:    testModel,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: text}},
	}
}

// withoutRaw returns the requests with Raw cleared, for comparison, after
// checking each carried the test's key.
func withoutRaw(rs []llmtest.Request) []llmtest.Request {
	for i := range rs {
		if rs[i].Authorization != "Bearer "+testKey {
			panic("request without the test's key: " + rs[i].Authorization)
		}
		rs[i].Raw, rs[i].Authorization = nil, ""
	}
	return rs
}

func TestPlainAnswer(t *testing.T) {
	t.Parallel()
	f := newFake(t, llmtest.Options{APIKey: testKey, Model: testModel})
	f.Enqueue(llmtest.Reply{Content: "Hello.", Usage: llmtest.Usage{PromptTokens: 12, CompletionTokens: 3}})
	c := newClient(f, testKey)

	resp, err := c.CreateChatCompletion(testContext(t), openai.ChatCompletionRequest{
		Model: testModel,
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: "Be brief."},
			{Role: openai.ChatMessageRoleUser, Content: "Hi", Name: "ann"},
		},
		MaxCompletionTokens: 64,
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.ID != "chatcmpl-1" || resp.Object != "chat.completion" || resp.Created != testNow.Unix() || resp.Model != testModel {
		t.Errorf("response header = %q %q %d %q", resp.ID, resp.Object, resp.Created, resp.Model)
	}
	if len(resp.Choices) != 1 {
		t.Fatalf("choices = %d, want 1", len(resp.Choices))
	}
	ch := resp.Choices[0]
	if ch.Index != 0 || ch.FinishReason != openai.FinishReasonStop {
		t.Errorf("choice index %d finish %q", ch.Index, ch.FinishReason)
	}
	if m := ch.Message; m.Role != openai.ChatMessageRoleAssistant || m.Content != "Hello." || m.ToolCalls != nil {
		t.Errorf("message = %+v", m)
	}
	wantUsage := openai.Usage{PromptTokens: 12, CompletionTokens: 3, TotalTokens: 15}
	if !reflect.DeepEqual(resp.Usage, wantUsage) {
		t.Errorf("usage = %+v, want %+v", resp.Usage, wantUsage)
	}

	got := f.Requests()
	if len(got) != 1 {
		t.Fatalf("recorded %d requests, want 1", len(got))
	}
	var body map[string]any
	if err := json.Unmarshal(got[0].Raw, &body); err != nil || body["max_completion_tokens"] != 64.0 {
		t.Errorf("raw body %s (%v)", got[0].Raw, err)
	}
	want := []llmtest.Request{{
		Model: testModel,
		Messages: []llmtest.Message{
			{Role: "system", Content: "Be brief."},
			{Role: "user", Content: "Hi", Name: "ann"},
		},
		MaxTokens: 64,
	}}
	if got := withoutRaw(got); !reflect.DeepEqual(got, want) {
		t.Errorf("recorded %+v\nwant     %+v", got, want)
	}
}

func TestMaxTokens(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name               string
		maxTokens, maxComp int
		want               int
	}{
		{"neither", 0, 0, 0},
		{"max_tokens", 10, 0, 10},
		{"max_completion_tokens", 0, 20, 20},
		{"both", 10, 20, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, llmtest.Options{})
			f.Enqueue(llmtest.Reply{Content: "ok"})
			req := userRequest("hi")
			//lint:ignore SA1019 the fake reads both fields
			req.MaxTokens, req.MaxCompletionTokens = tc.maxTokens, tc.maxComp
			if _, err := newClient(f, "any").CreateChatCompletion(testContext(t), req); err != nil {
				t.Fatal(err)
			}
			if got := f.Requests()[0].MaxTokens; got != tc.want {
				t.Errorf("MaxTokens = %d, want %d", got, tc.want)
			}
		})
	}
}

var lookupSchema = json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)

func lookupTool() openai.Tool {
	return openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
		Name: "lookup", Description: "Looks a thing up.", Parameters: lookupSchema,
	}}
}

func TestToolCallRoundTrip(t *testing.T) {
	t.Parallel()
	f := newFake(t, llmtest.Options{APIKey: testKey, Model: testModel})
	f.Enqueue(
		llmtest.Reply{
			ToolCalls: []llmtest.ToolCall{{Name: "lookup", Arguments: `{"q":"weather"}`}},
			Usage:     llmtest.Usage{PromptTokens: 20, CompletionTokens: 7},
		},
		llmtest.Reply{Content: "Sunny.", Usage: llmtest.Usage{PromptTokens: 40, CompletionTokens: 2}},
	)
	c := newClient(f, testKey)
	req := openai.ChatCompletionRequest{
		Model:      testModel,
		Messages:   []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "Weather?"}},
		Tools:      []openai.Tool{lookupTool()},
		ToolChoice: "auto",
	}

	first, err := c.CreateChatCompletion(testContext(t), req)
	if err != nil {
		t.Fatal(err)
	}
	msg := first.Choices[0].Message
	wantCalls := []openai.ToolCall{{ID: "call_1", Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: "lookup", Arguments: `{"q":"weather"}`}}}
	if first.Choices[0].FinishReason != openai.FinishReasonToolCalls || msg.Content != "" || !reflect.DeepEqual(msg.ToolCalls, wantCalls) {
		t.Fatalf("first choice = %+v", first.Choices[0])
	}
	if first.Usage.TotalTokens != 27 {
		t.Errorf("first total tokens = %d, want 27", first.Usage.TotalTokens)
	}

	req.Messages = append(req.Messages, msg, openai.ChatCompletionMessage{
		Role: openai.ChatMessageRoleTool, ToolCallID: msg.ToolCalls[0].ID, Content: "sunny, 21C",
	})
	second, err := c.CreateChatCompletion(testContext(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if second.ID != "chatcmpl-2" || second.Choices[0].Message.Content != "Sunny." || second.Choices[0].FinishReason != openai.FinishReasonStop {
		t.Errorf("second = %s %+v", second.ID, second.Choices[0])
	}

	tools := []llmtest.Tool{{Name: "lookup", Description: "Looks a thing up.", Parameters: lookupSchema}}
	user := llmtest.Message{Role: "user", Content: "Weather?"}
	want := []llmtest.Request{
		{Model: testModel, Messages: []llmtest.Message{user}, Tools: tools, ToolChoice: json.RawMessage(`"auto"`)},
		{Model: testModel, Messages: []llmtest.Message{
			user,
			{Role: "assistant", ToolCalls: []llmtest.ToolCall{{ID: "call_1", Name: "lookup", Arguments: `{"q":"weather"}`}}},
			{Role: "tool", ToolCallID: "call_1", Content: "sunny, 21C"},
		}, Tools: tools, ToolChoice: json.RawMessage(`"auto"`)},
	}
	if got := withoutRaw(f.Requests()); !reflect.DeepEqual(got, want) {
		t.Errorf("recorded %+v\nwant     %+v", got, want)
	}
}

// post sends body to the fake without go-openai.
func post(t *testing.T, url, key, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func jsonEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("body %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("body %s\nwant %s", got, want)
	}
}

func TestWireShape(t *testing.T) {
	t.Parallel()
	f := newFake(t, llmtest.Options{APIKey: testKey})
	f.Enqueue(
		llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "lookup"}, {ID: "mine", Name: "lookup", Arguments: `{"q":"x"}`}}},
		llmtest.Reply{Content: "cut", FinishReason: "length", Usage: llmtest.Usage{PromptTokens: 1, CompletionTokens: 2}},
	)
	body := `{"model":"m","messages":[{"role":"developer","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],` +
		`"tools":[{"type":"function","function":{"name":"lookup"}}],"unknown_field":{"x":1}}`

	resp, b := post(t, f.URL()+"/chat/completions", testKey, body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	jsonEqual(t, b, `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"m",
		"choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[
			{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{}"}},
			{"id":"mine","type":"function","function":{"name":"lookup","arguments":"{\"q\":\"x\"}"}}]},
		"logprobs":null,"finish_reason":"tool_calls"}],
		"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}}`)

	_, b = post(t, f.URL()+"/chat/completions", testKey, body)
	jsonEqual(t, b, `{"id":"chatcmpl-2","object":"chat.completion","created":1700000000,"model":"m",
		"choices":[{"index":0,"message":{"role":"assistant","content":"cut","refusal":null},
		"logprobs":null,"finish_reason":"length"}],
		"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`)

	got := f.Requests()
	if len(got) != 2 || string(got[0].Raw) != body {
		t.Fatalf("recorded %d requests, first raw %s", len(got), got[0].Raw)
	}
	want := llmtest.Request{Model: "m", Messages: []llmtest.Message{{Role: "developer", Content: "ab"}}, Tools: []llmtest.Tool{{Name: "lookup"}}}
	if got := withoutRaw(got)[0]; !reflect.DeepEqual(got, want) {
		t.Errorf("recorded %+v, want %+v", got, want)
	}
}

func TestRateLimitHeaders(t *testing.T) {
	t.Parallel()
	f := newFake(t, llmtest.Options{})
	f.Enqueue(llmtest.RateLimited(1500*time.Millisecond), llmtest.ErrorReply(http.StatusTooManyRequests, "slow down"))
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`

	resp, b := post(t, f.URL()+"/chat/completions", "", body)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" || resp.Header.Get("x-ratelimit-reset-requests") != "1.5s" {
		t.Errorf("status %d, Retry-After %q, reset %q", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("x-ratelimit-reset-requests"))
	}
	jsonEqual(t, b, `{"error":{"message":"Rate limit reached for requests. Please try again in 1.5s.","type":"rate_limit_exceeded","param":null,"code":"rate_limit_exceeded"}}`)

	resp, b = post(t, f.URL()+"/chat/completions", "", body)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "" {
		t.Errorf("status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	jsonEqual(t, b, `{"error":{"message":"slow down","type":"rate_limit_exceeded","param":null,"code":null}}`)
}

func TestAPIErrors(t *testing.T) {
	t.Parallel()
	assistantCalls := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, ToolCalls: []openai.ToolCall{
		{ID: "call_a", Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: "lookup", Arguments: "{}"}},
		{ID: "call_b", Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: "lookup", Arguments: "{}"}},
	}}
	user := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: "hi"}
	withMessages := func(ms ...openai.ChatCompletionMessage) openai.ChatCompletionRequest {
		return openai.ChatCompletionRequest{Model: testModel, Messages: ms, Tools: []openai.Tool{lookupTool()}}
	}
	toolMsg := func(id string) openai.ChatCompletionMessage {
		return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: id, Content: "result"}
	}
	param := func(s string) *string { return &s }

	for _, tc := range []struct {
		name    string
		key     string // "" sends testKey, "-" sends none
		replies []llmtest.Reply
		req     openai.ChatCompletionRequest
		want    openai.APIError
	}{
		{
			name: "rate limited", replies: []llmtest.Reply{llmtest.RateLimited(2 * time.Second)},
			want: openai.APIError{HTTPStatusCode: 429, HTTPStatus: "429 Too Many Requests", Type: "rate_limit_exceeded", Code: "rate_limit_exceeded",
				Message: "Rate limit reached for requests. Please try again in 2s."},
		},
		{
			name: "server error", replies: []llmtest.Reply{llmtest.ServerError()},
			want: openai.APIError{HTTPStatusCode: 500, HTTPStatus: "500 Internal Server Error", Type: "server_error", Code: 0,
				Message: "The server had an error while processing your request. Sorry about that!"},
		},
		{
			name: "error reply", replies: []llmtest.Reply{llmtest.ErrorReply(503, "overloaded")},
			want: openai.APIError{HTTPStatusCode: 503, HTTPStatus: "503 Service Unavailable", Type: "server_error", Code: 0, Message: "overloaded"},
		},
		{
			name: "custom error", replies: []llmtest.Reply{{Status: 400, ErrorType: "invalid_request_error", ErrorCode: "context_length_exceeded"}},
			want: openai.APIError{HTTPStatusCode: 400, HTTPStatus: "400 Bad Request", Type: "invalid_request_error", Code: "context_length_exceeded", Message: "Bad Request"},
		},
		{
			name: "non-error status", replies: []llmtest.Reply{{Status: 200}},
			want: openai.APIError{HTTPStatusCode: 500, HTTPStatus: "500 Internal Server Error", Type: "server_error", Code: 0,
				Message: "llmtest: scripted reply has Status 200, not an error status"},
		},
		{
			name: "wrong key", key: "sk-wrong-key-1234",
			want: openai.APIError{HTTPStatusCode: 401, HTTPStatus: "401 Unauthorized", Type: "invalid_request_error", Code: "invalid_api_key",
				Message: "Incorrect API key provided: sk-**********1234."},
		},
		{
			name: "missing key", key: "-",
			want: openai.APIError{HTTPStatusCode: 401, HTTPStatus: "401 Unauthorized", Type: "invalid_request_error", Code: "invalid_api_key",
				Message: "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."},
		},
		{
			name: "unknown model", req: openai.ChatCompletionRequest{Model: "gpt-9", Messages: []openai.ChatCompletionMessage{user}},
			want: openai.APIError{HTTPStatusCode: 404, HTTPStatus: "404 Not Found", Type: "invalid_request_error", Code: "model_not_found",
				Message: "The model `gpt-9` does not exist or you do not have access to it."},
		},
		{
			name: "unknown tool_call_id", req: withMessages(user, assistantCalls, toolMsg("call_a"), toolMsg("call_x")),
			want: openai.APIError{HTTPStatusCode: 400, HTTPStatus: "400 Bad Request", Type: "invalid_request_error", Code: 0,
				Param: param("messages.[3].tool_call_id"), Message: "Invalid parameter: 'tool_call_id' of 'call_x' not found in 'tool_calls' of previous message."},
		},
		{
			name: "unanswered tool call", req: withMessages(user, assistantCalls, toolMsg("call_a"), user),
			want: openai.APIError{HTTPStatusCode: 400, HTTPStatus: "400 Bad Request", Type: "invalid_request_error", Code: 0,
				Param:   param("messages.[1].role"),
				Message: "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_b"},
		},
		{
			name: "unanswered at end", req: withMessages(user, assistantCalls),
			want: openai.APIError{HTTPStatusCode: 400, HTTPStatus: "400 Bad Request", Type: "invalid_request_error", Code: 0,
				Param:   param("messages.[1].role"),
				Message: "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_a, call_b"},
		},
		{
			name: "tool message without tool calls", req: withMessages(user, toolMsg("call_a")),
			want: openai.APIError{HTTPStatusCode: 400, HTTPStatus: "400 Bad Request", Type: "invalid_request_error", Code: 0,
				Param: param("messages.[1].role"), Message: "Invalid parameter: messages with role 'tool' must be a response to a preceding message with 'tool_calls'."},
		},
		{
			name: "function role", req: withMessages(user, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleFunction, Name: "lookup", Content: "x"}),
			want: openai.APIError{HTTPStatusCode: 400, HTTPStatus: "400 Bad Request", Type: "invalid_request_error", Code: "invalid_value",
				Param: param("messages.[1].role"), Message: "Invalid value: 'function'. Supported values are: 'system', 'developer', 'user', 'assistant', and 'tool'."},
		},
		{
			name: "tool reply with empty content", req: withMessages(user, assistantCalls, toolMsg("call_a"), openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: "call_b"}),
			want: openai.APIError{HTTPStatusCode: 400, HTTPStatus: "400 Bad Request", Type: "invalid_request_error", Code: "missing_required_parameter",
				Param: param("messages.[3].content"), Message: "Missing required parameter: 'messages.[3].content'."},
		},
		{
			name: "nothing scripted",
			want: openai.APIError{HTTPStatusCode: 500, HTTPStatus: "500 Internal Server Error", Type: "server_error", Code: 0, Message: "llmtest: no reply scripted"},
		},
		{
			name: "reply calls undefined tool", replies: []llmtest.Reply{{ToolCalls: []llmtest.ToolCall{{Name: "search"}}}},
			want: openai.APIError{HTTPStatusCode: 500, HTTPStatus: "500 Internal Server Error", Type: "server_error", Code: 0,
				Message: `llmtest: scripted reply calls tool "search", which the request does not define`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, llmtest.Options{APIKey: testKey, Model: testModel})
			f.Enqueue(tc.replies...)
			key := testKey
			switch tc.key {
			case "":
			case "-":
				key = ""
			default:
				key = tc.key
			}
			req := tc.req
			if req.Model == "" {
				req = userRequest("hi")
			}
			_, err := newClient(f, key).CreateChatCompletion(testContext(t), req)
			var apiErr *openai.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("error %v (%T), want *openai.APIError", err, err)
			}
			if !reflect.DeepEqual(*apiErr, tc.want) {
				t.Errorf("error %#v\nwant  %#v", *apiErr, tc.want)
			}
			var reqErr *openai.RequestError
			if errors.As(err, &reqErr) {
				t.Errorf("error is also a *openai.RequestError: %v", reqErr)
			}
			if n := len(f.Requests()); n != 1 {
				t.Errorf("recorded %d requests, want 1", n)
			}
		})
	}
}

func TestAPIErrorString(t *testing.T) {
	t.Parallel()
	f := newFake(t, llmtest.Options{})
	f.Enqueue(llmtest.RateLimited(time.Second))
	_, err := newClient(f, "k").CreateChatCompletion(testContext(t), userRequest("hi"))
	const want = "error, status code: 429, status: 429 Too Many Requests, message: Rate limit reached for requests. Please try again in 1s."
	if err == nil || err.Error() != want {
		t.Errorf("error %v\nwant  %s", err, want)
	}
}

func TestInvalidRequestConsumesNoReply(t *testing.T) {
	t.Parallel()
	f := newFake(t, llmtest.Options{APIKey: testKey})
	f.Enqueue(llmtest.Reply{Content: "kept"})
	c := newClient(f, testKey)

	bad := userRequest("hi")
	bad.Messages[0].Role = "robot"
	if _, err := c.CreateChatCompletion(testContext(t), bad); err == nil {
		t.Fatal("invalid role accepted")
	}
	resp, err := c.CreateChatCompletion(testContext(t), userRequest("again"))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "kept" || resp.ID != "chatcmpl-1" {
		t.Errorf("reply %s %q, want chatcmpl-1 %q", resp.ID, got, "kept")
	}
	got := f.Requests()
	if len(got) != 2 || got[0].Messages[0].Role != "robot" || got[1].Messages[0].Content != "again" {
		t.Errorf("recorded %+v", got)
	}
}

func TestStreamRefused(t *testing.T) {
	t.Parallel()
	f := newFake(t, llmtest.Options{APIKey: testKey})
	f.Enqueue(llmtest.Reply{Content: "unused"})
	c := newClient(f, testKey)

	// go-openai refuses Stream in CreateChatCompletion without sending.
	req := userRequest("hi")
	req.Stream = true
	if _, err := c.CreateChatCompletion(testContext(t), req); !errors.Is(err, openai.ErrChatCompletionStreamNotSupported) {
		t.Errorf("CreateChatCompletion error %v, want ErrChatCompletionStreamNotSupported", err)
	}

	stream, err := c.CreateChatCompletionStream(testContext(t), userRequest("hi"))
	if err == nil {
		stream.Close()
		t.Fatal("stream accepted")
	}
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("error %v (%T), want *openai.APIError", err, err)
	}
	if apiErr.HTTPStatusCode != 400 || apiErr.Type != "invalid_request_error" || apiErr.Param == nil || *apiErr.Param != "stream" ||
		apiErr.Message != "llmtest: streaming is not supported by this fake" {
		t.Errorf("error %#v", *apiErr)
	}
	if n := len(f.Requests()); n != 1 {
		t.Errorf("recorded %d requests, want 1", n)
	}
}

func TestValidation(t *testing.T) {
	t.Parallel()
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	tool := func(fn string) string {
		return `{"model":"m",` + msgs + `,"tools":[{"type":"function","function":` + fn + `}]}`
	}
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		want                     string // the error object
	}{
		{name: "unknown path", path: "/models", status: 404,
			want: `{"message":"Invalid URL (POST /v1/models)","type":"invalid_request_error","param":null,"code":null}`},
		{name: "get", method: http.MethodGet, status: 405,
			want: `{"message":"Invalid method for URL (GET /v1/chat/completions)","type":"invalid_request_error","param":null,"code":null}`},
		{name: "not json", body: `{"model":`, status: 400,
			want: `{"message":"We could not parse the JSON body of your request. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.","type":"invalid_request_error","param":null,"code":null}`},
		{name: "not an object", body: `[]`, status: 400,
			want: `{"message":"Invalid type for body: expected an object, but got an array instead.","type":"invalid_request_error","param":null,"code":"invalid_type"}`},
		{name: "model type", body: `{"model":5,` + msgs + `}`, status: 400,
			want: `{"message":"Invalid type for 'model': expected a string, but got a number instead.","type":"invalid_request_error","param":"model","code":"invalid_type"}`},
		{name: "no model", body: `{` + msgs + `}`, status: 400,
			want: `{"message":"you must provide a model parameter","type":"invalid_request_error","param":null,"code":null}`},
		{name: "stream", body: `{"model":"m","stream":true,` + msgs + `}`, status: 400,
			want: `{"message":"llmtest: streaming is not supported by this fake","type":"invalid_request_error","param":"stream","code":null}`},
		{name: "no messages", body: `{"model":"m"}`, status: 400,
			want: `{"message":"Missing required parameter: 'messages'.","type":"invalid_request_error","param":"messages","code":"missing_required_parameter"}`},
		{name: "empty messages", body: `{"model":"m","messages":[]}`, status: 400,
			want: `{"message":"Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.","type":"invalid_request_error","param":"messages","code":"empty_array"}`},
		{name: "no role", body: `{"model":"m","messages":[{"content":"hi"}]}`, status: 400,
			want: `{"message":"Missing required parameter: 'messages.[0].role'.","type":"invalid_request_error","param":"messages.[0].role","code":"missing_required_parameter"}`},
		{name: "null content", body: `{"model":"m","messages":[{"role":"user","content":null}]}`, status: 400,
			want: `{"message":"Missing required parameter: 'messages.[0].content'.","type":"invalid_request_error","param":"messages.[0].content","code":"missing_required_parameter"}`},
		{name: "content type", body: `{"model":"m","messages":[{"role":"user","content":7}]}`, status: 400,
			want: `{"message":"Invalid type for 'messages.[0].content': expected one of a string or array of objects, but got a number instead.","type":"invalid_request_error","param":"messages.[0].content","code":"invalid_type"}`},
		{name: "tool call without id", body: `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, status: 400,
			want: `{"message":"Missing required parameter: 'messages.[0].tool_calls[0].id'.","type":"invalid_request_error","param":"messages.[0].tool_calls[0].id","code":"missing_required_parameter"}`},
		{name: "tool message without id", body: `{"model":"m","messages":[{"role":"tool","content":"x"}]}`, status: 400,
			want: `{"message":"Missing required parameter: 'messages.[0].tool_call_id'.","type":"invalid_request_error","param":"messages.[0].tool_call_id","code":"missing_required_parameter"}`},
		{name: "tool type", body: `{"model":"m",` + msgs + `,"tools":[{"type":"web_search"}]}`, status: 400,
			want: `{"message":"Invalid value: 'web_search'. Supported values are: 'function'.","type":"invalid_request_error","param":"tools[0].type","code":"invalid_value"}`},
		{name: "tool without function", body: `{"model":"m",` + msgs + `,"tools":[{"type":"function"}]}`, status: 400,
			want: `{"message":"Missing required parameter: 'tools[0].function'.","type":"invalid_request_error","param":"tools[0].function","code":"missing_required_parameter"}`},
		{name: "tool name pattern", body: tool(`{"name":"look up"}`), status: 400,
			want: `{"message":"Invalid 'tools[0].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.","type":"invalid_request_error","param":"tools[0].function.name","code":"invalid_value"}`},
		{name: "tool name length", body: tool(`{"name":"` + strings.Repeat("a", 65) + `"}`), status: 400,
			want: `{"message":"Invalid 'tools[0].function.name': string too long. Expected a string with maximum length 64, but got a string with length 65 instead.","type":"invalid_request_error","param":"tools[0].function.name","code":"string_above_max_length"}`},
		{name: "parameters not object schema", body: tool(`{"name":"f","parameters":{"type":"string"}}`), status: 400,
			want: `{"message":"Invalid schema for function 'f': schema must be a JSON Schema of 'type: \"object\"', got 'type: \"string\"'.","type":"invalid_request_error","param":"tools[0].function.parameters","code":"invalid_function_parameters"}`},
		{name: "parameters without type", body: tool(`{"name":"f","parameters":{"properties":{}}}`), status: 400,
			want: `{"message":"Invalid schema for function 'f': schema must be a JSON Schema of 'type: \"object\"', got 'type: \"None\"'.","type":"invalid_request_error","param":"tools[0].function.parameters","code":"invalid_function_parameters"}`},
		{name: "parameters not object", body: tool(`{"name":"f","parameters":[]}`), status: 400,
			want: `{"message":"Invalid type for 'tools[0].function.parameters': expected an object, but got an array instead.","type":"invalid_request_error","param":"tools[0].function.parameters","code":"invalid_type"}`},
		{name: "tool_choice without tools", body: `{"model":"m",` + msgs + `,"tool_choice":"auto"}`, status: 400,
			want: `{"message":"Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.","type":"invalid_request_error","param":"tool_choice","code":null}`},
		{name: "tool_choice value", body: `{"model":"m",` + msgs + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"always"}`, status: 400,
			want: `{"message":"Invalid value: 'always'. Supported values are: 'none', 'auto', and 'required'.","type":"invalid_request_error","param":"tool_choice","code":"invalid_value"}`},
		{name: "tool_choice function", body: `{"model":"m",` + msgs + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}}`, status: 400,
			want: `{"message":"Invalid value for 'tool_choice': function 'g' is not among 'tools'.","type":"invalid_request_error","param":"tool_choice.function.name","code":"invalid_value"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, llmtest.Options{APIKey: testKey})
			f.SetResponder(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Content: "unexpected"} })
			method, path := tc.method, tc.path
			if method == "" {
				method = http.MethodPost
			}
			if path == "" {
				path = "/chat/completions"
			}
			req, err := http.NewRequestWithContext(testContext(t), method, f.URL()+path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+testKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
			jsonEqual(t, b, `{"error":`+tc.want+`}`)
			if tc.status == 405 && resp.Header.Get("Allow") != "POST" {
				t.Errorf("Allow %q, want POST", resp.Header.Get("Allow"))
			}
			wantRecorded := 1
			if tc.status == 404 || tc.status == 405 {
				wantRecorded = 0
			}
			got := f.Requests()
			if len(got) != wantRecorded {
				t.Fatalf("recorded %d requests, want %d", len(got), wantRecorded)
			}
			if wantRecorded == 1 && !bytes.Equal(got[0].Raw, []byte(tc.body)) {
				t.Errorf("recorded raw %s, want %s", got[0].Raw, tc.body)
			}
		})
	}
}

func TestAnyKeyWhenUnset(t *testing.T) {
	t.Parallel()
	f := newFake(t, llmtest.Options{})
	f.Enqueue(llmtest.Reply{Content: "a"}, llmtest.Reply{Content: "b"})
	for _, key := range []string{"whatever", ""} {
		resp, err := newClient(f, key).CreateChatCompletion(testContext(t), userRequest("hi"))
		if err != nil {
			t.Fatalf("key %q: %v", key, err)
		}
		if resp.Model != testModel {
			t.Errorf("model %q, want %q", resp.Model, testModel)
		}
	}
}

func TestResponder(t *testing.T) {
	t.Parallel()
	f := newFake(t, llmtest.Options{})
	f.Enqueue(llmtest.Reply{Content: "queued"})
	f.SetResponder(func(r llmtest.Request) llmtest.Reply {
		// The responder may call the server: it runs without its lock.
		n := len(f.Requests())
		return llmtest.Reply{Content: fmt.Sprintf("%d: %s", n, r.Messages[len(r.Messages)-1].Content)}
	})
	c := newClient(f, "k")
	var got []string
	for _, text := range []string{"one", "two", "three"} {
		resp, err := c.CreateChatCompletion(testContext(t), userRequest(text))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, resp.Choices[0].Message.Content)
	}
	want := []string{"queued", "2: two", "3: three"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("replies %q, want %q", got, want)
	}

	f.SetResponder(nil)
	_, err := c.CreateChatCompletion(testContext(t), userRequest("four"))
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 500 || apiErr.Message != "llmtest: no reply scripted" {
		t.Errorf("error %v, want 500 no reply scripted", err)
	}
}

func TestRequestsAreCopies(t *testing.T) {
	t.Parallel()
	f := newFake(t, llmtest.Options{})
	f.Enqueue(llmtest.Reply{})
	req := userRequest("hi")
	req.Tools = []openai.Tool{lookupTool()}
	if _, err := newClient(f, "k").CreateChatCompletion(testContext(t), req); err != nil {
		t.Fatal(err)
	}
	first := f.Requests()
	first[0].Messages[0].Content = "changed"
	first[0].Tools[0].Parameters[0] = 'X'
	first[0].Raw[0] = 'X'
	again := f.Requests()[0]
	if again.Messages[0].Content != "hi" || !bytes.Equal(again.Tools[0].Parameters, lookupSchema) || again.Raw[0] != '{' {
		t.Errorf("recorded request changed through a copy: %+v", again)
	}
}

func TestConcurrent(t *testing.T) {
	t.Parallel()
	f := newFake(t, llmtest.Options{APIKey: testKey})
	f.SetResponder(func(r llmtest.Request) llmtest.Reply {
		return llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "lookup"}}}
	})
	c := newClient(f, testKey)
	req := userRequest("hi")
	req.Tools = []openai.Tool{lookupTool()}
	const workers, each = 8, 5
	var (
		mu       sync.Mutex
		ids      = map[string]bool{}
		callIDs  = map[string]bool{}
		failures []error
		wg       sync.WaitGroup
	)
	ctx := testContext(t)
	for range workers {
		wg.Go(func() {
			for range each {
				resp, err := c.CreateChatCompletion(ctx, req)
				mu.Lock()
				if err != nil {
					failures = append(failures, err)
				} else {
					ids[resp.ID] = true
					callIDs[resp.Choices[0].Message.ToolCalls[0].ID] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatal(failures)
	}
	if len(ids) != workers*each || len(callIDs) != workers*each || !ids[fmt.Sprintf("chatcmpl-%d", workers*each)] || !callIDs[fmt.Sprintf("call_%d", workers*each)] {
		t.Errorf("distinct ids %d, call ids %d, want %d each numbered from 1", len(ids), len(callIDs), workers*each)
	}
	if n := len(f.Requests()); n != workers*each {
		t.Errorf("recorded %d requests, want %d", n, workers*each)
	}
}
