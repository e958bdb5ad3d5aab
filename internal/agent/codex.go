package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Codex runs the OpenAI Codex CLI non-interactively with JSONL output:
//
//	codex exec --json --skip-git-repo-check [-m M] -s SANDBOX
//	  [-c mcp_servers.<name>.command="…" -c mcp_servers.<name>.args=[…]
//	   -c mcp_servers.<name>.env_vars=["VAR",…] | -c mcp_servers.<name>.url="…"]…
//	  [-c mcp_servers.agentqueued.default_tools_approval_mode="approve"
//	   -c mcp_servers.agentqueued.tool_timeout_sec=N]
//	  [-c developer_instructions="S"] [agent args…] [resume ID] -
//
// The prompt goes to standard input ("-"). SANDBOX comes from the profile's
// permission mode: read-only, workspace-write (the default) or
// danger-full-access, or another CLI's name for one of them
// (models.PermissionModeFor); anything else is refused.
//
// Codex has no per-run MCP config file, and a config.toml under a private
// CODEX_HOME would lose the user's login, so servers are -c overrides. Their
// env values are never put on the command line (argv is readable by every
// local user): they go into the agent's environment and the server lists
// their names in env_vars, which makes Codex pass them on; agentqueued's own
// server gets AQ_SOCKET, AQ_TASK_ID and AQ_RUN_TOKEN this way. Two servers
// that set one variable to different values are refused. An HTTP server's
// env is ignored. Allowed tools have no Codex equivalent and are ignored.
//
// codex exec runs with the approval policy "never", under which an MCP
// tool call that needs approval is refused: agentqueued's own server is
// approved (default_tools_approval_mode), and its tool_timeout_sec is
// RunContext.ToolTimeout in whole seconds, rounded up, so that an ask
// waits for a person as long as the daemon does (Codex gives up after
// 300 s by default). exec resume drops developer_instructions, so a
// resumed run gets the profile's suffix at the end of its prompt instead.
type Codex struct{}

// Type returns "codex".
func (Codex) Type() string { return "codex" }

// ownServer is the name of agentqueued's own MCP server, and ownServerEnv
// the variables of the run it needs.
const ownServer = "agentqueued"

var ownServerEnv = []string{"AQ_SOCKET", "AQ_TASK_ID", "AQ_RUN_TOKEN"}

// Invocation builds the codex command line.
func (c Codex) Invocation(rc RunContext) (Invocation, error) {
	p := rc.Profile
	argv := []string{command(rc, "codex"), "exec", "--json", "--skip-git-repo-check"}
	if p.Model != "" {
		if err := checkFlagValue("model", p.Model); err != nil {
			return Invocation{}, err
		}
		argv = append(argv, "-m", p.Model)
	}
	sandbox, err := codexSandbox(p.PermissionMode)
	if err != nil {
		return Invocation{}, err
	}
	argv = append(argv, "-s", sandbox)
	inv := Invocation{Stdin: rc.Prompt}
	for _, s := range rc.MCPServers {
		key := "mcp_servers." + tomlKey(s.Name)
		if s.URL != "" {
			argv = append(argv, "-c", key+".url="+tomlString(s.URL))
			continue
		}
		argv = append(argv, "-c", key+".command="+tomlString(s.Command))
		if len(s.Args) > 0 {
			argv = append(argv, "-c", key+".args="+tomlArray(s.Args))
		}
		names := slices.Sorted(maps.Keys(s.Env))
		for _, k := range names {
			if old, ok := inv.Env[k]; ok && old != s.Env[k] {
				return Invocation{}, fmt.Errorf("codex: MCP servers set %s to different values; codex passes server env through its own environment", k)
			}
			if inv.Env == nil {
				inv.Env = map[string]string{}
			}
			inv.Env[k] = s.Env[k]
		}
		if s.Name == ownServer {
			names = append(names, ownServerEnv...)
		}
		if names = slices.Compact(slices.Sorted(slices.Values(names))); len(names) > 0 {
			argv = append(argv, "-c", key+".env_vars="+tomlArray(names))
		}
		if s.Name == ownServer {
			argv = append(argv, "-c", key+`.default_tools_approval_mode="approve"`)
			if rc.ToolTimeout > 0 {
				argv = append(argv, "-c", key+".tool_timeout_sec="+strconv.FormatInt(ceilSeconds(rc.ToolTimeout), 10))
			}
		}
	}
	if p.SystemPromptSuffix != "" {
		if rc.SessionID == "" {
			argv = append(argv, "-c", "developer_instructions="+tomlString(p.SystemPromptSuffix))
		} else {
			inv.Stdin = WithInstructions(rc.Prompt, p.SystemPromptSuffix)
		}
	}
	argv = append(argv, rc.Agent.Args...)
	if rc.SessionID != "" {
		if !validSessionID(rc.SessionID) {
			return Invocation{}, fmt.Errorf("codex: session id %q cannot be resumed", rc.SessionID)
		}
		argv = append(argv, "resume", rc.SessionID)
	}
	inv.Argv = append(argv, "-")
	return inv, nil
}

