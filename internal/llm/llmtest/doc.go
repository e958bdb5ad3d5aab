// Package llmtest is a fake OpenAI-compatible chat completions endpoint
// for tests that drive the real github.com/sashabaranov/go-openai client
// over 127.0.0.1.
//
// New starts an httptest server; the client under test keeps its
// production code path and only changes its base URL:
//
//	fake := llmtest.New(llmtest.Options{APIKey: "k", Model: "gpt-4o-mini"})
//	t.Cleanup(fake.Close)
//	cfg := openai.DefaultConfig("k")
//	cfg.BaseURL = fake.URL() // http://127.0.0.1:PORT/v1
//	client := openai.NewClientWithConfig(cfg)
//
// # Scripting
//
// Each valid request takes the next Reply from the queue filled by Enqueue;
// when the queue is empty the function given to SetResponder answers. A
// request that neither can answer gets a 500 error "llmtest: no reply
// scripted", so a test that forgets to script fails loudly. A Reply
// either answers a completion (Content, ToolCalls, FinishReason, Usage) or,
// with a non-zero Status, an OpenAI-shaped error; ErrorReply, RateLimited
// and ServerError build the usual ones. Invalid requests consume no reply.
//
// # Validation
//
// Only POST /v1/chat/completions and GET /v1/models (the one model of
// Options.Model, else "gpt-4o-mini"; authorized like completions, not
// recorded) exist: other paths get 404, other methods 405. With Options.APIKey set, "Authorization: Bearer <key>" is required
// (401, code "invalid_api_key"). The JSON body is checked the way OpenAI
// checks it, answering 400 with type "invalid_request_error" and the
// offending "param": model is required; messages must be non-empty; roles
// are system, developer, user, assistant or tool; content is required
// except on an assistant message carrying tool_calls; a tool message must
// answer, by tool_call_id, a tool call of the assistant message before it,
// and every tool call must be answered before the next non-tool message;
// tools are {"type":"function","function":{"name",...,"parameters"}} with
// names matching ^[a-zA-Z0-9_-]{1,64}$ and an object schema (or none) as
// parameters; tool_choice is "none", "auto", "required" or a function
// among the tools, and only allowed with tools. "stream": true is refused:
// the fake does not stream. Unknown fields are ignored, as OpenAI ignores
// many. With Options.Model set, another model gets 404 "model_not_found".
//
// A reply whose tool call names a tool the request does not define is a
// mistake in the test, not in the client: the fake answers 500 saying so,
// and the reply is spent.
//
// # Recording
//
// Requests returns every POST to /v1/chat/completions, in arrival order,
// including those refused for authentication or validation (decoded as far
// as the body allowed, with the body verbatim in Raw), so a test can see
// exactly what a refused client sent.
//
// # Wire format
//
// A completion is
//
//	{"id":"chatcmpl-1","object":"chat.completion","created":UNIX,"model":MODEL,
//	 "choices":[{"index":0,"message":{"role":"assistant","content":...,"refusal":null,
//	   "tool_calls":[{"id":"call_1","type":"function","function":{"name":...,"arguments":...}}]},
//	   "logprobs":null,"finish_reason":"stop"}],
//	 "usage":{"prompt_tokens":P,"completion_tokens":C,"total_tokens":P+C}}
//
// with "content" null when the reply has only tool calls, and an error is
//
//	{"error":{"message":...,"type":...,"param":...,"code":...}}
//
// which go-openai returns as *openai.APIError carrying the HTTP status
// (never *openai.RequestError, which it reserves for bodies it cannot
// decode). go-openai decodes a null "code" as the int 0, not nil, and a
// null "param" as nil. It does not retry: a 429 reaches the caller at once.
// It omits empty "content", so a tool or user message with empty text is
// refused as missing its content, as OpenAI refuses it.
// CreateChatCompletion refuses Stream itself, before sending; only
// CreateChatCompletionStream reaches the fake's streaming refusal.
package llmtest
