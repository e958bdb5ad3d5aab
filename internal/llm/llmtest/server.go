package llmtest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock"
)

const (
	chatPath   = "/v1/chat/completions"
	modelsPath = "/v1/models"
)

// listModels answers GET /v1/models: Options.Model, or "gpt-4o-mini" when
// every model is served. Requests are not recorded.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	if e := s.authorize(r); e != nil {
		writeError(w, e)
		return
	}
	model := s.opts.Model
	if model == "" {
		model = "gpt-4o-mini"
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []map[string]any{
		{"id": model, "object": "model", "created": 1700000000, "owned_by": "llmtest"}}})
}

// Server is a fake chat completions endpoint. Its methods are safe for
// concurrent use.
type Server struct {
	opts Options
	srv  *httptest.Server

	mu          sync.Mutex
	queue       []Reply
	responder   func(Request) Reply
	requests    []Request
	completions int // completions answered, for "chatcmpl-<n>"
	callIDs     int // tool call IDs defaulted, for "call_<n>"
}

// New starts a Server on 127.0.0.1. Close it when done.
func New(opts Options) *Server {
	s := &Server{opts: opts}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	return s
}

// URL returns the base URL for go-openai's ClientConfig.BaseURL, ending in
// "/v1".
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Close shuts the server down, waiting for requests in flight.
func (s *Server) Close() { s.srv.Close() }

// Enqueue appends replies to the queue answering valid requests in order.
func (s *Server) Enqueue(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// SetResponder sets the function answering valid requests while the queue
// is empty; nil removes it. It is called without the server's lock held, so
// it may call the server's methods.
func (s *Server) SetResponder(f func(Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.responder = f
}

// Requests returns copies of the requests received so far, valid or not,
// in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		out[i] = r.clone()
	}
	return out
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == modelsPath && r.Method == http.MethodGet {
		s.listModels(w, r)
		return
	}
	if r.URL.Path != chatPath {
		writeError(w, &apiError{status: http.StatusNotFound, Message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path), Type: invalidRequest})
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, &apiError{status: http.StatusMethodNotAllowed, Message: fmt.Sprintf("Invalid method for URL (%s %s)", r.Method, r.URL.Path), Type: invalidRequest})
		return
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, badRequest("llmtest: reading body: "+err.Error(), ""))
		return
	}
	wr, decErr := decodeRequest(raw)
	req := wr.record(raw)
	req.Authorization = r.Header.Get("Authorization")
	s.mu.Lock()
	s.requests = append(s.requests, req.clone())
	s.mu.Unlock()

	if e := s.authorize(r); e != nil {
		writeError(w, e)
		return
	}
	if decErr != nil {
		writeError(w, decErr)
		return
	}
	if e := wr.validate(); e != nil {
		writeError(w, e)
		return
	}
	if s.opts.Model != "" && wr.Model != s.opts.Model {
		writeError(w, &apiError{
			status:  http.StatusNotFound,
			Message: fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", wr.Model),
			Type:    invalidRequest,
			Code:    ptr("model_not_found"),
		})
		return
	}

	reply, ok := s.next(req)
	if !ok {
		writeError(w, serverError("llmtest: no reply scripted"))
		return
	}
	if reply.Status != 0 {
		s.writeReplyError(w, reply)
		return
	}
	tools := make(map[string]bool, len(req.Tools))
	for _, t := range req.Tools {
		tools[t.Name] = true
	}
	for _, c := range reply.ToolCalls {
		if !tools[c.Name] && !reply.InventsTools {
			writeError(w, serverError(fmt.Sprintf("llmtest: scripted reply calls tool %q, which the request does not define", c.Name)))
			return
		}
	}
	writeJSON(w, http.StatusOK, s.completion(req.Model, reply))
}