// WithInstructions appends a profile's system prompt suffix to a prompt,
// for a CLI that does not keep it on resume.
func WithInstructions(prompt, suffix string) string {
	return strings.TrimRight(prompt, "\n") + "\n\n## Standing instructions\n\n" + strings.TrimSpace(suffix) + "\n"
}

// ceilSeconds is d in whole seconds, rounded up.
func ceilSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// VersionArgv asks codex for its version: its stream does not carry it.
func (Codex) VersionArgv(a models.Agent) []string {
	return []string{command(RunContext{Agent: a}, "codex"), "--version"}
}

// codexSandbox maps a permission mode to a codex sandbox.
func codexSandbox(mode string) (string, error) {
	if mode == "" {
		return models.DefaultCodexSandbox, nil
	}
	sandbox, err := models.PermissionModeFor("codex", mode)
	if err != nil {
		return "", fmt.Errorf("codex: %s", models.ErrorMessageOf(err))
	}
	return sandbox, nil
}

// tomlBareKey is a key TOML accepts unquoted.
var tomlBareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// tomlKey quotes a key unless it is bare.
func tomlKey(k string) string {
	if tomlBareKey.MatchString(k) {
		return k
	}
	return tomlString(k)
}

// tomlString renders s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// tomlArray renders a TOML array of strings.
func tomlArray(l []string) string {
	q := make([]string, len(l))
	for i, s := range l {
		q[i] = tomlString(s)
	}
	return "[" + strings.Join(q, ",") + "]"
}

// NewParser reads codex's --json output.
func (Codex) NewParser(rc RunContext) Parser {
	return &codexParser{requested: rc.SessionID, now: time.Now, mode: rc.Profile.PermissionMode,
		sessionUsage: models.TokenUsage{Input: rc.SessionUsage.Input, Output: rc.SessionUsage.Output,
			CacheRead: rc.SessionUsage.CacheRead, CacheWrite: rc.SessionUsage.CacheWrite}}
}

// codexParser is the state of one run's stream.
//
// Usage: turn.completed carries the turn's usage, or (recent versions) the
// thread's running total. OpenAI counts cached tokens inside input_tokens,
// so Input is input_tokens minus cached_input_tokens and
// cache_write_input_tokens, which become CacheRead and CacheWrite; Output is
// output_tokens (reasoning tokens are part of it). When the run resumed its
// thread (thread.started repeats rc.SessionID) and every field is at least
// rc.SessionUsage, the numbers are taken as the thread's running total and
// rc.SessionUsage is subtracted; otherwise they are this turn's own.
// A failed turn reports no usage, so its tokens are booked with the next
// resumed run, whose running total includes them.
//
// Sessions: a resume that comes back with another thread id (older
// versions silently started a new thread for an unknown id) reports the
// new session and goes on; SessionInvalid is not set since the run itself
// works. A resumed run that exits 1 before any thread.started (codex prints
// "no rollout found for thread id" on stderr, which the parser does not
// see) is marked SessionInvalid, as is an error naming a missing rollout.
//
// Failed edits: a file_change item that completes with status "failed"
// (Codex's sandbox or the file system refused the write) fails the run,
// naming the files, unless a later file_change wrote them after all: the
// turn itself still ends turn.completed, and without this the run would
// only fail later as "the agent made no changes".
//
// Refused writes: a write codex's sandbox rejects before applying it (an
// apply_patch outside the checkout, or any under read-only) leaves no
// file_change item; codex says so only on standard error, as a line with
// "patch rejected: <why>". Those lines, and only those, are kept (see
// Refusals), so that a run that therefore changed nothing says why.
type codexParser struct {
	requested    string
	sessionUsage models.TokenUsage
	thread       string
	sawThread    bool
	resumed      bool
	done         bool
	messages     []string
	failedEdits  []string // "<kind> <path>" of failed file changes not redone
	lastErr      string
	usage        usageGate
	mode         string // the profile's permission mode, for failure texts
	now          func() time.Time
	refused      refusedWrites // read from standard error, another goroutine
}

