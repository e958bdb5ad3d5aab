package orchestrator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/clock"
	"github.com/agentqueued/agentqueued/internal/landing"
	"github.com/agentqueued/agentqueued/internal/models"
)

// Defaults of the orchestrator's configuration.
const (
	DefaultSafetyTick      = 10 * time.Second
	DefaultWindow          = 24 * time.Hour
	DefaultReadyPerProject = 200
	DefaultIdleTimeout     = 30 * time.Minute
	DefaultMaxRuntime      = 2 * time.Hour
	DefaultStartTimeout    = 5 * time.Minute
	DefaultPrepareTimeout  = 10 * time.Minute
	DefaultRetryBackoff    = 30 * time.Second
	DefaultMaxBackoff      = 30 * time.Minute
	DefaultStopGrace       = 10 * time.Second
	DefaultPauseDelay      = 15 * time.Minute
	DefaultInputTimeout    = models.DefaultInputTimeout
	DefaultCheckTimeout    = landing.DefaultCheckTimeout
	DefaultResultGrace     = 10 * time.Second
	// maxOwnRuleSets bounds the distinct own rules of a project's READY
	// tasks a round describes to the store; tasks under further ones are
	// read and refused one by one.
	maxOwnRuleSets = 64
	// DefaultTimerBatch is how many due timers (PAUSED or FAILED tasks)
	// are read at a time; a round reads batches until none is due.
	DefaultTimerBatch = 500
	// ToolTimeoutMargin is added to InputTimeout for the agent CLI's limit
	// on one call of agentqueued's MCP tools: an ask returns when the input
	// timeout ends, and the CLI must not give up on it before.
	ToolTimeoutMargin = time.Minute
	// FencedRetry is how soon a round that the lease's fence kept from
	// dispatching (the lease is about to expire without a renewal) is
	// made again.
	FencedRetry = time.Second
)

// Config configures an Orchestrator. Zero durations take the defaults above.
type Config struct {
	// SafetyTick is the longest the loop waits without a wake-up: the slow
	// tick that repairs anything a lost signal missed.
	SafetyTick time.Duration
	// Window is the rolling window of fair share and budgets.
	Window time.Duration
	// ReadyPerProject is the page of READY tasks read per project at a
	// time; a round reads further pages while a project can take more work
	// and an idle agent serves it.
	ReadyPerProject int
	// IdleTimeout ends a run with no output and no RPC for this long, unless
	// its agent sets its own.
	IdleTimeout time.Duration
	// MaxRuntime caps a run's wall-clock time, unless its agent sets its own.
	MaxRuntime time.Duration
	// PrepareTimeout bounds the preparation of a run's workspace (a first
	// clone, a fetch, the task branch), from the claim: past it the run
	// ends with EXECUTION_ERROR, its task back in READY, and the project
	// cools down as after a failed preparation.
	PrepareTimeout time.Duration
	// StartTimeout bounds the time from the spawn (the workspace is ready
	// and the process is being started) to a started, recorded process:
	// past it the run ends with TIMEOUT.
	StartTimeout time.Duration
	// RetryBackoff is the wait before the first retry; it doubles with each
	// retry up to MaxBackoff.
	RetryBackoff time.Duration
	MaxBackoff   time.Duration
	// StopGrace is the time between SIGTERM and SIGKILL when a run is stopped.
	StopGrace time.Duration
	// PauseDelay is how long a rate-limited task waits when no reset time
	// was reported.
	PauseDelay time.Duration
	// InputTimeout is how long a question waits for a human before the task
	// is PAUSED (for as long again) and the run ends.
	InputTimeout time.Duration
	// CheckTimeout bounds each test command of AUTO_TEST verification.
	CheckTimeout time.Duration
	// ResultGrace is how long a process may linger after its final result
	// (open MCP connections keep some CLIs alive) before it is stopped.
	ResultGrace time.Duration
	// Profiles are the named agent profiles tasks and projects may choose.
	Profiles map[string]models.Profile
	// PlanPaths are files in a checkout where a root task's agent may leave
	// a plan instead of proposing it (e.g. ".claude/plan.md").
	PlanPaths []string
	// QAAgent reviews QA_AGENT tasks of projects that name no reviewer;
	// QAProfile is the profile it reviews with.
	QAAgent, QAProfile string
	// Executable is the daemon's own executable: runs get `<Executable> mcp`
	// as their "agentqueued" MCP server, and its path as AQ_BIN, for
	// `<Executable> agent …` in a shell where their CLI can run it (the
	// prompt offers it then). Empty leaves all three out.
	Executable string
	// PullRequests, when set, opens pull requests for tasks that land
	// through one (landing.Config.PullRequests); without it a task that
	// requires approval waits for a person without one, and a task that
	// needs one only because of pr_mode always is BLOCKED with
	// PR_UNAVAILABLE.
	PullRequests PullRequests
	// PRPollInterval is how often each open pull request is checked;
	// default DefaultPRPollInterval.
	PRPollInterval time.Duration
	// LandPollInterval is how often, while a landing waits for a LINK
	// repository's working tree, that tree is checked; default
	// landing.DefaultLandPollInterval.
	LandPollInterval time.Duration
	// Quantum is the agent time each assignment adds to its project's share
	// within a round.
	Quantum time.Duration
	// GlobalBudget caps the tokens of all projects in the window; nil is unlimited.
	GlobalBudget *int64
	// Rules are the scheduling rules in force, unless CurrentRules is set.
	Rules []models.Rule
	// CurrentRules, when set, returns the rules in force; each round asks
	// it, so rules changed at runtime apply from the next round. It must
	// not block (the store's CurrentRules reads memory).
	CurrentRules func() []models.Rule
	// RunDir holds each attempt's prompt and log: RunDir/<task>/<attempt>.{prompt,log}.
	RunDir string
	// SocketPath is the agent RPC socket, passed to runs as AQ_SOCKET.
	SocketPath string
	// Environ is the daemon's environment, scrubbed for each run; default os.Environ().
	Environ []string
	// Clock reads the time and waits; nil: clock.Real.
	Clock clock.Clock
	// Logger receives the orchestrator's logs.
	Logger *slog.Logger
	// OnOutput, when set, is called with the task's id after the log of
	// one of its runs grew: a line or a chunk of the agent's output, or a
	// progress report (for followers of that task's log). It must not block.
	OnOutput func(taskID string)
	// OnRound, OnRunStart and OnRunEnd, when set, are called after each
	// round (with the wake-up sequence number the round started from), after
	// a run's process has started and been recorded, and after a run has
	// ended and been recorded (for tests and metrics).
	OnRound    func(seq uint64)
	OnRunStart func(models.Run)
	OnRunEnd   func(models.Run, models.TransitionResult)
	// OnPRCheck, when set, is called after each check of a pull request,
	// with its error (for tests and metrics).
	OnPRCheck func(models.PullRequest, error)
	// Observer, when set, is told how long each round took (for metrics).
	Observer Observer
	// Runners, when set, are the runners' connections: the agents of a
	// runner are scheduled only while it is connected, and it is woken
	// when a run is offered to it. Nil: runners' agents take no work.
	Runners Runners
	// LeaseTTL is how long a remote run's lease lasts without a heartbeat
	// of its runner; RunnerHeartbeat is how often runners renew them;
	// ReportHold is the longest a relayed ask's report is held.
	LeaseTTL, RunnerHeartbeat, ReportHold time.Duration
}

