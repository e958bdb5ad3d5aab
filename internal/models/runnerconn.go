package models

import (
	"encoding/json"
	"slices"
	"strings"
)

// What a runner and the daemon say to each other over /runner/v1
// (docs/runners.md, "The connection").

// RunnerAgent is one agent of a runner as the runner announces it: what
// the daemon needs to schedule it and to write its prompts. How the runner
// starts it (its command, arguments and environment) stays on the runner.
type RunnerAgent struct {
	// Name is the agent's name in the runner's configuration (ValidID);
	// the daemon knows it as RUNNER/NAME.
	Name string `json:"name"`
	// AgentType is claude, codex, cursor, aider or command.
	AgentType        string   `json:"agent_type"`
	MaxRuntime       Duration `json:"max_runtime,omitempty"`
	IdleTimeout      Duration `json:"idle_timeout,omitempty"`
	HeartbeatTimeout Duration `json:"heartbeat_timeout,omitempty"`
	// Projects limits the agent to these projects; empty means any.
	Projects []string `json:"projects,omitempty"`
	// Profile is the agent's own way of running its CLI.
	Profile Profile `json:"profile,omitzero"`
}

// RunnerHello is what a runner says when it connects: POST /runner/v1/hello.
type RunnerHello struct {
	// Name, when set, is the name the runner believes it has: the daemon
	// refuses the hello when the token names another runner.
	Name    string        `json:"name,omitempty"`
	Version string        `json:"version"`
	Agents  []RunnerAgent `json:"agents"`
}

// MaxRunnerAgents caps the agents one runner announces.
const MaxRunnerAgents = 256

// RunnerWelcome is the daemon's answer to a hello.
type RunnerWelcome struct {
	// Runner is the runner's name (its token's).
	Runner string `json:"runner"`
	// Agents are the runner's agents as the daemon knows them (RUNNER/NAME).
	Agents []string `json:"agents"`
	// PollHold is the longest the daemon holds a poll; the runner waits
	// longer than that for an answer before it takes the connection for
	// lost.
	PollHold Duration `json:"poll_hold"`
}

// RunnerPoll is the daemon's answer to a poll: GET /runner/v1/poll. An
// empty answer means "nothing yet: poll again".
type RunnerPoll struct {
	// Draining is set while the runner is drained: it takes no new run.
	Draining bool `json:"draining,omitempty"`
	// Runs are runs given to the runner that it has not taken up yet: it
	// prepares each one's checkout and asks for its launch (a
	// RunnerReport of kind "prepared"). Each run is listed once after a
	// hello; a runner whose request failed says hello again and is given
	// again what it has not taken up. A run listed again is the same run:
	// a runner takes each run id once.
	Runs []RunnerAssignment `json:"runs,omitempty"`
	// End lists runs the runner must end now: stopped by the daemon, or no
	// longer its own (its lease was lost).
	End []RunnerEnd `json:"end,omitempty"`
}

// RunnerAssignment is one run given to a runner's agent.
type RunnerAssignment struct {
	// RunID names the run in every report about it; a run is given once,
	// and the task's next run is a new one, so the id is also the run's
	// fencing token.
	RunID int64 `json:"run_id"`
	// Token is the run's token (AQ_RUN_TOKEN): the runner sends it with
	// each report and gives it to its agent, whose calls it relays.
	Token string `json:"token"`
	// Agent is the agent's name on the runner (without "RUNNER/").
	Agent     string `json:"agent"`
	ProjectID string `json:"project_id"`
	Attempt   int    `json:"attempt"`
	Kind      string `json:"kind"`
	Task      Task   `json:"task"`
	// Repo is the repository to check out from the daemon; nil when the
	// project has none (the agent gets a scratch directory).
	Repo *RunnerRepo `json:"repo,omitempty"`
	// LeaseTTL is how long the run's lease lasts without a heartbeat.
	LeaseTTL Duration `json:"lease_ttl"`
	// Heartbeat is how often the runner renews its runs' leases.
	Heartbeat Duration `json:"heartbeat"`
}

// RunnerRepo is the repository a runner checks a run out from: the
// daemon serves it at /runner/v1/git/{ID}.git.
type RunnerRepo struct {
	ID            string `json:"id"`
	DefaultBranch string `json:"default_branch"`
	// Branch is the task branch: the runner's checkout is on it, and the
	// runner pushes it back when the agent is done.
	Branch string `json:"branch"`
}

// RunnerEnd tells a runner to end a run's agent.
type RunnerEnd struct {
	RunID  int64  `json:"run_id"`
	Reason string `json:"reason"`
}

// RunnerHeartbeat renews the leases of the runs a runner holds: POST
// /runner/v1/heartbeat.
type RunnerHeartbeat struct {
	Runs []int64 `json:"runs"`
}

