package agent_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/models"
)

// describe renders an event as one comparable line.
func describe(e agent.Event) string {
	switch e.Kind {
	case agent.EventSession:
		return "session " + e.SessionID
	case agent.EventUsage:
		u := e.Usage
		return fmt.Sprintf("usage in=%d out=%d read=%d write=%d", u.Input, u.Output, u.CacheRead, u.CacheWrite)
	case agent.EventRateLimit:
		return fmt.Sprintf("rate_limit reset=%s cap=%t %q", resetString(e.ResetAt), e.UsageCap, e.Error)
	case agent.EventMessage:
		return fmt.Sprintf("message %q", e.Text)
	case agent.EventResult:
		extra := ""
		if e.CostUSD != nil {
			extra += fmt.Sprintf(" cost=%g", *e.CostUSD)
		}
		for _, d := range e.Denied {
			extra += fmt.Sprintf(" denied=%s/%s", d.Tool, d.ToolUseID)
		}
		if e.IsError {
			return fmt.Sprintf("error %q invalid=%t%s", e.Error, e.SessionInvalid, extra)
		}
		return fmt.Sprintf("ok %q%s", e.Summary, extra)
	case agent.EventCLI:
		return fmt.Sprintf("cli version=%s not_ready=%v", e.Version, e.MCPNotReady)
	}
	return fmt.Sprintf("unknown %+v", e)
}

func resetString(t *time.Time) string {
	if t == nil {
		return "none"
	}
	return t.UTC().Format(time.RFC3339)
}

func unixReset(sec int64) string { return time.Unix(sec, 0).UTC().Format(time.RFC3339) }

// streamLines reads a test stream; section, when set, keeps only the lines
// after the comment line "# <section>" up to the next "# run" comment.
func streamLines(t testing.TB, file, section string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "streams", file))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	if section == "" {
		return lines
	}
	var out [][]byte
	in := false
	for _, l := range lines {
		if bytes.HasPrefix(l, []byte("# run")) {
			in = string(l) == "# "+section
			continue
		}
		if in {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no section %q", file, section)
	}
	return out
}

// run feeds lines to a new parser of adapter a and ends it with exitCode.
func run(a agent.Adapter, rc agent.RunContext, lines [][]byte, exitCode int) []string {
	p := a.NewParser(rc)
	var got []string
	for _, l := range lines {
		for _, e := range p.Line(l) {
			got = append(got, describe(e))
		}
	}
	for _, e := range p.End(exitCode) {
		got = append(got, describe(e))
	}
	return got
}

type streamCase struct {
	name    string
	adapter agent.Adapter
	file    string
	section string
	rc      agent.RunContext
	exit    int
	want    []string
}

func checkStreams(t *testing.T, cases []streamCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var lines [][]byte
			if c.file != "" {
				lines = streamLines(t, c.file, c.section)
			}
			got := run(c.adapter, c.rc, lines, c.exit)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("events of %s:\n got: %s\nwant: %s", c.file, strings.Join(got, "\n      "), strings.Join(c.want, "\n      "))
			}
		})
	}
}