// Observer receives the orchestrator's measurements (for metrics). Its
// methods must not block.
type Observer interface {
	// RoundDone reports the duration of one round: timers, reviews,
	// scheduling, dispatch and reconciliation, on the orchestrator's clock.
	RoundDone(d time.Duration)
}

func (c *Config) applyDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.SafetyTick, DefaultSafetyTick)
	def(&c.Window, DefaultWindow)
	def(&c.IdleTimeout, DefaultIdleTimeout)
	def(&c.MaxRuntime, DefaultMaxRuntime)
	def(&c.StartTimeout, DefaultStartTimeout)
	def(&c.PrepareTimeout, DefaultPrepareTimeout)
	def(&c.RetryBackoff, DefaultRetryBackoff)
	def(&c.MaxBackoff, DefaultMaxBackoff)
	def(&c.StopGrace, DefaultStopGrace)
	def(&c.PauseDelay, DefaultPauseDelay)
	def(&c.InputTimeout, DefaultInputTimeout)
	def(&c.CheckTimeout, DefaultCheckTimeout)
	def(&c.ResultGrace, DefaultResultGrace)
	def(&c.Quantum, DefaultQuantum)
	def(&c.LeaseTTL, DefaultLeaseTTL)
	def(&c.RunnerHeartbeat, DefaultRunnerHeartbeat)
	def(&c.ReportHold, DefaultReportHold)
	if c.ReadyPerProject <= 0 {
		c.ReadyPerProject = DefaultReadyPerProject
	}
	if c.Environ == nil {
		c.Environ = os.Environ()
	}
	c.Clock = clock.Or(c.Clock)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Store is what the orchestrator needs from the store: what the Lander it
// drives uses (landing.Store, whose reads and ApplyEvent the orchestrator
// uses too), and what only the orchestrator uses.
type Store interface {
	landing.Store

	SchedulingState(ctx context.Context, now time.Time, window time.Duration) (models.SchedulingState, error)
	ReadyTasks(ctx context.Context, q models.ReadyQuery) ([]models.Task, error)
	ReadyRuleSets(ctx context.Context, projectID string, limit int) ([]string, error)
	TokenBudgetFreesAt(ctx context.Context, now time.Time, window time.Duration, budget int64) (time.Time, bool, error)
	SetWaiting(ctx context.Context, updates []models.WaitingUpdate) (int64, error)
	DuePaused(ctx context.Context, now, afterAt time.Time, afterID string, limit int) ([]models.Task, *time.Time, error)
	DueFailed(ctx context.Context, now time.Time, base, maxBackoff time.Duration, afterAt time.Time, afterID string, limit int) ([]models.Task, *time.Time, error)
	ClaimTask(ctx context.Context, taskID, agentID string) (models.Run, string, error)
	StartRun(ctx context.Context, runID int64, pid int, checkoutPath string) (models.TransitionResult, error)
	StartRunWith(ctx context.Context, runID int64, st models.RunStart) (models.TransitionResult, error)
	TouchRun(ctx context.Context, runID int64) error
	SetTaskProgress(ctx context.Context, runID int64, succeeded, failed *int) (models.Task, error)
	FinishRun(ctx context.Context, end models.RunEnd) (models.TransitionResult, error)
	OpenRuns(ctx context.Context) ([]models.Run, error)
	FreeOrphanAgents(ctx context.Context) ([]string, error)
	ListTasks(ctx context.Context, f models.TaskFilter) ([]models.Task, error)
	RestAgent(ctx context.Context, id string, until time.Time, reason string) error
	RestingAgents(ctx context.Context, now time.Time) ([]models.Agent, error)
	SetAgentPaused(ctx context.Context, id string, paused bool) (models.Agent, error)
	RunByToken(ctx context.Context, token string) (models.Run, error)
	SaveRemoteRun(ctx context.Context, runID, seq int64, answer json.RawMessage, st models.RemoteRunState) error
	RemoteRun(ctx context.Context, runID int64) (int64, json.RawMessage, models.RemoteRunState, bool, error)
	RecordTokenUsage(ctx context.Context, u models.TokenUsage) error
	AskQuestionWith(ctx context.Context, runID int64, ask models.Ask, timeout time.Duration) (models.Question, error)
	GetQuestion(ctx context.Context, id int64) (models.Question, error)
	AnswerQuestion(ctx context.Context, id int64, answer, by string) (models.Question, error)
	ExpireQuestion(ctx context.Context, id int64) (models.QuestionExpiry, error)
	DueQuestions(ctx context.Context, now time.Time, limit int) ([]models.Question, *time.Time, error)
	OpenQuestions(ctx context.Context) ([]models.Question, error)
	TaskQuestions(ctx context.Context, taskID string) ([]models.Question, error)

	LastSession(ctx context.Context, taskID, agentID string) (string, models.TokenUsage, error)
	RecordRunSession(ctx context.Context, runID int64, sessionID string) error
	RecordRunCLI(ctx context.Context, runID int64, c models.RunCLI) error
	RecordRunResult(ctx context.Context, runID int64, cost *float64, denied []string) error
	ForgetSessions(ctx context.Context, taskID, agentID string) error
	RecordRunUsage(ctx context.Context, runID int64, cumulative models.TokenUsage) (models.TokenUsage, error)
	UpstreamResults(ctx context.Context, taskID string) ([]models.UpstreamResult, error)
	RunErrors(ctx context.Context, taskID string) ([]string, error)
	TaskFeedback(ctx context.Context, taskID string) ([]models.Feedback, error)
	ClaimReview(ctx context.Context, taskID, agentID string) (models.Run, string, error)
	SavePlan(ctx context.Context, taskID, source string, tasks []models.BatchTask) (models.Plan, error)
	// LeaseGeneration is the generation of the database lease the store
	// writes under (0: none); each run records the one it was claimed under.
	LeaseGeneration() int64
}

