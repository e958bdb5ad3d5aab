package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock"
	"github.com/agentqueued/agentqueued/internal/fleet"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/orchestrator"
	"github.com/agentqueued/agentqueued/internal/service/areas"
	"github.com/agentqueued/agentqueued/internal/store"
)

// Orchestrator is what the service needs from the scheduler
// (*orchestrator.Orchestrator): the operations that touch running agents,
// their checkouts and their logs.
type Orchestrator interface {
	ApplyAdminEvent(ctx context.Context, req models.TransitionRequest) (models.TransitionResult, error)
	SetAgentPaused(ctx context.Context, id string, paused bool) (models.Agent, error)
	AnswerQuestion(ctx context.Context, id int64, answer, by string) (models.Question, error)
	Approve(ctx context.Context, taskID, actor, note string) (models.TransitionResult, error)
	Reject(ctx context.Context, taskID, actor, feedback string) (models.TransitionResult, error)
	Land(ctx context.Context, projectID string) (models.LandResult, error)
	TaskDiff(ctx context.Context, taskID string) (string, error)
	TaskLogs(ctx context.Context, taskID string, attempt int) (models.TaskLogs, error)
	ReadTaskLog(ctx context.Context, taskID string, attempt int, offset int64, limit int) (models.LogChunk, error)
}

// HookEngine is what the service needs from the hook engine
// (*hooks.Engine): its checks of a hook before it is saved, and firing.
type HookEngine interface {
	Check(ctx context.Context, h models.Hook) error
	Fire(ctx context.Context, hookID, by string, f models.HookFire) (models.HookRun, error)
}

// WorkflowEngine is what the service needs from the workflow engine
// (*workflow.Engine): starting, cancelling and retrying runs, and a wake
// when a saved workflow's schedule may have changed.
type WorkflowEngine interface {
	Wake()
	Trigger(ctx context.Context, name, by string) (models.WorkflowRun, error)
	TriggerWith(ctx context.Context, name, by string, inputs map[string]string) (models.WorkflowRun, error)
	Cancel(ctx context.Context, id, by string) (models.WorkflowRun, error)
	Retry(ctx context.Context, id, by string) (models.WorkflowRun, error)
}

// SourceChecker checks a project's repository before it is stored
// (repo.Workspaces.CheckSource).
type SourceChecker interface {
	CheckSource(ctx context.Context, r models.RepoConfig, timeout time.Duration) error
}

// Traces removes what a removed agent or a deleted task leaves in a
// project's linked (LINK) repository (repo.Workspaces): the agent's
// worktree, the task's branch. Each returns, when it kept something, why.
type Traces interface {
	RemoveCheckout(ctx context.Context, a models.Agent, p models.Project) (kept string, err error)
	RemoveTaskBranch(ctx context.Context, p models.Project, t models.Task) (kept string, err error)
}

// Config configures a Service. Only Store is required; an operation that
// goes through a component the configuration leaves out must not be
// called (tests of one area give only what it uses), except
// SetAgentPaused, which goes to the store alone without an Orchestrator.
type Config struct {
	// Store keeps the daemon's state. Required.
	Store *store.Store
	// Orchestrator ends runs on admin events, hands answers to waiting
	// agents, decides and lands reviewed work, and reads run logs.
	Orchestrator Orchestrator
	// Hooks checks hooks before they are saved and fires them by hand.
	Hooks HookEngine
	// Workflows starts, cancels and retries workflow runs.
	Workflows WorkflowEngine
	// Repos checks a project's repository before it is stored; nil skips
	// the check. RemoteTimeout bounds a remote's answer (zero: the
	// checker's default).
	Repos         SourceChecker
	RemoteTimeout time.Duration
	// Traces, when set, removes a removed agent's worktrees and a deleted
	// task's branch from linked repositories, after the store's change.
	Traces Traces
	// Logger receives what Traces removed or kept; nil discards it.
	Logger *slog.Logger
	// Feed tells followers of the change feed and of tasks' logs about
	// changes (Changed, LogChanged).
	Feed *Feed
	// Profiles are the configured profiles: tasks, projects and workflow
	// steps may name only these.
	Profiles map[string]models.Profile
	// Window is the scheduling window of the budget report; zero is the
	// orchestrator's default.
	Window time.Duration
	// GlobalBudget is the tokens all projects may use in Window; nil is
	// unlimited.
	GlobalBudget *int64
	// Clock tells the time of the budget report's window; nil: the real
	// clock.
	Clock clock.Clock
	// RetryBackoff and MaxBackoff are the orchestrator's backoff between a
	// FAILED task's retries (orchestrator.retry_backoff and max_backoff),
	// from which a task read for people says when it is retried; zero is
	// the orchestrator's default.
	RetryBackoff, MaxBackoff time.Duration
	// DeskWebhooks are the names of the daemon's desk webhooks: a project's
	// escalate_webhook may name only one of these.
	DeskWebhooks []string
	// Runners, when set, is told about removed runners, so that their
	// held connections end at once, and says which runners are connected
	// and when each was last seen (the fleet's hub).
	Runners RunnerConnections
}