func TestClaudeStreams(t *testing.T) {
	t.Parallel()
	const (
		s17     = "1d1e46f9-35c7-4834-b529-846d5bb82288"
		s285    = "4cda4f2a-2a49-499b-af37-c6f4739bd0c7"
		glued   = "c0ffee00-1234-4abc-8def-0123456789ab"
		lost    = "3f9e6a10-2b7c-4d1e-8f00-123456789abc"
		limit21 = "You've hit your limit · resets 5pm (Europe/Berlin)"
	)
	cl := agent.Claude{}
	checkStreams(t, []streamCase{
		{name: "success 2.1.7", adapter: cl, file: "claude-stream-json-success.jsonl", want: []string{
			"session " + s17,
			"cli version=2.1.7 not_ready=[]",
			"usage in=10 out=5 read=0 write=21570",
			`message "4"`,
			"usage in=10 out=25 read=0 write=21570",
			`ok "4" cost=0.1354875`,
		}},
		{name: "tool use 2.1.285, usage repeated per content block", adapter: cl, file: "claude-stream-json-tooluse-2.1.285.jsonl", want: []string{
			"session " + s285,
			"cli version=2.1.285 not_ready=[]",
			"usage in=10 out=3 read=13780 write=7424",
			"usage in=18 out=4 read=34984 write=29690",
			`message "901"`,
			"usage in=18 out=234 read=34984 write=29690",
			`ok "901" cost=0.06406640000000001`,
		}},
		{name: "canary 2026-08, keys out of order, redacted session", adapter: cl, file: "claude-stream-json-canary-2026-08.jsonl", want: []string{
			"usage in=2 out=1 read=25307 write=11634",
			`message "canary"`,
			"usage in=2 out=4 read=25307 write=11634",
			`ok "canary" cost=0.13005850000000002`,
		}},
		{name: "max turns", adapter: cl, file: "claude-stream-json-error-max-turns.jsonl", exit: 1, want: []string{
			"usage in=2409 out=15946 read=1617801 write=29104",
			`error "Reached maximum number of turns (40) (error_max_turns, terminal_reason max_turns)" invalid=false cost=1.4020935000000005`,
		}},
		{name: "rejected rate limit then plain text, no result", adapter: cl, file: "claude-rate-limit-rejected.txt", exit: 1, want: []string{
			"session test-session-027",
			fmt.Sprintf("rate_limit reset=%s cap=false %q", unixReset(1747017000), "Claude rate limit reached"),
			fmt.Sprintf("rate_limit reset=%s cap=true %q", unixReset(1747017000), "You're out of extra usage · resets 1:10am (Asia/Saigon)"),
			`error "the stream ended without a result (exit status 1)" invalid=false`,
		}},
		{name: "issue 38673: overage rejected is no limit, empty result", adapter: cl, file: "claude-issue-38673-overage-rejected.jsonl", want: []string{
			"session REDACTED",
			"cli version=2.1.83 not_ready=[]",
			"usage in=3 out=2 read=14707 write=2783",
			`message "Hello."`,
			"usage in=3 out=6 read=14707 write=2783",
			`ok "Hello." cost=0.024`,
		}},
		{name: "help text is no stream", adapter: cl, file: "claude-cli-help-2.1.x.txt", want: []string{
			`error "the stream ended without a result (exit status 0)" invalid=false`,
		}},
		{name: "resume of an unknown session", adapter: cl, file: "synthetic-claude-resume-unknown-session.jsonl", exit: 1,
			rc: agent.RunContext{SessionID: lost}, want: []string{
				`error "No conversation found with session ID: ` + lost + ` (error_during_execution)" invalid=true cost=0`,
			}},
		{name: "1.0.x usage limit text", adapter: cl, file: "synthetic-claude-usage-limit-1.0.x.jsonl", want: []string{
			"session 0d6b1c4e-8a53-4b67-9d3c-1e0c2f6a7b88",
			fmt.Sprintf("rate_limit reset=%s cap=true %q", unixReset(1751990400), "Claude AI usage limit reached"),
			`error "Claude AI usage limit reached|1751990400" invalid=false cost=0`,
		}},
		{name: "2.1.x usage limit", adapter: cl, file: "synthetic-claude-usage-limit-2.1.x.jsonl", exit: 1, want: []string{
			"session a41c9e07-3d2b-4f68-8c15-6e9d0b7a2f33",
			"cli version=2.1.173 not_ready=[]",
			fmt.Sprintf("rate_limit reset=%s cap=true %q", unixReset(1790791200), "Claude rate limit reached (five_hour)"),
			fmt.Sprintf("rate_limit reset=%s cap=true %q", unixReset(1790791200), limit21),
			fmt.Sprintf("error %q invalid=false cost=0", limit21+" (terminal_reason api_error, API status 429)"),
		}},
		{name: "glued lines, garbage, unknown types, second result", adapter: cl, file: "synthetic-claude-glued-and-garbage.jsonl", want: []string{
			"session " + glued,
			"cli version=2.1.74 not_ready=[]",
			"usage in=5 out=7 read=100 write=0",
			`message "Recovered text"`,
			"usage in=8 out=9 read=100 write=0",
			`message "Second"`,
			`ok "All done"`,
		}},
		{name: "writes denied: a success that is a failure, MCP server pending at start", adapter: cl,
			file: "synthetic-claude-permission-denied.jsonl", rc: agent.RunContext{Profile: models.Profile{PermissionMode: "default"}},
			want: []string{
				"session 5b1d7e02-9c4a-4e8f-b3d6-7a2c1e0f9d44",
				"cli version=2.1.197 not_ready=[agentqueued (pending)]",
				"usage in=20 out=30 read=0 write=1000",
				"usage in=45 out=42 read=1000 write=1000",
				`message "I could not write the file: permission was denied."`,
				`error "claude denied 2 tool call(s) (Write, mcp__agentqueued__progress): their work was not done. ` +
					`Allow them in the agent's profile: permission_mode (now \"default\"; acceptEdits allows file edits) or ` +
					`allowed_tools (now none)" invalid=false cost=0.0123 denied=Write/toolu_01Wr1teDen1ed ` +
					`denied=mcp__agentqueued__progress/toolu_01Pr0gressDen`,
			}},
		{name: "an MCP server failed at start, no denials", adapter: cl, file: "synthetic-claude-mcp-failed.jsonl", want: []string{
			"session 8e2f4a61-0d3b-4c7e-9a15-b6c8d2e4f013",
			"cli version=2.1.240 not_ready=[docs (failed)]",
			"usage in=5 out=3 read=0 write=0",
			`ok "Done."`,
		}},
		{name: "cut short", adapter: cl, file: "synthetic-claude-cut-short.jsonl", exit: 143, want: []string{
			"session " + glued,
			"cli version=2.1.238 not_ready=[]",
			"usage in=12 out=20 read=4000 write=300",
			`message "Starting on the task."`,
			`error "the stream ended without a result (exit status 143)" invalid=false`,
		}},
	})
}

