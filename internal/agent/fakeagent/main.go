// Command fakeagent stands in for the agent CLIs in tests. Installed (or
// linked) under the name of a CLI — claude, codex, cursor-agent or aider —
// it accepts the flags the adapters pass, reads the prompt where that CLI
// reads it, and prints a plausible stream in that CLI's real line format:
// claude/cursor stream-json and codex exec --json lines with the field names
// of the recordings, aider's text lines. FAKEAGENT_FORMAT (claude, codex,
// cursor, aider) overrides the name.
//
// Prompt lines that start with "@" are directives, run in order:
//
//	@write <path> <text…>           write a file under the working directory (text + "\n")
//	@append <path> <text…>          append to it
//	@commit <message…>              git add -A && git commit -m (skipped when nothing changed)
//	@complete <summary…>            RPC complete; the summary is also the stream's final text
//	@complete-no-changes <summary…> RPC complete saying the task needed no change
//	@complete-outputs <json>        RPC complete with these outputs (summary "outputs")
//	@deny <tool>                    claude: list a refused call of the tool in the result's
//	                                permission_denials (the run still ends "success")
//	@mcp-pending                    claude: the init line shows every MCP server "pending"
//	@refuse-write                   codex: print on stderr the line codex 0.171.0 prints when its
//	                                sandbox rejects a write outside the checkout (nothing is written)
//	@fail <message…>                RPC fail
//	@ask <question…>                RPC ask; the answer goes to ANSWER.txt
//	@plan <json array>              RPC propose_plan with models.BatchTask entries
//	@approve <reasons…>             RPC approve (a reviewer's verdict)
//	@reject <reasons…>              RPC reject
//	@ratelimit <seconds>            print the CLI's usage-limit output with a reset that far
//	                                ahead and exit as the CLI does
//	@exit <code>                    exit at once without a result (a stream cut short)
//	@sleep-until-killed             block until SIGTERM or SIGINT (which exit 143 or 130
//	                                at any time, as with the real CLIs)
//	@only-attempt <n> <directive…>  run the directive only when AQ_ATTEMPT is n
//	@conflict-resolve <path> <text…> overwrite the file with text if it has conflict markers
//	@wait-for <absolute path>       wait until the file exists (a test's release signal)
//	@review <directive…>            run the directive only in a review run (AQ_RUN_KIND=review);
//	                                every other directive runs only in work runs
//
// RPC directives call the daemon through AQ_SOCKET, AQ_TASK_ID and
// AQ_RUN_TOKEN; without them the fake exits 2 with a message on stderr. A
// refused call is reported on stderr and the run goes on. They stand for
// the model calling agentqueued's MCP tools (or its shell fallback), so
// the fake refuses them where the real CLI would, with its words on
// stderr: claude unless the agentqueued server is in its --mcp-config and
// mcp__agentqueued (or the tool's own name) in --allowedTools, or the
// allowed tools include Bash(<AQ_BIN> agent:*), or the mode is
// bypassPermissions; codex unless the agentqueued server is configured
// with default_tools_approval_mode="approve", or it runs without a sandbox
// (danger-full-access) and AQ_BIN is set.
//
// The fake codex answers --version with "codex-cli 0.169.0"; the fake
// claude's init line says claude_code_version 2.1.285.
//
// Usage is fixed per run: input 1000, output 200, cache read 300, cache
// write 40 (codex reports the thread's running total, as recent versions
// do; aider prints "1.3k sent, 40 cache write, 300 cache hit, 200
// received", which reads back as input 960). Sessions are remembered under
// FAKEAGENT_STATE_DIR (default $TMPDIR/fakeagent-<uid>), so resuming an unknown
// session fails the way the real CLI does (Cursor's wording is invented:
// none is known).
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

func main() {
	// Like the real CLIs, end with 143 on SIGTERM and 130 on SIGINT, from
	// the start: a test that saw any output may stop the fake.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		if s := <-sigs; s == syscall.SIGINT {
			os.Exit(130)
		}
		os.Exit(143)
	}()
	dir, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeagent:", err)
		os.Exit(2)
	}
	os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr, dir, os.Getenv))
}

// codexVersion is what the fake codex answers to --version.
const codexVersion = "0.169.0"

// Fixed usage of every run.
const (
	inputTokens      = 1000
	outputTokens     = 200
	cacheReadTokens  = 300
	cacheWriteTokens = 40
)

// fake is one run of the fake agent.
type fake struct {
	format  string
	out     emitter
	stdout  io.Writer
	stderr  io.Writer
	dir     string
	getenv  func(string) string
	inv     invocation
	session string
	turn    int // this run's turn on the session, from 1
	summary string
	rpc     *api.RPCClient
	denied  []string // tools of @deny
}

// exitNow ends the run at once with a code (a directive's doing).
type exitNow struct{ code int }

func (e exitNow) Error() string { return fmt.Sprintf("exit %d", e.code) }

