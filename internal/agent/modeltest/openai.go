package modeltest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// openaiRequest is the part of a Responses API request the server reads.
type openaiRequest struct {
	Model  string          `json:"model"`
	Stream bool            `json:"stream"`
	Input  json.RawMessage `json:"input"`
	Tools  []openaiTool    `json:"tools"`
}

// openaiTool is a tool a request offers: a function or custom tool has a
// name; built-in tools (web_search, local_shell, …) only a type.
type openaiTool struct {
	Type      string          `json:"type"`
	Name      string          `json:"name"`
	Tools     []openaiTool    `json:"tools"` // a namespace's tools
	Raw       json.RawMessage `json:"-"`
	Namespace string          `json:"-"`
}

// openaiItem is an input or output item.
type openaiItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	Name      string          `json:"name,omitempty"`
	Namespace string          `json:"namespace,omitempty"`
	Arguments string          `json:"arguments,omitempty"`
	Input     string          `json:"input,omitempty"`
	CallID    string          `json:"call_id,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
	Tools     []openaiTool    `json:"tools,omitempty"` // a tool_search_output's tools
}

// modelItems are the item types a model answer produces.
var modelItems = map[string]bool{"function_call": true, "custom_tool_call": true, "local_shell_call": true,
	"reasoning": true, "web_search_call": true, "tool_search_call": true}

// openaiCallPrefix starts the call ids of the calls the server answers,
// and openaiSearchPrefix those of its tool searches.
const (
	openaiCallPrefix   = "call_modeltest_"
	openaiSearchPrefix = "call_search_"
)

// toolNames lists the names a request offers, namespaced tools as
// "<namespace>.<name>" and built-in tools by type.
func toolNames(tools []openaiTool, ns string) []string {
	var out []string
	for _, t := range tools {
		switch {
		case len(t.Tools) > 0:
			out = append(out, toolNames(t.Tools, t.Name)...)
		case t.Name != "" && ns != "":
			out = append(out, ns+"."+t.Name)
		case t.Name != "":
			out = append(out, t.Name)
		default:
			out = append(out, t.Type)
		}
	}
	return out
}

// responses answers POST /v1/responses.
func (s *Server) responses(w http.ResponseWriter, req *Request) {
	var body openaiRequest
	if err := json.Unmarshal(req.Body, &body); err != nil {
		req.Answer = "invalid JSON"
		writeJSON(w, http.StatusBadRequest, openaiError("invalid JSON body: "+err.Error(), "invalid_request_error", ""))
		return
	}
	req.Model, req.Stream = body.Model, body.Stream
	req.Tools = toolNames(body.Tools, "")
	var items []openaiItem
	var s1 string
	if json.Unmarshal(body.Input, &s1) == nil {
		items = []openaiItem{{Type: "message", Role: "user", Content: json.RawMessage(mustJSON(s1))}}
	} else {
		json.Unmarshal(body.Input, &items)
	}
	var user, searches []string // searches: the queries of the server's tool searches
	turns, inModel, lastWasSearch := 0, false, false
	for _, it := range items {
		model := modelItems[it.Type] || it.Type == "message" && it.Role == "assistant"
		if !model {
			inModel = false
			switch {
			case it.Type == "message" && it.Role == "user":
				user = append(user, openaiText(it.Content))
			case it.Type == "tool_search_output":
				// Tools found by a search are offered from then on.
				req.Tools = append(req.Tools, toolNames(it.Tools, "")...)
			case strings.HasSuffix(it.Type, "_output"):
				req.ToolResults = append(req.ToolResults, ToolResult{CallID: it.CallID, Content: openaiOutput(it.Output)})
			}
			continue
		}
		search := strings.HasPrefix(it.CallID, openaiSearchPrefix)
		mine := strings.HasPrefix(it.CallID, openaiCallPrefix) || it.Type == "message" && s.ours(openaiText(it.Content))
		if !search && !mine {
			continue // not the server's answer: the CLI's own item
		}
		if search {
			var args struct {
				Query string `json:"query"`
			}
			json.Unmarshal([]byte(it.Arguments), &args)
			searches = append(searches, args.Query)
		}
		if inModel && (search == lastWasSearch || it.Type == "message") {
			continue
		}
		inModel, lastWasSearch = true, search
		if !search {
			turns++
		}
	}
	req.UserText = strings.Join(user, "\n")
	req.Turn = turns
	turn, apiErr, ok := s.pick(req)
	if !ok {
		req.Answer = "no script: text"
		s.writeResponse(w, req, []openaiItem{assistantText(s, "modeltest: nothing scripted for this request.")}, defaultUsage(Usage{}, turns))
		return
	}
	if apiErr != nil {
		req.Answer = fmt.Sprintf("error %d", apiErr.Status)
		if apiErr.RetryAfter != "" {
			w.Header().Set("retry-after", apiErr.RetryAfter)
		}
		code := ""
		typ := "server_error"
		if apiErr.Status == 429 {
			code, typ = "rate_limit_exceeded", "requests"
		}
		writeJSON(w, apiErr.Status, openaiError(apiErr.Message, typ, code))
		return
	}
	var out []openaiItem
	if turn.Text != "" {
		out = append(out, assistantText(s, turn.Text))
	}
	var missing, search []string
	searched := map[string]bool{}
	for _, c := range turn.Calls {
		it, ok := s.openaiCall(req, c)
		if !ok {
			name := strings.TrimSpace(c.Server + " " + c.Tool + " " + c.Name)
			canSearch := c.Kind == KindMCP && req.Offers("tool_search") && !s.opts.NoToolSearch
			for _, q := range searches {
				searched[name] = searched[name] || strings.Contains(q, name)
			}
			if canSearch && !searched[name] {
				search = append(search, name)
			} else {
				if c.Kind == KindMCP && req.Offers("tool_search") {
					req.Deferred = append(req.Deferred, name)
				}
				missing = append(missing, name)
			}
		}
		out = append(out, it)
	}
	if len(missing) > 0 {
		// A model does not call a tool it is not offered, and this one
		// cannot be loaded: the test is wrong or the CLI changed.
		msg := s.notOffered(req, missing, searched)
		s.writeResponse(w, req, []openaiItem{assistantText(s, "modeltest: "+msg)}, Usage{Input: 10, Output: 1})
		return
	}
	if len(search) > 0 {
		// Codex defers MCP tools: they are offered once a search found
		// them, so search first, as a model does.
		req.Answer = "tool search for " + strings.Join(search, ", ")
		args := mustJSON(map[string]any{"query": strings.Join(search, " "), "limit": 8})
		s.writeResponse(w, req, []openaiItem{{Type: "tool_search_call", Arguments: args,
			CallID: openaiSearchPrefix + fmt.Sprint(s.nextID())}}, Usage{Input: 10, Output: 1})
		return
	}
	req.Answer = describe(turn)
	s.writeResponse(w, req, out, defaultUsage(turn.Usage, turns))
}

// openaiCall maps a scripted call to the tool Codex offers for it; ok is
// false when the request does not offer it.
func (s *Server) openaiCall(req *Request, c Call) (openaiItem, bool) {
	id := fmt.Sprintf("%s%d", openaiCallPrefix, s.nextID())
	switch c.Kind {
	case KindWrite:
		patch := addFilePatch(c.Path, c.Content)
		if req.Offers("apply_patch") {
			return openaiItem{Type: "custom_tool_call", Name: "apply_patch", Input: patch, CallID: id}, true
		}
		return openaiItem{Type: "function_call", Name: "shell", CallID: id,
			Arguments: mustJSON(map[string]any{"command": []string{"apply_patch", patch}})}, req.Offers("shell")
	case KindMCP:
		for _, name := range []string{"mcp__" + c.Server + "." + c.Tool, "mcp__" + c.Server + "__" + c.Tool} {
			if req.Offers(name) {
				ns, n, _ := strings.Cut(name, ".")
				if n == "" {
					ns, n = "", name
				}
				return openaiItem{Type: "function_call", Name: n, Namespace: ns, CallID: id, Arguments: mustJSON(orEmpty(c.Args))}, true
			}
		}
		return openaiItem{Type: "function_call", Name: "mcp__" + c.Server + "__" + c.Tool, CallID: id, Arguments: mustJSON(orEmpty(c.Args))}, false
	case KindShell, KindRead:
		cmd := c.Command
		if c.Kind == KindRead {
			cmd = "cat " + shellQuote(c.Path)
		}
		if req.Offers("exec_command") {
			return openaiItem{Type: "function_call", Name: "exec_command", CallID: id, Arguments: mustJSON(map[string]any{"cmd": cmd})}, true
		}
		return openaiItem{Type: "function_call", Name: "shell", CallID: id,
			Arguments: mustJSON(map[string]any{"command": []string{"bash", "-lc", cmd}})}, req.Offers("shell")
	}
	if in, ok := c.Input.(string); ok {
		return openaiItem{Type: "custom_tool_call", Name: c.Name, Input: in, CallID: id}, req.Offers(c.Name)
	}
	return openaiItem{Type: "function_call", Name: c.Name, CallID: id, Arguments: mustJSON(c.Input)}, req.Offers(c.Name)
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// openaiText is the text of a message's content: a string or parts.
func openaiText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &parts)
	var out []string
	for _, p := range parts {
		out = append(out, p.Text)
	}
	return strings.Join(out, "\n")
}

// openaiOutput is a tool output's text: a string, or its parts' text.
func openaiOutput(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if t := openaiText(raw); t != "" {
		return t
	}
	return string(raw)
}

// assistantText is an assistant message item.
func assistantText(s *Server, text string) openaiItem {
	return openaiItem{Type: "message", Role: "assistant", Content: json.RawMessage(mustJSON(text))}
}

// writeResponse answers with the items, streamed when asked.
func (s *Server) writeResponse(w http.ResponseWriter, req *Request, items []openaiItem, u Usage) {
	id := fmt.Sprintf("resp_modeltest_%d", s.nextID())
	w.Header().Set("x-request-id", fmt.Sprintf("req_modeltest_%d", s.nextID()))
	var output []map[string]any
	for _, it := range items {
		if it.Type == "message" {
			s.answered(openaiText(it.Content))
		}
		output = append(output, itemJSON(it, fmt.Sprintf("%s_%d", itemPrefix(it.Type), s.nextID()), "completed"))
	}
	if !req.Stream {
		writeJSON(w, http.StatusOK, responseJSON(id, req.Model, "completed", output, &u))
		return
	}
	writeResponseEvents(newSSE(w), id, req.Model, items, output, u)
}

// writeResponseEvents writes the SSE events of one streamed response.
func writeResponseEvents(e *sse, id, model string, items []openaiItem, output []map[string]any, u Usage) {
	seq := 0
	ev := func(name string, v map[string]any) {
		v["type"], v["sequence_number"] = name, seq
		seq++
		e.event(name, v)
	}
	ev("response.created", map[string]any{"response": responseJSON(id, model, "in_progress", []map[string]any{}, nil)})
	ev("response.in_progress", map[string]any{"response": responseJSON(id, model, "in_progress", []map[string]any{}, nil)})
	for i, it := range items {
		done := output[i]
		itemID := done["id"].(string)
		ev("response.output_item.added", map[string]any{"output_index": i, "item": itemJSON(it, itemID, "in_progress")})
		switch it.Type {
		case "message":
			text := openaiText(it.Content)
			part := func(t string) map[string]any {
				return map[string]any{"type": "output_text", "text": t, "annotations": []any{}, "logprobs": []any{}}
			}
			ev("response.content_part.added", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0, "part": part("")})
			for _, d := range halves(text) {
				ev("response.output_text.delta", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0, "delta": d, "logprobs": []any{}})
			}
			ev("response.output_text.done", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0, "text": text, "logprobs": []any{}})
			ev("response.content_part.done", map[string]any{"item_id": itemID, "output_index": i, "content_index": 0, "part": part(text)})
		case "function_call":
			for _, d := range halves(it.Arguments) {
				ev("response.function_call_arguments.delta", map[string]any{"item_id": itemID, "output_index": i, "delta": d})
			}
			ev("response.function_call_arguments.done", map[string]any{"item_id": itemID, "output_index": i, "arguments": it.Arguments})
		case "custom_tool_call":
			for _, d := range halves(it.Input) {
				ev("response.custom_tool_call_input.delta", map[string]any{"item_id": itemID, "output_index": i, "delta": d})
			}
			ev("response.custom_tool_call_input.done", map[string]any{"item_id": itemID, "output_index": i, "input": it.Input})
		}
		ev("response.output_item.done", map[string]any{"output_index": i, "item": done})
	}
	ev("response.completed", map[string]any{"response": responseJSON(id, model, "completed", output, &u)})
}

func itemPrefix(typ string) string {
	switch typ {
	case "message":
		return "msg"
	case "custom_tool_call":
		return "ctc"
	}
	return "fc"
}

// itemJSON renders an output item with its id and status.
func itemJSON(it openaiItem, id, status string) map[string]any {
	m := map[string]any{"id": id, "type": it.Type, "status": status}
	switch it.Type {
	case "message":
		m["role"] = "assistant"
		content := []any{}
		if status == "completed" {
			content = append(content, map[string]any{"type": "output_text", "text": openaiText(it.Content), "annotations": []any{}, "logprobs": []any{}})
		}
		m["content"] = content
	case "function_call":
		m["call_id"], m["name"] = it.CallID, it.Name
		if it.Namespace != "" {
			m["namespace"] = it.Namespace
		}
		m["arguments"] = ""
		if status == "completed" {
			m["arguments"] = it.Arguments
		}
	case "tool_search_call":
		m["call_id"], m["execution"] = it.CallID, "client"
		m["arguments"] = json.RawMessage(it.Arguments)
	case "custom_tool_call":
		m["call_id"], m["name"] = it.CallID, it.Name
		m["input"] = ""
		if status == "completed" {
			m["input"] = it.Input
		}
	}
	return m
}

// responseJSON renders a response object.
func responseJSON(id, model, status string, output []map[string]any, u *Usage) map[string]any {
	r := map[string]any{"id": id, "object": "response", "created_at": 1735689600, "status": status, "model": model,
		"output": output, "error": nil, "incomplete_details": nil, "parallel_tool_calls": true, "usage": nil}
	if u != nil {
		in := u.Input + u.CacheRead + u.CacheWrite
		r["usage"] = map[string]any{"input_tokens": in, "input_tokens_details": map[string]any{"cached_tokens": u.CacheRead},
			"output_tokens": u.Output, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": in + u.Output}
	}
	return r
}

// openaiError is the OpenAI error body.
func openaiError(msg, typ, code string) map[string]any {
	var c any
	if code != "" {
		c = code
	}
	return map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c}}
}