func TestCodexStreams(t *testing.T) {
	t.Parallel()
	const (
		nov    = "019ab7c5-3c6c-7dd3-8e6e-cec2a5a49a62"
		luna   = "0199f000-0419-7000-8000-00000000c0de"
		synth  = "019c0a6e-1f2b-7c3d-9e4f-5a6b7c8d9e0f"
		limitX = "You've hit your usage limit. Visit https://chatgpt.com/codex/settings/usage to purchase more credits or try again at Jul 5th, 2026 8:19 PM."
	)
	run1 := models.TokenUsage{Input: 4768, Output: 6, CacheRead: 5888}
	run2 := models.TokenUsage{Input: 4784, Output: 7, CacheRead: 5888}
	novText := "- Unable to check hygiene (read-only mode, no commands run); repository state unknown.\n- Recommend running `git status` and your lint/test suite to surface any hygiene issues when write access is available."
	resumeText := "- Still no repo visibility (read-only, no commands run); hygiene status remains unknown.\n- When you can, run `git status` plus your usual lint/tests to surface any pending issues."
	cx := agent.Codex{}
	checkStreams(t, []streamCase{
		{name: "0.46.0 command", adapter: cx, file: "codex-exec-json.jsonl", want: []string{
			"session 019a2d7b-231d-7290-acc1-6bc6571440da",
			`message "` + "`test.js` simply contains `console.log('Hello World');`, so running it will print the string “Hello World” to the standard output." + `"`,
			"usage in=967 out=204 read=5120 write=0",
			`ok "` + "`test.js` simply contains `console.log('Hello World');`, so running it will print the string “Hello World” to the standard output." + `"`,
		}},
		{name: "file change", adapter: cx, file: "codex-exec-json-file-change.jsonl", want: []string{
			"session 019a2d7a-8e1c-7111-b1a6-8cec551a55a0",
			"message \"Created `hello.txt` containing `Hello from Codex`.\"",
			"usage in=1912 out=51 read=4096 write=0",
			"ok \"Created `hello.txt` containing `Hello from Codex`.\"",
		}},
		{name: "a failed file change fails the run, 0.171.0", adapter: cx, file: "codex-exec-json-file-change-failed-0.171.0.jsonl",
			rc: agent.RunContext{Profile: models.Profile{PermissionMode: "workspace-write"}}, want: []string{
				"session 01a2508e-616f-70d0-aa1f-ca1eb88ae78c",
				`message "Could not."`,
				"usage in=201 out=20 read=0 write=0",
				`error "codex could not make 1 file change(s) (add /work/repo/adir): its file_change failed, so that work was not done. ` +
					`Codex's sandbox or the file system refused the write (codex's own words are in the run's log); ` +
					`check the checkout and the agent's permission_mode (now \"workspace-write\")" invalid=false`,
			}},
		{name: "a failed file change redone", adapter: cx, file: "synthetic-codex-file-change-redone.jsonl", want: []string{
			"session 01a2508e-616f-70d0-aa1f-ca1eb88ae78d",
			`message "Written on the second try."`,
			"usage in=201 out=20 read=0 write=0",
			`ok "Written on the second try."`,
		}},
		{name: "fresh 2025-11", adapter: cx, file: "codex-exec-json-fresh-2025-11.jsonl", want: []string{
			"session " + nov,
			fmt.Sprintf("message %q", novText),
			"usage in=7499 out=111 read=0 write=0",
			fmt.Sprintf("ok %q", novText),
		}},
		{name: "resume 2025-11 reports per-turn usage", adapter: cx, file: "codex-exec-json-resume-2025-11.jsonl",
			rc: agent.RunContext{SessionID: nov, SessionUsage: models.TokenUsage{Input: 7499, Output: 111}}, want: []string{
				"session " + nov,
				fmt.Sprintf("message %q", resumeText),
				"usage in=529 out=109 read=7040 write=0",
				fmt.Sprintf("ok %q", resumeText),
			}},
		{name: "a resume that got another thread", adapter: cx, file: "codex-exec-json-fresh-2025-11.jsonl",
			rc: agent.RunContext{SessionID: "019c0000-dead-7000-8000-000000000000", SessionUsage: models.TokenUsage{Input: 10}}, want: []string{
				"session " + nov,
				fmt.Sprintf("message %q", novText),
				"usage in=7499 out=111 read=0 write=0",
				fmt.Sprintf("ok %q", novText),
			}},
		{name: "0.157.1 fresh", adapter: cx, file: "codex-exec-json-resume-usage-0.157.1.jsonl", section: "run 1", want: []string{
			"session " + luna, `message "Hi!"`, "usage in=4768 out=6 read=5888 write=0", `ok "Hi!"`,
		}},
		{name: "0.157.1 resume reports the thread's running total", adapter: cx, file: "codex-exec-json-resume-usage-0.157.1.jsonl", section: "run 2",
			rc: agent.RunContext{SessionID: luna, SessionUsage: run1}, want: []string{
				"session " + luna, `message "Hi again!"`, "usage in=4784 out=7 read=5888 write=0", `ok "Hi again!"`,
			}},
		{name: "0.157.1 second resume", adapter: cx, file: "codex-exec-json-resume-usage-0.157.1.jsonl", section: "run 3",
			rc: agent.RunContext{SessionID: luna, SessionUsage: models.TokenUsage{Input: run1.Input + run2.Input, Output: run1.Output + run2.Output, CacheRead: run1.CacheRead + run2.CacheRead}}, want: []string{
				"session " + luna, `message "Hi once more!"`, "usage in=705 out=8 read=9984 write=0", `ok "Hi once more!"`,
			}},
		{name: "turn failed with an API body", adapter: cx, file: "codex-exec-json-turn-failed.jsonl", exit: 1, want: []string{
			`error "The following tools cannot be used with reasoning.effort 'minimal': web_search. (HTTP 400)" invalid=false`,
		}},
		{name: "unauthenticated 0.153.4", adapter: cx, file: "codex-exec-json-unauthenticated-0.153.4.jsonl", exit: 1, want: []string{
			"session 01a09977-a0ee-7262-b052-8ab64abec409",
			`error "unexpected status 401 Unauthorized: Missing bearer or basic authentication in header, url: https://api.openai.com/v1/responses, cf-ray: a3a51dd47e8fd70c-BNE, request id: req_efe7cfbc1b674d88ba5ab3c31af88759" invalid=false`,
		}},
		{name: "canary 2026, five usage fields", adapter: cx, file: "codex-exec-json-canary-2026.jsonl", want: []string{
			`message "canary"`, "usage in=3988 out=6 read=11008 write=0", `ok "canary"`,
		}},
		{name: "usage limit with a date", adapter: cx, file: "synthetic-codex-usage-limit.jsonl", exit: 1, want: []string{
			"session " + synth,
			fmt.Sprintf("rate_limit reset=%s cap=true %q", time.Date(2026, 7, 5, 20, 19, 0, 0, time.Local).UTC().Format(time.RFC3339), limitX),
			fmt.Sprintf("error %q invalid=false", limitX),
		}},
		{name: "transient 429 then success", adapter: cx, file: "synthetic-codex-429-then-success.jsonl", want: []string{
			"session " + synth, `message "Done after a retry."`, "usage in=1500 out=50 read=500 write=0", `ok "Done after a retry."`,
		}},
		{name: "429 then failed", adapter: cx, file: "synthetic-codex-429-failed.jsonl", exit: 1, want: []string{
			"session " + synth,
			`rate_limit reset=none cap=false "exceeded retry limit, last status: 429 Too Many Requests"`,
			`error "exceeded retry limit, last status: 429 Too Many Requests" invalid=false`,
		}},
		{name: "cut short", adapter: cx, file: "synthetic-codex-cut-short.jsonl", exit: -1, want: []string{
			"session " + synth, `message "Working on it."`,
			`error "the stream ended without a result (exit status -1)" invalid=false`,
		}},
		{name: "unknown events and garbage", adapter: cx, file: "synthetic-codex-unknown-and-garbage.jsonl", want: []string{
			"session " + synth, `message "First part."`, `message "Second part."`,
			"usage in=0 out=30 read=100 write=0",
			`ok "First part.\n\nSecond part."`,
		}},
		{name: "resume of a missing rollout prints nothing", adapter: cx, exit: 1, rc: agent.RunContext{SessionID: nov}, want: []string{
			`error "the stream ended without a result (exit status 1)" invalid=true`,
		}},
		{name: "a fresh run that prints nothing", adapter: cx, exit: 1, want: []string{
			`error "the stream ended without a result (exit status 1)" invalid=false`,
		}},
	})
}

