package agent

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Claude runs Claude Code in print mode with stream-json output:
//
//	claude -p --output-format stream-json --verbose [--model M]
//	  [--permission-mode P] [--allowedTools T…]
//	  [--mcp-config <StateDir>/mcp.json --strict-mcp-config]
//	  [--append-system-prompt S] [--resume ID] [agent args…]
//
// The prompt goes to standard input, never on the command line. MCP servers
// are written to mcp.json in the run's private state directory (their env
// may carry the run's token; argv is readable by every local user).
//
// P is the profile's permission mode, or another CLI's name for it
// translated (models.PermissionModeFor). In print mode Claude denies every
// tool call --allowedTools does not name, so T is the profile's allowed
// tools, then mcp__agentqueued (every tool of agentqueued's own server)
// whenever that server is configured, then Bash(<AQ_BIN> agent:*) when the
// run may report from a shell (ShellFallback: not in plan mode).
//
// With agentqueued's own server configured, the run's environment gets
// ENABLE_TOOL_SEARCH=false (ClaudeToolSearchEnv), unless the agent's env or
// pass_env sets that variable itself: Claude Code 2.1.332 otherwise defers
// MCP tools behind its ToolSearch tool, and a model that does not search
// first never sees progress, ask, complete or the review verdicts.
type Claude struct{}

// ClaudeToolSearchEnv is the variable by which Claude Code defers MCP
// tools behind its ToolSearch tool, or offers them directly ("false").
const ClaudeToolSearchEnv = "ENABLE_TOOL_SEARCH"

// Type returns "claude".
func (Claude) Type() string { return "claude" }

// Invocation builds the claude command line and its MCP config file.
func (c Claude) Invocation(rc RunContext) (Invocation, error) {
	p := rc.Profile
	argv := []string{command(rc, "claude"), "-p", "--output-format", "stream-json", "--verbose"}
	if p.Model != "" {
		if err := checkFlagValue("model", p.Model); err != nil {
			return Invocation{}, err
		}
		argv = append(argv, "--model", p.Model)
	}
	mode, err := models.PermissionModeFor(c.Type(), p.PermissionMode)
	if err != nil {
		return Invocation{}, fmt.Errorf("claude: %s", models.ErrorMessageOf(err))
	}
	if mode != "" {
		argv = append(argv, "--permission-mode", mode)
	}
	if tools := c.allowedTools(rc); len(tools) > 0 {
		for _, t := range tools {
			if err := checkFlagValue("allowed tool", t); err != nil {
				return Invocation{}, err
			}
		}
		argv = append(append(argv, "--allowedTools"), tools...)
	}
	inv := Invocation{Stdin: rc.Prompt}
	if len(rc.MCPServers) > 0 {
		if rc.StateDir == "" {
			return Invocation{}, fmt.Errorf("claude: %d MCP servers but no state directory for their config", len(rc.MCPServers))
		}
		cfg, err := claudeMCPConfig(rc.MCPServers)
		if err != nil {
			return Invocation{}, err
		}
		inv.Files = map[string]string{"mcp.json": cfg}
		argv = append(argv, "--mcp-config", filepath.Join(rc.StateDir, "mcp.json"), "--strict-mcp-config")
		_, own := rc.Agent.Env[ClaudeToolSearchEnv]
		if c.ownServer(rc) && !own && !slices.Contains(rc.Agent.PassEnv, ClaudeToolSearchEnv) {
			inv.Env = map[string]string{ClaudeToolSearchEnv: "false"}
		}
	}
	if p.SystemPromptSuffix != "" {
		argv = append(argv, "--append-system-prompt", p.SystemPromptSuffix)
	}
	if rc.SessionID != "" {
		if !validSessionID(rc.SessionID) {
			return Invocation{}, fmt.Errorf("claude: session id %q cannot be resumed", rc.SessionID)
		}
		argv = append(argv, "--resume", rc.SessionID)
	}
	inv.Argv = append(argv, rc.Agent.Args...)
	return inv, nil
}

// allowedTools lists a run's --allowedTools: the profile's, then
// agentqueued's own server and the shell fallback, each once.
func (c Claude) allowedTools(rc RunContext) []string {
	tools := slices.Clone(rc.Profile.AllowedTools)
	add := func(t string) {
		if !slices.Contains(tools, t) {
			tools = append(tools, t)
		}
	}
	if c.ownServer(rc) {
		add(ClaudeServerTools(ownServer))
	}
	if rc.Executable != "" && c.ShellFallback(rc.Profile) {
		add("Bash(" + AgentCommand(rc.Executable) + ":*)")
	}
	return tools
}

