package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/proc"
)

// RunContext is what an adapter needs to build one run.
type RunContext struct {
	Agent models.Agent
	Task  models.Task
	// Profile is the effective profile of the run: the task's, else the
	// project's default, else the agent's own settings.
	Profile models.Profile
	// MCPServers are the servers the run gets: agentqueued's own first
	// (named "agentqueued"), then the profile's.
	MCPServers []models.MCPServer
	// Dir is the working directory of the run (the agent's checkout).
	Dir string
	// Prompt is the rendered task prompt.
	Prompt string
	// PromptFile holds the same prompt on disk.
	PromptFile string
	// StateDir is a private directory (0700) of this run where the
	// adapter's Files are written; it is not inside the checkout.
	StateDir string
	// SessionID, when set, is the session of an earlier attempt on this
	// agent to resume; SessionUsage is the usage that session's earlier
	// runs booked, for CLIs that report running totals per session.
	SessionID    string
	SessionUsage models.TokenUsage
	// Executable is the daemon's own binary (the run's AQ_BIN), which an
	// agent may run as `<Executable> agent …` in a shell when its CLI can
	// (ShellFallback); "" when the daemon does not know it.
	Executable string
	// ToolTimeout is how long one call of agentqueued's own MCP tools may
	// block (an ask waits for a person up to the input timeout); zero
	// leaves the CLI's own limit.
	ToolTimeout time.Duration
}

// Invocation is how to start one run.
type Invocation struct {
	Argv  []string
	Stdin string
	// Env is added to the run's environment (after the agent's own env).
	Env map[string]string
	// Files are written into RunContext.StateDir (name → content, mode
	// 0600) before the process starts: config files the CLI reads.
	Files map[string]string
}

// EventKind classifies what an adapter read from an agent's output.
type EventKind string

// Event kinds.
const (
	EventSession   EventKind = "session"    // the CLI's session id
	EventUsage     EventKind = "usage"      // token usage of this run so far
	EventRateLimit EventKind = "rate_limit" // a rate limit or usage cap, with its reset time
	EventMessage   EventKind = "message"    // assistant text, for the task's thread
	EventResult    EventKind = "result"     // the final result: the run is over
	EventCLI       EventKind = "cli"        // the CLI's version and its MCP servers at start
)

// Denial is a tool call the CLI refused for want of a permission.
type Denial struct {
	Tool      string `json:"tool"`
	ToolUseID string `json:"tool_use_id,omitempty"`
}

// Event is one thing an adapter read from an agent's output.
type Event struct {
	Kind EventKind
	// SessionID is set on EventSession.
	SessionID string
	// Usage is this run's cumulative usage so far (EventUsage); the
	// orchestrator records the difference to the previous one.
	Usage models.TokenUsage
	// ResetAt is when a rate limit ends (EventRateLimit); nil if unknown.
	ResetAt *time.Time
	// UsageCap marks a plan's usage cap or token exhaustion rather than a
	// transient rate limit (EventRateLimit).
	UsageCap bool
	// Text is assistant text (EventMessage).
	Text string
	// Summary is the final text (EventResult).
	Summary string
	// IsError and Error describe a failed result (EventResult), or the
	// provider's words for a rate limit (EventRateLimit).
	IsError bool
	Error   string
	// SessionInvalid marks a result that failed because the resumed
	// session does not exist: the next attempt must start afresh.
	SessionInvalid bool
	// CostUSD is the cost the CLI reported with its result, when it did
	// (EventResult).
	CostUSD *float64
	// Denied lists the tool calls the CLI refused (EventResult); a result
	// with denials is a failure.
	Denied []Denial
	// Version is the CLI's version (EventCLI), "" when it did not say.
	Version string
	// MCPNotReady names the configured MCP servers that were not connected
	// when the CLI began its first turn, each as "name (status)" (EventCLI).
	MCPNotReady []string
}

// Adapter knows how to run one agent type and read its output.
type Adapter interface {
	// Type is the agent_type it serves.
	Type() string
	// Invocation builds the command line, environment, config files and
	// standard input of one run.
	Invocation(rc RunContext) (Invocation, error)
	// NewParser returns the reader of one run's output.
	NewParser(rc RunContext) Parser
}

// Parser reads one run's standard output. Unknown lines and message types
// yield nothing; they are never an error.
type Parser interface {
	// Line reads one line of standard output (without its newline).
	Line(line []byte) []Event
	// End is called once after the process exited, with its exit code: a
	// parser that saw no result decides it here (a stream cut short is a
	// failure; a text-only CLI's outcome comes from what it printed).
	End(exitCode int) []Event
}