// run is the whole program: it returns the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer, dir string, getenv func(string) string) int {
	format := formatOf(args[0], getenv("FAKEAGENT_FORMAT"))
	if format == "" {
		fmt.Fprintf(stderr, "fakeagent: cannot tell which CLI to imitate from %q; install it as claude, codex, cursor-agent or aider or set FAKEAGENT_FORMAT\n", args[0])
		return 2
	}
	if format == "codex" && len(args) == 2 && args[1] == "--version" {
		fmt.Fprintln(stdout, "codex-cli "+codexVersion)
		return 0
	}
	inv, code, err := parseArgs(format, args[1:])
	if err != nil {
		fmt.Fprintln(stderr, err)
		return code
	}
	if inv.workdir != "" {
		dir = resolve(dir, inv.workdir)
	}
	prompt, err := readPrompt(format, inv, stdin, dir)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	f := &fake{format: format, stdout: stdout, stderr: stderr, dir: dir, getenv: getenv, inv: inv}
	if code, ok := f.openSession(); !ok {
		return code
	}
	f.out = newEmitter(f, prompt)
	f.out.start()
	f.saveSession() // the real CLIs keep a transcript as they go: a run cut short can be resumed
	if err := f.directives(prompt); err != nil {
		var ex exitNow
		if errors.As(err, &ex) {
			return ex.code
		}
		fmt.Fprintln(stderr, "fakeagent:", err)
		return 1
	}
	summary := f.summary
	if summary == "" {
		summary = "done"
	}
	f.out.finish(summary)
	f.saveSession()
	return 0
}

// formatOf names the CLI to imitate: the override, else the program name.
func formatOf(argv0, override string) string {
	name := override
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(argv0), filepath.Ext(argv0))
	}
	switch name {
	case "claude", "codex", "aider":
		return name
	case "cursor", "cursor-agent", "agent":
		return "cursor"
	}
	return ""
}

// invocation is what the command line asked for.
type invocation struct {
	print, verbose, json  bool
	outputFormat          string
	model, permissionMode string
	resume                string
	mcpConfig             []string
	allowedTools          []string // claude's --allowedTools
	overrides             []string // codex's -c values
	messageFile, message  string
	positional            []string
	workdir               string
}

// valueFlags are the flags of each CLI that take a value; every other flag
// is taken as a switch. variadic ones take values up to the next flag.
var valueFlags = map[string]map[string]bool{
	"claude": set("--output-format", "--input-format", "--model", "--fallback-model", "--permission-mode",
		"--append-system-prompt", "--system-prompt", "--max-turns", "--max-budget-usd", "--resume", "-r",
		"--session-id", "--settings", "--setting-sources", "--agents", "--agent", "--json-schema"),
	"codex": set("-m", "--model", "-s", "--sandbox", "-c", "--config", "-C", "--cd", "-p", "--profile",
		"-o", "--output-last-message", "--output-schema", "--add-dir", "--color", "-i", "--image",
		"--local-provider", "-a", "--ask-for-approval"),
	"cursor": set("--output-format", "--model", "--resume", "--mode", "--sandbox", "--workspace", "--api-key",
		"-H", "--header"),
	"aider": set("--message", "--msg", "-m", "--message-file", "-f", "--model", "--read", "--file", "--edit-format",
		"--weak-model", "--editor-model", "--chat-history-file", "--input-history-file", "--llm-history-file",
		"--env-file", "-c", "--config", "--test-cmd", "--lint-cmd", "--timeout", "--map-tokens", "--encoding",
		"--api-key", "--set-env", "--openai-api-key", "--anthropic-api-key", "--aiderignore", "--commit-prompt",
		"--chat-language", "--line-endings", "--reasoning-effort", "--thinking-tokens", "--load", "--editor"),
}

var variadicFlags = set("--allowedTools", "--allowed-tools", "--disallowedTools", "--disallowed-tools", "--tools",
	"--mcp-config", "--add-dir", "--betas", "--plugin-dir")

func set(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

// parseArgs reads a command line the way format's CLI would, ignoring
// flags it does not know. A refused command line comes with the CLI's exit
// code.
func parseArgs(format string, args []string) (invocation, int, error) {
	var inv invocation
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			inv.positional = append(inv.positional, a)
			continue
		}
		name, value, inline := strings.Cut(a, "=")
		if format == "claude" && variadicFlags[name] {
			var vals []string
			if inline {
				vals = append(vals, value)
			}
			for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
				vals = append(vals, args[i])
			}
			switch name {
			case "--mcp-config":
				inv.mcpConfig = append(inv.mcpConfig, vals...)
			case "--allowedTools", "--allowed-tools":
				inv.allowedTools = append(inv.allowedTools, vals...)
			}
			continue
		}
		if valueFlags[format][name] && !inline {
			if i+1 >= len(args) {
				return inv, exitUsage(format), fmt.Errorf("error: option '%s' argument missing", name)
			}
			i++
			value = args[i]
		}
		switch {
		case name == "-p" && format == "codex": // --profile
		case name == "-p" || name == "--print":
			inv.print = true
		case name == "--verbose":
			inv.verbose = true
		case name == "--json" || name == "--experimental-json":
			inv.json = true
		case name == "--output-format":
			inv.outputFormat = value
		case name == "--model" || (name == "-m" && format == "codex"):
			inv.model = value
		case name == "--permission-mode" || name == "-s" || name == "--sandbox":
			inv.permissionMode = value
		case name == "--resume" || name == "-r":
			inv.resume = value
		case name == "--message-file" || (name == "-f" && format == "aider"):
			inv.messageFile = value
		case name == "--message" || name == "--msg" || (name == "-m" && format == "aider"):
			inv.message = value
		case name == "-C" || name == "--cd" || name == "--workspace":
			inv.workdir = value
		case (name == "-c" || name == "--config") && format == "codex":
			inv.overrides = append(inv.overrides, value)
		}
	}
	return checkArgs(format, inv)
}