// ownServer reports whether the run is given agentqueued's own MCP server.
func (Claude) ownServer(rc RunContext) bool {
	return slices.ContainsFunc(rc.MCPServers, func(s models.MCPServer) bool { return s.Name == ownServer })
}

// ClaudeServerTools is the --allowedTools rule that allows every tool of
// the MCP server named name (Claude calls them mcp__<name>__<tool>).
func ClaudeServerTools(name string) string { return "mcp__" + name }

// claudeMCPConfig renders servers in the mcpServers shape Claude Code reads.
func claudeMCPConfig(servers []models.MCPServer) (string, error) {
	type server struct {
		Type    string            `json:"type"`
		Command string            `json:"command,omitempty"`
		Args    []string          `json:"args,omitempty"`
		Env     map[string]string `json:"env,omitempty"`
		URL     string            `json:"url,omitempty"`
	}
	out := map[string]server{}
	for _, s := range servers {
		if _, dup := out[s.Name]; dup || s.Name == "" {
			return "", fmt.Errorf("claude: MCP server name %q is empty or repeated", s.Name)
		}
		if s.URL != "" {
			out[s.Name] = server{Type: "http", URL: s.URL}
			continue
		}
		out[s.Name] = server{Type: "stdio", Command: s.Command, Args: s.Args, Env: s.Env}
	}
	b, err := json.MarshalIndent(map[string]any{"mcpServers": out}, "", "  ")
	if err != nil {
		return "", fmt.Errorf("claude: encode MCP config: %w", err)
	}
	return string(b) + "\n", nil
}

// NewParser reads claude's stream-json output.
func (Claude) NewParser(rc RunContext) Parser {
	return &claudeParser{msgUsage: map[string]models.TokenUsage{}, now: time.Now, profile: rc.Profile}
}

// claudeParser is the state of one run's stream.
//
// Usage: assistant lines repeat the (partial) usage of their message once
// per content block, so the interim usage is the sum over message ids of
// the field-wise maximum seen for each; subagent lines are left out. The
// result's usage is this run's total and replaces the interim sum (never
// lowering a reported field). A resumed session's result.usage covers this
// run only; total_cost_usd is reported as it is (for a resumed session the
// CLI's figure may count the session's earlier runs too).
//
// The init line names the CLI's version (claude_code_version) and the
// state of each MCP server when the first turn began: one still "pending"
// (or "failed") gave the first turn none of its tools. A result that lists
// permission_denials is a failure whatever its subtype: the work those
// calls would have done was not done.
type claudeParser struct {
	profile  models.Profile
	session  string
	done     bool
	msgUsage map[string]models.TokenUsage
	interim  models.TokenUsage // the sum of msgUsage
	usage    usageGate
	lastText string
	// resetAt and usageCap come from a rejected rate_limit_event, for the
	// texts that follow it; limitWords is set once the provider's words
	// for the limit were reported.
	resetAt    *time.Time
	usageCap   bool
	limitWords bool
	now        func() time.Time
}

// claudeUsageLimit is the 1.0.x usage-limit text: "…|<unix seconds>".
var claudeUsageLimit = regexp.MustCompile(`Claude AI usage limit reached\|(\d{9,13})`)

// claudeNoSession is how claude says a resumed session does not exist.
const claudeNoSession = "No conversation found with session ID"

// Line reads one line of claude's output.
func (p *claudeParser) Line(line []byte) []Event {
	if p.done {
		return nil
	}
	objs := objects(line)
	if len(objs) == 0 {
		return p.text(string(line))
	}
	var evs []Event
	for _, f := range objs {
		if p.done {
			break
		}
		evs = append(evs, p.object(f)...)
	}
	return evs
}

// text reads a line that is not JSON: claude printed usage-limit texts
// this way in some versions.
func (p *claudeParser) text(line string) []Event {
	if limited, _ := limitInText(line); limited || claudeUsageLimit.MatchString(line) {
		return p.limitWordsEvent(strings.TrimSpace(line))
	}
	return nil
}

func (p *claudeParser) object(f fields) []Event {
	switch f.str("type") {
	case "system":
		if f.str("subtype") == "init" {
			return append(p.sessionEvent(f.str("session_id")), p.initEvent(f)...)
		}
	case "assistant":
		return p.assistant(f)
	case "rate_limit_event":
		return p.rateLimit(f.obj("rate_limit_info"))
	case "result":
		return p.result(f)
	}
	return nil
}