// PullRequests is the GitHub side of tasks that land through a pull
// request (wired in by main); see landing.PullRequests.
type PullRequests = landing.PullRequests

// DefaultPRPollInterval is how often each open pull request is checked.
const DefaultPRPollInterval = landing.DefaultPRPollInterval

// Workspaces prepares agents' checkouts and, for the Lander, verification
// checkouts, and delivers finished work (landing.Workspaces).
type Workspaces interface {
	landing.Workspaces
	// Prepare returns the agent's checkout of the project's repo on the
	// task's branch (a plain directory when the project has no repo).
	Prepare(ctx context.Context, a models.Agent, p models.Project, t models.Task) (models.Workspace, error)
	// Seal commits what a run left uncommitted on the task branch and
	// returns the files the branch changes; unresolved conflicts refuse.
	Seal(ctx context.Context, p models.Project, t models.Task, ws models.Workspace) ([]string, error)
	// Release ends a run's use of its checkout.
	Release(ws models.Workspace)
	// Serve readies the repository served to runners for a remote run
	// of the task and returns its workspace as the daemon sees it (Dir
	// is the served repository).
	Serve(ctx context.Context, p models.Project, t models.Task) (models.Workspace, error)
	// BranchFiles returns the files the task branch of the repository
	// src changes: what a remote run pushed.
	BranchFiles(ctx context.Context, p models.Project, t models.Task, src string) ([]string, error)
	// Diff returns the task branch's change against the default branch.
	Diff(ctx context.Context, p models.Project, t models.Task, src string) (string, error)
	// LandedDiff returns the change a landed task brought to the default
	// branch and the commit that landed it ("" when none is found); pr is
	// the number of the merged pull request it landed through, or 0.
	LandedDiff(ctx context.Context, p models.Project, t models.Task, pr int) (text, commit string, err error)
}

// Orchestrator schedules READY tasks onto idle agents, supervises their
// runs, applies timers (resume, retry, timeouts) and recovers after a
// restart. Create it with New and run it with Run.
type Orchestrator struct {
	// adopted start the supervision of the remote runs recovery took up;
	// recovered is set once recovery is done (runners' reports wait for
	// it).
	adopted   []func(ctx context.Context)
	recovered atomic.Bool
	cfg       Config
	store     Store
	ws        Workspaces
	adapters  *agent.Registry
	log       *slog.Logger
	wake      chan struct{}
	// arm asks the loop to arm its timer for the runs' deadlines, without
	// a round (a run has started).
	arm chan struct{}
	// roundDue is when the last round's timers other than the runs' are
	// due (read and written by the loop only).
	roundDue time.Time
	// waited is what the last round wrote as waiting reasons (read and
	// written by the loop only); nil when unknown.
	waited *waitingWritten
	// landing verifies and lands the work of VERIFYING tasks.
	landing *landing.Lander
	// wakeSeq counts wake-ups; a round records the count it started from.
	wakeSeq atomic.Uint64
	// noticeSeq makes the outbox keys of agents' messages unique.
	noticeSeq atomic.Uint64

	mu   sync.Mutex
	runs map[int64]*activeRun
	// cooldown keeps projects whose runs could not start (a broken
	// checkout, an unreachable repository) and agents that hit a rate limit
	// out of scheduling until the time given; failures counts consecutive
	// start failures per project.
	cooldown map[string]time.Time
	// cliVersions are the versions of CLIs read with --version, by command
	// file (see probeVersion).
	cliVersions map[string]string
	failures    map[string]int
	// asks wakes the ask waiting for question id with its answer or error.
	asks map[int64]chan askResult
	// afterAsk, when set (by tests), is called when an ask has recorded its
	// question and registered its waiter, before it looks for an answer.
	afterAsk func(models.Question)
	// reviewFails counts reviews that could not start, per task attempt.
	reviewFails map[string]int
	// stuck holds the open runs of an earlier life whose process group
	// outlived SIGKILL and LeftoverWait (see endLeftover).
	stuck map[int64]bool
	// failedRounds counts the rounds in a row that met an error, and
	// roundErr is the last one's (see Health).
	failedRounds int
	roundErr     error
	// resume lists the VERIFYING tasks recovery found, for Run to resume.
	resume []string
	wg     sync.WaitGroup
}

