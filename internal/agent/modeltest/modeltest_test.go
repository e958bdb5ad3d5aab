package modeltest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// post sends body to the server's path and returns the status, the
// content type and the body of the answer.
func post(t *testing.T, s *Server, path string, header map[string]string, body any) (int, string, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, s.URL()+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), out
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the answer (run with -update to accept it)\ngot:\n%s", path, got)
	}
}

// sseEvent is one decoded Server-Sent Event.
type sseEvent struct {
	name string
	data map[string]any
}

// parseSSE decodes an event stream the way an SSE client does: "event:"
// and "data:" lines, a blank line ending each event.
func parseSSE(t *testing.T, body []byte) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.name != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.data); err != nil {
				t.Fatalf("data of %s is not JSON: %v", cur.name, err)
			}
			if typ, _ := cur.data["type"].(string); typ != cur.name {
				t.Errorf("event %s carries type %q", cur.name, typ)
			}
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
	return out
}

func names(evs []sseEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.name)
	}
	return out
}

// anthropicConversation is a Messages API request at turn len(answers).
func anthropicConversation(prompt string, stream bool, tools []string, history ...map[string]any) map[string]any {
	var ts []map[string]any
	for _, n := range tools {
		ts = append(ts, map[string]any{"name": n, "input_schema": map[string]any{"type": "object"}})
	}
	msgs := []map[string]any{{"role": "user", "content": []map[string]any{{"type": "text", "text": prompt}}}}
	msgs = append(msgs, history...)
	return map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 32000, "stream": stream, "tools": ts,
		"system":   []map[string]any{{"type": "text", "text": "You are Claude Code.\n - Primary working directory: /work/repo\n"}},
		"messages": msgs}
}

// interruptedNote is the tool result Claude Code 2.1.332 puts in a resumed
// session for a call its killed process never recorded a result of.
const interruptedNote = "[Tool call interrupted: the session ended before this call's result was recorded, so its outcome is unknown. " +
	"Check whether it took effect before relying on it or running it again.]"

var anthropicHeaders = map[string]string{"x-api-key": "k", "anthropic-version": "2023-06-01", "content-type": "application/json"}

func TestAnthropicStreamWireFormat(t *testing.T) {
	t.Parallel()
	s := New(Options{})
	defer s.Close()
	s.Add(Script{Name: "edit", Match: "Task one", Turns: []Turn{
		{Text: "I will write the file now.", Calls: []Call{Write("notes/hello.txt", "hello\nworld\n"),
			MCP("agentqueued", "progress", map[string]any{"message": "wrote it"})}},
	}})
	status, ctype, body := post(t, s, "/v1/messages", anthropicHeaders,
		anthropicConversation("# Task one", true, []string{"Write", "Bash", "mcp__agentqueued__progress"}))
	if status != 200 || ctype != "text/event-stream" {
		t.Fatalf("status %d, content type %q", status, ctype)
	}
	golden(t, "anthropic-stream.golden", body)

	evs := parseSSE(t, body)
	want := []string{"message_start", "ping",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
		"message_delta", "message_stop"}
	if got := names(evs); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	// The deltas of each block put together are its text or its input.
	inputs := map[float64]string{}
	for _, e := range evs {
		if e.name != "content_block_delta" {
			continue
		}
		d := e.data["delta"].(map[string]any)
		idx := e.data["index"].(float64)
		switch d["type"] {
		case "text_delta":
			inputs[idx] += d["text"].(string)
		case "input_json_delta":
			inputs[idx] += d["partial_json"].(string)
		default:
			t.Errorf("delta type %v", d["type"])
		}
	}
	if inputs[0] != "I will write the file now." {
		t.Errorf("text = %q", inputs[0])
	}
	var write, progress map[string]any
	if err := json.Unmarshal([]byte(inputs[1]), &write); err != nil || write["file_path"] != "/work/repo/notes/hello.txt" ||
		write["content"] != "hello\nworld\n" {
		t.Errorf("Write input %q (%v): want the path made absolute in the working directory", inputs[1], err)
	}
	if err := json.Unmarshal([]byte(inputs[2]), &progress); err != nil || progress["message"] != "wrote it" {
		t.Errorf("progress input %q (%v)", inputs[2], err)
	}
	if got := evs[10].data["content_block"].(map[string]any)["name"]; got != "mcp__agentqueued__progress" {
		t.Errorf("MCP tool name %v", got)
	}
	md := evs[14].data
	if md["delta"].(map[string]any)["stop_reason"] != "tool_use" || md["usage"].(map[string]any)["output_tokens"] != float64(10) {
		t.Errorf("message_delta %v", md)
	}
	reqs := s.Requests()
	if len(reqs) != 1 || reqs[0].API != Anthropic || reqs[0].Turn != 0 || reqs[0].Script != "edit" || !reqs[0].Stream ||
		!reqs[0].Offers("mcp__agentqueued__progress") {
		t.Errorf("recorded %+v", reqs)
	}
}

