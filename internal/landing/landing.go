package landing

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock"
	"github.com/agentqueued/agentqueued/internal/models"
)

// Defaults of the landing's configuration.
const (
	// DefaultCheckTimeout bounds each test command of AUTO_TEST.
	DefaultCheckTimeout = 20 * time.Minute
	// DefaultStopGrace is the time between SIGTERM and SIGKILL when a
	// test command is stopped.
	DefaultStopGrace = 10 * time.Second
	// DefaultPRPollInterval is how often each open pull request is checked.
	DefaultPRPollInterval = time.Minute
	// DefaultLandPollInterval is how often, while a landing waits, the
	// LINK working tree holding it is checked.
	DefaultLandPollInterval = 2 * time.Second
)

// Config configures a Lander. Zero durations take the defaults above; the
// Clock is required (the orchestrator passes its own).
type Config struct {
	// RunDir holds each attempt's check logs: RunDir/<task>/<attempt>.check-<n>.log.
	RunDir string
	// Environ is the daemon's environment, scrubbed for each test command.
	Environ []string
	// CheckTimeout bounds each test command of AUTO_TEST verification.
	CheckTimeout time.Duration
	// StopGrace is the time between SIGTERM and SIGKILL when a test
	// command is stopped.
	StopGrace time.Duration
	// QAAgent reviews QA_AGENT tasks of projects that name no reviewer.
	QAAgent string
	// PullRequests, when set, opens pull requests for tasks that land
	// through one; without it a task that must have one is BLOCKED with
	// PR_UNAVAILABLE, and one that requires approval waits without it.
	PullRequests PullRequests
	// PRPollInterval is how often each open pull request is checked;
	// default DefaultPRPollInterval.
	PRPollInterval time.Duration
	// LandPollInterval is how often, while a landing waits for a LINK
	// repository's working tree, WatchLandings checks that tree; default
	// DefaultLandPollInterval.
	LandPollInterval time.Duration
	// Clock tells the time and makes timers.
	Clock clock.Clock
	// Logger receives the landing's logs.
	Logger *slog.Logger
	// OnPRCheck, when set, is called after each check of a pull request,
	// with its error (for tests and metrics).
	OnPRCheck func(models.PullRequest, error)
}