// StderrReader is a Parser that also reads the run's standard error, for
// what its CLI reports only there. Only lines it recognises are kept, never
// the rest: standard error may hold anything, secrets included.
type StderrReader interface {
	// StderrLine reads one line of standard error (without its newline).
	// It is called from another goroutine than Line and End.
	StderrLine(line []byte)
	// Refusals says what the CLI refused to do that its output stream does
	// not show (a write its sandbox rejected), in the CLI's own words,
	// cleaned and bounded; "" when nothing. It is called after the process
	// ended.
	Refusals() string
}

// ShellChecker is implemented by adapters whose agents cannot always run
// the daemon's binary from a shell: a sandbox that blocks the daemon's
// socket, a mode that runs no commands, a CLI that refuses every command.
type ShellChecker interface {
	// ShellFallback reports whether a run with profile p can report
	// through `<AQ_BIN> agent …` in a shell.
	ShellFallback(p models.Profile) bool
}

// ShellFallback reports whether a run of adapter a with profile p can
// report through `<AQ_BIN> agent …` in a shell: the prompt offers it only
// then. An adapter that is no ShellChecker runs any executable, so it can.
func ShellFallback(a Adapter, p models.Profile) bool {
	if c, ok := a.(ShellChecker); ok {
		return c.ShellFallback(p)
	}
	return true
}

// Registry maps agent types to their adapters.
type Registry struct{ adapters map[string]Adapter }

// NewRegistry returns a registry of the given adapters; two adapters of one
// type are a programming error.
func NewRegistry(adapters ...Adapter) *Registry {
	r := &Registry{adapters: map[string]Adapter{}}
	for _, a := range adapters {
		if _, dup := r.adapters[a.Type()]; dup {
			panic("agent: two adapters for type " + a.Type())
		}
		r.adapters[a.Type()] = a
	}
	return r
}

// DefaultRegistry returns the adapters agentqueued ships.
func DefaultRegistry() *Registry {
	return NewRegistry(Command{}, Claude{}, Codex{}, Cursor{}, Aider{})
}

// For returns the adapter of an agent type.
func (r *Registry) For(agentType string) (Adapter, error) {
	a, ok := r.adapters[agentType]
	if !ok {
		known := make([]string, 0, len(r.adapters))
		for t := range r.adapters {
			known = append(known, t)
		}
		slices.Sort(known)
		return nil, models.Errorf(models.CodeInvalid, "agent type %q is not supported here (supported: %s)", agentType, strings.Join(known, ", "))
	}
	return a, nil
}

// Command runs any executable: the agent's command and args, the prompt on
// standard input (and in AQ_PROMPT_FILE). It reports through RPC; its output
// is logged but not parsed. Exit 0 without a complete call counts as
// completed with an empty summary; a non-zero exit fails the run with the
// tail of its stderr.
type Command struct{}

// Type returns "command".
func (Command) Type() string { return "command" }

// Invocation runs the agent's command with its args.
func (Command) Invocation(rc RunContext) (Invocation, error) {
	if strings.TrimSpace(rc.Agent.Command) == "" {
		return Invocation{}, fmt.Errorf("agent %s: command is empty", rc.Agent.ID)
	}
	argv := append([]string{rc.Agent.Command}, rc.Agent.Args...)
	return Invocation{Argv: argv, Stdin: rc.Prompt}, nil
}

// NewParser reads nothing: command agents report through RPC.
func (Command) NewParser(RunContext) Parser { return nopParser{} }

type nopParser struct{}

func (nopParser) Line([]byte) []Event { return nil }
func (nopParser) End(int) []Event     { return nil }

// VersionProber is an adapter whose CLI does not print its version in its
// output stream: the version is read by running VersionArgv (see
// ProbeVersion).
type VersionProber interface {
	VersionArgv(a models.Agent) []string
}

// ProbeVersion runs argv (a CLI's --version) and returns the version it
// printed; it gives up when ctx ends.
func ProbeVersion(ctx context.Context, argv []string, env []string) (string, error) {
	if len(argv) == 0 {
		return "", fmt.Errorf("probe version: no command")
	}
	command, args := argv[0], argv[1:]
	cmd := proc.Command(ctx, command, args...)
	cmd.Env = env
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", command, strings.Join(args, " "), err)
	}
	v := models.ParseCLIVersion(string(out))
	if v == "" {
		return "", fmt.Errorf("%s %s printed no version", command, strings.Join(args, " "))
	}
	return v, nil
}