// RunnerHeartbeatAnswer lists the runs of a heartbeat the runner must end.
type RunnerHeartbeatAnswer struct {
	End []RunnerEnd `json:"end,omitempty"`
}

// The kinds of RunnerReport.
const (
	// ReportPrepared: the checkout is ready; the answer is the launch.
	ReportPrepared = "prepared"
	// ReportStarted: the agent's process runs.
	ReportStarted = "started"
	// ReportEvents: what the agent's CLI said, as its adapter read it.
	ReportEvents = "events"
	// ReportRPC: a call of the agent RPC, relayed.
	ReportRPC = "rpc"
	// ReportEnded: the agent's process ended and its work was pushed.
	ReportEnded = "ended"
)

// MaxRunnerEvents caps the events of one report.
const MaxRunnerEvents = 1000

// RunnerReport is one report about a run: POST /runner/v1/runs/{id}/reports.
// Reports are numbered from 1 per run, and applied in order, each once: a
// report sent again (its answer was lost) is answered as the first time
// and not applied again; one that skips a number is refused.
type RunnerReport struct {
	Seq  int64  `json:"seq"`
	Kind string `json:"kind"`
	// Prepared is the checkout (kind prepared): its directory on the
	// runner, branch, base and the files left in conflict.
	Prepared *Workspace `json:"prepared,omitempty"`
	// PrepareError is why the checkout could not be prepared (kind
	// prepared): the run ends and the task is READY again.
	PrepareError string `json:"prepare_error,omitempty"`
	// Tool and Body are a relayed call (kind rpc): the tool's name and
	// its request body.
	Tool string          `json:"tool,omitempty"`
	Body json.RawMessage `json:"body,omitempty"`
	// Events are the adapter's events (kind events), encoded as the agent
	// package encodes them.
	Events json.RawMessage `json:"events,omitempty"`
	// Ended is how the process ended (kind ended).
	Ended *RunnerEnded `json:"ended,omitempty"`
}

// RunnerEnded is how a remote run's process ended and what became of its
// work.
type RunnerEnded struct {
	ExitCode int `json:"exit_code"`
	// Signal names the signal that ended the process, if one did.
	Signal     string `json:"signal,omitempty"`
	StderrTail string `json:"stderr_tail,omitempty"`
	// Refusals is what the CLI refused to write, when it said so.
	Refusals string `json:"refusals,omitempty"`
	// Pushed is the task branch's commit pushed to the daemon; "" when
	// nothing was pushed (no repository, or PushError).
	Pushed string `json:"pushed,omitempty"`
	// PushError is why the work could not be committed or pushed.
	PushError string `json:"push_error,omitempty"`
	// LogSize is the size of the run's log, all of which was sent.
	LogSize int64 `json:"log_size"`
	// Lost is set when the runner lost the agent (it restarted and ended
	// it): no fault of the agent's, the task goes back to READY by
	// RECOVERY without using a retry.
	Lost bool `json:"lost,omitempty"`
}

// RunnerLaunch answers a prepared report: how to start the agent.
type RunnerLaunch struct {
	Profile      Profile    `json:"profile"`
	Prompt       string     `json:"prompt"`
	SessionID    string     `json:"session_id,omitempty"`
	SessionUsage TokenUsage `json:"session_usage"`
	// Env is the run's place in its workflow run (AQ_RUN_ID, AQ_STEP, …).
	Env map[string]string `json:"env,omitempty"`
	// ToolTimeout is the longest one call of agentqueued's tools may block.
	ToolTimeout Duration `json:"tool_timeout"`
}

// RunnerReportAnswer answers a report.
type RunnerReportAnswer struct {
	// Launch answers a prepared report.
	Launch *RunnerLaunch `json:"launch,omitempty"`
	// Status and Answer are a relayed call's HTTP status and answer body.
	Status int             `json:"status,omitempty"`
	Answer json.RawMessage `json:"answer,omitempty"`
	// Pending answers a relayed ask still waiting for its answer: send the
	// same report again.
	Pending bool `json:"pending,omitempty"`
}