func (c *Config) applyDefaults() {
	if c.CheckTimeout <= 0 {
		c.CheckTimeout = DefaultCheckTimeout
	}
	if c.StopGrace <= 0 {
		c.StopGrace = DefaultStopGrace
	}
	if c.PRPollInterval <= 0 {
		c.PRPollInterval = DefaultPRPollInterval
	}
	if c.LandPollInterval <= 0 {
		c.LandPollInterval = DefaultLandPollInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Store is what landing needs from the store.
type Store interface {
	GetTask(ctx context.Context, id string) (models.Task, error)
	GetProject(ctx context.Context, id string) (models.Project, error)
	GetAgent(ctx context.Context, id string) (models.Agent, error)
	ApplyEvent(ctx context.Context, req models.TransitionRequest) (models.TransitionResult, error)
	Notify(ctx context.Context, key string, n models.Notice) error
	LastWorkRun(ctx context.Context, taskID string) (models.Run, bool, error)
	TaskResult(ctx context.Context, taskID string) (models.Completion, bool, error)
	PendingPlan(ctx context.Context, taskID string) (models.Plan, bool, error)
	RecordTaskFailure(ctx context.Context, taskID string, outcome models.RunOutcome, msg string) error
	SlotsHeld(ctx context.Context, projectID string) (int, error)
	// WaitDurable returns once every write committed before the call is
	// on disk: landing acts outside the daemon (checks, merges, pushes,
	// pull requests) only on what a crash cannot undo.
	WaitDurable(ctx context.Context) error

	GetVerification(ctx context.Context, taskID string) (models.Verification, bool, error)
	SetVerification(ctx context.Context, v models.Verification) error
	Verifications(ctx context.Context, phases ...models.VerificationPhase) ([]models.Verification, error)
	SwitchVerification(ctx context.Context, taskID string, attempt int, from, to models.VerificationPhase, note models.VerificationNote) (bool, error)
	SwitchApproval(ctx context.Context, taskID string, attempt int, from, to models.VerificationPhase, note models.VerificationNote) (bool, error)
	SetLandingWaiting(ctx context.Context, taskID string, status models.TaskStatus, reason string) (bool, error)

	SavePullRequest(ctx context.Context, pr models.PullRequest) (models.PullRequest, error)
	PullRequestOf(ctx context.Context, taskID string) (models.PullRequest, bool, error)
	DuePullRequests(ctx context.Context, now time.Time, limit int) ([]models.PullRequest, time.Time, error)
	RecordPullRequestCheck(ctx context.Context, pr models.PullRequest) error
	PokePullRequest(ctx context.Context, owner, repo string, number int, now time.Time) (bool, error)

	// ConfirmLease confirms, immediately before an act outside the
	// database (a test command started in a verification checkout), that
	// this daemon still holds the database's lease; an error refuses the
	// act (see models.Fenced).
	ConfirmLease(ctx context.Context) error
}

// Workspaces stages a task's work for verification and delivers it.
type Workspaces interface {
	// Stage checks out the task branch merged into the default branch in a
	// daemon-owned directory for verification; a conflict is a
	// *models.ConflictError.
	Stage(ctx context.Context, p models.Project, t models.Task, src string) (models.Staged, error)
	// Deliver merges the task branch into the default branch (idempotent).
	Deliver(ctx context.Context, p models.Project, t models.Task, src string) (models.Delivery, error)
	// Cleanup removes the task's verification checkout, and its branch when merged.
	Cleanup(ctx context.Context, p models.Project, t models.Task, src string, merged bool) error
	// LandingHeld says why a landing of the project would wait now (its
	// LINK repository's default branch checked out with local changes),
	// "" when nothing holds it; it changes nothing.
	LandingHeld(ctx context.Context, p models.Project) (string, error)
}

// PullRequests is the GitHub side of tasks that land through a pull
// request (wired in by main).
type PullRequests interface {
	// Open pushes the task's branch and opens (or finds) its pull request.
	// An invalid error means the project cannot have one (not on GitHub);
	// a pull request without a number means there is nothing to review
	// (the default branch contains the work already).
	Open(ctx context.Context, p models.Project, t models.Task, src string, c models.PRContent) (models.PullRequest, error)
	// Check reads a pull request's state (and, with reviews, its new
	// reviews) conditionally. An error with a RetryAt() time.Time method
	// is a rate limit: nothing is asked before then.
	Check(ctx context.Context, pr models.PullRequest, reviews bool) (models.PRCheck, error)
	// Merge merges a pull request through the API.
	Merge(ctx context.Context, pr models.PullRequest) error
	// DeleteBranch deletes a merged pull request's branch.
	DeleteBranch(ctx context.Context, pr models.PullRequest) error
}

// Host is what landing needs of the orchestrator that drives it: its
// runs, its agents' rests, and its loop.
type Host interface {
	// Wake asks the loop for a round (a review is due, a slot may be free).
	Wake()
	// RunningFor reports whether a run of the task (its work, or a review
	// of it) is under way: a work run verifies its task when it ends.
	RunningFor(taskID string) bool
	// Reviewing reports whether a review run of the task is under way.
	Reviewing(taskID string) bool
	// Resting reports whether the agent is kept from work for now (a rate
	// limit, a failed start).
	Resting(agentID string) bool
	// StartReview claims the idle agent ag for a review of task t, whose
	// verification v waits in the review phase, and runs it; a claim lost
	// to a race starts nothing. The review's end comes back through
	// Lander.ReviewFailed or Lander.ReviewApproved.
	StartReview(ctx context.Context, ag models.Agent, p models.Project, t models.Task, v models.Verification)
}

// Lander verifies the work of VERIFYING tasks and lands it: checks,
// reviews, a person's decision, the merge or the pull request. Create it
// with New; the orchestrator calls Verify or Advance for a task whose run
// ended in VERIFYING, and DispatchReviews and Resume in each round.
type Lander struct {
	cfg   Config
	store Store
	ws    Workspaces
	host  Host
	log   *slog.Logger

	// prPoke wakes the pull request watcher (a webhook arrived).
	prPoke chan struct{}
	// landPoke wakes the landing watcher (a landing started waiting).
	landPoke chan struct{}

	mu sync.Mutex
	// verifying holds the tasks whose verification a goroutine is running,
	// each with the cancel of its context (an admin event that takes the
	// task out of VERIFYING cancels it), the channel closed when it ends
	// and what it did.
	verifying map[string]*verifyRun
	// vctx bounds verification work (checks, merges); Shutdown cancels it
	// before waiting for the goroutines.
	vctx    context.Context
	vcancel context.CancelFunc
	// stopping is set by Shutdown: no verification goroutine starts after.
	stopping bool
	wg       sync.WaitGroup

	// afterVerify, when set (by tests), is called by each verification
	// once it has released its task, before it returns.
	afterVerify func(taskID string)
}

// New returns a Lander; it starts nothing by itself. A Config without its
// clock, or a missing store, workspaces or host, is a wiring error: New
// panics naming it.
func New(cfg Config, st Store, ws Workspaces, host Host) *Lander {
	if cfg.Clock == nil || st == nil || ws == nil || host == nil {
		panic("landing.New: Config.Clock, the store, the workspaces and the host are required")
	}
	cfg.applyDefaults()
	vctx, vcancel := context.WithCancel(context.Background())
	return &Lander{cfg: cfg, store: st, ws: ws, host: host, log: cfg.Logger, prPoke: make(chan struct{}, 1),
		landPoke: make(chan struct{}, 1), verifying: map[string]*verifyRun{}, vctx: vctx, vcancel: vcancel}
}

// Verify carries the task's verification as far as it can go without
// waiting (see verify), in the caller's goroutine.
func (l *Lander) Verify(taskID string) { l.verify(taskID, nil) }

// Advance carries the task's verification as far as it can go without
// waiting, in a goroutine of its own; after Shutdown it does nothing (the
// next start resumes the recorded phase).
func (l *Lander) Advance(taskID string) { l.goVerify(taskID) }

// DispatchReviews starts a review for each task waiting in the review
// phase whose reviewer is free, and records why the others wait.
func (l *Lander) DispatchReviews(ctx context.Context) error { return l.dispatchReviews(ctx) }

// Resume starts the verification of every task whose recorded phase
// needs one and that nothing verifies now.
func (l *Lander) Resume(ctx context.Context) { l.resumeVerifications(ctx) }

// Cancel stops the verification under way of a task that an admin event
// took out of VERIFYING or AWAITING_APPROVAL: its checks or merge belong
// to the attempt taken away.
func (l *Lander) Cancel(taskID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if run, ok := l.verifying[taskID]; ok {
		run.cancel()
	}
}

// Start readies a Lander stopped by Shutdown for a new life: verifications
// start again, with a fresh context.
func (l *Lander) Start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopping {
		l.stopping = false
		l.vctx, l.vcancel = context.WithCancel(context.Background())
	}
}

// Shutdown stops the checks and merges under way (the next start resumes
// them) and refuses new verification goroutines; Wait waits for them.
func (l *Lander) Shutdown() {
	l.vcancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopping = true
}

// Wait waits for the verification goroutines to end.
func (l *Lander) Wait() { l.wg.Wait() }

// ReviewFailed ends the verification v of t with VERIFY_FAILED after its
// review (step names it): the reviewer rejected the work (fb is its
// verdict), gave no verdict, or could not run.
func (l *Lander) ReviewFailed(ctx context.Context, t models.Task, v models.Verification, step string, err error, fb *models.Feedback) {
	l.verifyFailed(ctx, t, v, step, err, fb)
}

// ReviewApproved records the reviewer's approval of the verification v of
// t, and lands the work as any verification does (one at a time, stopped
// at shutdown, resumed after a restart). A verification that moved on
// meanwhile is left alone.
func (l *Lander) ReviewApproved(ctx context.Context, t models.Task, v models.Verification, reviewer, text string) {
	note := models.VerificationNote{Event: models.EventVerifyPassed, Text: "approved by reviewer " + reviewer + ": " + text}
	if ok, err := l.store.SwitchVerification(ctx, t.ID, v.Attempt, models.PhaseReview, models.PhaseDeliver, note); err != nil || !ok {
		l.log.Info("approval not recorded: the task moved on", "task_id", t.ID, "agent", reviewer, "err", err)
		return
	}
	l.goVerify(t.ID)
}

// apply applies a transition, logging what it did or why not.
func (l *Lander) apply(ctx context.Context, req models.TransitionRequest) {
	Apply(ctx, l.store, l.log, req)
}

// Apply applies an event the daemon decided by itself, logging what it did
// or (not failing on) why not: a lost race means another writer got there
// first, and whoever acts next sees its result. The orchestrator's loop
// applies its own decisions through it too.
func Apply(ctx context.Context, st interface {
	ApplyEvent(ctx context.Context, req models.TransitionRequest) (models.TransitionResult, error)
}, log *slog.Logger, req models.TransitionRequest) {
	res, err := st.ApplyEvent(ctx, req)
	if err != nil {
		log.Warn("transition not applied", "task_id", req.TaskID, "event", req.Event, "err", err)
		return
	}
	if !res.Duplicate {
		log.Info("task transition", "task_id", req.TaskID, "event", req.Event, "from", res.From, "to", res.To)
	}
}