// TestCodexRefusedWrites: a write codex's sandbox rejects shows only on
// its standard error; the parser keeps those lines, and nothing else of
// standard error, for the reason of a run that changed nothing.
func TestCodexRefusedWrites(t *testing.T) {
	t.Parallel()
	const outside = "patch rejected: writing outside of the project; rejected by user approval settings"
	recorded := streamLines(t, "codex-exec-stderr-patch-rejected-0.171.0.txt", "")
	line := func(s string) []byte {
		return []byte("2026-12-07T13:20:02.711958Z ERROR codex_core::tools::router: error=" + s)
	}
	long := "patch rejected: " + strings.Repeat("x", 400)
	tests := []struct {
		name   string
		stderr [][]byte
		want   string
	}{
		{"recorded 0.171.0", recorded, "codex refused a write (" + outside + ")"},
		{"nothing refused", [][]byte{recorded[0], []byte("OPENAI_API_KEY=sk-secret"), []byte("Failed to write file x")}, ""},
		{"refused twice, once under read-only", [][]byte{line(outside), []byte("token sk-secret"),
			line("patch rejected: writing is blocked by read-only sandbox; rejected by user approval settings"), line(outside)},
			"codex refused 3 writes (" + outside + " | patch rejected: writing is blocked by read-only sandbox; rejected by user approval settings)"},
		{"cleaned and bounded", [][]byte{line("patch rejected: a\tand\x1b[31mmore\r"), line("patch rejected: b"), line("patch rejected: c"),
			line("patch rejected: d")}, "codex refused 4 writes (patch rejected: a and [31mmore | patch rejected: b | patch rejected: c)"},
		{"a long line is cut", [][]byte{line(long)}, "codex refused a write (" + long[:299] + "…)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := agent.Codex{}.NewParser(agent.RunContext{})
			sr, ok := p.(agent.StderrReader)
			if !ok {
				t.Fatal("the codex parser does not read standard error")
			}
			for _, l := range tc.stderr {
				sr.StderrLine(l)
			}
			if got := sr.Refusals(); got != tc.want {
				t.Errorf("refusals\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestCursorStreams(t *testing.T) {
	t.Parallel()
	const synth = "8e2f4c1a-9b3d-4e5f-a6b7-c8d9e0f1a2b3"
	cu := agent.Cursor{}
	checkStreams(t, []streamCase{
		{name: "parallel shell calls", adapter: cu, file: "cursor-stream-json.jsonl", want: []string{
			"session 1e273e42-21dd-4b5e-9c2a-1cbbde35ae1c",
			"message \"I’ll run `sleep 6` and `sleep 4` in parallel using separate shell commands, wait for both to finish, then respond with exactly `done`.\"",
			`message "done"`,
			"ok \"I’ll run `sleep 6` and `sleep 4` in parallel using separate shell commands, wait for both to finish, then respond with exactly `done`.done\"",
		}},
		{name: "thinking deltas", adapter: cu, file: "cursor-stream-json-thinking.jsonl", want: []string{
			"session d43015b9-0707-43f4-b2df-0bcea7891654",
			"message \"I’ll run `sleep 5` in bash, wait for it to finish, then run `sleep 3` in bash.\"",
			"message \"Both commands have finished running: first `sleep 5`, then `sleep 3`, with no other actions taken.\"",
			"ok \"I’ll run `sleep 5` in bash, wait for it to finish, then run `sleep 3` in bash.Both commands have finished running: first `sleep 5`, then `sleep 3`, with no other actions taken.\"",
		}},
		{name: "2026.09 usage", adapter: cu, file: "synthetic-cursor-usage-2026.09.jsonl", want: []string{
			"session " + synth,
			`message "I'll add the greeting."`,
			`message "Added hello.txt."`,
			"usage in=740 out=307 read=28160 write=0",
			`ok "I'll add the greeting.Added hello.txt."`,
		}},
		{name: "error result", adapter: cu, file: "synthetic-cursor-error.jsonl", exit: 1, want: []string{
			"session " + synth,
			`error "Connection to the model provider failed: ETIMEDOUT" invalid=false`,
		}},
		{name: "error result worded as a limit", adapter: cu, file: "synthetic-cursor-rate-limit.jsonl", exit: 1, want: []string{
			"session " + synth,
			`rate_limit reset=2026-10-02T17:00:00Z cap=true "You've hit your usage limit. Try again at 2026-10-02T17:00:00Z."`,
			`error "You've hit your usage limit. Try again at 2026-10-02T17:00:00Z." invalid=false`,
		}},
		{name: "cut short after a text error line", adapter: cu, file: "synthetic-cursor-cut-short.jsonl", exit: 1, rc: agent.RunContext{SessionID: synth}, want: []string{
			"session " + synth,
			`error "the stream ended without a result (exit status 1)" invalid=false`,
		}},
		{name: "resume of an unknown chat prints nothing", adapter: cu, exit: 1, rc: agent.RunContext{SessionID: synth}, want: []string{
			`error "the stream ended without a result (exit status 1)" invalid=true`,
		}},
		{name: "stopped resume is no lost chat", adapter: cu, exit: -1, rc: agent.RunContext{SessionID: synth}, want: []string{
			`error "the stream ended without a result (exit status -1)" invalid=false`,
		}},
	})
}

func TestAiderStreams(t *testing.T) {
	t.Parallel()
	const rateLimited = "The API provider has rate limited you. Try again later or check your quotas."
	ai := agent.Aider{}
	checkStreams(t, []streamCase{
		{name: "0.86.2 run with three calls", adapter: ai, file: "aider-output.txt", want: []string{
			"usage in=3000 out=42 read=0 write=0",
			"usage in=6900 out=1342 read=0 write=0",
			"usage in=12200 out=2442 read=0 write=0",
			fmt.Sprintf("ok %q", "Applied edit to ticket_cleaner/report.py\nApplied edit to tests/test_cli.py\nApplied edit to ticket_cleaner/cli.py\nApplied edit to tests/test_report.py"),
		}},
		{name: "0.47 chat history", adapter: ai, file: "aider-chat-history-excerpt-0.47.md", want: []string{
			"usage in=5244 out=604 read=0 write=0",
			"usage in=17810 out=688 read=0 write=0",
			fmt.Sprintf("ok %q", "Applied edit to aider/utils.py\nCommit fd43cd4 feat: Use the Spinner instead of the inlined custom spinner"),
		}},
		{name: "setup failure exit 1", adapter: ai, file: "aider-output.txt", exit: 1, want: []string{
			"usage in=3000 out=42 read=0 write=0",
			"usage in=6900 out=1342 read=0 write=0",
			"usage in=12200 out=2442 read=0 write=0",
			`error "aider exited with status 1" invalid=false`,
		}},
		{name: "rate limited, exit 0", adapter: ai, file: "synthetic-aider-rate-limit.txt", want: []string{
			fmt.Sprintf("rate_limit reset=none cap=false %q", rateLimited),
			fmt.Sprintf("error %q invalid=false", rateLimited),
		}},
		{name: "commit with cache counts, fenced look-alikes", adapter: ai, file: "synthetic-aider-commit.txt", want: []string{
			"usage in=700 out=456 read=2100 write=1200",
			`ok "Applied edit to hello.py\nCommit 3f2a9c1 fix: Say hello instead of hi"`,
		}},
		{name: "killed", adapter: ai, file: "synthetic-aider-commit.txt", exit: -1, want: []string{
			"usage in=700 out=456 read=2100 write=1200",
			`error "aider exited with status -1" invalid=false`,
		}},
		{name: "no edits", adapter: ai, file: "synthetic-aider-no-edits.txt", want: []string{
			"usage in=12566 out=84 read=0 write=0",
			`ok "no edits applied"`,
		}},
		{name: "did not conform", adapter: ai, file: "synthetic-aider-did-not-conform.txt", want: []string{
			"usage in=2200 out=310 read=0 write=0",
			"usage in=4800 out=600 read=0 write=0",
			`error "The LLM did not conform to the edit format." invalid=false`,
		}},
		{name: "authentication", adapter: ai, file: "synthetic-aider-auth.txt", want: []string{
			`error "The API provider is not able to authenticate you. Check your API key." invalid=false`,
		}},
	})
}

func TestAiderTokenLines(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ line, want string }{
		{"Tokens: 3.0k sent, 1.2k cache write, 2.1k cache hit, 456 received.", "usage in=0 out=456 read=2100 write=1200"},
		{"Tokens: 1.2M sent, 3.4k received. Cost: $1.20 message, $1.20 session.", "usage in=1200000 out=3400 read=0 write=0"},
		{"Tokens: 5,244 sent, 2,048 cached, 604 received. Cost: $0.02 request, $0.02 session.", "usage in=3196 out=604 read=2048 write=0"},
		{"11,491 prompt tokens, 360 completion tokens, $0.039873 cost, session cost: $0.078021", "usage in=11491 out=360 read=0 write=0"},
		{"Tokens: lots sent, 3 received.", ""},
	} {
		p := agent.Aider{}.NewParser(agent.RunContext{})
		var got []string
		for _, e := range p.Line([]byte(c.line)) {
			got = append(got, describe(e))
		}
		if strings.Join(got, "|") != c.want {
			t.Errorf("%q: got %v, want %q", c.line, got, c.want)
		}
	}
}

// TestRelativeResetTimes checks limit texts whose reset is relative to now.
func TestRelativeResetTimes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		text string
		in   time.Duration
	}{
		{"You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) or try again in 5 days 22 hours 11 minutes.", 5*24*time.Hour + 22*time.Hour + 11*time.Minute},
		{`{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","resets_in_seconds":13872}}`, 13872 * time.Second},
	} {
		lines := [][]byte{
			[]byte(`{"type":"thread.started","thread_id":"t-1"}`),
			fmt.Appendf(nil, `{"type":"turn.failed","error":{"message":%q}}`, c.text),
		}
		before := time.Now()
		p := agent.Codex{}.NewParser(agent.RunContext{})
		var limit *agent.Event
		for _, l := range lines {
			for _, e := range p.Line(l) {
				if e.Kind == agent.EventRateLimit {
					limit = &e
				}
			}
		}
		after := time.Now()
		if limit == nil || limit.ResetAt == nil || !limit.UsageCap {
			t.Fatalf("%q: no usage cap with a reset time: %+v", c.text, limit)
		}
		if at := *limit.ResetAt; at.Before(before.Add(c.in)) || at.After(after.Add(c.in)) {
			t.Errorf("%q: reset at %v, want %v from now", c.text, at, c.in)
		}
	}
}

// TestResultIsFinal checks that nothing after a result yields a second one
// and End adds none.
func TestResultIsFinal(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a     agent.Adapter
		lines []string
	}{
		{agent.Claude{}, []string{`{"type":"result","subtype":"success","is_error":false,"result":"a"}`, `{"type":"result","subtype":"error_during_execution","is_error":true}`, `{"type":"system","subtype":"init","session_id":"late"}`}},
		{agent.Codex{}, []string{`{"type":"turn.completed","usage":{"input_tokens":1}}`, `{"type":"turn.failed","error":{"message":"x"}}`, `{"type":"thread.started","thread_id":"late"}`}},
		{agent.Cursor{}, []string{`{"type":"result","is_error":false,"result":"a"}`, `{"type":"result","is_error":true,"result":"b"}`, `{"type":"system","subtype":"init","session_id":"late"}`}},
	} {
		p := c.a.NewParser(agent.RunContext{})
		var results, after int
		for i, l := range c.lines {
			evs := p.Line([]byte(l))
			if i > 0 {
				after += len(evs)
			}
			for _, e := range evs {
				if e.Kind == agent.EventResult {
					results++
				}
			}
		}
		if results != 1 || after != 0 || len(p.End(1)) != 0 {
			t.Errorf("%s: %d results, %d events after the first", c.a.Type(), results, after)
		}
	}
}