// New returns an orchestrator; it starts nothing until Run.
func New(cfg Config, st Store, ws Workspaces, adapters *agent.Registry) (*Orchestrator, error) {
	if st == nil || ws == nil || adapters == nil {
		return nil, errors.New("orchestrator: store, workspaces and adapters are required")
	}
	if cfg.RunDir == "" {
		return nil, errors.New("orchestrator: Config.RunDir is required")
	}
	cfg.applyDefaults()
	o := &Orchestrator{cfg: cfg, store: st, ws: ws, adapters: adapters, log: cfg.Logger,
		wake: make(chan struct{}, 1), arm: make(chan struct{}, 1), runs: map[int64]*activeRun{}, asks: map[int64]chan askResult{},
		cooldown: map[string]time.Time{}, cliVersions: map[string]string{}, failures: map[string]int{},
		reviewFails: map[string]int{}, stuck: map[int64]bool{}}
	o.landing = o.newLander()
	return o, nil
}

// newLander returns the Lander of the orchestrator's configuration, store
// and workspaces.
func (o *Orchestrator) newLander() *landing.Lander {
	c := o.cfg
	return landing.New(landing.Config{RunDir: c.RunDir, Environ: c.Environ, CheckTimeout: c.CheckTimeout,
		StopGrace: c.StopGrace, QAAgent: c.QAAgent, PullRequests: c.PullRequests, PRPollInterval: c.PRPollInterval,
		LandPollInterval: c.LandPollInterval, Clock: c.Clock, Logger: o.log, OnPRCheck: c.OnPRCheck}, o.store, o.ws,
		landingHost{o})
}

// UnhealthyAfter is how many rounds in a row must fail before Health
// reports the orchestrator unhealthy: one failed round is often a race
// the next one resolves.
const UnhealthyAfter = 3

// Health reports an error when the last UnhealthyAfter rounds or more all
// failed, naming how many and the last reason: the daemon answers, but no
// work is scheduled. It is nil again after a round without an error.
func (o *Orchestrator) Health() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.failedRounds < UnhealthyAfter {
		return nil
	}
	return fmt.Errorf("the scheduler failed its last %d passes: %v", o.failedRounds, o.roundErr)
}

// Wake asks the loop for a round now. It never blocks; wake-ups that
// arrive while one is pending are merged.
func (o *Orchestrator) Wake() {
	o.wakeSeq.Add(1)
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// armTimers asks the loop to arm its timer for the runs' deadlines (a run
// started) without a scheduling round: nothing a round reads has changed.
// It never blocks.
func (o *Orchestrator) armTimers() {
	select {
	case o.arm <- struct{}{}:
	default:
	}
}

// Run recovers what an earlier life left in flight, then runs rounds on
// every wake-up, due timer and safety tick until ctx ends. On the way out it
// stops the runs it started and returns their tasks to READY.
func (o *Orchestrator) Run(ctx context.Context) error {
	o.landing.Start() // after an earlier Run ended, this life verifies afresh
	if err := o.loadRests(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("orchestrator start: %w", err)
	}
	if err := o.recover(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // shut down during recovery: the next start repeats it
		}
		return fmt.Errorf("orchestrator recovery: %w", err)
	}
	runCtx, cancelRuns := context.WithCancel(context.WithoutCancel(ctx))
	defer func() {
		o.wg.Wait() // runs record their end with runCtx: cancel it only after
		o.landing.Wait()
		cancelRuns()
	}()
	for _, id := range o.resume {
		o.landing.Advance(id)
	}
	o.resume = nil
	for _, start := range o.adopted {
		start(runCtx)
	}
	o.adopted = nil
	o.recovered.Store(true)
	// The first round runs at once: READY work an earlier life left must
	// not wait for the safety tick (a recovery's writes wake the loop, a
	// clean start's nothing would).
	o.Wake()
	timer := o.cfg.Clock.After(o.cfg.SafetyTick)
	o.roundDue = o.cfg.Clock.Now().Add(o.cfg.SafetyTick)
	var due time.Time
	for {
		select {
		case <-ctx.Done():
			o.shutdown()
			return nil
		case <-o.wake:
		case <-timer:
		case <-o.arm:
			// A run started: the runs' deadlines changed.
			now := o.cfg.Clock.Now()
			due = o.roundDue
			if d := o.superviseRuns(now); !d.IsZero() && d.Before(due) {
				due = d
			}
			timer = o.cfg.Clock.After(max(due.Sub(now), 0))
			continue
		}
		seq := o.wakeSeq.Load()
		began := o.cfg.Clock.Now()
		var deposed error
		due, deposed = o.round(runCtx)
		if o.cfg.Observer != nil {
			o.cfg.Observer.RoundDone(o.cfg.Clock.Now().Sub(began))
		}
		if deposed != nil {
			// Another daemon holds the database now: this one stands down
			// without another act (its runs are stopped; their ends are
			// refused, and the new owner closes them as leftovers).
			o.log.Error("another daemon took the database over: the orchestrator stands down", "err", deposed)
			o.shutdown()
			return fmt.Errorf("orchestrator: %w", deposed)
		}
		// A wake-up whose change committed before this round began is
		// covered by it: when none came since, the pending one is dropped,
		// so a burst of changes costs one round, and a change during a
		// round exactly one more.
		if o.wakeSeq.Load() == seq {
			select {
			case <-o.wake:
			default:
			}
		}
		// Armed from the clock now, not from the round's start: time that
		// passed during the round must not push the deadline back.
		timer = o.cfg.Clock.After(max(due.Sub(o.cfg.Clock.Now()), 0))
		if o.cfg.OnRound != nil { // after arming, so the round's timer exists
			o.cfg.OnRound(seq)
		}
	}
}