// exitUsage is the exit code of a CLI's usage errors.
func exitUsage(format string) int {
	if format == "codex" {
		return 2
	}
	return 1
}

// checkArgs refuses what the real CLI refuses (or what the fake cannot
// imitate) and takes codex's subcommand apart.
func checkArgs(format string, inv invocation) (invocation, int, error) {
	switch format {
	case "claude":
		if !inv.print || inv.outputFormat != "stream-json" {
			return inv, 1, errors.New("fakeagent: only `claude -p --output-format stream-json` is imitated")
		}
		if !inv.verbose {
			return inv, 1, errors.New("Error: When using --print, --output-format=stream-json requires --verbose")
		}
	case "cursor":
		if !inv.print || inv.outputFormat != "stream-json" {
			return inv, 1, errors.New("fakeagent: only `cursor-agent -p --output-format stream-json` is imitated")
		}
	case "aider":
		if inv.messageFile == "" && inv.message == "" {
			return inv, 1, errors.New("fakeagent: only `aider --message-file` or `--message` is imitated")
		}
	case "codex":
		pos := inv.positional
		if len(pos) == 0 || (pos[0] != "exec" && pos[0] != "e") || !inv.json {
			return inv, 2, errors.New("fakeagent: only `codex exec --json` is imitated")
		}
		pos = pos[1:]
		if len(pos) > 0 && pos[0] == "resume" {
			if len(pos) < 2 {
				return inv, 2, errors.New("error: resume needs a session id (--last is not imitated)")
			}
			inv.resume, pos = pos[1], pos[2:]
		}
		inv.positional = pos
	}
	return inv, 0, nil
}

// readPrompt reads the prompt where format's CLI reads it.
func readPrompt(format string, inv invocation, stdin io.Reader, dir string) (string, error) {
	if format == "aider" {
		if inv.message != "" {
			return inv.message, nil
		}
		b, err := os.ReadFile(resolve(dir, inv.messageFile))
		if err != nil {
			return "", fmt.Errorf("cannot read message file %s: %w", inv.messageFile, err)
		}
		return string(b), nil
	}
	args := strings.Join(inv.positional, "\n")
	if args != "" && args != "-" {
		return args, nil
	}
	b, err := io.ReadAll(stdin)
	if err != nil {
		return "", fmt.Errorf("fakeagent: read the prompt from stdin: %w", err)
	}
	return string(b), nil
}

// resolve makes p absolute against dir.
func resolve(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// Sessions.

// sessionFile is where a session's turns are remembered: under
// FAKEAGENT_STATE_DIR, else a directory of the user's in TMPDIR (not HOME:
// tests must not write into a developer's home).
func (f *fake) sessionFile(id string) string {
	root := f.getenv("FAKEAGENT_STATE_DIR")
	if root == "" {
		tmp := f.getenv("TMPDIR")
		if tmp == "" {
			tmp = "/tmp"
		}
		root = filepath.Join(tmp, fmt.Sprintf("fakeagent-%d", os.Getuid()))
	}
	return filepath.Join(root, f.format, id+".json")
}

type sessionState struct {
	Turns int `json:"turns"`
}

// openSession starts a new session or resumes the requested one; an
// unknown one ends the run the way the real CLI does.
func (f *fake) openSession() (int, bool) {
	f.turn = 1
	if f.format == "aider" {
		return 0, true
	}
	if f.inv.resume == "" {
		f.session = newID()
		return 0, true
	}
	f.session = f.inv.resume
	var st sessionState
	b, err := os.ReadFile(f.sessionFile(f.session))
	if err == nil && json.Unmarshal(b, &st) == nil && st.Turns > 0 {
		f.turn = st.Turns + 1
		return 0, true
	}
	msg := "No conversation found with session ID: " + f.session
	switch f.format {
	case "claude":
		writeLine(f.stdout, obj{{"type", "result"}, {"subtype", "error_during_execution"}, {"duration_ms", 0},
			{"duration_api_ms", 0}, {"is_error", true}, {"num_turns", 0}, {"session_id", newID()},
			{"total_cost_usd", 0}, {"usage", claudeUsage(0, 0, 0, 0)}, {"modelUsage", obj{}},
			{"permission_denials", []any{}}, {"uuid", newID()}, {"errors", []string{msg}}})
		fmt.Fprintln(f.stderr, msg)
	case "codex":
		fmt.Fprintf(f.stderr, "Error: thread/resume: thread/resume failed: no rollout found for thread id %s (code -32600)\n", f.session)
	default:
		fmt.Fprintf(f.stderr, "Error: chat %s not found (fakeagent's wording; cursor-agent's is unknown)\n", f.session)
	}
	return 1, false
}

// saveSession remembers the session's turns for a later resume.
func (f *fake) saveSession() {
	if f.session == "" {
		return
	}
	path := f.sessionFile(f.session)
	b, _ := json.Marshal(sessionState{Turns: f.turn})
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err == nil {
		err = os.WriteFile(path, b, 0o600)
		if err != nil {
			fmt.Fprintln(f.stderr, "fakeagent: remember the session:", err)
		}
	}
}

// newID returns a random UUID (version 4).
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Directives.

// directives runs the directive lines of the prompt in order.
func (f *fake) directives(prompt string) error {
	for line := range strings.Lines(prompt) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "@") {
			continue
		}
		inner, isReview := strings.CutPrefix(line, "@review ")
		if isReview != (f.getenv("AQ_RUN_KIND") == "review") {
			continue
		}
		line = strings.TrimSpace(inner)
		if err := f.directive(line); err != nil {
			return err
		}
	}
	return nil
}

