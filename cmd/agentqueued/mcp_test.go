package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// mcpSession connects an MCP client to newMCPServer over in-memory
// transports, for the run whose AQ_* environment is env.
func mcpSession(t *testing.T, env map[string]string) *mcp.ClientSession {
	t.Helper()
	rpc, err := api.NewRPCClient(env[api.EnvSocket], env[api.EnvTaskID], env[api.EnvRunToken])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rpc.CloseIdleConnections)
	ctx := context.Background()
	serverT, clientT := mcp.NewInMemoryTransports()
	ss, err := newMCPServer(rpc).Connect(ctx, serverT, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "v0"}, nil).Connect(ctx, clientT, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

// callTool calls a tool and returns its text and whether it is a tool error.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	var texts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	return strings.Join(texts, "\n"), res.IsError
}

func TestMCPTools(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	env := e.startRun("Build the thing")
	task := env[api.EnvTaskID]
	cs := mcpSession(t, env)
	ctx := context.Background()

	if ins := cs.InitializeResult().Instructions; !strings.Contains(ins, "complete") || !strings.Contains(ins, "ask") {
		t.Errorf("instructions = %q", ins)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	byName := map[string]*mcp.Tool{}
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		byName[tool.Name] = tool
		schema, ok := tool.InputSchema.(map[string]any)
		if !ok || schema["type"] != "object" {
			t.Errorf("tool %s: input schema %v is not an object schema", tool.Name, tool.InputSchema)
		}
		if tool.Description == "" {
			t.Errorf("tool %s has no description", tool.Name)
		}
	}
	slices.Sort(names)
	want := slices.Clone(api.RPCTools)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("tools = %v, want %v", names, want)
	}
	if !strings.Contains(byName["ask"].Description, "Use only when you cannot proceed without a decision") {
		t.Errorf("ask description = %q", byName["ask"].Description)
	}
	schemaJSON, _ := json.Marshal(byName["progress"].InputSchema)
	for _, prop := range []string{`"message":`, `"succeeded":`, `"failed":`} {
		if !strings.Contains(string(schemaJSON), prop) {
			t.Errorf("progress schema = %s, want %s", schemaJSON, prop)
		}
	}
	schemaJSON, _ = json.Marshal(byName["rate_limited"].InputSchema)
	if !strings.Contains(string(schemaJSON), `"enum":["rate_limit","tokens"]`) {
		t.Errorf("rate_limited schema = %s, want kind's values", schemaJSON)
	}

	if text, isErr := callTool(t, cs, "heartbeat", map[string]any{}); isErr || text != "ok" {
		t.Errorf("heartbeat = %q, error %v", text, isErr)
	}
	if text, isErr := callTool(t, cs, "progress", map[string]any{"message": "schema drafted"}); isErr {
		t.Errorf("progress failed: %s", text)
	}
	e.svc.mu.Lock()
	if len(e.svc.progress) != 1 || e.svc.progress[0] != "schema drafted" || e.svc.heartbeats != 1 {
		t.Errorf("service saw progress %q, %d heartbeat(s)", e.svc.progress, e.svc.heartbeats)
	}
	e.svc.mu.Unlock()

	// Refusals are tool errors carrying the message: the schema's, then the daemon's.
	if text, isErr := callTool(t, cs, "progress", map[string]any{}); !isErr || !strings.Contains(text, "message") {
		t.Errorf("progress without a message = %q, error %v", text, isErr)
	}
	if text, isErr := callTool(t, cs, "ask", map[string]any{"question": "  "}); !isErr || text != "question: required" {
		t.Errorf("blank question = %q, error %v", text, isErr)
	}
	if text, isErr := callTool(t, cs, "usage", map[string]any{"input_tokens": 5, "output_tokens": -1}); !isErr ||
		text != "output_tokens: must not be negative (got -1)" {
		t.Errorf("negative usage = %q, error %v", text, isErr)
	}
	if text, isErr := callTool(t, cs, "usage", map[string]any{"input_tokens": 5, "output_tokens": 2}); isErr {
		t.Errorf("usage failed: %s", text)
	}

	text, isErr := callTool(t, cs, "propose_plan", map[string]any{"tasks": []map[string]any{
		{"id": "a", "title": "First part", "verification_type": "AUTO_TEST", "test_commands": []string{"go test ./..."}},
		{"id": "b", "title": "Second part", "depends_on": []string{"a"}},
	}})
	if isErr || !strings.Contains(text, "a -> task ") || !strings.Contains(text, "(DEFINED)") {
		t.Fatalf("propose_plan = %q, error %v", text, isErr)
	}
	if text, isErr := callTool(t, cs, "propose_plan", map[string]any{"tasks": []map[string]any{
		{"title": "x", "verification_type": "LOOKS_FINE"}}}); !isErr || !strings.Contains(text, "verification_type") {
		t.Errorf("plan with a bad verification type = %q, error %v", text, isErr)
	}

	answered := make(chan string, 1)
	go func() {
		text, _ := callTool(t, cs, "ask", map[string]any{"question": "Postgres or SQLite?"})
		answered <- text
	}()
	select {
	case p := <-e.svc.asks:
		p.answer <- "SQLite, please."
	case <-time.After(waitLimit):
		t.Fatal("the service was never asked")
	}
	if got := <-answered; got != "SQLite, please." {
		t.Errorf("ask = %q", got)
	}

	text, isErr = callTool(t, cs, "complete", map[string]any{"summary": "Built it", "files_changed": []string{"main.go"},
		"outputs": map[string]any{"port": 8080}})
	if isErr || !strings.Contains(text, "Stop working") {
		t.Fatalf("complete = %q, error %v", text, isErr)
	}
	if st := e.status(task); st != models.StatusVerifying {
		t.Errorf("task after complete = %s, want VERIFYING", st)
	}
	e.svc.mu.Lock()
	if len(e.svc.completions) != 1 || e.svc.completions[0].Summary != "Built it" || string(e.svc.completions[0].Outputs) != `{"port":8080}` {
		t.Errorf("service saw %+v", e.svc.completions)
	}
	e.svc.mu.Unlock()
	if text, isErr := callTool(t, cs, "progress", map[string]any{"message": "one more thing"}); !isErr ||
		text != "the run of this token has ended" {
		t.Errorf("progress after complete = %q, error %v", text, isErr)
	}
}

