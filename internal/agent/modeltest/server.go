package modeltest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
)

// API names the protocol of a request.
type API string

// The protocols the server speaks.
const (
	Anthropic API = "anthropic" // the Messages API
	OpenAI    API = "openai"    // the Responses API
)

// Options configure a Server.
type Options struct {
	// Logf, when set, gets one line per request (t.Logf, for instance).
	Logf func(format string, args ...any)
	// OnRequest, when set, is called after each request has been answered
	// (a sign of progress for the test's waits). It must not block.
	OnRequest func(Request)
	// NoToolSearch makes the model one that never searches for tools: it
	// calls only the tools a request offers directly, never loading a
	// deferred one (Claude Code's ToolSearch, Codex's tool_search) first.
	NoToolSearch bool
}

// Request is one request the server received, as decoded.
type Request struct {
	// Seq numbers the requests from 1 in arrival order.
	Seq          int
	API          API
	Method, Path string
	Header       http.Header
	Body         []byte
	// Model and Stream are the body's model and stream fields.
	Model  string
	Stream bool
	// Tools are the names of the tools the request offers: those it
	// defines, less the deferred ones no search has loaded yet.
	Tools []string
	// Deferred are the tools the request names but does not offer yet: a
	// search (Claude Code's ToolSearch, Codex's tool_search) loads them.
	Deferred []string
	// UserText is the text of its user messages (not tool results).
	UserText string
	// ToolResults are the tool results in its history, in order.
	ToolResults []ToolResult
	// Turn is how many model answers its history holds (filler answers,
	// and answers with a call the CLI reports as interrupted, left out);
	// -1 for a request that is not a conversation.
	Turn int
	// Script names the script that answered; empty when none did.
	Script string
	// Status is the HTTP status answered.
	Status int
	// Answer describes what was answered, for logs and failure messages.
	Answer string
}

// ToolResult is a tool's result the CLI sent back to the model.
type ToolResult struct {
	CallID  string
	Content string
	IsError bool
}

// Offers reports whether the request offers the tool name.
func (r Request) Offers(name string) bool { return slices.Contains(r.Tools, name) }

// Server is a fake model endpoint on 127.0.0.1. Its methods are safe for
// concurrent use.
type Server struct {
	opts Options
	srv  *httptest.Server

	mu         sync.Mutex
	scripts    []Script
	errServed  map[string]int // "<script>/<turn>" → errors answered
	errorsOver bool           // EndErrors was called
	requests   []Request
	unscripted []string
	ids        int
	// texts are the assistant texts answered so far: an assistant message
	// in a history counts as an answer only when the server gave it (a
	// CLI may fill a failed turn with a text of its own).
	texts map[string]bool
}

// New starts a Server. Close it when done.
func New(opts Options) *Server {
	s := &Server{opts: opts, errServed: map[string]int{}, texts: map[string]bool{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	return s
}

// URL is the server's base URL, http://127.0.0.1:PORT: Claude Code's
// ANTHROPIC_BASE_URL. Codex's provider base_url is URL()+"/v1".
func (s *Server) URL() string { return s.srv.URL }

// Close shuts the server down, waiting for requests in flight.
func (s *Server) Close() { s.srv.Close() }

// Add adds scripts; a request is answered by the first script, in the
// order added, that matches it.
func (s *Server) Add(scripts ...Script) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scripts = append(s.scripts, scripts...)
}

// EndErrors ends every scripted error: from now on each turn gets its
// answer, as when a rate limit has reset.
func (s *Server) EndErrors() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errorsOver = true
}

// Requests returns the requests received so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Unscripted describes the conversation requests no script could answer:
// none matched, the script had no turn left, or the turn called a tool the
// request did not offer and no search could load. A test asserts it is
// empty, and may look at it after each request to fail at once.
func (s *Server) Unscripted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.unscripted)
}

// nextID returns a new number for ids.
func (s *Server) nextID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids++
	return s.ids
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Turn: -1}
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	switch {
	case r.URL.Path == "/v1/messages" && r.Method == http.MethodPost:
		req.API = Anthropic
		s.messages(rec, &req)
	case r.URL.Path == "/v1/messages/count_tokens" && r.Method == http.MethodPost:
		req.API = Anthropic
		req.Answer = "token count"
		writeJSON(rec, http.StatusOK, map[string]any{"input_tokens": len(body)/4 + 1})
	case strings.HasPrefix(r.URL.Path, "/v1/models") && r.Method == http.MethodGet:
		req.API = apiOf(r)
		req.Answer = "model list"
		s.models(rec, req.API)
	case r.URL.Path == "/" && (r.Method == http.MethodHead || r.Method == http.MethodGet):
		// A reachability probe.
		req.API = apiOf(r)
		req.Answer = "reachable"
		rec.WriteHeader(http.StatusOK)
	case r.URL.Path == "/v1/responses" && r.Method == http.MethodPost:
		req.API = OpenAI
		s.responses(rec, &req)
	default:
		req.API = apiOf(r)
		req.Answer = "not found"
		if req.API == OpenAI {
			writeJSON(rec, http.StatusNotFound, map[string]any{"error": map[string]any{
				"message": fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path), "type": "invalid_request_error",
				"param": nil, "code": nil}})
		} else {
			writeJSON(rec, http.StatusNotFound, anthropicError("not_found_error", fmt.Sprintf("Not found: %s %s", r.Method, r.URL.Path)))
		}
	}
	req.Status = rec.status
	s.mu.Lock()
	req.Seq = len(s.requests) + 1
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	if s.opts.Logf != nil {
		s.opts.Logf("modeltest: #%d %s %s %s turn %d script %q: %d %s", req.Seq, req.API, req.Method, req.Path, req.Turn,
			req.Script, req.Status, req.Answer)
	}
	if s.opts.OnRequest != nil {
		s.opts.OnRequest(req)
	}
}