// directive runs one directive line ("@name args…").
func (f *fake) directive(line string) error {
	name, rest, _ := strings.Cut(strings.TrimPrefix(line, "@"), " ")
	rest = strings.TrimSpace(rest)
	switch name {
	case "write", "append":
		path, text, _ := strings.Cut(rest, " ")
		return f.writeFile(path, text, name == "append")
	case "conflict-resolve":
		path, text, _ := strings.Cut(rest, " ")
		b, err := os.ReadFile(f.local(path))
		if err != nil {
			return fmt.Errorf("@conflict-resolve %s: %w", path, err)
		}
		if !bytes.Contains(b, []byte("<<<<<<< ")) || !bytes.Contains(b, []byte(">>>>>>> ")) {
			return nil
		}
		return f.writeFile(path, text, false)
	case "commit":
		return f.commit(rest)
	case "complete", "complete-no-changes":
		f.summary = rest
		return f.call(name, func(ctx context.Context, c *api.RPCClient) error {
			return c.Complete(ctx, models.Completion{Summary: rest, NoChanges: name == "complete-no-changes"})
		})
	case "complete-outputs":
		f.summary = "outputs"
		return f.call(name, func(ctx context.Context, c *api.RPCClient) error {
			return c.Complete(ctx, models.Completion{Summary: "outputs", Outputs: json.RawMessage(rest)})
		})
	case "deny":
		f.denied = append(f.denied, rest)
		return nil
	case "mcp-pending":
		return nil // read by the init line
	case "refuse-write":
		if f.format == "codex" {
			fmt.Fprintf(f.stderr, "%s ERROR codex_core::tools::router: error=patch rejected: writing outside of the project; rejected by user approval settings\n",
				time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"))
		}
		return nil
	case "fail":
		return f.call(name, func(ctx context.Context, c *api.RPCClient) error { return c.Fail(ctx, rest) })
	case "ask":
		return f.call(name, func(ctx context.Context, c *api.RPCClient) error {
			answer, err := c.Ask(ctx, models.Ask{Question: rest})
			if err != nil {
				return err
			}
			return os.WriteFile(f.local("ANSWER.txt"), []byte(answer+"\n"), 0o644)
		})
	case "plan":
		var tasks []models.BatchTask
		if err := json.Unmarshal([]byte(rest), &tasks); err != nil {
			return fmt.Errorf("@plan: not a JSON array of tasks: %w", err)
		}
		return f.call(name, func(ctx context.Context, c *api.RPCClient) error {
			_, err := c.ProposePlan(ctx, tasks)
			return err
		})
	case "approve":
		return f.call(name, func(ctx context.Context, c *api.RPCClient) error { return c.Approve(ctx, rest) })
	case "reject":
		return f.call(name, func(ctx context.Context, c *api.RPCClient) error { return c.Reject(ctx, rest) })
	case "ratelimit":
		secs, err := strconv.Atoi(rest)
		if err != nil || secs < 0 {
			return fmt.Errorf("@ratelimit %q: want a number of seconds", rest)
		}
		return exitNow{f.out.rateLimit(time.Now().Add(time.Duration(secs) * time.Second))}
	case "exit":
		code, err := strconv.Atoi(rest)
		if err != nil {
			return fmt.Errorf("@exit %q: want an exit code", rest)
		}
		return exitNow{code}
	case "wait-for":
		if !filepath.IsAbs(rest) {
			return fmt.Errorf("@wait-for %q: want an absolute path", rest)
		}
		for {
			if _, err := os.Stat(rest); err == nil {
				return nil
			}
			time.Sleep(20 * time.Millisecond) // polls a file the test creates; the test itself never sleeps
		}
	case "sleep-until-killed":
		select {} // main's signal handler ends the process
	case "only-attempt":
		n, inner, _ := strings.Cut(rest, " ")
		if strings.TrimSpace(f.getenv("AQ_ATTEMPT")) != n {
			return nil
		}
		return f.directive(strings.TrimSpace(inner))
	}
	fmt.Fprintf(f.stderr, "fakeagent: ignoring unknown directive %q\n", line)
	return nil
}

// local is path inside the working directory.
func (f *fake) local(path string) string { return filepath.Join(f.dir, filepath.FromSlash(path)) }

// writeFile writes or appends text and a newline to path, which must stay
// inside the working directory.
func (f *fake) writeFile(path, text string, appendTo bool) error {
	if path == "" || !filepath.IsLocal(filepath.FromSlash(path)) {
		return fmt.Errorf("@write %q: want a relative path inside the working directory", path)
	}
	full := f.local(path)
	_, statErr := os.Stat(full)
	created := errors.Is(statErr, os.ErrNotExist)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return fmt.Errorf("@write %s: %w", path, err)
	}
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if appendTo {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	file, err := os.OpenFile(full, flags, 0o644)
	if err != nil {
		return fmt.Errorf("@write %s: %w", path, err)
	}
	_, err = io.WriteString(file, text+"\n")
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("@write %s: %w", path, err)
	}
	f.out.wrote(path, created)
	return nil
}

