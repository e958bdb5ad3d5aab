package modeltest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// callPrefix starts the ids of the tool calls the server answers, and
// searchPrefix those of its tool searches, which do not count as turns.
const (
	callPrefix   = "toolu_modeltest_"
	searchPrefix = "toolu_search_"
)

// anthropicRequest is the part of a Messages API request the server reads.
type anthropicRequest struct {
	Model    string          `json:"model"`
	System   json.RawMessage `json:"system"`
	Stream   bool            `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name         string `json:"name"`
		DeferLoading bool   `json:"defer_loading"`
	} `json:"tools"`
}

// anthropicBlock is a content block of a message.
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	ToolName  string          `json:"tool_name,omitempty"` // a tool_reference's
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// blocks decodes a message content: a string or an array of blocks.
func blocks(raw json.RawMessage) []anthropicBlock {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []anthropicBlock{{Type: "text", Text: s}}
	}
	var bs []anthropicBlock
	json.Unmarshal(raw, &bs)
	return bs
}

// flatText is a tool result's or system prompt's text: a string, or the
// text of its blocks.
func flatText(raw json.RawMessage) string {
	var parts []string
	for _, b := range blocks(raw) {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// workDir finds the working directory Claude Code states in its system
// prompt (2.1.197) or in a system message of the conversation (2.1.332).
var workDir = regexp.MustCompile(`(?m)(?:Primary working directory|Working directory): (\S+)`)

// deferredHeader starts the list of deferred tools Claude Code names in a
// system message ("The following deferred tools are now available via
// ToolSearch. …"), one name a line up to a blank line.
var (
	deferredHeader = regexp.MustCompile(`(?i)deferred[ -]tools`)
	toolName       = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
)

// deferredTools lists the tool names text announces as deferred.
func deferredTools(text string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case deferredHeader.MatchString(l) && !toolName.MatchString(l):
			in = true
		case !in:
		case l == "" || !toolName.MatchString(l):
			in = false
		default:
			out = append(out, l)
		}
	}
	return out
}

// interruptedCall starts the error result Claude Code puts in a history for
// a call that reached no result of its own (2.1.332): "[Tool call
// interrupted: the session ended before this call's result was recorded,
// …]" when a session resumes after its process was killed mid-call, and
// its siblings "[Tool call did not complete: …]", "[Tool call skipped: …]"
// and "[Tool call result not in this copy: …]". Each tells the model to
// check and run the call again if still needed.
const interruptedCall = "[Tool call "

// isInterrupted reports whether a tool result's text is the CLI's own
// note of a call that reached no result.
func isInterrupted(text string) bool {
	return strings.HasPrefix(strings.TrimSpace(text), interruptedCall)
}

// searchedNames lists the tools a ToolSearch input selected by name.
func searchedNames(input json.RawMessage) []string {
	var in struct {
		Query string `json:"query"`
	}
	json.Unmarshal(input, &in)
	q, ok := strings.CutPrefix(strings.TrimSpace(in.Query), "select:")
	if !ok {
		return nil
	}
	var out []string
	for _, n := range strings.Split(q, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// messages answers POST /v1/messages.
func (s *Server) messages(w http.ResponseWriter, req *Request) {
	var body anthropicRequest
	if err := json.Unmarshal(req.Body, &body); err != nil {
		req.Answer = "invalid JSON"
		writeJSON(w, http.StatusBadRequest, anthropicError("invalid_request_error", "invalid JSON body: "+err.Error()))
		return
	}
	req.Model, req.Stream = body.Model, body.Stream
	var user, system []string
	system = append(system, flatText(body.System))
	loaded := map[string]bool{}   // deferred tools a search loaded (tool_reference)
	searched := map[string]bool{} // tools the server searched for
	// A call the CLI reports as interrupted never reached a result: its
	// answer is given again, as a model re-runs such a call.
	interrupted := map[string]bool{}
	for _, m := range body.Messages {
		if m.Role == "assistant" || m.Role == "system" {
			continue
		}
		for _, b := range blocks(m.Content) {
			if b.Type == "tool_result" && b.IsError && isInterrupted(flatText(b.Content)) {
				interrupted[b.ToolUseID] = true
			}
		}
	}
	// The model's answers in the history: consecutive assistant messages
	// are one answer, a search is an answer of its own.
	type answer struct{ search, lost bool }
	var answers []answer
	inAssistant := false
	for _, m := range body.Messages {
		bs := blocks(m.Content)
		if m.Role == "system" {
			system = append(system, flatText(m.Content))
			continue
		}
		if m.Role != "assistant" {
			inAssistant = false
			for _, b := range bs {
				switch b.Type {
				case "text":
					user = append(user, b.Text)
				case "tool_result":
					req.ToolResults = append(req.ToolResults, ToolResult{CallID: b.ToolUseID, Content: flatText(b.Content), IsError: b.IsError})
					for _, r := range blocks(b.Content) {
						if r.Type == "tool_reference" && r.ToolName != "" {
							loaded[r.ToolName] = true
						}
					}
				}
			}
			continue
		}
		var a answer
		mine := false
		for _, b := range bs {
			switch {
			case b.Type == "tool_use" && strings.HasPrefix(b.ID, searchPrefix):
				a.search = true
				if interrupted[b.ID] {
					continue // it loaded nothing: the model searches again
				}
				for _, n := range searchedNames(b.Input) {
					searched[n] = true
				}
			case b.Type == "tool_use" && strings.HasPrefix(b.ID, callPrefix):
				mine = true
				a.lost = a.lost || interrupted[b.ID]
			case b.Type == "text" && s.ours(b.Text):
				mine = true
			}
		}
		if !a.search && !mine {
			continue // the CLI's own filler of a failed turn
		}
		if n := len(answers); inAssistant && answers[n-1].search == a.search {
			answers[n-1].lost = answers[n-1].lost || a.lost
			continue // one answer split over consecutive messages
		}
		inAssistant = true
		answers = append(answers, a)
	}
	turns := 0
	for _, a := range answers {
		if !a.search && !a.lost {
			turns++
		}
	}
	// A deferred tool is offered once a search loaded it; until then the
	// model knows only its name.
	for _, t := range body.Tools {
		switch {
		case !t.DeferLoading || loaded[t.Name]:
			req.Tools = append(req.Tools, t.Name)
		case t.Name != "" && !strings.HasPrefix(t.Name, "DeferredTool"):
			req.Deferred = append(req.Deferred, t.Name)
		}
	}
	for _, text := range append(slices.Clone(system), user...) {
		for _, n := range deferredTools(text) {
			if !req.Offers(n) && !slices.Contains(req.Deferred, n) {
				req.Deferred = append(req.Deferred, n)
			}
		}
	}
	req.UserText = strings.Join(user, "\n")
	if len(body.Tools) == 0 {
		// Not the agent's conversation: a title, a summary, a probe.
		req.Answer = "a side request"
		s.writeMessage(w, req, body.Model, []anthropicBlock{{Type: "text", Text: "OK"}}, "end_turn", Usage{Input: 10, Output: 1})
		return
	}
	req.Turn = turns
	turn, apiErr, ok := s.pick(req)
	if !ok {
		req.Answer = "no script: text"
		s.writeMessage(w, req, body.Model, []anthropicBlock{{Type: "text", Text: "modeltest: nothing scripted for this request."}},
			"end_turn", defaultUsage(Usage{}, turns))
		return
	}
	if apiErr != nil {
		req.Answer = fmt.Sprintf("error %d", apiErr.Status)
		if apiErr.RetryAfter != "" {
			w.Header().Set("retry-after", apiErr.RetryAfter)
		}
		w.Header().Set("request-id", fmt.Sprintf("req_modeltest_%d", s.nextID()))
		writeJSON(w, apiErr.Status, anthropicError(anthropicErrorType(apiErr.Status), apiErr.Message))
		return
	}
	var out []anthropicBlock
	if turn.Text != "" {
		out = append(out, anthropicBlock{Type: "text", Text: turn.Text})
	}
	var missing, search []string
	cwd := ""
	for _, text := range system {
		if m := workDir.FindStringSubmatch(text); m != nil {
			cwd = m[1]
			break
		}
	}
	for _, c := range turn.Calls {
		b := anthropicBlock{Type: "tool_use", ID: fmt.Sprintf("%s%d", callPrefix, s.nextID())}
		var input any
		switch c.Kind {
		case KindWrite:
			path := c.Path
			if !filepath.IsAbs(path) && cwd != "" {
				path = filepath.Join(cwd, path)
			}
			b.Name, input = "Write", map[string]any{"file_path": path, "content": c.Content}
		case KindRead:
			path := c.Path
			if !filepath.IsAbs(path) && cwd != "" {
				path = filepath.Join(cwd, path)
			}
			b.Name, input = "Read", map[string]any{"file_path": path}
		case KindMCP:
			b.Name, input = "mcp__"+c.Server+"__"+c.Tool, c.Args
			if c.Args == nil {
				input = map[string]any{}
			}
		case KindShell:
			b.Name, input = "Bash", map[string]any{"command": c.Command, "description": "Run a command"}
		default:
			b.Name, input = c.Name, c.Input
		}
		switch {
		case req.Offers(b.Name):
		case !s.opts.NoToolSearch && req.Offers("ToolSearch") && slices.Contains(req.Deferred, b.Name) && !searched[b.Name]:
			search = append(search, b.Name)
		default:
			missing = append(missing, b.Name)
		}
		b.Input, _ = json.Marshal(input)
		out = append(out, b)
	}
	if len(missing) > 0 {
		// A model does not call a tool it is not offered, and this one
		// cannot be loaded: the test is wrong or the CLI changed.
		msg := s.notOffered(req, missing, searched)
		s.writeMessage(w, req, body.Model, []anthropicBlock{{Type: "text", Text: "modeltest: " + msg}}, "end_turn", Usage{Input: 10, Output: 1})
		return
	}
	if len(search) > 0 {
		// The tools are deferred: load them first, as a model does.
		req.Answer = "tool search for " + strings.Join(search, ", ")
		s.writeMessage(w, req, body.Model, []anthropicBlock{{Type: "tool_use", ID: fmt.Sprintf("%s%d", searchPrefix, s.nextID()),
			Name: "ToolSearch", Input: json.RawMessage(mustJSON(map[string]any{"query": "select:" + strings.Join(search, ",")}))}},
			"tool_use", Usage{Input: 10, Output: 1})
		return
	}
	stop := "end_turn"
	if len(turn.Calls) > 0 {
		stop = "tool_use"
	}
	req.Answer = describe(turn)
	s.writeMessage(w, req, body.Model, out, stop, defaultUsage(turn.Usage, turns))
}

// describe summarises a turn for logs.
func describe(t Turn) string {
	var parts []string
	if t.Text != "" {
		parts = append(parts, fmt.Sprintf("text %.40q", t.Text))
	}
	for _, c := range t.Calls {
		parts = append(parts, c.String())
	}
	return strings.Join(parts, "; ")
}

// writeMessage answers a message, streamed when the request asked so.
func (s *Server) writeMessage(w http.ResponseWriter, req *Request, model string, content []anthropicBlock, stop string, u Usage) {
	id := fmt.Sprintf("msg_modeltest_%d", s.nextID())
	for _, b := range content {
		if b.Type == "text" {
			s.answered(b.Text)
		}
	}
	usage := map[string]any{"input_tokens": u.Input, "cache_creation_input_tokens": u.CacheWrite,
		"cache_read_input_tokens": u.CacheRead, "output_tokens": u.Output}
	w.Header().Set("request-id", fmt.Sprintf("req_modeltest_%d", s.nextID()))
	if !req.Stream {
		for i := range content {
			if content[i].Type == "tool_use" && content[i].Input == nil {
				content[i].Input = json.RawMessage(`{}`)
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "type": "message", "role": "assistant", "model": model,
			"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	e := newSSE(w)
	writeMessageEvents(e, id, model, content, stop, u)
}

// writeMessageEvents writes the SSE events of one streamed message.
func writeMessageEvents(e *sse, id, model string, content []anthropicBlock, stop string, u Usage) {
	e.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": u.Input,
			"cache_creation_input_tokens": u.CacheWrite, "cache_read_input_tokens": u.CacheRead, "output_tokens": 1}}})
	e.event("ping", map[string]any{"type": "ping"})
	for i, b := range content {
		switch b.Type {
		case "text":
			e.event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "text", "text": ""}})
			for _, part := range halves(b.Text) {
				e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]any{"type": "text_delta", "text": part}})
			}
		case "tool_use":
			e.event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": map[string]any{}}})
			for _, part := range halves(string(b.Input)) {
				e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
			}
		}
		e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	e.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"input_tokens": u.Input, "cache_creation_input_tokens": u.CacheWrite,
			"cache_read_input_tokens": u.CacheRead, "output_tokens": u.Output}})
	e.event("message_stop", map[string]any{"type": "message_stop"})
}

// halves splits s in two at a rune boundary, as a stream delivers a text
// in pieces; a short s stays whole.
func halves(s string) []string {
	if len(s) < 8 {
		return []string{s}
	}
	mid := len(s) / 2
	for mid < len(s) && !utf8Start(s[mid]) {
		mid++
	}
	return []string{s[:mid], s[mid:]}
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// anthropicError is the Messages API's error body.
func anthropicError(typ, msg string) map[string]any {
	return map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
}

// anthropicErrorType is the error type the API gives a status.
func anthropicErrorType(status int) string {
	switch status {
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	return "api_error"
}