// Validate checks a report's shape, naming the bad field.
func (r RunnerReport) Validate() error {
	if r.Seq < 1 {
		return Errorf(CodeInvalid, "seq: reports are numbered from 1 (got %d)", r.Seq)
	}
	switch r.Kind {
	case ReportPrepared:
		if (r.Prepared == nil) == (r.PrepareError == "") {
			return Errorf(CodeInvalid, "prepared: give either the checkout or prepare_error")
		}
		if err := CheckText("prepare_error", r.PrepareError, MaxDescriptionLen); err != nil {
			return err
		}
		if p := r.Prepared; p != nil {
			if err := CheckLine("prepared.dir", p.Dir, 4096); err != nil {
				return err
			}
			if len(p.Conflicts) > 10000 {
				return Errorf(CodeInvalid, "prepared.conflicts: at most 10000 files")
			}
		}
	case ReportStarted:
	case ReportEvents:
		if len(r.Events) == 0 {
			return Errorf(CodeInvalid, "events: missing")
		}
	case ReportRPC:
		if r.Tool == "" || len(r.Tool) > 64 {
			return Errorf(CodeInvalid, "tool: missing or too long")
		}
	case ReportEnded:
		e := r.Ended
		if e == nil {
			return Errorf(CodeInvalid, "ended: missing")
		}
		if e.LogSize < 0 {
			return Errorf(CodeInvalid, "ended.log_size: negative")
		}
		for _, f := range []struct{ name, v string }{{"ended.stderr_tail", e.StderrTail}, {"ended.refusals", e.Refusals},
			{"ended.push_error", e.PushError}} {
			if err := CheckText(f.name, f.v, MaxDescriptionLen); err != nil {
				return err
			}
		}
		if err := CheckLine("ended.signal", e.Signal, 32); err != nil {
			return err
		}
		if err := CheckLine("ended.pushed", e.Pushed, 64); err != nil {
			return err
		}
	default:
		return Errorf(CodeInvalid, "kind: %s is not a report kind (prepared, started, events, rpc, ended)",
			Quote(cutRunes(r.Kind, 40)))
	}
	return nil
}

// Validate checks a hello, naming the bad field: a version of one short
// line, at most MaxRunnerAgents agents, each named by an id given once, of
// a known type, with valid limits and profile.
func (h RunnerHello) Validate() error {
	if h.Name != "" && !ValidID(h.Name) {
		return Errorf(CodeInvalid, "name: %s is not a runner name", Quote(cutRunes(h.Name, 80)))
	}
	if err := CheckLine("version", h.Version, MaxShortLen); err != nil {
		return err
	}
	if len(h.Agents) > MaxRunnerAgents {
		return Errorf(CodeInvalid, "agents: at most %d (got %d)", MaxRunnerAgents, len(h.Agents))
	}
	seen := make(map[string]bool, len(h.Agents))
	for i, a := range h.Agents {
		switch {
		case !ValidID(a.Name):
			return Errorf(CodeInvalid, "agents[%d].name: %s is not an agent name (1-64 lower-case letters, digits, '-' or '_')",
				i, Quote(cutRunes(a.Name, 80)))
		case seen[a.Name]:
			return Errorf(CodeInvalid, "agents[%d].name: %s is listed twice", i, Quote(a.Name))
		case !slices.Contains(AgentTypes, a.AgentType):
			return Errorf(CodeInvalid, "agents[%d].agent_type: %s is not an agent type (%s)", i, Quote(cutRunes(a.AgentType, 40)),
				strings.Join(AgentTypes, ", "))
		case a.MaxRuntime < 0 || a.IdleTimeout < 0 || a.HeartbeatTimeout < 0:
			return Errorf(CodeInvalid, "agents[%d]: time limits must not be negative", i)
		}
		seen[a.Name] = true
		prof := a.Profile
		if err := prof.Validate(); err != nil {
			return WrapError(CodeInvalid, err, "agents[%d].profile: %s", i, ErrorMessageOf(err))
		}
		for j, p := range a.Projects {
			if !ValidID(p) {
				return Errorf(CodeInvalid, "agents[%d].projects[%d]: %s is not a project id", i, j, Quote(cutRunes(p, 80)))
			}
		}
	}
	return nil
}

// RemoteRunState is what the daemon keeps of a run on a runner, so that a
// restarted daemon takes the run up where it was (see Store.SaveRemoteRun).
type RemoteRunState struct {
	// Runner is the runner the run is on.
	Runner string `json:"runner"`
	// Served is the repository served for the run ("" without one), and
	// Branch and DefaultBranch the task's.
	Served        string `json:"served,omitempty"`
	Branch        string `json:"branch,omitempty"`
	DefaultBranch string `json:"default_branch,omitempty"`
	// Started is set once the runner reported the agent started.
	Started bool `json:"started,omitempty"`
	// Completion, Failure and Pause are what the agent reported through
	// the RPC, applied at the run's end.
	Completion *Completion `json:"completion,omitempty"`
	Failure    string      `json:"failure,omitempty"`
	Pause      *RateLimit  `json:"pause,omitempty"`
	// LogSize is how much of the runner's log of the run the daemon has.
	LogSize int64 `json:"log_size,omitempty"`
}