// Line reads one line of codex's output.
func (p *codexParser) Line(line []byte) []Event {
	var evs []Event
	for _, f := range objects(line) {
		if p.done {
			break
		}
		evs = append(evs, p.object(f)...)
	}
	return evs
}

func (p *codexParser) object(f fields) []Event {
	switch f.str("type") {
	case "thread.started":
		id := f.str("thread_id")
		if id == "" || !validSessionID(id) {
			return nil
		}
		p.sawThread = true
		p.resumed = p.requested != "" && id == p.requested
		if id == p.thread {
			return nil
		}
		p.thread = id
		return []Event{{Kind: EventSession, SessionID: id}}
	case "item.completed":
		item := f.obj("item")
		if item.str("type") == "agent_message" && strings.TrimSpace(item.str("text")) != "" {
			p.messages = append(p.messages, strings.TrimSpace(item.str("text")))
			return []Event{{Kind: EventMessage, Text: short(item.str("text"))}}
		}
		if item.str("type") == "file_change" {
			p.fileChange(item)
		}
	case "error":
		if m := strings.TrimSpace(f.str("message")); m != "" {
			p.lastErr = m
		}
	case "turn.failed":
		p.done = true
		msg := strings.TrimSpace(f.obj("error").str("message"))
		if msg == "" {
			msg = p.lastErr
		}
		if msg == "" {
			msg = "codex reported a failed turn"
		}
		return p.failure(msg, codexMessage(msg))
	case "turn.completed":
		p.done = true
		u := codexUsage(f.obj("usage"))
		if p.resumed && coversUsage(u, p.sessionUsage) {
			u = subUsage(u, p.sessionUsage)
		}
		evs := p.usage.next(u)
		if len(p.failedEdits) > 0 {
			return append(evs, Event{Kind: EventResult, IsError: true, Error: p.failedEditsText()})
		}
		return append(evs, Event{Kind: EventResult, Summary: strings.Join(p.messages, "\n\n")})
	}
	return nil
}

// fileChange notes the files of a failed file_change item, and forgets
// those a completed one wrote.
func (p *codexParser) fileChange(item fields) {
	var changes []string
	var paths []string
	for _, raw := range item.list("changes") {
		var c fields
		if json.Unmarshal(raw, &c) != nil || strings.TrimSpace(c.str("path")) == "" {
			continue
		}
		paths = append(paths, c.str("path"))
		changes = append(changes, strings.TrimSpace(c.str("kind")+" "+c.str("path")))
	}
	switch item.str("status") {
	case "failed":
		for _, c := range changes {
			if !slices.Contains(p.failedEdits, c) {
				p.failedEdits = append(p.failedEdits, c)
			}
		}
		if len(changes) == 0 && !slices.Contains(p.failedEdits, "a file change") {
			p.failedEdits = append(p.failedEdits, "a file change")
		}
	case "completed":
		p.failedEdits = slices.DeleteFunc(p.failedEdits, func(c string) bool {
			return slices.ContainsFunc(paths, func(path string) bool { return strings.HasSuffix(c, " "+path) || c == path })
		})
	}
}

// failedEditsText says which file changes codex could not make.
func (p *codexParser) failedEditsText() string {
	mode := p.mode
	if mode == "" {
		mode = "not set: workspace-write"
	} else {
		mode = strconv.Quote(mode)
	}
	return fmt.Sprintf("codex could not make %d file change(s) (%s): its file_change failed, so that work was not done. "+
		"Codex's sandbox or the file system refused the write (codex's own words are in the run's log); "+
		"check the checkout and the agent's permission_mode (now %s)", len(p.failedEdits), strings.Join(p.failedEdits, ", "), mode)
}

var _ StderrReader = (*codexParser)(nil)

