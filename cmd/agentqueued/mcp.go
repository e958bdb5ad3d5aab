package main

// "agentqueued mcp" serves the agent RPC as an MCP server on standard input
// and output, so agent CLIs that speak MCP (Claude Code, Codex, Cursor) call
// the tools natively. An agent's MCP configuration names the command:
//
//	{"mcpServers": {"agentqueued": {"command": "agentqueued", "args": ["mcp"]}}}
//
// The server inherits AQ_SOCKET, AQ_TASK_ID and AQ_RUN_TOKEN from the agent
// process and refuses to start without them. Each tool call is one RPC call;
// a refused call is a tool error carrying the daemon's message.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// mcpInstructions tells the agent how to use the tools.
const mcpInstructions = `You are working on one task queued by agentqueued, which supervises your run and relays to a human who is usually away from the keyboard. Use these tools to report to it:

- progress: after each meaningful step, say briefly what you did or are doing. It also shows you are alive. When the task processes a number of items, also give succeeded and failed: how many items this run has processed so far (totals, not increments).
- heartbeat: during long silent work (a long build or test run), call it every few minutes so the run is not taken for idle.
- ask: only when you cannot proceed without a human decision. It waits, possibly for hours, and returns the answer. Ask one self-contained question with the options you see.
- complete: when the task is done, call it once with a summary of what you did and how you checked it, the files you changed, and any outputs dependent tasks need. Then stop. If the task needed no change to any file, set no_changes: a run that changed nothing and did not say so fails.
- fail: when the task cannot be done, call it once with the reason and what would unblock it. Then stop.
- rate_limited: when your provider refuses work because of a rate limit or an exhausted token quota, call it with the reset time, then stop; the task is resumed after the reset.
- propose_plan: when the task is too large for one run, propose subtasks with their dependencies instead of doing everything yourself.
- approve / reject: only when you were asked to review another agent's work: give exactly one verdict with your reasons.
- usage: report token use if your runtime does not report it by itself.

These tools may appear a moment after you start: the server can still be connecting when your first turn begins. If they are missing, look again before falling back to anything else.`

// agentRPC is the RPC the MCP tools call: *api.RPCClient.
type agentRPC interface {
	Heartbeat(ctx context.Context) error
	ReportProgress(ctx context.Context, p models.TaskProgress) error
	Ask(ctx context.Context, ask models.Ask) (string, error)
	Complete(ctx context.Context, c models.Completion) error
	Fail(ctx context.Context, message string) error
	Usage(ctx context.Context, u api.UsageReport) error
	RateLimited(ctx context.Context, r models.RateLimit) error
	ProposePlan(ctx context.Context, tasks []models.BatchTask) ([]models.BatchResult, error)
	Approve(ctx context.Context, reasons string) error
	Reject(ctx context.Context, reasons string) error
}