// round applies due timers, schedules, and dispatches; it returns when the
// next timer is due (at the latest, a safety tick from now), and an error
// wrapping models.ErrLeaseLost when a step found that another daemon has
// taken the database over (nothing else is done after that step).
func (o *Orchestrator) round(ctx context.Context) (time.Time, error) {
	now := o.cfg.Clock.Now()
	due := now.Add(o.cfg.SafetyTick)
	var roundErr, deposed error
	failed := func(step string, err error) {
		o.log.Error(step, "err", err)
		if roundErr == nil {
			roundErr = fmt.Errorf("%s: %w", step, err)
		}
		if deposed == nil && errors.Is(err, models.ErrLeaseLost) {
			deposed = fmt.Errorf("%s: %w", step, err)
		}
	}
	if d, err := o.applyTimers(ctx, now); err != nil {
		failed("apply timers", err)
	} else if !d.IsZero() && d.Before(due) {
		due = d
	}
	// A dispatch acts outside the database (a checkout prepared, a
	// process started): while the lease's fence refuses, nothing is
	// dispatched, and the round is tried again soon.
	held := false
	if deposed == nil {
		if err := o.store.ConfirmLease(ctx); err != nil {
			failed("confirm the lease", err)
			held = true
			if retry := now.Add(FencedRetry); retry.Before(due) {
				due = retry
			}
		}
	}
	// Reviews first: a reviewer that also takes work must not be taken by
	// the scheduler every round while a review waits for it.
	if deposed == nil && !held {
		if err := o.landing.DispatchReviews(ctx); err != nil {
			failed("dispatch reviews", err)
		}
	}
	if deposed == nil && !held {
		if d, err := o.schedule(ctx, now); err != nil {
			failed("schedule", err)
		} else if !d.IsZero() && d.Before(due) {
			due = d
		}
	}
	if deposed == nil {
		if err := o.reconcile(ctx); err != nil {
			failed("reconcile", err)
		}
	}
	if deposed != nil {
		return due, deposed
	}
	o.mu.Lock()
	if roundErr != nil && ctx.Err() == nil {
		o.failedRounds++
		o.roundErr = roundErr
	} else if roundErr == nil {
		o.failedRounds, o.roundErr = 0, nil
	}
	o.mu.Unlock()
	o.landing.Resume(ctx)
	o.roundDue = due
	// After scheduling, so that runs dispatched now have their start
	// deadline armed.
	if d := o.superviseRuns(now); !d.IsZero() && d.Before(due) {
		due = d
	}
	o.log.Debug("round done", "next_in", due.Sub(now))
	return due, nil
}

// schedule reads the scheduling state and the READY tasks that can start,
// runs the scheduler and dispatches its assignments, and writes why the
// READY tasks it did not start wait; it returns the next time something now
// held back (a task's not_before, a cooldown) becomes due (zero if none).
//
// READY tasks are read per project, a page at a time, only for projects
// that can take work and that an idle agent serves, leaving out those that
// cannot start (not_before in the future, a rule or a workflow step at its
// limit). While a project could take more and its page ran out, the next
// page is read and the scheduler runs again with what was assigned, so a
// backlog never hides a task that can start.
func (o *Orchestrator) schedule(ctx context.Context, now time.Time) (time.Time, error) {
	st, err := o.store.SchedulingState(ctx, now, o.cfg.Window)
	if err != nil {
		return time.Time{}, err
	}
	var next time.Time
	consider := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if st.NextNotBefore != nil {
		consider(*st.NextNotBefore)
	}
	o.mu.Lock()
	for key, until := range o.cooldown {
		if !until.After(now) {
			delete(o.cooldown, key)
			continue
		}
		consider(until)
	}
	o.mu.Unlock()

	snap := o.snapshot(st)
	if b := snap.GlobalBudget; b != nil && snap.GlobalTokensUsed >= *b {
		// Exhausted: say until when, and wake then.
		at, ok, err := o.store.TokenBudgetFreesAt(ctx, now, o.cfg.Window, *b)
		if err != nil {
			return next, err
		}
		if ok {
			snap.GlobalBudgetFreesAt = &at
			consider(at)
		}
	}
	cfg := SchedulerConfig{Quantum: o.cfg.Quantum}
	// Only projects that can take work now, with an idle agent serving
	// them, have their READY tasks read.
	probe := Decide(snap, cfg)
	pages := map[string]*readyPage{}
	var want []string
	for _, p := range snap.Projects {
		if probe.Projects[p.ID] == (Why{}) {
			want = append(want, p.ID)
			pages[p.ID] = &readyPage{why: map[string]Why{}}
		}
	}
	slices.Sort(want)
	// The tasks' own rules, read without the tasks, so that the groups they
	// hold back are left out of the READY pages too.
	for _, pid := range want {
		texts, err := o.store.ReadyRuleSets(ctx, pid, maxOwnRuleSets)
		if err != nil {
			return next, err
		}
		for _, text := range texts {
			var rules []models.Rule
			if err := json.Unmarshal([]byte(text), &rules); err != nil {
				o.log.Warn("own rules of READY tasks not read", "project_id", pid, "err", err)
				continue
			}
			snap.OwnRules = append(snap.OwnRules, OwnRuleSet{ProjectID: pid, Text: text, Rules: rules})
		}
	}
	var excl []models.ReadyExclusion
	assigned := map[string]bool{}
	for len(want) > 0 {
		excl = Exclusions(snap)
		snap.Ready = nil
		owner := map[string]string{}
		for _, pid := range want {
			pg := pages[pid]
			ts, err := o.store.ReadyTasks(ctx, models.ReadyQuery{ProjectID: pid, Now: now, After: pg.after,
				Exclude: exclusionsFor(excl, pid), Limit: o.cfg.ReadyPerProject})
			if err != nil {
				return next, err
			}
			pg.more = len(ts) == o.cfg.ReadyPerProject
			if len(ts) > 0 {
				t := ts[len(ts)-1]
				pg.after = &models.ReadyCursor{Priority: t.Priority, SubmissionSeq: t.SubmissionSeq}
			}
			pg.seen = append(pg.seen, ts...)
			for _, t := range ts {
				snap.Ready = append(snap.Ready, taskInfo(t))
				owner[t.ID] = pid
			}
		}
		d := Decide(snap, cfg)
		for id, why := range d.Waiting {
			if pg := pages[owner[id]]; pg != nil {
				pg.why[id] = why
			}
		}
		for _, as := range d.Assignments {
			assigned[as.TaskID] = true
			o.dispatch(ctx, as)
			snap = afterAssignment(snap, as, o.cfg.Quantum)
		}
		// Another page for each project whose page ran out while it could
		// still take work.
		snap.Ready = nil
		after := Decide(snap, cfg)
		want = want[:0]
		for pid, pg := range pages {
			pg.rest = after.Projects[pid]
			if pg.more && pg.rest == (Why{}) {
				want = append(want, pid)
			}
		}
		slices.Sort(want)
	}
	if err := o.writeWaiting(ctx, now, st, probe, pages, excl, assigned); err != nil {
		o.log.Warn("write waiting reasons", "err", err)
	}
	return next, nil
}