func TestAnthropicAnswerWithoutStreaming(t *testing.T) {
	t.Parallel()
	s := New(Options{})
	defer s.Close()
	s.Add(Script{Name: "done", Turns: []Turn{{Text: "Finished.", Usage: Usage{Input: 7, Output: 3, CacheRead: 2}}}})
	status, ctype, body := post(t, s, "/v1/messages", anthropicHeaders, anthropicConversation("hi", false, []string{"Write"}))
	if status != 200 || ctype != "application/json" {
		t.Fatalf("status %d, content type %q", status, ctype)
	}
	golden(t, "anthropic-message.golden", body)
}

func TestResponsesStreamWireFormat(t *testing.T) {
	t.Parallel()
	s := New(Options{})
	defer s.Close()
	s.Add(Script{Name: "edit", Match: "Task two", Turns: []Turn{
		{Text: "Writing the file.", Calls: []Call{Write("hello.txt", "hello\n"),
			MCP("agentqueued", "complete", map[string]any{"summary": "done"}), Shell("go test ./...")}},
	}})
	// The MCP tool was found by an earlier tool search, as Codex defers them.
	input := []map[string]any{
		{"type": "message", "role": "developer", "content": []map[string]any{{"type": "input_text", "text": "You are Codex."}}},
		{"type": "message", "role": "user", "content": []map[string]any{{"type": "input_text", "text": "# Task two"}}},
		{"type": "tool_search_call", "call_id": "call_wait_1", "execution": "client", "arguments": map[string]any{"query": "complete"}},
		{"type": "tool_search_output", "call_id": "call_wait_1", "execution": "client", "tools": []map[string]any{
			{"type": "namespace", "name": "mcp__agentqueued", "tools": []map[string]any{{"type": "function", "name": "complete"}}}}},
	}
	body := map[string]any{"model": "gpt-5.5", "stream": true, "input": input, "tools": []map[string]any{
		{"type": "function", "name": "exec_command"}, {"type": "custom", "name": "apply_patch"},
		{"type": "tool_search", "execution": "client"}}}
	status, ctype, out := post(t, s, "/v1/responses", map[string]string{"Authorization": "Bearer k"}, body)
	if status != 200 || ctype != "text/event-stream" {
		t.Fatalf("status %d, content type %q", status, ctype)
	}
	golden(t, "responses-stream.golden", out)

	evs := parseSSE(t, out)
	if evs[0].name != "response.created" || evs[len(evs)-1].name != "response.completed" {
		t.Fatalf("events %v", names(evs))
	}
	for i, e := range evs {
		if e.data["sequence_number"] != float64(i) {
			t.Errorf("event %d (%s) has sequence_number %v", i, e.name, e.data["sequence_number"])
		}
	}
	var items []map[string]any
	for _, e := range evs {
		if e.name == "response.output_item.done" {
			items = append(items, e.data["item"].(map[string]any))
		}
	}
	if len(items) != 4 {
		t.Fatalf("%d items done, want 4", len(items))
	}
	if items[0]["type"] != "message" || items[0]["content"].([]any)[0].(map[string]any)["text"] != "Writing the file." {
		t.Errorf("message item %v", items[0])
	}
	if items[1]["type"] != "custom_tool_call" || items[1]["name"] != "apply_patch" ||
		items[1]["input"] != "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n" {
		t.Errorf("apply_patch item %v", items[1])
	}
	if items[2]["type"] != "function_call" || items[2]["namespace"] != "mcp__agentqueued" || items[2]["name"] != "complete" ||
		items[2]["arguments"] != `{"summary":"done"}` {
		t.Errorf("MCP item %v", items[2])
	}
	if items[3]["name"] != "exec_command" || items[3]["arguments"] != `{"cmd":"go test ./..."}` {
		t.Errorf("shell item %v", items[3])
	}
	usage := evs[len(evs)-1].data["response"].(map[string]any)["usage"].(map[string]any)
	if usage["input_tokens"] != float64(100) || usage["output_tokens"] != float64(10) {
		t.Errorf("usage %v", usage)
	}
	if r := s.Requests()[0]; r.API != OpenAI || r.Turn != 0 || !r.Offers("mcp__agentqueued.complete") {
		t.Errorf("recorded %+v", r)
	}
}

