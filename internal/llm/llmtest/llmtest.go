package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock"
)

// Options configure a Server.
type Options struct {
	// APIKey is the bearer key requests must carry; empty accepts any
	// request, with or without a key.
	APIKey string
	// Model, when set, is the only model served; requests naming another
	// get 404 "model_not_found", as from OpenAI.
	Model string
	// Clock gives the "created" time of completions; nil: clock.Real.
	Clock clock.Clock
}

// Reply is the scripted answer to one request.
type Reply struct {
	// Content is the assistant message's text; empty with ToolCalls set
	// is sent as null.
	Content string
	// ToolCalls are the function calls the assistant makes. Each must name
	// a tool of the request, unless InventsTools is set.
	ToolCalls []ToolCall
	// InventsTools sends tool calls that name tools the request does not
	// define, as a model that makes one up does.
	InventsTools bool
	// FinishReason defaults to "tool_calls" when ToolCalls are set and to
	// "stop" otherwise.
	FinishReason string
	// Usage is sent in the response's "usage".
	Usage Usage

	// Status, when non-zero, makes the answer an error with this HTTP
	// status (400 or above) and the fields below.
	Status int
	// ErrorType defaults to "rate_limit_exceeded" for 429, "server_error"
	// for 5xx and "invalid_request_error" otherwise.
	ErrorType string
	// ErrorCode is sent as "code"; empty is sent as null.
	ErrorCode string
	// ErrorMessage defaults to the status text.
	ErrorMessage string
	// RetryAfter, when positive on a 429, sets the Retry-After header (in
	// whole seconds, rounded up) and x-ratelimit-reset-requests (a Go
	// duration such as "1.5s", which go-openai's RateLimitHeaders parse).
	RetryAfter time.Duration
}

// ToolCall is a function call of an assistant message.
type ToolCall struct {
	// ID identifies the call; in a Reply, empty means "call_<n>", n
	// counting defaulted IDs from 1 over the server's life.
	ID string
	// Name is the function's name.
	Name string
	// Arguments is the JSON text of the arguments; in a Reply, empty means
	// "{}".
	Arguments string
}

// Usage is a completion's token count; the total sent is their sum.
type Usage struct {
	// PromptTokens is sent as "prompt_tokens".
	PromptTokens int
	// CompletionTokens is sent as "completion_tokens".
	CompletionTokens int
}

// ErrorReply returns an error answer with the given status and message.
func ErrorReply(status int, msg string) Reply {
	return Reply{Status: status, ErrorMessage: msg}
}

// RateLimited returns a 429 answer of type and code "rate_limit_exceeded"
// whose headers tell the client to retry after retryAfter.
func RateLimited(retryAfter time.Duration) Reply {
	msg := "Rate limit reached for requests."
	if retryAfter > 0 {
		msg = fmt.Sprintf("Rate limit reached for requests. Please try again in %s.", retryAfter)
	}
	return Reply{
		Status:       http.StatusTooManyRequests,
		ErrorType:    "rate_limit_exceeded",
		ErrorCode:    "rate_limit_exceeded",
		ErrorMessage: msg,
		RetryAfter:   retryAfter,
	}
}

// ServerError returns a 500 answer of type "server_error", worded as
// OpenAI words it.
func ServerError() Reply {
	return Reply{
		Status:       http.StatusInternalServerError,
		ErrorType:    "server_error",
		ErrorMessage: "The server had an error while processing your request. Sorry about that!",
	}
}

// Request is a recorded request to /v1/chat/completions.
type Request struct {
	// Model is the request's "model".
	Model string
	// Messages are the request's "messages".
	Messages []Message
	// Tools are the request's function tools.
	Tools []Tool
	// ToolChoice is the request's "tool_choice" verbatim; nil when absent.
	ToolChoice json.RawMessage
	// MaxTokens is "max_completion_tokens", or "max_tokens" when that is
	// absent or zero.
	MaxTokens int
	// Raw is the request body verbatim.
	Raw []byte
	// Authorization is the request's Authorization header verbatim.
	Authorization string
}

// Message is one message of a request.
type Message struct {
	// Role is "system", "developer", "user", "assistant" or "tool" (or
	// whatever an invalid request sent).
	Role string
	// Content is the message's text; for an array of content parts, the
	// concatenated text of its "text" parts.
	Content string
	// Name is the optional participant name.
	Name string
	// ToolCallID is the call a tool message answers.
	ToolCallID string
	// ToolCalls are an assistant message's function calls.
	ToolCalls []ToolCall
}

// Tool is a function tool offered by a request.
type Tool struct {
	// Name is the function's name.
	Name string
	// Description is the function's description.
	Description string
	// Parameters is the function's JSON schema verbatim; nil when absent.
	Parameters json.RawMessage
}

func (r Request) clone() Request {
	c := r
	if r.Messages != nil {
		c.Messages = make([]Message, len(r.Messages))
		for i, m := range r.Messages {
			if m.ToolCalls != nil {
				m.ToolCalls = append([]ToolCall{}, m.ToolCalls...)
			}
			c.Messages[i] = m
		}
	}
	if r.Tools != nil {
		c.Tools = make([]Tool, len(r.Tools))
		for i, t := range r.Tools {
			t.Parameters = cloneBytes(t.Parameters)
			c.Tools[i] = t
		}
	}
	c.ToolChoice = cloneBytes(r.ToolChoice)
	c.Raw = cloneBytes(r.Raw)
	return c
}

func cloneBytes[T ~[]byte](b T) T {
	if b == nil {
		return nil
	}
	return append(T{}, b...)
}