// StderrLine keeps a line of codex's standard error that reports a write
// its sandbox rejected.
func (p *codexParser) StderrLine(line []byte) {
	if i := bytes.Index(line, []byte(codexPatchRejected)); i >= 0 {
		p.refused.add(string(line[i:]))
	}
}

// Refusals says which writes codex's sandbox rejected, "" when none.
func (p *codexParser) Refusals() string {
	n, texts := p.refused.get()
	if n == 0 {
		return ""
	}
	what := "a write"
	if n > 1 {
		what = fmt.Sprintf("%d writes", n)
	}
	return fmt.Sprintf("codex refused %s (%s)", what, strings.Join(texts, " | "))
}

// codexPatchRejected starts codex's report of a write its sandbox
// rejected, as in (0.171.0) "ERROR codex_core::tools::router:
// error=patch rejected: writing outside of the project; rejected by user
// approval settings".
const codexPatchRejected = "patch rejected:"

// Bounds of the refusals a parser keeps.
const (
	maxRefusals    = 3   // distinct texts
	maxRefusalText = 300 // characters of one text
)

// refusedWrites counts the writes a CLI refused and keeps the first
// maxRefusals distinct texts, cleaned and cut to maxRefusalText.
type refusedWrites struct {
	mu    sync.Mutex
	n     int
	texts []string
}

func (r *refusedWrites) add(text string) {
	text = models.CleanLine(text, maxRefusalText)
	if text == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	if len(r.texts) < maxRefusals && !slices.Contains(r.texts, text) {
		r.texts = append(r.texts, text)
	}
}

func (r *refusedWrites) get() (int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n, slices.Clone(r.texts)
}

// codexUsage reads a turn.completed usage object.
func codexUsage(u fields) models.TokenUsage {
	cached, written := u.num("cached_input_tokens"), u.num("cache_write_input_tokens")
	return models.TokenUsage{Input: max(u.num("input_tokens")-cached-written, 0), Output: u.num("output_tokens"),
		CacheRead: cached, CacheWrite: written}
}

// failure is the events of a failed run: a rate limit when raw (or the
// last error line) says so, then the failed result described by msg.
func (p *codexParser) failure(raw, msg string) []Event {
	var evs []Event
	for _, text := range []string{raw, p.lastErr} {
		if limited, usageCap := limitInText(text); limited {
			evs = append(evs, Event{Kind: EventRateLimit, ResetAt: resetFromText(text, p.now()), UsageCap: usageCap,
				Error: codexMessage(text)})
			break
		}
	}
	res := Event{Kind: EventResult, IsError: true, Error: msg}
	res.SessionInvalid = p.requested != "" && (codexLostSession(raw) || codexLostSession(p.lastErr))
	return append(evs, res)
}

// codexLostSession reports whether text says the resumed thread is gone.
func codexLostSession(text string) bool {
	lower := strings.ToLower(text)
	return strings.Contains(lower, "no rollout found") || strings.Contains(lower, "missing rollout path") ||
		strings.Contains(lower, "thread not found") || strings.Contains(lower, "session not found")
}

// codexMessage shortens an error message that is a whole API error body
// (codex passes 400 bodies through as pretty-printed JSON) to its message
// and status.
func codexMessage(msg string) string {
	t := strings.TrimSpace(msg)
	var body fields
	if !strings.HasPrefix(t, "{") || json.Unmarshal([]byte(t), &body) != nil {
		return t
	}
	inner := body.obj("error").str("message")
	if inner == "" {
		return t
	}
	if st := body.num("status"); st != 0 {
		return fmt.Sprintf("%s (HTTP %d)", inner, st)
	}
	return inner
}

// End decides a stream that ended without turn.completed or turn.failed.
func (p *codexParser) End(exitCode int) []Event {
	if p.done {
		return nil
	}
	p.done = true
	res := cutShort(exitCode, codexMessage(p.lastErr))
	var evs []Event
	if limited, usageCap := limitInText(p.lastErr); limited {
		evs = append(evs, Event{Kind: EventRateLimit, ResetAt: resetFromText(p.lastErr, p.now()), UsageCap: usageCap,
			Error: codexMessage(p.lastErr)})
	}
	res.SessionInvalid = p.requested != "" && ((!p.sawThread && exitCode == 1) || codexLostSession(p.lastErr))
	return append(evs, res)
}