// authorize checks the bearer key.
func (s *Server) authorize(r *http.Request) *apiError {
	if s.opts.APIKey == "" {
		return nil
	}
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || key == "" {
		return &apiError{
			status:  http.StatusUnauthorized,
			Message: "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
			Type:    invalidRequest,
			Code:    ptr("invalid_api_key"),
		}
	}
	if key != s.opts.APIKey {
		return &apiError{
			status:  http.StatusUnauthorized,
			Message: fmt.Sprintf("Incorrect API key provided: %s.", maskKey(key)),
			Type:    invalidRequest,
			Code:    ptr("invalid_api_key"),
		}
	}
	return nil
}

// maskKey hides all but the ends of a key, as OpenAI does.
func maskKey(key string) string {
	if len(key) <= 8 {
		return strings.Repeat("*", len(key))
	}
	return key[:3] + strings.Repeat("*", len(key)-7) + key[len(key)-4:]
}

// next takes the reply for a valid request: the queue's head, else the
// responder's answer.
func (s *Server) next(req Request) (Reply, bool) {
	s.mu.Lock()
	if len(s.queue) > 0 {
		r := s.queue[0]
		s.queue = s.queue[1:]
		s.mu.Unlock()
		return r, true
	}
	f := s.responder
	s.mu.Unlock()
	if f == nil {
		return Reply{}, false
	}
	return f(req.clone()), true
}

func (s *Server) writeReplyError(w http.ResponseWriter, r Reply) {
	if r.Status < 400 || r.Status > 599 {
		writeError(w, serverError(fmt.Sprintf("llmtest: scripted reply has Status %d, not an error status", r.Status)))
		return
	}
	e := &apiError{status: r.Status, Message: r.ErrorMessage, Type: r.ErrorType}
	if e.Message == "" {
		e.Message = http.StatusText(r.Status)
	}
	if e.Type == "" {
		switch {
		case r.Status == http.StatusTooManyRequests:
			e.Type = "rate_limit_exceeded"
		case r.Status >= 500:
			e.Type = "server_error"
		default:
			e.Type = invalidRequest
		}
	}
	if r.ErrorCode != "" {
		e.Code = ptr(r.ErrorCode)
	}
	if r.Status == http.StatusTooManyRequests && r.RetryAfter > 0 {
		secs := (r.RetryAfter + time.Second - 1) / time.Second
		w.Header().Set("Retry-After", strconv.FormatInt(int64(secs), 10))
		w.Header().Set("x-ratelimit-reset-requests", r.RetryAfter.String())
	}
	writeError(w, e)
}

// completion builds the success body for reply.
func (s *Server) completion(model string, r Reply) wireResponse {
	now := clock.Or(s.opts.Clock).Now
	s.mu.Lock()
	s.completions++
	id := s.completions
	calls := make([]wireToolCall, len(r.ToolCalls))
	for i, c := range r.ToolCalls {
		if c.ID == "" {
			s.callIDs++
			c.ID = fmt.Sprintf("call_%d", s.callIDs)
		}
		if c.Arguments == "" {
			c.Arguments = "{}"
		}
		calls[i] = wireToolCall{ID: c.ID, Type: "function", Function: wireFunctionCall{Name: c.Name, Arguments: c.Arguments}}
	}
	s.mu.Unlock()

	msg := wireReplyMessage{Role: "assistant", ToolCalls: calls}
	if r.Content != "" || len(calls) == 0 {
		msg.Content = ptr(r.Content)
	}
	finish := r.FinishReason
	if finish == "" {
		finish = "stop"
		if len(calls) > 0 {
			finish = "tool_calls"
		}
	}
	return wireResponse{
		ID:      fmt.Sprintf("chatcmpl-%d", id),
		Object:  "chat.completion",
		Created: now().Unix(),
		Model:   model,
		Choices: []wireChoice{{Index: 0, Message: msg, FinishReason: finish}},
		Usage: wireUsage{
			PromptTokens:     r.Usage.PromptTokens,
			CompletionTokens: r.Usage.CompletionTokens,
			TotalTokens:      r.Usage.PromptTokens + r.Usage.CompletionTokens,
		},
	}
}