// apiOf tells the protocol of a request from its headers: Anthropic's
// clients send anthropic-version or x-api-key.
func apiOf(r *http.Request) API {
	if r.Header.Get("anthropic-version") != "" || r.Header.Get("x-api-key") != "" {
		return Anthropic
	}
	return OpenAI
}

// models answers a model list.
func (s *Server) models(w http.ResponseWriter, api API) {
	if api == Anthropic {
		data := []map[string]any{}
		for _, id := range []string{"claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"} {
			data = append(data, map[string]any{"type": "model", "id": id, "display_name": id, "created_at": "2025-01-01T00:00:00Z"})
		}
		writeJSON(w, http.StatusOK, map[string]any{"data": data, "has_more": false, "first_id": data[0]["id"], "last_id": data[2]["id"]})
		return
	}
	data := []map[string]any{}
	for _, id := range []string{"gpt-5.5", "gpt-5"} {
		data = append(data, map[string]any{"id": id, "object": "model", "created": 1735689600, "owned_by": "modeltest"})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// answered records an assistant text the server gave.
func (s *Server) answered(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.texts[strings.TrimSpace(text)] = true
}

// ours reports whether a history's assistant text was the server's.
func (s *Server) ours(text string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.texts[strings.TrimSpace(text)]
}

// pick finds the answer of a conversation request: its script, turn and
// an error to answer instead. ok is false when no script can answer; the
// reason is then recorded in Unscripted.
func (s *Server) pick(req *Request) (turn Turn, errAnswer *Error, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sc := range s.scripts {
		if !matches(sc, req.UserText) {
			continue
		}
		req.Script = sc.Name
		if req.Turn >= len(sc.Turns) {
			s.unscripted = append(s.unscripted, fmt.Sprintf("script %q has no turn %d (it has %d)", sc.Name, req.Turn, len(sc.Turns)))
			return Turn{}, nil, false
		}
		t := sc.Turns[req.Turn]
		if t.Error != nil && !s.errorsOver {
			key := fmt.Sprintf("%s/%d", sc.Name, req.Turn)
			if s.errServed[key] < max(t.Error.Times, 1) {
				s.errServed[key]++
				return t, t.Error, true
			}
		}
		return t, nil, true
	}
	s.unscripted = append(s.unscripted, fmt.Sprintf("no script matches a %s conversation at turn %d: %.200q", req.API, req.Turn, req.UserText))
	return Turn{}, nil, false
}

// notOffered records a turn that calls tools the request does not offer
// and no search can load (searched: the tools already searched for), and
// returns the message saying so.
func (s *Server) notOffered(req *Request, missing []string, searched map[string]bool) string {
	var why []string
	for _, n := range missing {
		switch {
		case searched[n]:
			why = append(why, n+" (searched for, but the CLI did not load it)")
		case slices.Contains(req.Deferred, n) && s.opts.NoToolSearch:
			why = append(why, n+" (deferred: this model does not search for tools)")
		case slices.Contains(req.Deferred, n):
			why = append(why, n+" (deferred, and the request offers no tool search)")
		default:
			why = append(why, n+" (neither offered nor deferred)")
		}
	}
	msg := fmt.Sprintf("script %q turn %d calls %s; the request offers %s", req.Script, req.Turn, strings.Join(why, ", "),
		strings.Join(req.Tools, ", "))
	s.mu.Lock()
	s.unscripted = append(s.unscripted, msg)
	s.mu.Unlock()
	req.Answer = "not offered: " + strings.Join(missing, ", ")
	return msg
}

func matches(sc Script, text string) bool {
	return sc.Match == "" || strings.Contains(text, sc.Match)
}

// defaultUsage fills a zero usage.
func defaultUsage(u Usage, turn int) Usage {
	if u == (Usage{}) {
		return Usage{Input: 100 + turn, Output: 10}
	}
	return u
}

// recorder keeps the status written.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// sse writes Server-Sent Events, flushing after each.
type sse struct {
	w   http.ResponseWriter
	buf bytes.Buffer
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w}
}

// event writes one event named name with v as its JSON data.
func (e *sse) event(name string, v any) {
	b, _ := json.Marshal(v)
	e.buf.Reset()
	fmt.Fprintf(&e.buf, "event: %s\ndata: %s\n\n", name, b)
	e.w.Write(e.buf.Bytes())
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}
