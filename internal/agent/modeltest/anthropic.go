package modeltest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
)

// callPrefix starts the ids of the tool calls the server answers, and
// waitPrefix those of filler calls, which do not count as turns.
const (
	callPrefix = "toolu_modeltest_"
	waitPrefix = "toolu_wait_"
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
		Name string `json:"name"`
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
// prompt.
var workDir = regexp.MustCompile(`(?m)(?:Primary working directory|Working directory): (\S+)`)

// messages answers POST /v1/messages.
func (s *Server) messages(ctx context.Context, w http.ResponseWriter, req *Request) {
	var body anthropicRequest
	if err := json.Unmarshal(req.Body, &body); err != nil {
		req.Answer = "invalid JSON"
		writeJSON(w, http.StatusBadRequest, anthropicError("invalid_request_error", "invalid JSON body: "+err.Error()))
		return
	}
	req.Model, req.Stream = body.Model, body.Stream
	for _, t := range body.Tools {
		req.Tools = append(req.Tools, t.Name)
	}
	var user []string
	turns, waits, inAssistant, lastWasWait := 0, 0, false, false
	for _, m := range body.Messages {
		bs := blocks(m.Content)
		if m.Role != "assistant" {
			inAssistant = false
			for _, b := range bs {
				switch b.Type {
				case "text":
					user = append(user, b.Text)
				case "tool_result":
					req.ToolResults = append(req.ToolResults, ToolResult{CallID: b.ToolUseID, Content: flatText(b.Content), IsError: b.IsError})
				}
			}
			continue
		}
		wait, mine := false, false
		for _, b := range bs {
			switch {
			case b.Type == "tool_use" && strings.HasPrefix(b.ID, waitPrefix):
				wait = true
			case b.Type == "tool_use" && strings.HasPrefix(b.ID, callPrefix):
				mine = true
			case b.Type == "text" && s.ours(b.Text):
				mine = true
			}
		}
		if !wait && !mine {
			continue // the CLI's own filler of a failed turn
		}
		if inAssistant && wait == lastWasWait {
			continue // one answer split over consecutive messages
		}
		inAssistant, lastWasWait = true, wait
		if wait {
			waits++
		} else {
			turns++
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
	var missing []string
	cwd := ""
	if m := workDir.FindStringSubmatch(flatText(body.System)); m != nil {
		cwd = m[1]
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
		if !req.Offers(b.Name) {
			missing = append(missing, b.Name)
		}
		b.Input, _ = json.Marshal(input)
		out = append(out, b)
	}
	if len(missing) > 0 && waits < s.opts.MaxWaits {
		// A model does not call a tool it is not offered: Claude Code
		// connects MCP servers while it already talks to the model, so
		// the tools may come a request later. Make a harmless call and
		// ask again.
		if filler, ok := fillerCall(req, cwd); ok {
			s.pace(ctx)
			req.Answer = fmt.Sprintf("waiting for %s (%d)", strings.Join(missing, ", "), waits+1)
			s.writeMessage(w, req, body.Model, []anthropicBlock{{Type: "text", Text: "Waiting for tools: " + strings.Join(missing, ", ")}, filler},
				"tool_use", Usage{Input: 10, Output: 1})
			return
		}
	}
	stop := "end_turn"
	if len(turn.Calls) > 0 {
		stop = "tool_use"
	}
	req.Answer = describe(turn)
	s.writeMessage(w, req, body.Model, out, stop, defaultUsage(turn.Usage, turns))
}

// fillerCall is a harmless call that is always allowed: Read of a file
// that does not exist.
func fillerCall(req *Request, cwd string) (anthropicBlock, bool) {
	if !req.Offers("Read") {
		return anthropicBlock{}, false
	}
	path := filepath.Join(cmp.Or(cwd, "/"), ".modeltest-wait")
	return anthropicBlock{Type: "tool_use", ID: waitPrefix + fmt.Sprint(req.Seq), Name: "Read",
		Input: json.RawMessage(mustJSON(map[string]any{"file_path": path}))}, true
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