// runContext is a representative run: profile, MCP servers, a session.
func runContext(cmd string, args ...string) agent.RunContext {
	return agent.RunContext{
		Agent: models.Agent{ID: "a1", AgentSettings: models.AgentSettings{Command: cmd, Args: args}},
		Profile: models.Profile{Model: "opus", PermissionMode: "bypassPermissions", AllowedTools: []string{"Bash(git log:*)", "Edit"},
			SystemPromptSuffix: `Be brief. Quote "this" and C:\path.` + "\nSecond line."},
		MCPServers: []models.MCPServer{
			{Name: "agentqueued", Command: "/usr/local/bin/agentqueued", Args: []string{"mcp"}, Env: map[string]string{"AQ_RUN_TOKEN": "run-secret-token"}},
			{Name: "github", Command: "github-mcp", Args: []string{"stdio", "--read-only"}, Env: map[string]string{"GITHUB_TOKEN": "ghp_secret"}},
			{Name: "docs", URL: "https://mcp.example.com/mcp"},
		},
		Dir:         "/var/lib/aq/checkouts/a1",
		Prompt:      "Do the task.\n@write a.txt hello\n",
		PromptFile:  "/var/lib/aq/runs/t1/2.prompt",
		StateDir:    "/var/lib/aq/runs/t1/2.state",
		SessionID:   "1d1e46f9-35c7-4834-b529-846d5bb82288",
		Executable:  "/usr/local/bin/agentqueued",
		ToolTimeout: 4*time.Hour + time.Minute,
	}
}

