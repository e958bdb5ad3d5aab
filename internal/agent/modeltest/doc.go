// Package modeltest is a fake model server for tests that run the real
// Claude Code and Codex CLIs: it speaks the Anthropic Messages API and the
// OpenAI Responses API on 127.0.0.1, streamed as the real services stream
// them, and answers from scripts.
//
//	srv := modeltest.New(modeltest.Options{Logf: t.Logf})
//	t.Cleanup(srv.Close)
//	srv.Add(modeltest.Script{Name: "edit", Match: "Add a greeting", Turns: []modeltest.Turn{
//		{Text: "Writing it.", Calls: []modeltest.Call{modeltest.Write("hello.txt", "hello\n")}},
//		{Calls: []modeltest.Call{modeltest.MCP("agentqueued", "complete", map[string]any{"summary": "wrote hello.txt"})}},
//		{Text: "Done."},
//	}})
//
// Claude Code reaches it with ANTHROPIC_BASE_URL=srv.URL() and any
// ANTHROPIC_API_KEY; Codex with a provider whose base_url is
// srv.URL()+"/v1" and wire_api = "responses" (see the clitest package).
//
// # Scripts and turns
//
// A request belongs to the first script, in the order added, whose Match
// occurs in the text of the request's user messages (tool results left
// out). Its answer is chosen by the conversation's history, not by the
// order of arrival: a request whose history already holds n answers of the
// model gets Turns[n]. A retried request therefore gets the same turn, a
// resumed session goes on where it stopped, and several conversations of
// one script (two attempts, two tasks) each follow it from their own
// position. Only the server's own answers count — its tool call ids and
// the texts it answered: Claude Code fills the turn a 429 ended with a
// text of its own ("No response requested.") when it resumes the session.
// An answer whose tool call never reached a result does not count either:
// when a session resumes after its CLI was killed during a call (the
// daemon ends a run that gave up on an ask), Claude Code gives that call
// an error result of its own, "[Tool call interrupted: … its outcome is
// unknown. Check whether it took effect before relying on it or running
// it again.]", and the server makes the call again, as a model told so
// does, instead of going on as though it had run.
// A Turn answers text and/or tool calls: Write (Claude's Write tool with
// the path made absolute in the working directory its system prompt
// names; Codex's apply_patch), Read (Claude's Read; Codex's exec_command
// running cat), MCP (Claude's mcp__<server>__<tool>;
// Codex's function in the mcp__<server> namespace), Shell (Claude's Bash;
// Codex's exec_command) or Tool (any tool, input as given). A turn with
// calls stops for tool use; one without ends the model's turn. A turn with
// an Error answers its first Error.Times requests with that API error (429
// builds a rate limit) and the later ones normally.
//
// A model does not call a tool it is not offered, and the server does not
// either. Both CLIs defer MCP tools: Claude Code 2.1.332 names them in a
// system message and loads one when the model calls ToolSearch with
// "select:<names>" (the tool_result holds a tool_reference; the tool is
// then among the request's tools, defer_loading set); Codex offers them
// once a tool_search_call found them. When a turn calls a deferred tool,
// the server first answers that search, as a model does; searches do not
// count as turns (their call ids say so). A turn calling a tool the
// request neither offers nor can load — not deferred, searched for in
// vain, or deferred while Options.NoToolSearch makes the model one that
// never searches — is never waited for: the conversation gets a closing
// text naming the tool, and Unscripted says why, so that a test fails at
// once with that message.
//
// Requests without tools (a title, a summary, a probe) are not the agent's
// conversation: they get a short text answer and consume no turn. A
// conversation no script matches, or one past its script's last turn,
// gets a short text answer too and is listed by Unscripted, which a test
// asserts empty.
//
// # Other endpoints
//
// POST /v1/messages/count_tokens answers a count, GET /v1/models a model
// list in the asking API's shape, HEAD / (a reachability probe) 200, and
// anything else a 404 in the API's error shape. Every request is recorded
// (Requests: path, headers, body, tools offered, user text, tool results,
// the turn and script that answered) and reported to Options.OnRequest.
//
// # Wire format
//
// Messages API, stream: true: message_start (usage with input and cache
// tokens), ping, then per content block content_block_start,
// content_block_delta (text_delta, or input_json_delta for tool_use, each
// in two pieces) and content_block_stop, then message_delta with
// stop_reason and usage, and message_stop. Without stream, one message
// object. Errors: {"type":"error","error":{"type":"rate_limit_error",…}}.
//
// Responses API, stream: true: response.created, response.in_progress,
// then per output item response.output_item.added, its deltas
// (response.content_part.added / output_text.delta / output_text.done /
// content_part.done for a message, function_call_arguments.delta / done,
// custom_tool_call_input.delta / done) and response.output_item.done, and
// response.completed with the usage; every event carries a
// sequence_number. Errors: {"error":{"message","type","param","code"}},
// code rate_limit_exceeded for 429. testdata/ holds golden streams.
package modeltest
