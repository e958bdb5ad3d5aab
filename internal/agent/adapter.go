package agent

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// RunContext is what an adapter needs to build one run.
type RunContext struct {
	Agent models.Agent
	Task  models.Task
	// Prompt is the rendered task prompt.
	Prompt string
	// PromptFile holds the same prompt on disk.
	PromptFile string
	// SessionID, when set, is a session of an earlier attempt to resume.
	SessionID string
}

// Invocation is how to start one run.
type Invocation struct {
	Argv  []string
	Stdin string
}

// EventKind classifies what an adapter read from an agent's output.
type EventKind string

// Event kinds.
const (
	EventSession   EventKind = "session"    // the CLI's session id
	EventUsage     EventKind = "usage"      // token usage so far
	EventRateLimit EventKind = "rate_limit" // a rate limit or usage cap, with its reset time
	EventResult    EventKind = "result"     // the final result: the run is over
)

// Event is one thing an adapter read from an agent's output.
type Event struct {
	Kind      EventKind
	SessionID string
	Usage     models.TokenUsage
	ResetAt   *time.Time
	Summary   string
	IsError   bool
	Error     string
}

// Adapter knows how to run one agent type and read its output.
type Adapter interface {
	// Type is the agent_type it serves.
	Type() string
	// Invocation builds the command line and standard input of one run.
	Invocation(rc RunContext) (Invocation, error)
	// ParseLine reads one line of standard output. Unknown lines and
	// message types yield nothing; they are never an error.
	ParseLine(line []byte) []Event
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
func DefaultRegistry() *Registry { return NewRegistry(Command{}) }

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

// ParseLine reads nothing: command agents report through RPC.
func (Command) ParseLine([]byte) []Event { return nil }