// commit commits every change in the working directory with the git CLI.
func (f *fake) commit(msg string) error {
	if msg == "" {
		msg = "fakeagent commit"
	}
	if _, err := f.git("add", "-A"); err != nil {
		return err
	}
	if _, err := f.git("diff", "--cached", "--quiet"); err == nil {
		fmt.Fprintln(f.stderr, "fakeagent: @commit: nothing to commit")
		return nil
	}
	if _, err := f.git("-c", "commit.gpgsign=false", "commit", "-q", "--no-verify", "-m", msg); err != nil {
		return err
	}
	hash, err := f.git("rev-parse", "--short", "HEAD")
	if err != nil {
		return err
	}
	f.out.committed(hash, msg)
	return nil
}

// git runs git in the working directory as the fake agent.
func (f *fake) git(args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = f.dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=fakeagent", "GIT_AUTHOR_EMAIL=fakeagent@example.invalid",
		"GIT_COMMITTER_NAME=fakeagent", "GIT_COMMITTER_EMAIL=fakeagent@example.invalid", "GIT_TERMINAL_PROMPT=0")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// call makes one RPC call; without the run's RPC settings the fake exits
// 2, and a refused call is only reported.
func (f *fake) call(directive string, do func(context.Context, *api.RPCClient) error) error {
	if f.rpc == nil {
		c, err := api.NewRPCClientFromEnv(f.getenv)
		if err != nil {
			fmt.Fprintf(f.stderr, "fakeagent: @%s needs the agent RPC: %v\n", directive, err)
			return exitNow{2}
		}
		f.rpc = c
	}
	if denial := f.refusal(directive); denial != "" {
		fmt.Fprintf(f.stderr, "fakeagent: @%s: %s\n", directive, denial)
		return nil
	}
	if err := do(context.Background(), f.rpc); err != nil {
		fmt.Fprintf(f.stderr, "fakeagent: @%s: %v\n", directive, err)
	}
	return nil
}

// mcpTools name the agentqueued MCP tool behind each RPC directive.
var mcpTools = map[string]string{"complete": "complete", "fail": "fail", "ask": "ask", "plan": "propose_plan",
	"approve": "approve", "reject": "reject"}

// refusal returns the CLI's words refusing the agentqueued tool behind an
// RPC directive, or "" when the CLI lets the call through (see the package
// doc).
func (f *fake) refusal(directive string) string {
	tool := "mcp__agentqueued__" + mcpTools[directive]
	shell := ""
	if bin := f.getenv("AQ_BIN"); bin != "" {
		shell = "Bash(" + agent.AgentCommand(bin) + ":*)"
	}
	switch f.format {
	case "claude":
		if f.inv.permissionMode == "bypassPermissions" || (shell != "" && slices.Contains(f.inv.allowedTools, shell)) ||
			(f.claudeServer() && (slices.Contains(f.inv.allowedTools, "mcp__agentqueued") || slices.Contains(f.inv.allowedTools, tool))) {
			return ""
		}
		return "Claude requested permissions to use " + tool + ", but you haven't granted it yet."
	case "codex":
		if (slices.ContainsFunc(f.inv.overrides, func(o string) bool { return strings.HasPrefix(o, "mcp_servers.agentqueued.command=") }) &&
			slices.Contains(f.inv.overrides, `mcp_servers.agentqueued.default_tools_approval_mode="approve"`)) ||
			(f.inv.permissionMode == "danger-full-access" && shell != "") {
			return ""
		}
		return "MCP tool call requires approval, but approval policy is never"
	}
	return ""
}

// claudeServer reports whether one of claude's --mcp-config files names
// the agentqueued server.
func (f *fake) claudeServer() bool {
	for _, path := range f.inv.mcpConfig {
		b, err := os.ReadFile(resolve(f.dir, path))
		if err != nil {
			b = []byte(path) // inline JSON
		}
		var cfg struct {
			MCPServers map[string]json.RawMessage `json:"mcpServers"`
		}
		if json.Unmarshal(b, &cfg) == nil && cfg.MCPServers["agentqueued"] != nil {
			return true
		}
	}
	return false
}

// Output.

// emitter prints one CLI's stream.
type emitter interface {
	start()
	wrote(path string, created bool)
	committed(hash, msg string)
	// rateLimit prints the usage-limit output and returns the exit code.
	rateLimit(reset time.Time) int
	finish(summary string)
}

