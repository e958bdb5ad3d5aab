package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Cursor runs Cursor's CLI agent in print mode with stream-json output:
//
//	cursor-agent -p --output-format stream-json [--model M]
//	  [--force | --mode plan|ask] [--resume ID] --trust [agent args…]
//
// The prompt goes to standard input. Permission mode "force" (or
// "bypassPermissions" and "danger-full-access", translated) adds --force;
// "plan" and "ask" (and "read-only", as plan) select Cursor's read-only
// modes; "default" or none keeps Cursor's default (commands outside its
// allowlist are rejected); any other mode is refused
// (models.PermissionModeFor).
//
// MCP servers are not passed: cursor-agent reads them only from
// <workspace>/.cursor/mcp.json or ~/.cursor/mcp.json, and agentqueued writes
// neither the checkout nor the user's home. A Cursor agent reports through
// the `agentqueued agent` commands instead (AQ_* are in its environment), and
// its result is read from the stream. --approve-mcps is therefore not given:
// it would approve servers agentqueued did not choose. Allowed tools and the
// system prompt suffix have no flag either (Cursor reads them from files in
// the workspace) and are ignored. Note that --model rewrites the default
// model in the user's ~/.cursor/cli-config.json; set CURSOR_CONFIG_DIR in the
// agent's env to keep that apart.
type Cursor struct{}

// Type returns "cursor".
func (Cursor) Type() string { return "cursor" }

// Invocation builds the cursor-agent command line.
func (Cursor) Invocation(rc RunContext) (Invocation, error) {
	p := rc.Profile
	argv := []string{command(rc, "cursor-agent"), "-p", "--output-format", "stream-json"}
	if p.Model != "" {
		if err := checkFlagValue("model", p.Model); err != nil {
			return Invocation{}, err
		}
		argv = append(argv, "--model", p.Model)
	}
	mode, err := models.PermissionModeFor("cursor", p.PermissionMode)
	if err != nil {
		return Invocation{}, fmt.Errorf("cursor: %s", models.ErrorMessageOf(err))
	}
	switch mode {
	case "force":
		argv = append(argv, "--force")
	case "plan", "ask":
		argv = append(argv, "--mode", mode)
	}
	if rc.SessionID != "" {
		if !validSessionID(rc.SessionID) {
			return Invocation{}, fmt.Errorf("cursor: session id %q cannot be resumed", rc.SessionID)
		}
		argv = append(argv, "--resume", rc.SessionID)
	}
	argv = append(argv, "--trust")
	return Invocation{Argv: append(argv, rc.Agent.Args...), Stdin: rc.Prompt}, nil
}

// NewParser reads cursor-agent's stream-json output.
func (Cursor) NewParser(rc RunContext) Parser {
	return &cursorParser{requested: rc.SessionID, now: time.Now}
}

// cursorParser is the state of one run's stream.
//
// Usage comes only from result.usage (camelCase, 2026.09 and later; older
// builds report none); cacheReadTokens and cacheWriteTokens are counted
// apart from inputTokens. Partial assistant deltas (timestamp_ms without
// model_call_id, with --stream-partial-output) are not messages. Cursor has
// no documented rate-limit output: an error result whose text reads like a
// limit is reported as one. A resumed run that exits 1 before its init line
// is marked SessionInvalid (there is no known wording for an unknown chat
// id; a signal or a stop does not count).
type cursorParser struct {
	requested string
	session   string
	sawInit   bool
	done      bool
	lastText  string
	usage     usageGate
	now       func() time.Time
}

// Line reads one line of cursor-agent's output.
func (p *cursorParser) Line(line []byte) []Event {
	var evs []Event
	for _, f := range objects(line) {
		if p.done {
			break
		}
		evs = append(evs, p.object(f)...)
	}
	return evs
}

func (p *cursorParser) object(f fields) []Event {
	switch f.str("type") {
	case "system":
		if f.str("subtype") == "init" {
			p.sawInit = true
			return p.sessionEvent(f.str("session_id"))
		}
	case "assistant":
		if f.has("timestamp_ms") && !f.has("model_call_id") {
			return nil // a partial delta
		}
		var evs []Event
		var texts []string
		for _, raw := range f.obj("message").list("content") {
			var block fields
			if json.Unmarshal(raw, &block) == nil && block.str("type") == "text" && strings.TrimSpace(block.str("text")) != "" {
				texts = append(texts, block.str("text"))
				evs = append(evs, Event{Kind: EventMessage, Text: short(block.str("text"))})
			}
		}
		if len(texts) > 0 {
			p.lastText = strings.TrimSpace(strings.Join(texts, "\n"))
		}
		return evs
	case "result":
		return p.result(f)
	}
	return nil
}

func (p *cursorParser) sessionEvent(id string) []Event {
	if id == "" || id == p.session || !validSessionID(id) {
		return nil
	}
	p.session = id
	return []Event{{Kind: EventSession, SessionID: id}}
}

func (p *cursorParser) result(f fields) []Event {
	p.done = true
	u := f.obj("usage")
	evs := p.usage.next(models.TokenUsage{Input: u.num("inputTokens"), Output: u.num("outputTokens"),
		CacheRead: u.num("cacheReadTokens"), CacheWrite: u.num("cacheWriteTokens")})
	text := strings.TrimSpace(f.str("result"))
	if !f.flag("is_error") && !strings.HasPrefix(f.str("subtype"), "error") {
		evs = append(evs, p.sessionEvent(f.str("session_id"))...)
		if text == "" {
			text = p.lastText
		}
		return append(evs, Event{Kind: EventResult, Summary: text})
	}
	if limited, usageCap := limitInText(text); limited {
		evs = append(evs, Event{Kind: EventRateLimit, ResetAt: resetFromText(text, p.now()), UsageCap: usageCap, Error: text})
	}
	if text == "" {
		text = "cursor-agent reported an error"
		if st := f.str("subtype"); st != "" && st != "success" {
			text += " (" + st + ")"
		}
	}
	return append(evs, Event{Kind: EventResult, IsError: true, Error: text})
}

// End decides a stream that ended without a result.
func (p *cursorParser) End(exitCode int) []Event {
	if p.done {
		return nil
	}
	p.done = true
	res := cutShort(exitCode, "")
	res.SessionInvalid = p.requested != "" && !p.sawInit && exitCode == 1
	return []Event{res}
}
