package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentqueued/agentqueued/internal/agent"
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
	DefaultRetryBackoff    = 30 * time.Second
	DefaultMaxBackoff      = 30 * time.Minute
	DefaultStopGrace       = 10 * time.Second
	DefaultPauseDelay      = 15 * time.Minute
	DefaultInputTimeout    = 4 * time.Hour
	DefaultCheckTimeout    = 20 * time.Minute
	DefaultResultGrace     = 10 * time.Second
)

// Config configures an Orchestrator. Zero durations take the defaults above.
type Config struct {
	// SafetyTick is the longest the loop waits without a wake-up: the slow
	// tick that repairs anything a lost signal missed.
	SafetyTick time.Duration
	// Window is the rolling window of fair share and budgets.
	Window time.Duration
	// ReadyPerProject bounds the READY tasks read per project per round.
	ReadyPerProject int
	// IdleTimeout ends a run with no output and no RPC for this long, unless
	// its agent sets its own.
	IdleTimeout time.Duration
	// MaxRuntime caps a run's wall-clock time, unless its agent sets its own.
	MaxRuntime time.Duration
	// StartTimeout bounds the time from claim to a started process.
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
	// as their "agentqueued" MCP server. Empty leaves it out.
	Executable string
	// PullRequests, when set, opens pull requests for tasks that require
	// approval; without it such tasks are BLOCKED with PR_UNAVAILABLE.
	PullRequests PullRequests
	// PRPollInterval is how often each open pull request is checked;
	// default DefaultPRPollInterval.
	PRPollInterval time.Duration
	// Quantum is the agent time each assignment adds to its project's share
	// within a round.
	Quantum time.Duration
	// GlobalBudget caps the tokens of all projects in the window; nil is unlimited.
	GlobalBudget *int64
	// Rules are the scheduling rules in force.
	Rules []models.Rule
	// RunDir holds each attempt's prompt and log: RunDir/<task>/<attempt>.{prompt,log}.
	RunDir string
	// SocketPath is the agent RPC socket, passed to runs as AQ_SOCKET.
	SocketPath string
	// Environ is the daemon's environment, scrubbed for each run; default os.Environ().
	Environ []string
	// Now and After are the clock; defaults time.Now and time.After.
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
	// Logger receives the orchestrator's logs.
	Logger *slog.Logger
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
	def(&c.RetryBackoff, DefaultRetryBackoff)
	def(&c.MaxBackoff, DefaultMaxBackoff)
	def(&c.StopGrace, DefaultStopGrace)
	def(&c.PauseDelay, DefaultPauseDelay)
	def(&c.InputTimeout, DefaultInputTimeout)
	def(&c.CheckTimeout, DefaultCheckTimeout)
	def(&c.ResultGrace, DefaultResultGrace)
	def(&c.Quantum, DefaultQuantum)
	if c.ReadyPerProject <= 0 {
		c.ReadyPerProject = DefaultReadyPerProject
	}
	if c.Environ == nil {
		c.Environ = os.Environ()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.After == nil {
		c.After = time.After
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Store is what the orchestrator needs from the store.
type Store interface {
	SchedulingState(ctx context.Context, now time.Time, window time.Duration, readyPerProject int) (models.SchedulingState, error)
	ClaimTask(ctx context.Context, taskID, agentID string) (models.Run, string, error)
	StartRun(ctx context.Context, runID int64, pid int, checkoutPath string) (models.TransitionResult, error)
	TouchRun(ctx context.Context, runID int64) error
	FinishRun(ctx context.Context, end models.RunEnd) (models.TransitionResult, error)
	OpenRuns(ctx context.Context) ([]models.Run, error)
	FreeOrphanAgents(ctx context.Context) ([]string, error)
	LastRunError(ctx context.Context, taskID string) (string, error)
	RecordRunFailure(ctx context.Context, runID int64, outcome, msg string) error
	ApplyEvent(ctx context.Context, req models.TransitionRequest) (models.TransitionResult, error)
	GetTask(ctx context.Context, id string) (models.Task, error)
	ListTasks(ctx context.Context, f models.TaskFilter) ([]models.Task, error)
	GetAgent(ctx context.Context, id string) (models.Agent, error)
	GetProject(ctx context.Context, id string) (models.Project, error)
	CreateTasks(ctx context.Context, b models.TaskBatch) ([]models.BatchResult, error)
	RunByToken(ctx context.Context, token string) (models.Run, error)
	RecordTokenUsage(ctx context.Context, u models.TokenUsage) error
	AskQuestion(ctx context.Context, runID int64, text string) (models.Question, error)
	AnswerQuestion(ctx context.Context, id int64, answer, by string) (models.Question, error)
	TimeOutQuestion(ctx context.Context, id int64, resumeAfter time.Time) (models.TransitionResult, error)
	OpenQuestions(ctx context.Context) ([]models.Question, error)
	TaskQuestions(ctx context.Context, taskID string) ([]models.Question, error)
	Notify(ctx context.Context, key, kind, projectID, taskID string, payload any) error

	LastSession(ctx context.Context, taskID, agentID string) (string, models.TokenUsage, error)
	RecordRunSession(ctx context.Context, runID int64, sessionID string) error
	ForgetSessions(ctx context.Context, taskID, agentID string) error
	RecordRunUsage(ctx context.Context, runID int64, cumulative models.TokenUsage) (models.TokenUsage, error)
	SaveResult(ctx context.Context, taskID string, runID int64, c models.Completion) error
	TaskResult(ctx context.Context, taskID string) (models.Completion, bool, error)
	UpstreamResults(ctx context.Context, taskID string) ([]models.UpstreamResult, error)
	RunErrors(ctx context.Context, taskID string) ([]string, error)
	RecordTaskFailure(ctx context.Context, taskID, outcome, msg string) error
	LastWorkRun(ctx context.Context, taskID string) (models.Run, bool, error)
	SetVerification(ctx context.Context, v models.Verification) error
	GetVerification(ctx context.Context, taskID string) (models.Verification, bool, error)
	Verifications(ctx context.Context, phases ...string) ([]models.Verification, error)
	TaskFeedback(ctx context.Context, taskID string) ([]models.Feedback, error)
	ClaimReview(ctx context.Context, taskID, agentID string) (models.Run, string, error)
	SwitchVerification(ctx context.Context, taskID string, attempt int, from, to, detail string) (bool, error)
	SwitchApproval(ctx context.Context, taskID string, attempt int, from, to, detail string) (bool, error)
	SavePlan(ctx context.Context, taskID, source string, tasks []models.BatchTask) (models.Plan, error)
	PendingPlan(ctx context.Context, taskID string) (models.Plan, bool, error)

	SavePullRequest(ctx context.Context, pr models.PullRequest) (models.PullRequest, error)
	PullRequestOf(ctx context.Context, taskID string) (models.PullRequest, bool, error)
	PullRequestByNumber(ctx context.Context, owner, repo string, number int) (models.PullRequest, bool, error)
	DuePullRequests(ctx context.Context, now time.Time, limit int) ([]models.PullRequest, time.Time, error)
	RecordPullRequestCheck(ctx context.Context, pr models.PullRequest) error
	PokePullRequest(ctx context.Context, owner, repo string, number int, now time.Time) (bool, error)
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

// Workspaces prepares agents' checkouts, verification checkouts, and
// delivers finished work.
type Workspaces interface {
	// Prepare returns the agent's checkout of the project's repo on the
	// task's branch (a plain directory when the project has no repo).
	Prepare(ctx context.Context, a models.Agent, p models.Project, t models.Task) (models.Workspace, error)
	// Seal commits what a run left uncommitted on the task branch and
	// returns the files the branch changes; unresolved conflicts refuse.
	Seal(ctx context.Context, p models.Project, t models.Task, ws models.Workspace) ([]string, error)
	// Release ends a run's use of its checkout.
	Release(ws models.Workspace)
	// Stage checks out the task branch merged into the default branch in a
	// daemon-owned directory for verification; a conflict is a
	// *models.ConflictError.
	Stage(ctx context.Context, p models.Project, t models.Task, src string) (models.Staged, error)
	// Deliver merges the task branch into the default branch (idempotent).
	Deliver(ctx context.Context, p models.Project, t models.Task, src string) (models.Delivery, error)
	// Cleanup removes the task's verification checkout, and its branch when merged.
	Cleanup(ctx context.Context, p models.Project, t models.Task, src string, merged bool) error
	// Diff returns the task branch's change against the default branch.
	Diff(ctx context.Context, p models.Project, t models.Task, src string) (string, error)
}

// Orchestrator schedules READY tasks onto idle agents, supervises their
// runs, applies timers (resume, retry, timeouts) and recovers after a
// restart. Create it with New and run it with Run.
type Orchestrator struct {
	cfg      Config
	store    Store
	ws       Workspaces
	adapters *agent.Registry
	log      *slog.Logger
	wake     chan struct{}
	// prPoke wakes the pull request watcher (a webhook arrived).
	prPoke chan struct{}
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
	failures map[string]int
	// asks wakes the ask waiting for question id with its answer or error.
	asks map[int64]chan askResult
	// verifying holds the tasks whose verification a goroutine is running,
	// with the cancel of its context (an admin event that takes the task
	// out of VERIFYING cancels it).
	verifying map[string]context.CancelFunc
	// verifyDone is closed when the task's verification under way ends.
	verifyDone map[string]chan struct{}
	// vctx bounds verification work (checks, merges); shutdown cancels it
	// before waiting for the goroutines.
	vctx    context.Context
	vcancel context.CancelFunc
	// stopping is set by shutdown: no verification goroutine starts after.
	stopping bool
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
	vctx, vcancel := context.WithCancel(context.Background())
	return &Orchestrator{cfg: cfg, store: st, ws: ws, adapters: adapters, log: cfg.Logger,
		wake: make(chan struct{}, 1), prPoke: make(chan struct{}, 1), runs: map[int64]*activeRun{}, asks: map[int64]chan askResult{},
		cooldown: map[string]time.Time{}, failures: map[string]int{}, verifying: map[string]context.CancelFunc{},
		verifyDone: map[string]chan struct{}{},
		vctx:       vctx, vcancel: vcancel, reviewFails: map[string]int{}, stuck: map[int64]bool{}}, nil
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

// Run recovers what an earlier life left in flight, then runs rounds on
// every wake-up, due timer and safety tick until ctx ends. On the way out it
// stops the runs it started and returns their tasks to READY.
func (o *Orchestrator) Run(ctx context.Context) error {
	o.mu.Lock()
	if o.stopping { // an earlier Run ended: this life verifies afresh
		o.stopping = false
		o.vctx, o.vcancel = context.WithCancel(context.Background())
	}
	o.mu.Unlock()
	if err := o.recover(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // shut down during recovery: the next start repeats it
		}
		return fmt.Errorf("orchestrator recovery: %w", err)
	}
	runCtx, cancelRuns := context.WithCancel(context.WithoutCancel(ctx))
	defer func() {
		o.wg.Wait() // runs record their end with runCtx: cancel it only after
		cancelRuns()
	}()
	for _, id := range o.resume {
		o.goVerify(id)
	}
	o.resume = nil
	timer := o.cfg.After(o.cfg.SafetyTick)
	for {
		select {
		case <-ctx.Done():
			o.shutdown()
			return nil
		case <-o.wake:
		case <-timer:
		}
		seq := o.wakeSeq.Load()
		due := o.round(runCtx)
		// Armed from the clock now, not from the round's start: time that
		// passed during the round must not push the deadline back.
		timer = o.cfg.After(max(due.Sub(o.cfg.Now()), 0))
		if o.cfg.OnRound != nil { // after arming, so the round's timer exists
			o.cfg.OnRound(seq)
		}
	}
}

// round applies due timers, schedules, and dispatches; it returns when the
// next timer is due (at the latest, a safety tick from now).
func (o *Orchestrator) round(ctx context.Context) time.Time {
	now := o.cfg.Now()
	due := now.Add(o.cfg.SafetyTick)
	var roundErr error
	failed := func(step string, err error) {
		o.log.Error(step, "err", err)
		if roundErr == nil {
			roundErr = fmt.Errorf("%s: %w", step, err)
		}
	}
	if d, err := o.applyTimers(ctx, now); err != nil {
		failed("apply timers", err)
	} else if !d.IsZero() && d.Before(due) {
		due = d
	}
	// Reviews first: a reviewer that also takes work must not be taken by
	// the scheduler every round while a review waits for it.
	if err := o.dispatchReviews(ctx); err != nil {
		failed("dispatch reviews", err)
	}
	if d, err := o.schedule(ctx, now); err != nil {
		failed("schedule", err)
	} else if !d.IsZero() && d.Before(due) {
		due = d
	}
	if err := o.reconcile(ctx); err != nil {
		failed("reconcile", err)
	}
	o.mu.Lock()
	if roundErr != nil && ctx.Err() == nil {
		o.failedRounds++
		o.roundErr = roundErr
	} else if roundErr == nil {
		o.failedRounds, o.roundErr = 0, nil
	}
	o.mu.Unlock()
	o.resumeVerifications(ctx)
	// After scheduling, so that runs dispatched now have their start
	// deadline armed.
	if d := o.superviseRuns(now); !d.IsZero() && d.Before(due) {
		due = d
	}
	o.log.Debug("round done", "next_in", due.Sub(now))
	return due
}

// schedule reads a snapshot, runs the scheduler and dispatches its
// assignments; it returns the next time something now held back (a task's
// not_before, a cooldown) becomes due (zero if none).
func (o *Orchestrator) schedule(ctx context.Context, now time.Time) (time.Time, error) {
	st, err := o.store.SchedulingState(ctx, now, o.cfg.Window, o.cfg.ReadyPerProject)
	if err != nil {
		return time.Time{}, err
	}
	var next time.Time
	consider := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, t := range st.Ready {
		if t.NotBefore != nil {
			consider(*t.NotBefore)
		}
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
	if len(st.IdleAgents) == 0 || len(st.Ready) == 0 {
		return next, nil
	}
	for _, as := range Schedule(o.snapshot(st), SchedulerConfig{Quantum: o.cfg.Quantum}) {
		o.dispatch(ctx, as)
	}
	return next, nil
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
	return o.cooldown[key].After(o.cfg.Now())
}

// snapshot converts the store's state into the scheduler's input.
func (o *Orchestrator) snapshot(st models.SchedulingState) Snapshot {
	s := Snapshot{Now: st.Now, Window: o.cfg.Window, Rules: o.cfg.Rules, GlobalBudget: o.cfg.GlobalBudget,
		GlobalTokensUsed: st.TokensInWindow}
	for _, p := range st.Projects {
		status := p.Project.Status
		if status == models.ProjectActive && o.coolingDown("project:"+p.Project.ID) {
			status = models.ProjectPaused
		}
		s.Projects = append(s.Projects, ProjectState{ID: p.Project.ID, CreditWeight: p.Project.CreditWeight,
			MaxConcurrentAgents: p.Project.MaxConcurrentAgents, Status: status, TokensUsed: p.Project.TotalTokensUsed,
			BudgetLimit: p.Project.BudgetLimit, AgentSeconds: p.AgentSeconds, CompletedInWindow: p.CompletedInWindow,
			Running: p.Running})
	}
	info := func(t models.Task) TaskInfo {
		return TaskInfo{ID: t.ID, ProjectID: t.ProjectID, Priority: t.Priority, CreatedBy: t.CreatedBy, CreatedAt: t.CreatedAt,
			NotBefore: t.NotBefore, Kind: t.Kind, Metadata: t.Metadata, Status: t.Status, ExpectedCount: t.ExpectedCount,
			SuccessCount: t.SuccessCount, FailureCount: t.FailureCount, RunID: t.RunID, StepName: t.StepName,
			StepConcurrency: t.StepConcurrency}
	}
	for _, t := range st.Ready {
		s.Ready = append(s.Ready, info(t))
	}
	for _, t := range st.Running {
		s.Running = append(s.Running, info(t))
	}
	for _, a := range st.IdleAgents {
		if o.coolingDown("agent:" + a.ID) {
			continue
		}
		s.IdleAgents = append(s.IdleAgents, AgentInfo{ID: a.ID, Projects: a.Projects})
	}
	return s
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
	paused, err := o.store.ListTasks(ctx, models.TaskFilter{Statuses: []models.TaskStatus{models.StatusPaused}, Limit: 10_000})
	if err != nil {
		return next, err
	}
	for _, t := range paused {
		if t.ResumeAfter == nil || !t.ResumeAfter.After(now) {
			o.apply(ctx, models.TransitionRequest{TaskID: t.ID, Event: models.EventResumeTimer, ExpectFrom: models.StatusPaused,
				Actor: "system", Reason: "resume time reached"})
			continue
		}
		consider(*t.ResumeAfter)
	}
	open, err := o.store.OpenQuestions(ctx)
	if err != nil {
		return next, err
	}
	for _, q := range open {
		deadline := q.AskedAt.Add(o.cfg.InputTimeout)
		if deadline.After(now) {
			consider(deadline)
			continue
		}
		if _, err := o.store.TimeOutQuestion(ctx, q.ID, now.Add(o.cfg.InputTimeout)); err != nil {
			o.log.Warn("input timeout not applied", "task_id", q.TaskID, "err", err)
			continue
		}
		o.log.Info("question timed out", "task_id", q.TaskID, "run_id", q.RunID)
		o.answered(q.ID, "", fmt.Errorf("no answer within %s: the task is paused and will resume later", o.cfg.InputTimeout))
		o.endRunsOf(q.TaskID, "no answer in time")
	}
	failed, err := o.store.ListTasks(ctx, models.TaskFilter{Statuses: []models.TaskStatus{models.StatusFailed}, Limit: 10_000})
	if err != nil {
		return next, err
	}
	for _, t := range failed {
		if t.RetryCount >= t.MaxRetries {
			o.apply(ctx, models.TransitionRequest{TaskID: t.ID, Event: models.EventMaxRetries, ExpectFrom: models.StatusFailed,
				Actor: "system", Reason: fmt.Sprintf("failed %d time(s); no retries left: %s", t.RetryCount+1, t.StatusReason)})
			continue
		}
		at := t.UpdatedAt.Add(o.Backoff(t.RetryCount))
		if at.After(now) {
			consider(at)
			continue
		}
		o.apply(ctx, models.TransitionRequest{TaskID: t.ID, Event: models.EventRetry, ExpectFrom: models.StatusFailed,
			Actor: "system", Reason: fmt.Sprintf("retry %d of %d", t.RetryCount+1, t.MaxRetries)})
	}
	return next, nil
}

// Backoff is the wait before retry number retries+1: RetryBackoff doubled
// for each earlier retry, at most MaxBackoff.
func (o *Orchestrator) Backoff(retries int) time.Duration {
	d := o.cfg.RetryBackoff
	for range retries {
		d *= 2
		if d >= o.cfg.MaxBackoff {
			return o.cfg.MaxBackoff
		}
	}
	return min(d, o.cfg.MaxBackoff)
}

// apply applies an event the loop decided, logging (not failing on) a lost
// race: another writer got there first, and the next round sees its result.
func (o *Orchestrator) apply(ctx context.Context, req models.TransitionRequest) {
	res, err := o.store.ApplyEvent(ctx, req)
	if err != nil {
		o.log.Warn("transition not applied", "task_id", req.TaskID, "event", req.Event, "err", err)
		return
	}
	if !res.Duplicate {
		o.log.Info("task transition", "task_id", req.TaskID, "event", req.Event, "from", res.From, "to", res.To)
	}
}