// Inputs of the MCP tools. Fields without omitempty are required.
type (
	mcpHeartbeatInput struct{}
	mcpProgressInput  struct {
		Message   string `json:"message,omitempty" jsonschema:"What you just did or are doing now, in one or two sentences. Required unless you give counts."`
		Succeeded *int   `json:"succeeded,omitempty" jsonschema:"When the task processes items: how many this run has processed successfully so far (a running total, not an increment)."`
		Failed    *int   `json:"failed,omitempty" jsonschema:"When the task processes items: how many have failed so far in this run (a running total, not an increment)."`
	}
	mcpAskInput struct {
		Question string `json:"question" jsonschema:"The question, self-contained: the human reads it on a phone without your context. Give the options you see and the one you would pick."`
		Default  string `json:"default,omitempty" jsonschema:"The answer you would go on with should nobody answer in time (the project may use it when the question expires)."`
	}
	mcpCompleteInput struct {
		Summary      string         `json:"summary" jsonschema:"What you did and how you checked it, for the human and for the tasks that depend on this one."`
		FilesChanged []string       `json:"files_changed,omitempty" jsonschema:"Paths of the files you changed, relative to the repository root."`
		Outputs      map[string]any `json:"outputs,omitempty" jsonschema:"Structured results handed to dependent tasks, as a JSON object (for example {\"api_url\": \"http://localhost:8080\"})."`
		NoChanges    bool           `json:"no_changes,omitempty" jsonschema:"true when the task was done without changing any file on purpose (nothing needed changing). Without it, a run that changed nothing fails as having made no changes."`
	}
	mcpFailInput struct {
		Message string `json:"message" jsonschema:"Why the task cannot be done and what would unblock it."`
	}
	mcpUsageInput struct {
		InputTokens      int64 `json:"input_tokens" jsonschema:"Input tokens used since your last report."`
		OutputTokens     int64 `json:"output_tokens" jsonschema:"Output tokens used since your last report."`
		CacheReadTokens  int64 `json:"cache_read_tokens,omitempty" jsonschema:"Cache-read tokens used since your last report."`
		CacheWriteTokens int64 `json:"cache_write_tokens,omitempty" jsonschema:"Cache-write tokens used since your last report."`
	}
	mcpRateLimitedInput struct {
		ResetAt        string `json:"reset_at,omitempty" jsonschema:"When the provider accepts work again, as an RFC 3339 time such as 2026-03-01T12:00:00Z. Leave out when unknown."`
		ResetInSeconds int64  `json:"reset_in_seconds,omitempty" jsonschema:"Instead of reset_at: how many seconds until the provider accepts work again."`
		Kind           string `json:"kind,omitempty" jsonschema:"rate_limit (requests refused for a while; the default) or tokens (the token quota is exhausted)."`
		Message        string `json:"message,omitempty" jsonschema:"The provider's words, kept as the reason of the pause."`
	}
	mcpVerdictInput struct {
		Reasons string `json:"reasons" jsonschema:"Why: for a rejection, exactly what must change; it is handed to the next attempt."`
	}
	mcpPlanInput struct {
		Tasks []mcpPlanTask `json:"tasks" jsonschema:"The subtasks, created all together or not at all."`
	}
	mcpPlanTask struct {
		ID                 string            `json:"id,omitempty" jsonschema:"A short id, unique in this plan, that other subtasks use in depends_on."`
		Title              string            `json:"title" jsonschema:"A short imperative title."`
		Description        string            `json:"description,omitempty" jsonschema:"What to do, with everything the agent working on it needs to know."`
		Priority           *int              `json:"priority,omitempty" jsonschema:"0 is the most urgent; the default is 100."`
		DependsOn          []string          `json:"depends_on,omitempty" jsonschema:"Ids of subtasks of this plan, or of existing tasks, that must complete first."`
		AcceptanceCriteria []string          `json:"acceptance_criteria,omitempty" jsonschema:"Conditions the result must meet."`
		TestCommands       []string          `json:"test_commands,omitempty" jsonschema:"Shell commands that check the result (for AUTO_TEST verification)."`
		VerificationType   string            `json:"verification_type,omitempty" jsonschema:"How the result is checked: AUTO_TEST, QA_AGENT or HUMAN."`
		RequiresApproval   bool              `json:"requires_approval,omitempty" jsonschema:"Whether a human must approve the result."`
		Kind               string            `json:"kind,omitempty" jsonschema:"A free-form kind, such as bugfix or docs."`
		Metadata           map[string]string `json:"metadata,omitempty" jsonschema:"Free-form string labels."`
		ExpectedCount      int               `json:"expected_count,omitempty" jsonschema:"How many items the subtask will process, when it processes items (required for kinds a Capacity rule limits)."`
	}
)

// mcpTool describes one tool: its name, title and description for the agent.
type mcpTool struct{ name, title, description string }

// The tools, in the order they are listed.
var (
	mcpToolHeartbeat = mcpTool{api.ToolHeartbeat, "Heartbeat",
		"Tell agentqueued you are alive. Call it every few minutes during long silent work (a long build or test run); any other tool call counts too."}
	mcpToolProgress = mcpTool{api.ToolProgress, "Report progress",
		"Report a step of your work in a sentence or two, so the human can follow along. Call it after each meaningful step. When the task processes a number of items, give the running totals of items succeeded and failed so far in this run."}
	mcpToolAsk = mcpTool{api.ToolAsk, "Ask the human",
		"Ask the human a question and wait for the answer. Use only when you cannot proceed without a decision. It may wait for hours; the answer is returned as text."}
	mcpToolComplete = mcpTool{api.ToolComplete, "Complete the task",
		"Report that the task is done, with a summary of what you did and how you checked it, the files you changed and any outputs for dependent tasks. Call it once, at the end, then stop working. If the task needed no change to any file, set no_changes to true: a run that changed nothing and did not say so fails."}
	mcpToolFail = mcpTool{api.ToolFail, "Fail the task",
		"Report that the task cannot be done, with the reason and what would unblock it. The task may be retried with your message as context. Call it once, then stop working."}
	mcpToolUsage = mcpTool{api.ToolUsage, "Report token usage",
		"Report tokens used since your last report. Only needed when your runtime does not report usage by itself."}
	mcpToolRateLimited = mcpTool{api.ToolRateLimited, "Report a rate limit",
		"Report that your model provider refuses work (rate limit or exhausted token quota) until a reset time. The task is paused, not failed, and resumed after the reset. Stop working after calling it."}
	mcpToolProposePlan = mcpTool{api.ToolProposePlan, "Propose subtasks",
		"Split the task into subtasks, each run separately by an agent, with dependencies between them (without any, they run in the order given). They are created when this task completes (after a human approves the plan when the project asks for that). Use it when the task is too large for one run."}
	mcpToolApprove = mcpTool{api.ToolApprove, "Approve the reviewed work",
		"Only in a review: approve the change under review, with your reasons. It is then merged. Call it once, then stop."}
	mcpToolReject = mcpTool{api.ToolReject, "Reject the reviewed work",
		"Only in a review: reject the change under review, saying exactly what must change; the task is redone with your reasons. Call it once, then stop."}
)