func TestInvocations(t *testing.T) {
	t.Parallel()
	const sess = "1d1e46f9-35c7-4834-b529-846d5bb82288"
	suffix := `Be brief. Quote "this" and C:\path.` + "\nSecond line."
	claudeMCP := `{"mcpServers":{
		"agentqueued":{"type":"stdio","command":"/usr/local/bin/agentqueued","args":["mcp"],"env":{"AQ_RUN_TOKEN":"run-secret-token"}},
		"github":{"type":"stdio","command":"github-mcp","args":["stdio","--read-only"],"env":{"GITHUB_TOKEN":"ghp_secret"}},
		"docs":{"type":"http","url":"https://mcp.example.com/mcp"}}}`
	cases := []struct {
		name  string
		a     agent.Adapter
		rc    agent.RunContext
		argv  []string
		stdin string
		env   map[string]string
		files map[string]string // JSON files are compared as JSON
	}{
		{name: "claude", a: agent.Claude{}, rc: runContext("/opt/claude/bin/claude", "--max-turns", "30"),
			argv: []string{"/opt/claude/bin/claude", "-p", "--output-format", "stream-json", "--verbose", "--model", "opus",
				"--permission-mode", "bypassPermissions", "--allowedTools", "Bash(git log:*)", "Edit", "mcp__agentqueued",
				"Bash(/usr/local/bin/agentqueued agent:*)", "--mcp-config", "/var/lib/aq/runs/t1/2.state/mcp.json", "--strict-mcp-config",
				"--append-system-prompt", suffix, "--resume", sess, "--max-turns", "30"},
			stdin: "Do the task.\n@write a.txt hello\n", files: map[string]string{"mcp.json": claudeMCP},
			env: map[string]string{"ENABLE_TOOL_SEARCH": "false"}},
		{name: "claude, nothing configured", a: agent.Claude{}, rc: agent.RunContext{Prompt: "p"},
			argv: []string{"claude", "-p", "--output-format", "stream-json", "--verbose"}, stdin: "p"},
		{name: "codex", a: agent.Codex{}, rc: runContext("/opt/codex", "-c", `model_reasoning_effort="high"`),
			argv: []string{"/opt/codex", "exec", "--json", "--skip-git-repo-check", "-m", "opus", "-s", "danger-full-access",
				"-c", `mcp_servers.agentqueued.command="/usr/local/bin/agentqueued"`,
				"-c", `mcp_servers.agentqueued.args=["mcp"]`,
				"-c", `mcp_servers.agentqueued.env_vars=["AQ_RUN_TOKEN","AQ_SOCKET","AQ_TASK_ID"]`,
				"-c", `mcp_servers.agentqueued.default_tools_approval_mode="approve"`,
				"-c", `mcp_servers.agentqueued.tool_timeout_sec=14460`,
				"-c", `mcp_servers.github.command="github-mcp"`,
				"-c", `mcp_servers.github.args=["stdio","--read-only"]`,
				"-c", `mcp_servers.github.env_vars=["GITHUB_TOKEN"]`,
				"-c", `mcp_servers.docs.url="https://mcp.example.com/mcp"`,
				"-c", `model_reasoning_effort="high"`,
				"resume", sess, "-"},
			stdin: "Do the task.\n@write a.txt hello\n\n## Standing instructions\n\n" + suffix + "\n",
			env:   map[string]string{"AQ_RUN_TOKEN": "run-secret-token", "GITHUB_TOKEN": "ghp_secret"}},
		{name: "codex, nothing configured", a: agent.Codex{}, rc: agent.RunContext{Prompt: "p"},
			argv: []string{"codex", "exec", "--json", "--skip-git-repo-check", "-s", "workspace-write", "-"}, stdin: "p"},
		{name: "cursor", a: agent.Cursor{}, rc: runContext("/opt/cursor-agent", "--sandbox", "disabled"),
			argv: []string{"/opt/cursor-agent", "-p", "--output-format", "stream-json", "--model", "opus", "--force",
				"--resume", sess, "--trust", "--sandbox", "disabled"},
			stdin: "Do the task.\n@write a.txt hello\n"},
		{name: "cursor, plan mode", a: agent.Cursor{}, rc: agent.RunContext{Prompt: "p", Profile: models.Profile{PermissionMode: "plan"}},
			argv: []string{"cursor-agent", "-p", "--output-format", "stream-json", "--mode", "plan", "--trust"}, stdin: "p"},
		{name: "aider", a: agent.Aider{}, rc: runContext("", "--edit-format", "diff"),
			argv: []string{"aider", "--message-file", "/var/lib/aq/runs/t1/2.prompt", "--yes-always", "--no-stream", "--no-pretty",
				"--no-check-update", "--no-show-release-notes", "--analytics-disable", "--no-gitignore",
				"--input-history-file", "/var/lib/aq/runs/t1/2.state/aider.input.history",
				"--chat-history-file", "/var/lib/aq/runs/t1/2.state/aider.chat.history.md",
				"--model", "opus", "--read", "/var/lib/aq/runs/t1/2.state/conventions.md", "--edit-format", "diff"},
			files: map[string]string{"conventions.md": suffix}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			inv, err := c.a.Invocation(c.rc)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(inv.Argv, c.argv) {
				t.Errorf("argv:\n got: %q\nwant: %q", inv.Argv, c.argv)
			}
			if inv.Stdin != c.stdin {
				t.Errorf("stdin %q, want %q", inv.Stdin, c.stdin)
			}
			if !reflect.DeepEqual(inv.Env, c.env) {
				t.Errorf("env %v, want %v", inv.Env, c.env)
			}
			if len(inv.Files) != len(c.files) {
				t.Errorf("files %v, want %v", inv.Files, c.files)
			}
			for name, want := range c.files {
				got, ok := inv.Files[name]
				if strings.HasSuffix(name, ".json") {
					var g, w any
					if json.Unmarshal([]byte(got), &g) != nil || json.Unmarshal([]byte(want), &w) != nil || !reflect.DeepEqual(g, w) {
						t.Errorf("file %s:\n%s\nwant:\n%s", name, got, want)
					}
				} else if !ok || got != want {
					t.Errorf("file %s = %q, want %q", name, got, want)
				}
			}
			for _, arg := range inv.Argv {
				if strings.Contains(arg, "secret") {
					t.Errorf("a secret is on the command line: %q", arg)
				}
			}
		})
	}
}