// TestTurnsFollowTheHistory checks that a conversation's answer is chosen
// by the model answers its history holds, that tool searches do not
// count, and that tool results are recorded.
func TestTurnsFollowTheHistory(t *testing.T) {
	t.Parallel()
	s := New(Options{})
	defer s.Close()
	s.Add(Script{Name: "three", Turns: []Turn{{Text: "one", Calls: []Call{Write("a", "a")}}, {Text: "two", Calls: []Call{Write("b", "b")}}, {Text: "three"}}})
	use := func(id string) map[string]any {
		return map[string]any{"role": "assistant", "content": []map[string]any{{"type": "tool_use", "id": id, "name": "Write", "input": map[string]any{}}}}
	}
	result := func(id, text string, isErr bool) map[string]any {
		return map[string]any{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": id, "content": text, "is_error": isErr}}}
	}
	tests := []struct {
		name    string
		history []map[string]any
		turn    int
		text    string
		results []ToolResult
	}{
		{"first", nil, 0, "one", nil},
		{"second", []map[string]any{use(callPrefix + "1"), result(callPrefix+"1", "File created", false)}, 1, "two",
			[]ToolResult{{CallID: callPrefix + "1", Content: "File created"}}},
		{"searches left out", []map[string]any{use(callPrefix + "1"), result(callPrefix+"1", "ok", false), use(searchPrefix + "7"),
			result(searchPrefix+"7", "Tool loaded.", false), use(callPrefix + "2"), result(callPrefix+"2", "ok", false)}, 2, "three",
			[]ToolResult{{CallID: callPrefix + "1", Content: "ok"}, {CallID: searchPrefix + "7", Content: "Tool loaded."},
				{CallID: callPrefix + "2", Content: "ok"}}},
		// Claude Code fills a turn that failed (a 429) with a text of its
		// own when it resumes the session: not an answer of the model.
		{"the CLI's own text left out", []map[string]any{use(callPrefix + "1"), result(callPrefix+"1", "ok", false),
			{"role": "assistant", "content": []map[string]any{{"type": "text", "text": "No response requested."}}},
			{"role": "user", "content": "go on"}}, 1, "two", []ToolResult{{CallID: callPrefix + "1", Content: "ok"}}},
		// A call that failed is an answer given: the model goes on.
		{"a failed call counts", []map[string]any{use(callPrefix + "1"), result(callPrefix+"1", `MCP server "s" tool "ask" timed out after 2s`, true)},
			1, "two", []ToolResult{{CallID: callPrefix + "1", Content: `MCP server "s" tool "ask" timed out after 2s`, IsError: true}}},
		// A call the CLI's process died in comes back, on resuming the
		// session, with Claude Code's note that its outcome is unknown:
		// the model makes it again.
		{"an interrupted call is made again", []map[string]any{use(callPrefix + "1"), result(callPrefix+"1", "ok", false),
			use(callPrefix + "2"), result(callPrefix+"2", interruptedNote, true),
			{"role": "assistant", "content": []map[string]any{{"type": "text", "text": "No response requested."}}},
			{"role": "user", "content": "go on"}}, 1, "two",
			[]ToolResult{{CallID: callPrefix + "1", Content: "ok"}, {CallID: callPrefix + "2", Content: interruptedNote, IsError: true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, body := post(t, s, "/v1/messages", anthropicHeaders, anthropicConversation("go", false, []string{"Write"}, tc.history...))
			var msg struct {
				Content []struct{ Text string } `json:"content"`
			}
			if err := json.Unmarshal(body, &msg); err != nil || len(msg.Content) == 0 || msg.Content[0].Text != tc.text {
				t.Fatalf("answer %s (%v), want %q", body, err, tc.text)
			}
			reqs := s.Requests()
			r := reqs[len(reqs)-1]
			if r.Turn != tc.turn || !slices.Equal(r.ToolResults, tc.results) {
				t.Errorf("recorded turn %d, results %+v; want %d, %+v", r.Turn, r.ToolResults, tc.turn, tc.results)
			}
		})
	}
}

// TestResponsesTurnsFollowTheHistory is TestTurnsFollowTheHistory for the
// Responses API: consecutive output items are one answer.
func TestResponsesTurnsFollowTheHistory(t *testing.T) {
	t.Parallel()
	s := New(Options{})
	defer s.Close()
	s.Add(Script{Name: "two", Turns: []Turn{{Text: "one", Calls: []Call{Write("a", "a")}}, {Text: "two"}}})
	input := []map[string]any{
		{"type": "message", "role": "user", "content": []map[string]any{{"type": "input_text", "text": "go"}}},
		{"type": "reasoning", "summary": []any{}},
		{"type": "message", "role": "assistant", "content": []map[string]any{{"type": "output_text", "text": "one"}}},
		{"type": "custom_tool_call", "call_id": openaiCallPrefix + "1", "name": "apply_patch", "input": "..."},
		{"type": "custom_tool_call_output", "call_id": openaiCallPrefix + "1", "output": "Success. Updated the following files:\nA a\n"},
	}
	_, _, body := post(t, s, "/v1/responses", nil, map[string]any{"model": "gpt-5.5", "input": input,
		"tools": []map[string]any{{"type": "custom", "name": "apply_patch"}}})
	if !strings.Contains(string(body), `"text":"two"`) {
		t.Fatalf("answer %s, want turn two", body)
	}
	r := s.Requests()[0]
	if r.Turn != 1 || len(r.ToolResults) != 1 || r.ToolResults[0].Content != "Success. Updated the following files:\nA a\n" {
		t.Errorf("recorded %+v", r)
	}
}

func TestErrorsComeBeforeTheAnswer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		api  API
		path string
		body map[string]any
		want string // the error body
	}{
		{Anthropic, "/v1/messages", anthropicConversation("go", false, []string{"Write"}),
			`{"error":{"message":"Rate limit exceeded: too many requests, please try again later","type":"rate_limit_error"},"type":"error"}`},
		{OpenAI, "/v1/responses", map[string]any{"model": "gpt-5.5", "input": "go", "tools": []map[string]any{{"type": "function", "name": "exec_command"}}},
			`{"error":{"code":"rate_limit_exceeded","message":"Rate limit exceeded: too many requests, please try again later","param":null,"type":"requests"}}`},
	}
	for _, tc := range tests {
		t.Run(string(tc.api), func(t *testing.T) {
			t.Parallel()
			s := New(Options{})
			defer s.Close()
			s.Add(Script{Name: "limited", Turns: []Turn{{Text: "at last", Error: RateLimit(2)}}})
			for i := range 2 {
				status, _, body := post(t, s, tc.path, anthropicHeaders, tc.body)
				if status != 429 || strings.TrimSpace(string(body)) != tc.want {
					t.Fatalf("request %d: %d %s", i+1, status, body)
				}
			}
			if status, _, body := post(t, s, tc.path, anthropicHeaders, tc.body); status != 200 || !strings.Contains(string(body), "at last") {
				t.Fatalf("third request: %d %s", status, body)
			}
		})
	}
}