// readyPage is what a round read of one project's READY tasks.
type readyPage struct {
	// after is the position of the last task read; more: the last read
	// filled its page, so more may follow.
	after *models.ReadyCursor
	more  bool
	seen  []models.Task
	// why holds the waiting reason of each task read and not started;
	// rest, that of the tasks after the last one read.
	why  map[string]Why
	rest Why
}

// exclusionsFor returns the exclusions that can apply to project pid.
func exclusionsFor(excl []models.ReadyExclusion, pid string) []models.ReadyExclusion {
	var out []models.ReadyExclusion
	for _, e := range excl {
		if e.ProjectID == "" || e.ProjectID == pid {
			out = append(out, e)
		}
	}
	return out
}

// afterAssignment returns s as the next pass of the round sees it: the
// task assigned, its agent busy, its project's usage one quantum more.
func afterAssignment(s Snapshot, as Assignment, quantum time.Duration) Snapshot {
	if quantum <= 0 {
		quantum = DefaultQuantum
	}
	for _, t := range s.Ready {
		if t.ID == as.TaskID {
			t.Status = models.StatusAssigned
			s.Running = append(slices.Clip(s.Running), t)
		}
	}
	s.IdleAgents = slices.DeleteFunc(slices.Clone(s.IdleAgents), func(a AgentInfo) bool { return a.ID == as.AgentID })
	s.Projects = slices.Clone(s.Projects)
	for i := range s.Projects {
		if s.Projects[i].ID == as.ProjectID {
			s.Projects[i].Running++
			s.Projects[i].AgentSeconds += quantum.Seconds()
		}
	}
	return s
}

// writeWaiting writes why the READY tasks the round did not start wait:
// per project for those it did not look at one by one, per task for those
// it did; each only where it changed.
func (o *Orchestrator) writeWaiting(ctx context.Context, now time.Time, st models.SchedulingState, probe Decision,
	pages map[string]*readyPage, excl []models.ReadyExclusion, assigned map[string]bool) error {
	var ups []models.WaitingUpdate
	for _, p := range st.Projects {
		pid := p.Project.ID
		pg := pages[pid]
		if pg == nil {
			why := o.refine(st, pid, probe.Projects[pid], now)
			if why != (Why{}) {
				ups = append(ups, models.WaitingUpdate{ProjectID: pid, Scope: models.WaitAll, Code: why.Code, Reason: why.Reason})
			}
			continue
		}
		if st.NextNotBefore != nil { // else no READY task anywhere is dated after now
			ups = append(ups, models.WaitingUpdate{ProjectID: pid, Scope: models.WaitFuture, Now: now,
				Code: models.WaitingNotBefore, Reason: "not before "})
		}
		mine := exclusionsFor(excl, pid)
		for i, e := range mine {
			ups = append(ups, models.WaitingUpdate{ProjectID: pid, Scope: models.WaitExcluded, Now: now,
				Exclude: append([]models.ReadyExclusion{e}, mine[:i]...), Code: e.Code, Reason: e.Reason})
		}
		byWhy := map[Why][]string{}
		for _, t := range pg.seen {
			why, ok := pg.why[t.ID]
			if assigned[t.ID] || !ok || excludedBy(mine, t) {
				continue
			}
			why = o.refine(st, pid, why, now)
			if why != (Why{}) && (why.Code != t.WaitingCode || why.Reason != t.WaitingReason) {
				byWhy[why] = append(byWhy[why], t.ID)
			}
		}
		whys := slices.SortedFunc(maps.Keys(byWhy), func(a, b Why) int {
			return cmp.Or(strings.Compare(a.Code, b.Code), strings.Compare(a.Reason, b.Reason))
		})
		for _, why := range whys {
			ups = append(ups, models.WaitingUpdate{ProjectID: pid, Scope: models.WaitTasks, TaskIDs: byWhy[why],
				Code: why.Code, Reason: why.Reason})
		}
		if rest := o.refine(st, pid, pg.rest, now); pg.more && rest != (Why{}) {
			ups = append(ups, models.WaitingUpdate{ProjectID: pid, Scope: models.WaitRest, Now: now, After: pg.after,
				Exclude: mine, Code: rest.Code, Reason: rest.Reason})
		}
	}
	w := &waitingWritten{gen: st.ReadyGeneration, next: st.NextNotBefore, ups: setLevel(ups)}
	if len(w.ups) == len(ups) && o.waited.covers(w, now) {
		return nil // the same statements on the same READY tasks: they would change nothing
	}
	o.waited = nil
	if _, err := o.store.SetWaiting(ctx, ups); err != nil {
		return err
	}
	o.waited = w
	return nil
}

// waitingWritten is what a round wrote as waiting reasons: the statements
// that write a reason on a set of READY tasks (all but WaitTasks, whose
// tasks a round compares one by one with what they carry), the count of
// changes to READY tasks it read before (ReadyGeneration) and the earliest
// not_before after its time.
//
// Writing the same statements again changes nothing while no task became
// READY or changed otherwise (the count), and no not_before has passed
// (which moves a task from "not before" to the statements of tasks that can
// start): each READY task matches at most one statement, and what a
// statement writes depends only on the task's own columns.
type waitingWritten struct {
	gen  int64
	next *time.Time
	ups  []models.WaitingUpdate
}

// covers reports whether w, computed at now, would write nothing that the
// earlier write at has not written already.
func (at *waitingWritten) covers(w *waitingWritten, now time.Time) bool {
	return at != nil && at.gen == w.gen && (at.next == nil || at.next.After(now)) && reflect.DeepEqual(at.ups, w.ups)
}