func TestMCPRateLimited(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	env := e.startRun("Throttled")
	cs := mcpSession(t, env)
	if text, isErr := callTool(t, cs, "rate_limited", map[string]any{"kind": "sometimes"}); !isErr || !strings.Contains(text, "kind") {
		t.Errorf("bad kind = %q, error %v", text, isErr)
	}
	if text, isErr := callTool(t, cs, "rate_limited", map[string]any{"reset_at": "soon"}); !isErr || !strings.Contains(text, "RFC 3339") {
		t.Errorf("bad reset_at = %q, error %v", text, isErr)
	}
	before := time.Now()
	if text, isErr := callTool(t, cs, "rate_limited", map[string]any{"reset_in_seconds": 600, "message": "429"}); isErr {
		t.Fatalf("rate_limited failed: %s", text)
	}
	task, err := e.st.GetTask(context.Background(), env[api.EnvTaskID])
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != models.StatusPaused || task.ResumeAfter == nil || task.ResumeAfter.Before(before.Add(9*time.Minute)) {
		t.Errorf("task = %s until %v, want PAUSED for about 10 minutes", task.Status, task.ResumeAfter)
	}
}

// TestMCPCommand runs "agentqueued mcp" through Main with pipes for its
// standard input and output.
func TestMCPCommand(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	env := e.startRun("Piped")

	stdinW, stdoutR, stderr, done := pipeMCP(env)
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "v0"}, nil).
		Connect(ctx, &mcp.IOTransport{Reader: stdoutR, Writer: stdinW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if text, isErr := callTool(t, cs, "progress", map[string]any{"message": "through the pipe"}); isErr {
		t.Errorf("progress failed: %s", text)
	}
	cs.Close() // closes the server's standard input
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("mcp exit %d, stderr %q", code, stderr.String())
		}
	case <-time.After(waitLimit):
		t.Fatal("mcp did not stop when its input closed")
	}
	e.svc.mu.Lock()
	defer e.svc.mu.Unlock()
	if len(e.svc.progress) != 1 || e.svc.progress[0] != "through the pipe" {
		t.Errorf("service saw %q", e.svc.progress)
	}
}