// claudeDeferred is a Messages API request as Claude Code 2.1.332 sends
// it: MCP tools deferred behind ToolSearch, named in a system message with
// the working directory, the DeferredToolPlaceholder among the tools, and
// a history.
func claudeDeferred(tools []map[string]any, history ...map[string]any) map[string]any {
	msgs := []map[string]any{
		{"role": "user", "content": []map[string]any{{"type": "text", "text": "# Task three"}}},
		{"role": "system", "content": "# Environment\n - Primary working directory: /work/repo\n\n" +
			"The following deferred tools are now available via ToolSearch. Their schemas are NOT loaded:\nWebFetch\n" +
			"mcp__agentqueued__ask\nmcp__agentqueued__progress\n\n# MCP Server Instructions\n"},
	}
	return map[string]any{"model": "claude-opus-5-5", "max_tokens": 32000, "tools": tools, "messages": append(msgs, history...)}
}

// TestDeferredToolsAreSearchedFirst: a turn calling a deferred tool gets a
// search that loads it first (Claude: ToolSearch select:<names>; Codex: a
// tool_search_call), which is no turn; once loaded, the turn is answered.
func TestDeferredToolsAreSearchedFirst(t *testing.T) {
	t.Parallel()
	s := New(Options{})
	defer s.Close()
	s.Add(Script{Name: "mcp", Turns: []Turn{{Calls: []Call{Write("a.txt", "a"), MCP("agentqueued", "progress", map[string]any{"message": "hi"})}}}})
	base := []map[string]any{{"name": "Write"}, {"name": "ToolSearch"}, {"name": "DeferredToolPlaceholder", "defer_loading": true}}

	_, _, body := post(t, s, "/v1/messages", anthropicHeaders, claudeDeferred(base))
	if !strings.Contains(string(body), `"name":"ToolSearch"`) || !strings.Contains(string(body), `"id":"`+searchPrefix) ||
		!strings.Contains(string(body), `"input":{"query":"select:mcp__agentqueued__progress"}`) {
		t.Fatalf("Claude's search: %s", body)
	}
	r := s.Requests()[0]
	if r.Turn != 0 || r.Offers("mcp__agentqueued__progress") || !slices.Contains(r.Deferred, "mcp__agentqueued__progress") {
		t.Errorf("recorded %+v", r)
	}
	// Claude Code answers with a tool_reference and adds the tool,
	// deferred, to the tools of the next request.
	loaded := append(slices.Clone(base), map[string]any{"name": "mcp__agentqueued__progress", "defer_loading": true})
	history := []map[string]any{
		{"role": "assistant", "content": []map[string]any{{"type": "tool_use", "id": searchPrefix + "1", "name": "ToolSearch",
			"input": map[string]any{"query": "select:mcp__agentqueued__progress"}}}},
		{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": searchPrefix + "1",
			"content": []map[string]any{{"type": "tool_reference", "tool_name": "mcp__agentqueued__progress"}}}, {"type": "text", "text": "Tool loaded."}}},
	}
	_, _, body = post(t, s, "/v1/messages", anthropicHeaders, claudeDeferred(loaded, history...))
	if !strings.Contains(string(body), `"name":"mcp__agentqueued__progress"`) || !strings.Contains(string(body), `"file_path":"/work/repo/a.txt"`) {
		t.Fatalf("Claude's turn after the search: %s (want the working directory of the system message)", body)
	}
	if r := s.Requests()[1]; r.Turn != 0 || !r.Offers("mcp__agentqueued__progress") {
		t.Errorf("recorded %+v", r)
	}

	_, _, body = post(t, s, "/v1/responses", nil, map[string]any{"model": "gpt-5.5", "input": "go",
		"tools": []map[string]any{{"type": "custom", "name": "apply_patch"}, {"type": "tool_search", "execution": "client"}}})
	if !strings.Contains(string(body), `"type":"tool_search_call"`) || !strings.Contains(string(body), `"execution":"client"`) ||
		!strings.Contains(string(body), `"call_id":"`+openaiSearchPrefix) {
		t.Fatalf("Codex's search: %s", body)
	}
	if un := s.Unscripted(); len(un) > 0 {
		t.Errorf("Unscripted = %q", un)
	}
}