// setLevel returns the updates of ups other than WaitTasks, their times
// left out: whether a task is before or after now is covered by the
// not_before check of covers.
func setLevel(ups []models.WaitingUpdate) []models.WaitingUpdate {
	out := make([]models.WaitingUpdate, 0, len(ups))
	for _, u := range ups {
		if u.Scope == models.WaitTasks {
			continue
		}
		u.Now = time.Time{}
		out = append(out, u)
	}
	return out
}

// excludedBy reports whether a task matches one of excl.
func excludedBy(excl []models.ReadyExclusion, t models.Task) bool {
	for _, e := range excl {
		if e.Matches(t) {
			return true
		}
	}
	return false
}

// refine makes a project's reason precise: a project held back after
// failed starts says until when; "no idle agent serves the project" says
// whether no agent works on it at all, its agents rest (until when) or are
// paused, or all are busy.
func (o *Orchestrator) refine(st models.SchedulingState, pid string, why Why, now time.Time) Why {
	if why.Code == models.WaitingProjectPaused {
		o.mu.Lock()
		until := o.cooldown["project:"+pid]
		o.mu.Unlock()
		if until.After(now) && slices.ContainsFunc(st.Projects, func(p models.ProjectUsage) bool {
			return p.Project.ID == pid && p.Project.Status == models.ProjectActive
		}) {
			return Why{models.WaitingProjectPaused, fmt.Sprintf("project %s is held back until %s: its workspace could not be prepared",
				pid, until.UTC().Format(time.RFC3339))}
		}
	}
	if why.Code != models.WaitingAgentsBusy {
		return why
	}
	var serving, paused int
	var rest time.Time
	o.mu.Lock()
	for _, a := range st.Agents {
		if len(a.Projects) > 0 && !slices.Contains(a.Projects, pid) {
			continue
		}
		serving++
		switch until := o.cooldown["agent:"+a.ID]; {
		case a.Paused || a.State == models.AgentError:
			paused++
		case until.After(now) && a.State == models.AgentIdle:
			if rest.IsZero() || until.Before(rest) {
				rest = until
			}
		}
	}
	o.mu.Unlock()
	switch {
	case serving == 0:
		return Why{models.WaitingNoAgent, fmt.Sprintf("no agent works on project %s", pid)}
	case !rest.IsZero():
		return Why{models.WaitingAgentResting, fmt.Sprintf("the agents of project %s are busy or resting; the first rests until %s",
			pid, rest.UTC().Format(time.RFC3339))}
	case paused == serving:
		return Why{models.WaitingNoAgent, fmt.Sprintf("every agent of project %s is paused or in error", pid)}
	}
	return Why{models.WaitingAgentsBusy, fmt.Sprintf("all %d agents of project %s are busy", serving-paused, pid)}
}

// coolDown keeps key ("project:<id>" or "agent:<id>") out of scheduling until until.
func (o *Orchestrator) coolDown(key string, until time.Time) {
	o.mu.Lock()
	if until.After(o.cooldown[key]) {
		o.cooldown[key] = until
	}
	o.mu.Unlock()
	o.Wake() // arm the timer for its end
}

func (o *Orchestrator) coolingDown(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cooldown[key].After(o.cfg.Clock.Now())
}

// rules returns the scheduling rules in force.
func (o *Orchestrator) rules() []models.Rule {
	if o.cfg.CurrentRules != nil {
		return o.cfg.CurrentRules()
	}
	return o.cfg.Rules
}

// snapshot converts the store's state into the scheduler's input.
func (o *Orchestrator) snapshot(st models.SchedulingState) Snapshot {
	s := Snapshot{Now: st.Now, Window: o.cfg.Window, Rules: o.rules(), GlobalBudget: o.cfg.GlobalBudget,
		GlobalTokensUsed: st.TokensInWindow}
	for _, p := range st.Projects {
		status := p.Project.Status
		if status == models.ProjectActive && o.coolingDown("project:"+p.Project.ID) {
			status = models.ProjectPaused
		}
		ps := ProjectState{ID: p.Project.ID, CreditWeight: p.Project.CreditWeight,
			MaxConcurrentAgents: p.Project.MaxConcurrentAgents, Status: status, TokensUsed: p.Project.TotalTokensUsed,
			BudgetLimit: p.Project.BudgetLimit, AgentSeconds: p.AgentSeconds, CompletedInWindow: p.CompletedInWindow,
			Running: p.Running, RunnerLabels: p.Project.Settings.RunnerLabels}
		if p.Project.Repo != nil {
			ps.RepoID = p.Project.Repo.ID
		}
		s.Projects = append(s.Projects, ps)
	}
	for _, t := range st.Running {
		s.Running = append(s.Running, taskInfo(t))
	}
	for _, t := range st.Waiting {
		ti := taskInfo(t)
		ti.Waiting = true
		s.Running = append(s.Running, ti)
	}
	runners := make(map[string]*runnerRoom, len(st.Runners))
	for _, rn := range st.Runners {
		runners[rn.Name] = &runnerRoom{labels: rn.Labels, free: rn.Capacity}
	}
	for _, a := range st.Agents {
		if rm := runners[a.RunnerID]; rm != nil && rm.free > 0 && a.State != models.AgentIdle {
			rm.busy++
		}
	}
	info := func(a models.Agent) AgentInfo {
		ai := AgentInfo{ID: a.ID, AgentType: a.AgentType, Projects: a.Projects}
		if rm := runners[a.RunnerID]; rm != nil {
			ai.Labels = rm.labels
		}
		if a.RepoID != nil {
			ai.RepoID = *a.RepoID
		}
		return ai
	}
	for _, a := range st.IdleAgents {
		if o.coolingDown("agent:" + a.ID) {
			continue
		}
		if a.RunnerID != "" {
			if o.cfg.Runners == nil || !o.cfg.Runners.Connected(a.RunnerID) {
				continue // its runner is away: nothing would start
			}
			// A runner at its capacity offers no more agents; one below
			// it offers as many as it may still take (the first by id).
			if rm := runners[a.RunnerID]; rm != nil && rm.free > 0 {
				if rm.busy >= rm.free {
					continue
				}
				rm.busy++
			}
		}
		s.IdleAgents = append(s.IdleAgents, info(a))
	}
	for _, a := range st.Agents {
		s.Agents = append(s.Agents, info(a))
	}
	return s
}