func TestInvocationErrors(t *testing.T) {
	t.Parallel()
	withMCP := agent.RunContext{MCPServers: []models.MCPServer{{Name: "x", Command: "x"}}}
	cases := []struct {
		name string
		a    agent.Adapter
		rc   agent.RunContext
	}{
		{"claude MCP without a state directory", agent.Claude{}, withMCP},
		{"claude model that reads as a flag", agent.Claude{}, agent.RunContext{Profile: models.Profile{Model: "--dangerously-skip-permissions"}}},
		{"claude session id with spaces", agent.Claude{}, agent.RunContext{SessionID: "a b"}},
		{"codex unknown permission mode", agent.Codex{}, agent.RunContext{Profile: models.Profile{PermissionMode: "yolo"}}},
		{"codex servers disagree on a variable", agent.Codex{}, agent.RunContext{MCPServers: []models.MCPServer{
			{Name: "a", Command: "a", Env: map[string]string{"K": "1"}}, {Name: "b", Command: "b", Env: map[string]string{"K": "2"}}}}},
		{"codex session id that reads as a flag", agent.Codex{}, agent.RunContext{SessionID: "-x"}},
		{"cursor bad session id", agent.Cursor{}, agent.RunContext{SessionID: "x\ny"}},
		{"aider without a prompt file", agent.Aider{}, agent.RunContext{}},
		{"aider suffix without a state directory", agent.Aider{}, agent.RunContext{PromptFile: "/p", Profile: models.Profile{SystemPromptSuffix: "s"}}},
	}
	for _, c := range cases {
		if _, err := c.a.Invocation(c.rc); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

func TestDefaultRegistry(t *testing.T) {
	t.Parallel()
	r := agent.DefaultRegistry()
	for _, typ := range models.AgentTypes {
		a, err := r.For(typ)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		if a.Type() != typ {
			t.Errorf("For(%q) = %q", typ, a.Type())
		}
	}
}

// FuzzParsers feeds arbitrary output to every parser: none may panic, each
// run yields exactly one result, usage never shrinks and session ids are
// usable on a command line.
func FuzzParsers(f *testing.F) {
	entries, err := os.ReadDir(filepath.Join("testdata", "streams"))
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join("testdata", "streams", e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, false, int8(0))
		f.Add(data, true, int8(1))
	}
	adapters := []agent.Adapter{agent.Claude{}, agent.Codex{}, agent.Cursor{}, agent.Aider{}}
	f.Fuzz(func(t *testing.T, data []byte, resume bool, exit int8) {
		rc := agent.RunContext{}
		if resume {
			rc.SessionID = "0199f000-0419-7000-8000-00000000c0de"
			rc.SessionUsage = models.TokenUsage{Input: 10, Output: 10}
		}
		for _, a := range adapters {
			p := a.NewParser(rc)
			var results int
			var last models.TokenUsage
			check := func(evs []agent.Event) {
				for _, e := range evs {
					switch e.Kind {
					case agent.EventResult:
						results++
					case agent.EventUsage:
						u := e.Usage
						if u.Input < last.Input || u.Output < last.Output || u.CacheRead < last.CacheRead || u.CacheWrite < last.CacheWrite ||
							u.Input < 0 || u.Output < 0 || u.CacheRead < 0 || u.CacheWrite < 0 {
							t.Fatalf("%s: usage went from %+v to %+v", a.Type(), last, u)
						}
						last = u
					case agent.EventSession:
						if e.SessionID == "" || strings.HasPrefix(e.SessionID, "-") || strings.ContainsAny(e.SessionID, " \n\x00") {
							t.Fatalf("%s: session id %q", a.Type(), e.SessionID)
						}
					}
				}
			}
			for _, l := range bytes.Split(data, []byte("\n")) {
				check(p.Line(l))
			}
			check(p.End(int(exit)))
			if results != 1 {
				t.Fatalf("%s: %d results", a.Type(), results)
			}
		}
	})
}

func TestVersionWarnings(t *testing.T) {
	t.Parallel()
	cases := []struct {
		agentType, version string
		warn               bool
	}{
		{"claude", "2.1.197", true},
		{"claude", "2.1.221", false},
		{"claude", "2.1.285", false},
		{"claude", "2.2", false},
		{"claude", "1.0.128 (Claude Code)", true},
		{"codex", "codex-cli 0.168.9", true},
		{"codex", "0.169.0", false},
		{"codex", "", false},
		{"claude", "unknown", false},
		{"cursor", "0.1.0", false},
	}
	for _, c := range cases {
		got := models.CLIVersionWarning(c.agentType, c.version)
		if (got != "") != c.warn {
			t.Errorf("VersionWarning(%q, %q) = %q, want a warning: %t", c.agentType, c.version, got, c.warn)
		}
	}
	if v := models.ParseCLIVersion("codex-cli 0.169.0\n"); v != "0.169.0" {
		t.Errorf("ParseVersion = %q", v)
	}
}