// RunnerConnections are the runners' live connections.
type RunnerConnections interface {
	// Remove ends a removed runner's held requests.
	Remove(name string)
	// Wake answers a runner's held poll now (its state changed).
	Wake(name string)
	// Statuses are the connections of the runners seen since the daemon
	// started: whether each is connected now, and its last request.
	Statuses() []fleet.Status
}

// Service is the daemon's command layer for people: the operations the
// API, the Discord bot and the hook engine's actions call. It holds no
// goroutine of its own.
type Service struct {
	store         *store.Store
	orch          Orchestrator
	hooks         HookEngine
	workflows     WorkflowEngine
	repos         SourceChecker
	remoteTimeout time.Duration
	traces        Traces
	log           *slog.Logger
	feed          *Feed
	profiles      map[string]models.Profile
	window        time.Duration
	// globalBudget is the global token budget; negative is unlimited,
	// since 0 is a budget that lets nothing start.
	globalBudget int64
	clock        clock.Clock
	// retryBackoff and maxBackoff are the orchestrator's retry backoff
	// and its cap, with its defaults.
	retryBackoff, maxBackoff time.Duration
	deskWebhooks             []string
	runners                  RunnerConnections
}

// New returns a service over cfg's components. It starts nothing.
func New(cfg Config) *Service {
	global := int64(-1)
	if cfg.GlobalBudget != nil {
		global = *cfg.GlobalBudget
	}
	orDefault := func(d, def time.Duration) time.Duration {
		if d <= 0 {
			return def
		}
		return d
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{store: cfg.Store, orch: cfg.Orchestrator, hooks: cfg.Hooks, workflows: cfg.Workflows,
		repos: cfg.Repos, remoteTimeout: cfg.RemoteTimeout, traces: cfg.Traces, log: log, feed: cfg.Feed, profiles: cfg.Profiles,
		window: cfg.Window, globalBudget: global, clock: clock.Or(cfg.Clock), runners: cfg.Runners,
		retryBackoff: orDefault(cfg.RetryBackoff, orchestrator.DefaultRetryBackoff),
		maxBackoff:   orDefault(cfg.MaxBackoff, orchestrator.DefaultMaxBackoff), deskWebhooks: cfg.DeskWebhooks}
}

// HasProfile reports whether a profile of that name is configured.
func (s *Service) HasProfile(name string) bool {
	_, ok := s.profiles[name]
	return ok
}

// Ping checks that the store answers (the store's).
func (s *Service) Ping(ctx context.Context) error { return s.store.Ping(ctx) }

// The service implements every area.
var (
	_ areas.Projects             = (*Service)(nil)
	_ areas.Landing              = (*Service)(nil)
	_ areas.Tasks                = (*Service)(nil)
	_ areas.Agents               = (*Service)(nil)
	_ areas.Runners              = (*Service)(nil)
	_ areas.Questions            = (*Service)(nil)
	_ areas.Approvals            = (*Service)(nil)
	_ areas.Status               = (*Service)(nil)
	_ areas.Usage                = (*Service)(nil)
	_ areas.Rules                = (*Service)(nil)
	_ areas.Hooks                = (*Service)(nil)
	_ areas.Workflows            = (*Service)(nil)
	_ areas.WorkflowDocuments    = (*Service)(nil)
	_ areas.WorkflowRuns         = (*Service)(nil)
	_ areas.RunStarter           = (*Service)(nil)
	_ areas.RunStarterWithInputs = (*Service)(nil)
	_ areas.RunTaskLogs          = (*Service)(nil)
	_ areas.Logs                 = (*Service)(nil)
	_ areas.Changes              = (*Service)(nil)
	_ areas.TaskCreator          = (*Service)(nil)
	_ areas.HookActions          = (*Service)(nil)
	_ areas.TokenHistory         = (*Service)(nil)
	_ areas.TaskGraphs           = (*Service)(nil)
)