// runMCP is the "mcp" subcommand: an MCP server on standard input and output
// until the client closes its end or ctx ends.
func (m *Main) runMCP(ctx context.Context, args []string) error {
	fs := newFlagSet("agentqueued mcp")
	pos, err := parseFlags(fs, args, m.Stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("mcp: unexpected argument %q", pos[0])
	}
	client, err := rpcClientFromEnv(m)
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()

	in, ok := stdinOf(ctx).(io.ReadCloser)
	if !ok {
		in = io.NopCloser(stdinOf(ctx))
	}
	out := &lockedWriter{w: m.Stdout}
	err = newMCPServer(client).Run(ctx, &mcp.IOTransport{Reader: newMCPFrames(in, out, mcp.DefaultMaxLineLength), Writer: out})
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mcp server: %w", err)
	}
	return nil
}

// newMCPServer returns an MCP server whose tools call rpc.
func newMCPServer(rpc agentRPC) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "agentqueued", Title: "agentqueued agent tools", Version: readVersion().module()},
		&mcp.ServerOptions{Instructions: mcpInstructions})

	addMCPTool(srv, mcpToolHeartbeat, nil, func(ctx context.Context, _ mcpHeartbeatInput) (string, error) {
		return "ok", rpc.Heartbeat(ctx)
	})
	addMCPTool(srv, mcpToolProgress, nil, func(ctx context.Context, in mcpProgressInput) (string, error) {
		return "Progress recorded.", rpc.ReportProgress(ctx, models.TaskProgress{Message: in.Message, Succeeded: in.Succeeded, Failed: in.Failed})
	})
	addMCPTool(srv, mcpToolAsk, nil, func(ctx context.Context, in mcpAskInput) (string, error) {
		ask := models.Ask{Question: in.Question}
		if strings.TrimSpace(in.Default) != "" {
			ask.Default = &in.Default
		}
		return rpc.Ask(ctx, ask)
	})
	addMCPTool(srv, mcpToolComplete, nil, func(ctx context.Context, in mcpCompleteInput) (string, error) {
		c := models.Completion{Summary: in.Summary, FilesChanged: in.FilesChanged, NoChanges: in.NoChanges}
		if in.Outputs != nil {
			data, err := json.Marshal(in.Outputs)
			if err != nil {
				return "", fmt.Errorf("outputs: %w", err)
			}
			c.Outputs = data
		}
		return "Completion recorded. Stop working on this task now.", rpc.Complete(ctx, c)
	})
	addMCPTool(srv, mcpToolFail, nil, func(ctx context.Context, in mcpFailInput) (string, error) {
		return "Failure recorded. Stop working on this task now.", rpc.Fail(ctx, in.Message)
	})
	addMCPTool(srv, mcpToolUsage, nil, func(ctx context.Context, in mcpUsageInput) (string, error) {
		return "Usage recorded.", rpc.Usage(ctx, api.UsageReport{Input: in.InputTokens, Output: in.OutputTokens,
			CacheRead: in.CacheReadTokens, CacheWrite: in.CacheWriteTokens})
	})
	addMCPTool(srv, mcpToolRateLimited, enumProperty("kind", "rate_limit", "tokens"),
		func(ctx context.Context, in mcpRateLimitedInput) (string, error) {
			r := models.RateLimit{Kind: in.Kind, Message: in.Message}
			switch {
			case in.ResetAt != "" && in.ResetInSeconds != 0:
				return "", errors.New("give reset_at or reset_in_seconds, not both")
			case in.ResetAt != "":
				t, err := time.Parse(time.RFC3339, in.ResetAt)
				if err != nil {
					return "", fmt.Errorf("reset_at: %q is not an RFC 3339 time (like 2026-03-01T12:00:00Z)", in.ResetAt)
				}
				r.ResetAt = &t
			case in.ResetInSeconds < 0:
				return "", fmt.Errorf("reset_in_seconds: must not be negative (got %d)", in.ResetInSeconds)
			case in.ResetInSeconds > 0:
				t := time.Now().Add(time.Duration(in.ResetInSeconds) * time.Second).UTC().Truncate(time.Second)
				r.ResetAt = &t
			}
			if err := rpc.RateLimited(ctx, r); err != nil {
				return "", err
			}
			return "Rate limit recorded: the task is paused and resumed after the reset. Stop working now.", nil
		})
	addMCPTool(srv, mcpToolProposePlan, enumItemProperty("tasks", "verification_type", "AUTO_TEST", "QA_AGENT", "HUMAN"),
		func(ctx context.Context, in mcpPlanInput) (string, error) {
			results, err := rpc.ProposePlan(ctx, planTasks(in.Tasks))
			if err != nil {
				return "", err
			}
			return planSummary(results), nil
		})
	addMCPTool(srv, mcpToolApprove, nil, func(ctx context.Context, in mcpVerdictInput) (string, error) {
		return "Approval recorded. Stop now.", rpc.Approve(ctx, in.Reasons)
	})
	addMCPTool(srv, mcpToolReject, nil, func(ctx context.Context, in mcpVerdictInput) (string, error) {
		return "Rejection recorded. Stop now.", rpc.Reject(ctx, in.Reasons)
	})
	return srv
}