// runnerRoom is a runner's labels and room for runs in a snapshot: free
// is its capacity (0: as many as it has agents), busy its agents at work
// and those offered to the round so far.
type runnerRoom struct {
	labels     []string
	free, busy int
}

// taskInfo is a task as the scheduler sees it.
func taskInfo(t models.Task) TaskInfo {
	return TaskInfo{ID: t.ID, ProjectID: t.ProjectID, Priority: t.Priority, CreatedBy: t.CreatedBy,
		SubmissionSeq: t.SubmissionSeq, NotBefore: t.NotBefore, Kind: t.Kind, Metadata: t.Metadata, Status: t.Status, ExpectedCount: t.ExpectedCount,
		SuccessCount: t.SuccessCount, FailureCount: t.FailureCount, RunID: t.RunID, StepName: t.StepName,
		StepConcurrency: t.StepConcurrency, Rules: t.Rules, AgentType: t.AgentType, PreferAgent: t.PreferAgentID,
		RunnerLabels: t.RunnerLabels}
}

// applyTimers resumes PAUSED tasks whose time has come and retries or
// blocks FAILED ones; it returns the next time one is due (zero if none).
func (o *Orchestrator) applyTimers(ctx context.Context, now time.Time) (time.Time, error) {
	var next time.Time
	consider := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	// Due timers are read by due time, a batch at a time, until none is
	// due: nothing is capped, and timers not yet due are not read.
	var at time.Time
	var after string
	for {
		due, nextPause, err := o.store.DuePaused(ctx, now, at, after, DefaultTimerBatch)
		if err != nil {
			return next, err
		}
		if nextPause != nil {
			consider(*nextPause)
		}
		for _, t := range due {
			o.apply(ctx, models.TransitionRequest{TaskID: t.ID, Event: models.EventResumeTimer, ExpectFrom: models.StatusPaused,
				Actor: "system", Reason: "resume time reached"})
			at, after = *t.ResumeAfter, t.ID
		}
		if len(due) < DefaultTimerBatch {
			break
		}
	}
	// Questions whose expiry has passed, a batch a round: a full batch
	// brings the next round at once.
	expiring, nextExpiry, err := o.store.DueQuestions(ctx, now, DefaultTimerBatch)
	if err != nil {
		return next, err
	}
	if nextExpiry != nil {
		consider(*nextExpiry)
	}
	for _, q := range expiring {
		o.expire(ctx, q)
	}
	if len(expiring) == DefaultTimerBatch {
		consider(now)
	}
	at, after = time.Time{}, ""
	for {
		due, nextRetry, err := o.store.DueFailed(ctx, now, o.cfg.RetryBackoff, o.cfg.MaxBackoff, at, after, DefaultTimerBatch)
		if err != nil {
			return next, err
		}
		if nextRetry != nil {
			consider(*nextRetry)
		}
		for _, t := range due {
			at, after = t.UpdatedAt, t.ID
			if t.RetryCount >= t.MaxRetries {
				o.apply(ctx, models.TransitionRequest{TaskID: t.ID, Event: models.EventMaxRetries, ExpectFrom: models.StatusFailed,
					Actor: "system", Reason: fmt.Sprintf("failed %d time(s); no retries left: %s", t.RetryCount+1, t.StatusReason)})
				continue
			}
			o.apply(ctx, models.TransitionRequest{TaskID: t.ID, Event: models.EventRetry, ExpectFrom: models.StatusFailed,
				Actor: "system", Reason: fmt.Sprintf("retry %d of %d", t.RetryCount+1, t.MaxRetries)})
		}
		if len(due) < DefaultTimerBatch {
			break
		}
	}
	return next, nil
}

// expire ends the wait for an expired question as its project's on_expiry
// says (see Store.ExpireQuestion), and tells the run that asked, if it
// still waits: the default answer, or that no answer came (its run then
// ends, the task having moved on).
func (o *Orchestrator) expire(ctx context.Context, q models.Question) {
	res, err := o.store.ExpireQuestion(ctx, q.ID)
	if err != nil {
		o.log.Warn("question expiry not applied", "task_id", q.TaskID, "question_id", q.ID, "err", err)
		return
	}
	if res.Outcome == models.ExpiryNone {
		return
	}
	o.log.Info("question expired", "task_id", q.TaskID, "run_id", q.RunID, "question_id", q.ID, "outcome", res.Outcome,
		"to", res.Task.Status)
	if res.Outcome == models.ExpiryAnswered {
		o.answered(q.ID, res.Answer, nil)
		return
	}
	o.answered(q.ID, "", models.Errorf(models.CodeConflict, "question %d expired unanswered: %s", q.ID, res.Task.StatusReason))
	if res.EndRun {
		o.endRuns([]int64{q.RunID}, fmt.Sprintf("question %d expired unanswered", q.ID))
	}
}

// Backoff is the wait before retry number retries+1: RetryBackoff doubled
// for each earlier retry, at most MaxBackoff (models.RetryBackoff, the
// formula the store's DueFailed computes in SQL).
func (o *Orchestrator) Backoff(retries int) time.Duration {
	return models.RetryBackoff(retries, o.cfg.RetryBackoff, o.cfg.MaxBackoff)
}

// apply applies an event the loop decided, logging (not failing on) a lost
// race: another writer got there first, and the next round sees its result.
func (o *Orchestrator) apply(ctx context.Context, req models.TransitionRequest) {
	landing.Apply(ctx, o.store, o.log, req)
}