func newEmitter(f *fake, prompt string) emitter {
	switch f.format {
	case "claude":
		return &claudeOut{f: f, msgID: "msg_fake" + strings.ReplaceAll(newID(), "-", "")[:20],
			mcpPending: strings.Contains("\n"+prompt+"\n", "\n@mcp-pending\n")}
	case "codex":
		return &codexOut{f: f}
	case "cursor":
		return &cursorOut{f: f, prompt: prompt, requestID: newID()}
	}
	return &aiderOut{f: f}
}

// obj is a JSON object that keeps its keys in order, as the CLIs print them.
type obj []kv

type kv struct {
	k string
	v any
}

// MarshalJSON writes the object in key order without HTML escaping.
func (o obj) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, err := marshal(f.k)
		if err != nil {
			return nil, err
		}
		v, err := marshal(f.v)
		if err != nil {
			return nil, err
		}
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// marshal encodes v without escaping <, > and & ("<synthetic>" stays as is).
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// writeLine prints one JSON line.
func writeLine(w io.Writer, o obj) {
	b, err := o.MarshalJSON()
	if err != nil {
		panic(err) // only plain values are ever printed
	}
	bw := bufio.NewWriter(w)
	bw.Write(b)        //nolint:errcheck // flushed below
	bw.WriteByte('\n') //nolint:errcheck // flushed below
	bw.Flush()         //nolint:errcheck // a closed stdout ends the run anyway
}

func claudeUsage(in, out, read, write int) obj {
	return obj{{"input_tokens", in}, {"cache_creation_input_tokens", write}, {"cache_read_input_tokens", read},
		{"output_tokens", out}, {"server_tool_use", obj{{"web_search_requests", 0}, {"web_fetch_requests", 0}}},
		{"service_tier", "standard"}}
}

// claudeOut prints Claude Code's stream-json (shapes of 2.1.x recordings):
// every assistant line belongs to one message and repeats its usage.
type claudeOut struct {
	f          *fake
	msgID      string
	mcpPending bool
}

func (c *claudeOut) model() string {
	if c.f.inv.model != "" {
		return c.f.inv.model
	}
	return "claude-fake-1"
}

func (c *claudeOut) start() {
	mode := c.f.inv.permissionMode
	if mode == "" {
		mode = "default"
	}
	servers := []obj{}
	for _, path := range c.f.inv.mcpConfig {
		var cfg struct {
			MCPServers map[string]json.RawMessage `json:"mcpServers"`
		}
		status := "connected"
		if c.mcpPending {
			status = "pending"
		}
		b, err := os.ReadFile(path)
		if err != nil || json.Unmarshal(b, &cfg) != nil {
			status = "failed"
		}
		for name := range cfg.MCPServers {
			servers = append(servers, obj{{"name", name}, {"status", status}})
		}
	}
	writeLine(c.f.stdout, obj{{"type", "system"}, {"subtype", "init"}, {"cwd", c.f.dir}, {"session_id", c.f.session},
		{"tools", []string{"Task", "Bash", "Glob", "Grep", "Read", "Edit", "Write"}}, {"mcp_servers", servers},
		{"model", c.model()}, {"permissionMode", mode}, {"apiKeySource", "none"}, {"claude_code_version", "2.1.285"},
		{"output_style", "default"}, {"uuid", newID()}})
	c.text("Working on the task.")
}

func (c *claudeOut) text(s string) {
	writeLine(c.f.stdout, obj{{"type", "assistant"}, {"message", obj{{"model", c.model()}, {"id", c.msgID},
		{"type", "message"}, {"role", "assistant"}, {"content", []obj{{{"type", "text"}, {"text", s}}}},
		{"stop_reason", nil}, {"stop_sequence", nil},
		{"usage", claudeUsage(inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens)}}},
		{"parent_tool_use_id", nil}, {"session_id", c.f.session}, {"uuid", newID()}})
}

func (c *claudeOut) wrote(path string, created bool) {
	verb := "Updated"
	if created {
		verb = "Created"
	}
	c.text(verb + " " + path + ".")
}

func (c *claudeOut) committed(hash, msg string) { c.text("Committed " + hash + " " + msg + ".") }