// TestToolsNotOfferedFailAtOnce: the server never waits for a tool: a
// turn calling one the request neither offers nor can load (not deferred,
// searched for in vain, or a model that does not search) ends the
// conversation with a text naming it, and Unscripted says why.
func TestToolsNotOfferedFailAtOnce(t *testing.T) {
	t.Parallel()
	searchedOnce := []map[string]any{
		{"role": "assistant", "content": []map[string]any{{"type": "tool_use", "id": searchPrefix + "1", "name": "ToolSearch",
			"input": map[string]any{"query": "select:mcp__agentqueued__progress"}}}},
		{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": searchPrefix + "1", "content": "No matching deferred tools found"}}},
	}
	withSearch := []map[string]any{{"name": "Write"}, {"name": "ToolSearch"}}
	tests := []struct {
		name string
		opts Options
		path string
		body map[string]any
		want string
	}{
		{"claude: not deferred", Options{}, "/v1/messages", anthropicConversation("go", false, []string{"Write", "ToolSearch"}),
			"mcp__agentqueued__progress (neither offered nor deferred)"},
		{"claude: searched in vain", Options{}, "/v1/messages", claudeDeferred(withSearch, searchedOnce...),
			"mcp__agentqueued__progress (searched for, but the CLI did not load it)"},
		{"claude: a model that does not search", Options{NoToolSearch: true}, "/v1/messages", claudeDeferred(withSearch),
			"mcp__agentqueued__progress (deferred: this model does not search for tools)"},
		{"codex: no tool search", Options{}, "/v1/responses", map[string]any{"model": "gpt-5.5", "input": "go",
			"tools": []map[string]any{{"type": "function", "name": "exec_command"}}}, "agentqueued progress (neither offered nor deferred)"},
		{"codex: a model that does not search", Options{NoToolSearch: true}, "/v1/responses", map[string]any{"model": "gpt-5.5", "input": "go",
			"tools": []map[string]any{{"type": "tool_search", "execution": "client"}}}, "agentqueued progress (deferred: this model does not search for tools)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := New(tc.opts)
			defer s.Close()
			s.Add(Script{Name: "mcp", Turns: []Turn{{Calls: []Call{MCP("agentqueued", "progress", map[string]any{"message": "hi"})}}}})
			status, _, body := post(t, s, tc.path, anthropicHeaders, tc.body)
			if status != 200 || !strings.Contains(string(body), "modeltest: script") || strings.Contains(string(body), `"tool_use"`) ||
				strings.Contains(string(body), "function_call") {
				t.Fatalf("answer %d %s: want a closing text, no call", status, body)
			}
			un := s.Unscripted()
			if len(un) != 1 || !strings.Contains(un[0], `script "mcp" turn 0 calls `+tc.want) {
				t.Errorf("Unscripted = %q, want %q", un, tc.want)
			}
		})
	}
}