func (p *claudeParser) sessionEvent(id string) []Event {
	if id == "" || id == p.session || !validSessionID(id) {
		return nil
	}
	p.session = id
	return []Event{{Kind: EventSession, SessionID: id}}
}

// initEvent reports the CLI's version and the MCP servers that were not
// connected when its first turn began.
func (p *claudeParser) initEvent(f fields) []Event {
	ev := Event{Kind: EventCLI, Version: strings.TrimSpace(f.str("claude_code_version"))}
	for _, raw := range f.list("mcp_servers") {
		var srv fields
		if json.Unmarshal(raw, &srv) != nil || srv.str("name") == "" {
			continue
		}
		if st := srv.str("status"); st != "connected" {
			if st == "" {
				st = "unknown"
			}
			ev.MCPNotReady = append(ev.MCPNotReady, srv.str("name")+" ("+st+")")
		}
	}
	if ev.Version == "" && len(ev.MCPNotReady) == 0 {
		return nil
	}
	return []Event{ev}
}

// claudeDenials reads a result's permission_denials.
func claudeDenials(f fields) []Denial {
	var out []Denial
	for _, raw := range f.list("permission_denials") {
		var d fields
		if json.Unmarshal(raw, &d) != nil || strings.TrimSpace(d.str("tool_name")) == "" {
			continue
		}
		out = append(out, Denial{Tool: strings.TrimSpace(d.str("tool_name")), ToolUseID: d.str("tool_use_id")})
	}
	return out
}

// denialText says which tools were denied and which setting of the
// agent's profile allows them.
func denialText(denied []Denial, p models.Profile) string {
	var tools []string
	for _, d := range denied {
		if !slices.Contains(tools, d.Tool) {
			tools = append(tools, d.Tool)
		}
	}
	mode := p.PermissionMode
	if mode == "" {
		mode = "not set"
	} else {
		mode = strconv.Quote(mode)
	}
	allowed := "none"
	if len(p.AllowedTools) > 0 {
		allowed = strings.Join(p.AllowedTools, ", ")
	}
	return fmt.Sprintf("claude denied %d tool call(s) (%s): their work was not done. Allow them in the agent's profile: "+
		"permission_mode (now %s; acceptEdits allows file edits) or allowed_tools (now %s)",
		len(denied), strings.Join(tools, ", "), mode, allowed)
}

func (p *claudeParser) assistant(f fields) []Event {
	msg := f.obj("message")
	var texts []string
	for _, raw := range msg.list("content") {
		var block fields
		if json.Unmarshal(raw, &block) == nil && block.str("type") == "text" && strings.TrimSpace(block.str("text")) != "" {
			texts = append(texts, block.str("text"))
		}
	}
	joined := strings.TrimSpace(strings.Join(texts, "\n"))
	if f.str("error") == "rate_limit" || msg.str("model") == "<synthetic>" {
		// The CLI's own message, not the model's: a limit, or an API error
		// the result reports.
		if limited, _ := limitInText(joined); limited || f.str("error") == "rate_limit" {
			return p.limitWordsEvent(joined)
		}
		return nil
	}
	if claudeUsageLimit.MatchString(joined) {
		return p.limitWordsEvent(joined)
	}
	if f.has("parent_tool_use_id") {
		return nil // a subagent's traffic
	}
	var evs []Event
	if id := msg.str("id"); id != "" {
		if u := claudeUsage(msg.obj("usage")); u != (models.TokenUsage{}) {
			old := p.msgUsage[id]
			p.msgUsage[id] = maxUsage(old, u)
			p.interim = addUsage(subUsage(p.interim, old), p.msgUsage[id])
			evs = append(evs, p.usage.next(p.interim)...)
		}
	}
	for _, t := range texts {
		evs = append(evs, Event{Kind: EventMessage, Text: short(t)})
	}
	if joined != "" {
		p.lastText = joined
	}
	return evs
}

// claudeUsage reads an Anthropic usage object.
func claudeUsage(u fields) models.TokenUsage {
	return models.TokenUsage{Input: u.num("input_tokens"), Output: u.num("output_tokens"),
		CacheRead: u.num("cache_read_input_tokens"), CacheWrite: u.num("cache_creation_input_tokens")}
}