func (c *claudeOut) rateLimit(reset time.Time) int {
	at := reset.Unix()
	if reset.After(time.Unix(at, 0)) {
		at++
	}
	words := "You've hit your limit · resets " + strings.ToLower(reset.UTC().Format("3:04PM")) + " (UTC)"
	writeLine(c.f.stdout, obj{{"type", "rate_limit_event"}, {"rate_limit_info", obj{{"status", "rejected"},
		{"resetsAt", at}, {"rateLimitType", "five_hour"}, {"overageStatus", "rejected"},
		{"overageDisabledReason", "out_of_credits"}, {"isUsingOverage", false}}},
		{"uuid", newID()}, {"session_id", c.f.session}})
	writeLine(c.f.stdout, obj{{"type", "assistant"}, {"message", obj{{"id", newID()}, {"container", nil},
		{"model", "<synthetic>"}, {"role", "assistant"}, {"stop_reason", "stop_sequence"}, {"stop_sequence", ""},
		{"type", "message"}, {"usage", claudeUsage(0, 0, 0, 0)}, {"content", []obj{{{"type", "text"}, {"text", words}}}},
		{"context_management", nil}}}, {"parent_tool_use_id", nil}, {"session_id", c.f.session}, {"uuid", newID()},
		{"error", "rate_limit"}})
	writeLine(c.f.stdout, obj{{"type", "result"}, {"subtype", "success"}, {"is_error", true}, {"api_error_status", 429},
		{"duration_ms", 611}, {"duration_api_ms", 0}, {"num_turns", 1}, {"result", words}, {"stop_reason", "stop_sequence"},
		{"session_id", c.f.session}, {"total_cost_usd", 0}, {"usage", claudeUsage(0, 0, 0, 0)}, {"modelUsage", obj{}},
		{"permission_denials", []any{}}, {"terminal_reason", "api_error"}, {"uuid", newID()}})
	return 1
}

func (c *claudeOut) finish(summary string) {
	c.text(summary)
	denials := []any{}
	for i, tool := range c.f.denied {
		denials = append(denials, obj{{"tool_name", tool}, {"tool_use_id", fmt.Sprintf("toolu_fake%02d", i+1)},
			{"tool_input", obj{{"file_path", filepath.Join(c.f.dir, "denied.txt")}}}})
	}
	writeLine(c.f.stdout, obj{{"type", "result"}, {"subtype", "success"}, {"is_error", false}, {"duration_ms", 2360},
		{"duration_api_ms", 2325}, {"num_turns", 1}, {"result", summary}, {"stop_reason", "end_turn"},
		{"session_id", c.f.session}, {"total_cost_usd", 0.0123},
		{"usage", claudeUsage(inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens)},
		{"modelUsage", obj{{c.model(), obj{{"inputTokens", inputTokens}, {"outputTokens", outputTokens},
			{"cacheReadInputTokens", cacheReadTokens}, {"cacheCreationInputTokens", cacheWriteTokens}, {"costUSD", 0.0123}}}}},
		{"permission_denials", denials}, {"terminal_reason", "completed"}, {"uuid", newID()}})
}

// codexOut prints codex exec --json lines; usage is the thread's running
// total over its turns.
type codexOut struct {
	f     *fake
	items int
}

func (c *codexOut) item(o obj) {
	o = append(obj{{"id", fmt.Sprintf("item_%d", c.items)}}, o...)
	c.items++
	writeLine(c.f.stdout, obj{{"type", "item.completed"}, {"item", o}})
}

func (c *codexOut) start() {
	writeLine(c.f.stdout, obj{{"type", "thread.started"}, {"thread_id", c.f.session}})
	writeLine(c.f.stdout, obj{{"type", "turn.started"}})
	c.item(obj{{"type", "reasoning"}, {"text", "**Working on the task**"}})
}

func (c *codexOut) wrote(path string, created bool) {
	kind := "update"
	if created {
		kind = "add"
	}
	c.item(obj{{"type", "file_change"}, {"changes", []obj{{{"path", c.f.local(path)}, {"kind", kind}}}}, {"status", "completed"}})
}

func (c *codexOut) committed(hash, msg string) {
	c.item(obj{{"type", "command_execution"}, {"command", "bash -lc 'git commit -m " + strconv.Quote(msg) + "'"},
		{"aggregated_output", "[" + hash + "] " + msg + "\n"}, {"exit_code", 0}, {"status", "completed"}})
}

func (c *codexOut) rateLimit(reset time.Time) int {
	// Codex prints minutes in local time: round up so the reset is not early.
	if t := reset.Truncate(time.Minute); t.Before(reset) {
		reset = t.Add(time.Minute)
	}
	reset = reset.Local()
	msg := "You've hit your usage limit. Visit https://chatgpt.com/codex/settings/usage to purchase more credits or try again at " +
		reset.Format("Jan ") + ordinal(reset.Day()) + reset.Format(", 2006 3:04 PM") + "."
	writeLine(c.f.stdout, obj{{"type", "error"}, {"message", msg}})
	writeLine(c.f.stdout, obj{{"type", "turn.failed"}, {"error", obj{{"message", msg}}}})
	return 1
}