func TestMCPCommandNeedsRunEnvironment(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	code := NewMain([]string{"mcp"}, &stdout, &stderr, envOf(nil)).Exec(withStdin(context.Background(), strings.NewReader("")))
	if code != 2 || !strings.Contains(stderr.String(), "AQ_SOCKET, AQ_TASK_ID, AQ_RUN_TOKEN are not set") {
		t.Errorf("mcp without a run = exit %d, stderr %q", code, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("mcp wrote %q to its protocol channel", stdout.String())
	}
}

// TestNoChangesReachTheDaemon: an agent says it finished without changing
// anything through the complete tool's no_changes and through `agent
// complete --no-changes`; its description says what the flag is for.
func TestNoChangesReachTheDaemon(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	cs := mcpSession(t, e.startRun("Check the docs"))
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name == "complete" && !strings.Contains(tool.Description, "no_changes") {
			t.Errorf("complete's description does not name no_changes: %q", tool.Description)
		}
	}
	if text, isErr := callTool(t, cs, "complete", map[string]any{"summary": "The docs are right", "no_changes": true}); isErr {
		t.Fatalf("complete: %s", text)
	}
	wantExit(t, runAgentCmd(e.startRun("Check the links"), "", "complete", "--no-changes", "links", "fine"), 0, "")
	wantExit(t, runAgentCmd(e.startRun("Fix the links"), "", "complete", "fixed"), 0, "")
	e.svc.mu.Lock()
	defer e.svc.mu.Unlock()
	var got []bool
	for _, c := range e.svc.completions {
		got = append(got, c.NoChanges)
	}
	if !slices.Equal(got, []bool{true, true, false}) {
		t.Fatalf("no_changes as the daemon saw them: %v (%+v)", got, e.svc.completions)
	}
}

// TestMCPAnswersMalformedFrames: a malformed JSON-RPC frame ended
// "agentqueued mcp" (the SDK's stdio transport stops at the first one);
// it is answered with a -32700 parse error and the server keeps serving.
func TestMCPAnswersMalformedFrames(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	env := e.startRun("Malformed")

	stdinW, stdoutR, stderr, done := pipeMCP(env)
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdoutR)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	send := func(frame string) {
		t.Helper()
		if _, err := io.WriteString(stdinW, frame+"\n"); err != nil {
			t.Fatalf("write %q: %v", frame, err)
		}
	}
	type answer struct {
		ID    json.RawMessage `json:"id"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Result json.RawMessage `json:"result"`
	}
	next := func() answer {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("mcp ended its output; stderr %q", stderr.String())
			}
			var a answer
			if err := json.Unmarshal([]byte(l), &a); err != nil {
				t.Fatalf("answer %q: %v", l, err)
			}
			return a
		case <-time.After(waitLimit):
			t.Fatal("no answer from mcp")
		}
		return answer{}
	}

	for i, bad := range []string{`{"jsonrpc":"2.0","id":1,"method":`, `not json`, `{"jsonrpc":"2.0"} trailing`} {
		send(bad)
		a := next()
		if a.Error == nil || a.Error.Code != -32700 || string(a.ID) != "null" || !strings.Contains(a.Error.Message, "Parse error") {
			t.Fatalf("frame %d %q: answer %+v", i, bad, a)
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},` +
		`"clientInfo":{"name":"raw","version":"v0"}}}`)
	if a := next(); a.Error != nil || string(a.ID) != "1" || len(a.Result) == 0 {
		t.Fatalf("initialize after malformed frames: %+v", a)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if a := next(); a.Error != nil || string(a.ID) != "2" {
		t.Fatalf("ping: %+v", a)
	}
	stdinW.Close()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("mcp exit %d, stderr %q", code, stderr.String())
		}
	case <-time.After(waitLimit):
		t.Fatal("mcp did not stop when its input closed")
	}
}

// pipeMCP runs "agentqueued mcp" through Main in the environment env, with
// pipes for its standard input and output; done receives its exit code.
func pipeMCP(env map[string]string) (stdin *io.PipeWriter, stdout *io.PipeReader, stderr *syncBuffer, done chan int) {
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	stderr, done = &syncBuffer{}, make(chan int, 1)
	go func() {
		code := NewMain([]string{"mcp"}, stdoutW, stderr, envOf(env)).Exec(withStdin(context.Background(), stdinR))
		stdoutW.Close()
		done <- code
	}()
	return stdinW, stdoutR, stderr, done
}