func TestRequestsNoScriptAnswers(t *testing.T) {
	t.Parallel()
	s := New(Options{})
	defer s.Close()
	s.Add(Script{Name: "short", Match: "# Task", Turns: []Turn{{Text: "only"}}})
	s.answered("only") // as if the first request had been answered
	tests := []struct {
		name, method, path string
		body               any
		status             int
		want               string
	}{
		{"side request without tools", http.MethodPost, "/v1/messages", anthropicConversation("Summarise # Task", false, nil), 200, `"text":"OK"`},
		{"no script matches", http.MethodPost, "/v1/messages", anthropicConversation("other", false, []string{"Write"}), 200, "nothing scripted"},
		{"past the last turn", http.MethodPost, "/v1/messages", anthropicConversation("# Task", false, []string{"Write"},
			map[string]any{"role": "assistant", "content": "only"}, map[string]any{"role": "user", "content": "more"}), 200, "nothing scripted"},
		{"token count", http.MethodPost, "/v1/messages/count_tokens", map[string]any{"messages": []any{}}, 200, `"input_tokens":`},
		{"Anthropic models", http.MethodGet, "/v1/models", nil, 200, `"type":"model"`},
		{"unknown path", http.MethodPost, "/v1/other", map[string]any{}, 404, `"not_found_error"`},
	}
	for _, tc := range tests {
		b, _ := json.Marshal(tc.body)
		req, _ := http.NewRequest(tc.method, s.URL()+tc.path, bytes.NewReader(b))
		req.Header.Set("anthropic-version", "2023-06-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: %d %s, want %d with %s", tc.name, resp.StatusCode, out, tc.status, tc.want)
		}
	}
	un := s.Unscripted()
	if len(un) != 2 || !strings.Contains(un[0], "no script matches") || !strings.Contains(un[1], `script "short" has no turn 1`) {
		t.Errorf("Unscripted = %q", un)
	}
}