// ordinal writes a day of the month as codex does: 1st, 2nd, 3rd, 4th.
func ordinal(d int) string {
	suffix := "th"
	switch {
	case d%100 >= 11 && d%100 <= 13:
	case d%10 == 1:
		suffix = "st"
	case d%10 == 2:
		suffix = "nd"
	case d%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(d) + suffix
}

func (c *codexOut) finish(summary string) {
	c.item(obj{{"type", "agent_message"}, {"text", summary}})
	n := c.f.turn
	writeLine(c.f.stdout, obj{{"type", "turn.completed"}, {"usage", obj{
		{"input_tokens", n * (inputTokens + cacheReadTokens + cacheWriteTokens)}, {"cached_input_tokens", n * cacheReadTokens},
		{"cache_write_input_tokens", n * cacheWriteTokens}, {"output_tokens", n * outputTokens},
		{"reasoning_output_tokens", 0}}}})
}

// cursorOut prints cursor-agent stream-json (shapes of the 2026.01 recordings
// plus the 2026.09 usage).
type cursorOut struct {
	f         *fake
	prompt    string
	requestID string
	calls     int
}

func (c *cursorOut) start() {
	writeLine(c.f.stdout, obj{{"type", "system"}, {"subtype", "init"}, {"apiKeySource", "login"}, {"cwd", c.f.dir},
		{"session_id", c.f.session}, {"model", "Auto"}, {"permissionMode", "default"}})
	writeLine(c.f.stdout, obj{{"type", "user"}, {"message", obj{{"role", "user"},
		{"content", []obj{{{"type", "text"}, {"text", c.prompt}}}}}}, {"session_id", c.f.session}})
	writeLine(c.f.stdout, obj{{"type", "thinking"}, {"subtype", "completed"}, {"session_id", c.f.session},
		{"timestamp_ms", time.Now().UnixMilli()}})
}

func (c *cursorOut) tool(kind string, args, result obj) {
	c.calls++
	id := fmt.Sprintf("call_fake%d\nfc_fake%d", c.calls, c.calls)
	modelCall := c.requestID + "-0-fake"
	for _, sub := range []string{"started", "completed"} {
		call := obj{{"args", args}}
		if sub == "completed" {
			call = append(call, kv{"result", obj{{"success", result}}})
		}
		writeLine(c.f.stdout, obj{{"type", "tool_call"}, {"subtype", sub}, {"call_id", id},
			{"tool_call", obj{{kind, call}}}, {"model_call_id", modelCall}, {"session_id", c.f.session},
			{"timestamp_ms", time.Now().UnixMilli()}})
	}
}

func (c *cursorOut) wrote(path string, _ bool) {
	c.tool("writeToolCall", obj{{"path", c.f.local(path)}}, obj{{"path", c.f.local(path)}})
}

func (c *cursorOut) committed(hash, msg string) {
	cmd := "git commit -m " + strconv.Quote(msg)
	c.tool("shellToolCall", obj{{"command", cmd}, {"workingDirectory", ""}, {"timeout", 30000}},
		obj{{"command", cmd}, {"workingDirectory", ""}, {"exitCode", 0}, {"signal", ""},
			{"stdout", "[" + hash + "] " + msg + "\n"}, {"stderr", ""}, {"executionTime", 40}})
}

func (c *cursorOut) rateLimit(reset time.Time) int {
	writeLine(c.f.stdout, obj{{"type", "result"}, {"subtype", "error"}, {"duration_ms", 900}, {"duration_api_ms", 0},
		{"is_error", true}, {"result", "You've hit your usage limit. Try again at " + reset.UTC().Format(time.RFC3339) + "."},
		{"session_id", c.f.session}, {"request_id", c.requestID}})
	return 1
}

func (c *cursorOut) finish(summary string) {
	writeLine(c.f.stdout, obj{{"type", "assistant"}, {"message", obj{{"role", "assistant"},
		{"content", []obj{{{"type", "text"}, {"text", summary}}}}}}, {"session_id", c.f.session}})
	writeLine(c.f.stdout, obj{{"type", "result"}, {"subtype", "success"}, {"duration_ms", 7474}, {"duration_api_ms", 7474},
		{"is_error", false}, {"result", summary}, {"session_id", c.f.session}, {"request_id", c.requestID},
		{"usage", obj{{"inputTokens", inputTokens}, {"outputTokens", outputTokens}, {"cacheReadTokens", cacheReadTokens},
			{"cacheWriteTokens", cacheWriteTokens}}}})
}

// aiderOut prints aider's plain text (0.86 wording).
type aiderOut struct{ f *fake }

func (a *aiderOut) println(s string) { fmt.Fprintln(a.f.stdout, s) }

func (a *aiderOut) start() {
	model := a.f.inv.model
	if model == "" {
		model = "openai/gpt-fake"
	}
	a.println("Aider v0.86.2")
	a.println("Model: " + model + " with diff edit format")
	if _, err := os.Stat(filepath.Join(a.f.dir, ".git")); err == nil {
		a.println("Git repo: .git")
	} else {
		a.println("Git repo: none")
	}
	a.println("Repo-map: using 4096 tokens, auto refresh")
	a.println("")
	a.println("I'll make the requested changes.")
	a.println("")
	a.println(fmt.Sprintf("Tokens: %.1fk sent, %d cache write, %d cache hit, %d received.",
		float64(inputTokens+cacheReadTokens+cacheWriteTokens)/1000, cacheWriteTokens, cacheReadTokens, outputTokens))
	a.println("Cost: $0.01 message, $0.01 session.")
}

func (a *aiderOut) wrote(path string, _ bool) { a.println("Applied edit to " + path) }

func (a *aiderOut) committed(hash, msg string) { a.println("Commit " + hash + " " + msg) }

func (a *aiderOut) rateLimit(time.Time) int {
	a.println(`litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached for requests`)
	a.println("The API provider has rate limited you. Try again later or check your quotas.")
	return 0 // aider exits 0 whatever the LLM said
}

func (a *aiderOut) finish(string) {}
