package modeltest

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Script answers the model requests of the conversations it matches.
type Script struct {
	// Name identifies the script in logs and in Unscripted.
	Name string
	// Match selects the conversations the script answers: a request is
	// the script's when the text of its user messages (not tool results)
	// contains Match. Empty matches every conversation.
	Match string
	// Turns answer the conversation's model requests by position: a
	// request whose history holds n model answers gets Turns[n].
	Turns []Turn
}

// Turn is one answer of the model: text, tool calls, or an API error.
type Turn struct {
	// Text is the assistant text, sent before the calls.
	Text string
	// Calls are the tool calls of the answer, in order. With calls the
	// answer stops for tool use; without, it ends the turn.
	Calls []Call
	// Error, when set, answers the turn's first Error.Times requests with
	// an API error instead; the requests after them get the answer.
	Error *Error
	// Usage is the answer's token usage; zero means a small default.
	Usage Usage
}

// Error is an API error answer.
type Error struct {
	// Status is the HTTP status, e.g. 429.
	Status int
	// Message is the error's message.
	Message string
	// Times is how many requests get the error (0 means 1).
	Times int
	// RetryAfter, when set, is sent as the retry-after header (seconds).
	RetryAfter string
}

// RateLimit is a 429 answer to times requests.
func RateLimit(times int) *Error {
	return &Error{Status: 429, Message: "Rate limit exceeded: too many requests, please try again later", Times: times}
}

// Usage is the token usage an answer reports.
type Usage struct {
	Input, Output, CacheRead, CacheWrite int
}

// CallKind is what a Call does.
type CallKind string

// Call kinds. The server maps each to the tool the CLI offers for it.
const (
	// KindWrite writes a file: Claude's Write tool (the path made
	// absolute against the conversation's working directory) or Codex's
	// apply_patch (an Add File patch).
	KindWrite CallKind = "write"
	// KindRead reads a file: Claude's Read tool (the path made absolute
	// like KindWrite's), Codex's exec_command running cat.
	KindRead CallKind = "read"
	// KindMCP calls a tool of an MCP server: Claude's mcp__<server>__<tool>
	// or the name Codex offers for it.
	KindMCP CallKind = "mcp"
	// KindShell runs a shell command: Claude's Bash, Codex's shell tool.
	KindShell CallKind = "shell"
	// KindRaw calls Name with Input exactly as given.
	KindRaw CallKind = "raw"
)

// Call is one tool call of a Turn. Build it with Write, Read, MCP, Shell or
// Tool.
type Call struct {
	Kind CallKind
	// Path and Content are the file of KindWrite (Path alone that of
	// KindRead), relative to the working directory.
	Path, Content string
	// Server and Tool name the MCP tool of KindMCP; Args are its arguments.
	Server, Tool string
	Args         map[string]any
	// Command is the shell command of KindShell.
	Command string
	// Name and Input are the tool and its input of KindRaw: a JSON value
	// for a function tool, a string for a freeform (custom) tool.
	Name  string
	Input any
}

// Write writes content to path, relative to the working directory.
func Write(path, content string) Call { return Call{Kind: KindWrite, Path: path, Content: content} }

// Read reads path, relative to the working directory.
func Read(path string) Call { return Call{Kind: KindRead, Path: path} }

// MCP calls tool of MCP server with args.
func MCP(server, tool string, args map[string]any) Call {
	return Call{Kind: KindMCP, Server: server, Tool: tool, Args: args}
}

// Shell runs a shell command.
func Shell(command string) Call { return Call{Kind: KindShell, Command: command} }

// Tool calls the tool name with input exactly as given.
func Tool(name string, input any) Call { return Call{Kind: KindRaw, Name: name, Input: input} }

// String describes the call for logs.
func (c Call) String() string {
	switch c.Kind {
	case KindWrite:
		return fmt.Sprintf("write %s", c.Path)
	case KindRead:
		return fmt.Sprintf("read %s", c.Path)
	case KindMCP:
		b, _ := json.Marshal(c.Args)
		return fmt.Sprintf("mcp %s.%s %s", c.Server, c.Tool, b)
	case KindShell:
		return "shell " + c.Command
	}
	return "tool " + c.Name
}

// addFilePatch is an apply_patch patch that creates path with content.
func addFilePatch(path, content string) string {
	var b strings.Builder
	b.WriteString("*** Begin Patch\n*** Add File: " + path + "\n")
	for _, l := range strings.SplitAfter(strings.TrimSuffix(content, "\n"), "\n") {
		b.WriteString("+" + strings.TrimSuffix(l, "\n") + "\n")
	}
	b.WriteString("*** End Patch\n")
	return b.String()
}