// addMCPTool adds a tool whose handler returns text. Its input schema is
// inferred from In and then adjusted by tweak (when not nil); an error is
// a tool error carrying the error's message.
func addMCPTool[In any](srv *mcp.Server, t mcpTool, tweak func(*jsonschema.Schema), h func(context.Context, In) (string, error)) {
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("mcp tool %s: input schema: %v", t.name, err))
	}
	if tweak != nil {
		tweak(schema)
	}
	tool := &mcp.Tool{Name: t.name, Title: t.title, Description: t.description, InputSchema: schema}
	mcp.AddTool(srv, tool, func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		text, err := h(ctx, in)
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
	})
}

// enumProperty restricts a string property of a tool's input to values.
func enumProperty(name string, values ...string) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) { setEnum(s.Properties[name], values) }
}

// enumItemProperty restricts a string property of the items of an array
// property of a tool's input to values.
func enumItemProperty(array, name string, values ...string) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) {
		if p := s.Properties[array]; p != nil && p.Items != nil {
			setEnum(p.Items.Properties[name], values)
		}
	}
}

func setEnum(p *jsonschema.Schema, values []string) {
	if p == nil {
		panic("mcp tool schema: no such property")
	}
	p.Enum = make([]any, len(values))
	for i, v := range values {
		p.Enum[i] = v
	}
}

// planTasks turns the MCP plan entries into batch entries.
func planTasks(in []mcpPlanTask) []models.BatchTask {
	out := make([]models.BatchTask, len(in))
	for i, t := range in {
		bt := models.BatchTask{LocalID: t.ID, Title: t.Title, Description: t.Description, Priority: t.Priority,
			AcceptanceCriteria: t.AcceptanceCriteria, TestCommands: t.TestCommands,
			VerificationType: models.VerificationType(t.VerificationType), RequiresApproval: t.RequiresApproval,
			Kind: t.Kind, Metadata: t.Metadata, ExpectedCount: t.ExpectedCount}
		for _, d := range t.DependsOn {
			bt.Dependencies = append(bt.Dependencies, models.BatchDependency{ID: d})
		}
		out[i] = bt
	}
	return out
}

// planSummary describes the created subtasks, one line each.
func planSummary(results []models.BatchResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Plan accepted: %d subtask(s), created when this task completes.\n", len(results))
	for _, r := range results {
		name := r.LocalID
		if name == "" {
			name = "(no id)"
		}
		note := ""
		if r.Skipped {
			note = ", an existing task"
		}
		if r.TaskID == "" {
			fmt.Fprintf(&b, "%s\n", name)
			continue
		}
		fmt.Fprintf(&b, "%s -> task %s (%s%s)\n", name, r.TaskID, r.Status, note)
	}
	return b.String()
}