// rateLimit reads a rate_limit_event: only "rejected" blocks; "allowed",
// "allowed_warning" and unknown statuses are information.
func (p *claudeParser) rateLimit(info fields) []Event {
	if info.str("status") != "rejected" {
		return nil
	}
	kind := info.str("rateLimitType")
	p.resetAt = epochTime(info.num("resetsAt"))
	p.usageCap = kind == "overage" || kind == "five_hour" || strings.HasPrefix(kind, "seven_day")
	msg := "Claude rate limit reached"
	if kind != "" {
		msg += " (" + kind + ")"
	}
	return []Event{{Kind: EventRateLimit, ResetAt: p.resetAt, UsageCap: p.usageCap, Error: msg}}
}

// limitWordsEvent reports a limit in the provider's words, with the reset
// time of a rejected rate_limit_event before it, or the epoch of the 1.0.x
// text.
func (p *claudeParser) limitWordsEvent(text string) []Event {
	reset, usageCap := p.resetAt, p.usageCap
	if m := claudeUsageLimit.FindStringSubmatch(text); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 64) // the pattern allows digits only
		reset, usageCap = epochTime(n), true
		text = "Claude AI usage limit reached"
	} else if _, isCap := limitInText(text); isCap {
		usageCap = true
	}
	if reset == nil {
		reset = resetFromText(text, p.now())
	}
	p.limitWords = true
	if text == "" {
		text = "Claude rate limit reached"
	}
	return []Event{{Kind: EventRateLimit, ResetAt: reset, UsageCap: usageCap, Error: text}}
}

func (p *claudeParser) result(f fields) []Event {
	p.done = true
	evs := p.usage.next(claudeUsage(f.obj("usage")))
	text := strings.TrimSpace(f.str("result"))
	errs := f.strings("errors")
	subtype, reason, status := f.str("subtype"), f.str("terminal_reason"), f.num("api_error_status")
	isErr := f.flag("is_error") || strings.HasPrefix(subtype, "error")
	denied := claudeDenials(f)
	var cost *float64
	if f.has("total_cost_usd") {
		var c float64
		if json.Unmarshal(f["total_cost_usd"], &c) == nil && c >= 0 && !math.IsInf(c, 0) && !math.IsNaN(c) {
			cost = &c
		}
	}
	if claudeUsageLimit.MatchString(text) {
		// 1.0.x reported the limit as the result text, not always as an error.
		if !p.limitWords {
			evs = append(evs, p.limitWordsEvent(text)...)
		}
		isErr = true
	} else if limited, _ := limitInText(text); isErr && !p.limitWords && (status == 429 || limited) {
		evs = append(evs, p.limitWordsEvent(text)...)
	}
	if !isErr && len(denied) == 0 {
		evs = append(evs, p.sessionEvent(f.str("session_id"))...) // when no init line came
		if text == "" {
			text = p.lastText // the result can be empty although the model answered (#38673)
		}
		return append(evs, Event{Kind: EventResult, Summary: text, CostUSD: cost})
	}
	if !isErr {
		// Denied work is not success; the session itself is sound.
		evs = append(evs, p.sessionEvent(f.str("session_id"))...)
		return append(evs, Event{Kind: EventResult, IsError: true, Error: denialText(denied, p.profile), CostUSD: cost,
			Denied: denied})
	}
	// Never adopt the session of a failed result: it may be invented.
	res := Event{Kind: EventResult, IsError: true, Error: claudeError(subtype, reason, status, errs, text), CostUSD: cost,
		Denied: denied}
	if len(denied) > 0 {
		res.Error += "; " + denialText(denied, p.profile)
	}
	for _, e := range append(errs, text) {
		if strings.Contains(e, claudeNoSession) {
			res.SessionInvalid = true
		}
	}
	return append(evs, res)
}

// claudeError describes a failed result: its errors (else its text), then
// its subtype, terminal reason and API status.
func claudeError(subtype, reason string, status int64, errs []string, text string) string {
	msg := strings.Join(errs, "; ")
	if msg == "" {
		msg = text
	}
	if msg == "" {
		msg = "claude reported an error"
	}
	var detail []string
	if subtype != "" && subtype != "success" {
		detail = append(detail, subtype)
	}
	if reason != "" && reason != "completed" {
		detail = append(detail, "terminal_reason "+reason)
	}
	if status != 0 {
		detail = append(detail, fmt.Sprintf("API status %d", status))
	}
	if len(detail) > 0 {
		msg += " (" + strings.Join(detail, ", ") + ")"
	}
	return msg
}

// End decides a stream that ended without a result.
func (p *claudeParser) End(exitCode int) []Event {
	if p.done {
		return nil
	}
	p.done = true
	return []Event{cutShort(exitCode, "")}
}
