package hooks

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/schedule"
	"github.com/agentqueued/agentqueued/internal/service/areas"
)

// Defaults of the engine's configuration.
const (
	DefaultMaxRunning     = 2
	DefaultPollInterval   = 5 * time.Second
	DefaultStepOutputCap  = 32 << 10
	DefaultCommandTimeout = 5 * time.Minute
	DefaultHTTPTimeout    = 30 * time.Second
	DefaultMaxToolRounds  = 8
	DefaultLLMAttempts    = 4
	DefaultLLMBackoff     = 2 * time.Second
	DefaultMaxLLMBackoff  = 5 * time.Minute
	DefaultLLMTimeout     = 2 * time.Minute
	// eventPage is how many outbox rows one pass reads at a time.
	eventPage = 200
	// cursorName is the hooks' event cursor.
	cursorName = models.HookEventCursor
)

// LLMConfig is the daemon's OpenAI-compatible endpoint.
type LLMConfig struct {
	BaseURL string
	APIKey  string
	Model   string
}

// Config configures an Engine. Zero values take the defaults above.
type Config struct {
	// MaxRunning caps the hook runs running at once, all hooks together.
	// A firing beyond it waits for a free place; nothing is dropped.
	MaxRunning int
	// PollInterval is the longest the engine waits before reading new
	// task events and schedules when nothing wakes it.
	PollInterval time.Duration
	// LLM is the daemon's model; a hook's llm_config overrides it.
	LLM LLMConfig
	// GlobalBudget, when set, caps the tokens of all projects in the
	// rolling Window (default 24h): past it, hooks are skipped.
	GlobalBudget *int64
	Window       time.Duration
	// HTTPAllowHosts are the host names http_get steps may fetch ("*.x.org"
	// admits sub-domains of x.org). Empty refuses every http_get.
	HTTPAllowHosts []string
	// HTTPClient fetches http_get steps; default a client with
	// HTTPTimeout. Redirects are followed only to allowed hosts.
	HTTPClient *http.Client
	// LLMHTTPClient carries the LLM calls; default http.DefaultClient's
	// transport with LLMTimeout.
	LLMHTTPClient *http.Client
	// StepOutputCap caps each step's output, in bytes.
	StepOutputCap int
	// CommandTimeout and HTTPTimeout bound run_command and http_get steps
	// that set no timeout_seconds.
	CommandTimeout time.Duration
	HTTPTimeout    time.Duration
	// MaxToolRounds caps the LLM calls of one run.
	MaxToolRounds int
	// LLMAttempts is how many times one LLM call is tried when the
	// endpoint is rate limited (429) or fails (5xx, network); the waits
	// start at LLMBackoff and double up to MaxLLMBackoff, or follow the
	// endpoint's Retry-After.
	LLMAttempts   int
	LLMBackoff    time.Duration
	MaxLLMBackoff time.Duration
	// LLMTimeout bounds one LLM call.
	LLMTimeout time.Duration
	// Environ is the environment run_command steps start from, scrubbed
	// to PATH, HOME, LANG, LC_*, TZ and TMPDIR; default os.Environ().
	Environ []string
	// Clock reads the time and waits; nil: clock.Real.
	Clock clock.Clock
	// Logger receives the engine's logs.
	Logger *slog.Logger
	// OnRunEnd, when set, is called after a run has been recorded as
	// finished or skipped (for tests and metrics).
	OnRunEnd func(models.HookRun)
}

func (c *Config) applyDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.PollInterval, DefaultPollInterval)
	def(&c.CommandTimeout, DefaultCommandTimeout)
	def(&c.HTTPTimeout, DefaultHTTPTimeout)
	def(&c.LLMBackoff, DefaultLLMBackoff)
	def(&c.MaxLLMBackoff, DefaultMaxLLMBackoff)
	def(&c.LLMTimeout, DefaultLLMTimeout)
	def(&c.Window, 24*time.Hour)
	if c.MaxRunning <= 0 {
		c.MaxRunning = DefaultMaxRunning
	}
	if c.StepOutputCap <= 0 {
		c.StepOutputCap = DefaultStepOutputCap
	}
	if c.MaxToolRounds <= 0 {
		c.MaxToolRounds = DefaultMaxToolRounds
	}
	if c.LLMAttempts <= 0 {
		c.LLMAttempts = DefaultLLMAttempts
	}
	c.Clock = clock.Or(c.Clock)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Store is what the engine needs from the store.
type Store interface {
	ListHooks(ctx context.Context, projectID string) ([]models.Hook, error)
	GetHook(ctx context.Context, id string) (models.Hook, error)
	GetProject(ctx context.Context, id string) (models.Project, error)
	ClaimHookRun(ctx context.Context, c models.HookClaim) (models.HookClaimResult, error)
	SaveHookRun(ctx context.Context, r models.HookRun) error
	FinishHookRun(ctx context.Context, r models.HookRun) (bool, error)
	RecordHookUsage(ctx context.Context, r models.HookRun, u models.TokenUsage) error
	LastScheduledFirings(ctx context.Context) (map[string]time.Time, error)
	FailRunningHookRuns(ctx context.Context) (int64, error)
	EventCursor(ctx context.Context, name string) (int64, error)
	SetEventCursor(ctx context.Context, name string, id int64) error
	TaskEventsAfter(ctx context.Context, afterID int64, limit int) ([]models.HookEvent, int64, error)
	HookQuery(ctx context.Context, projectID string, step models.HookStep) (string, int, error)
	// ConfirmLease confirms, immediately before a command step starts in
	// the project's hook checkout, that this daemon still holds the
	// database's lease; an error refuses the step.
	ConfirmLease(ctx context.Context) error
}

// Actions are what a hook's LLM may do: the service's operations
// (*service.Service), validated like any other caller's.
type Actions interface {
	areas.HookActions
}

// Checkouts gives hooks the project's checkout and reads its history.
type Checkouts interface {
	HookCheckout(ctx context.Context, p models.Project) (dir string, done func(), err error)
	GitDiff(ctx context.Context, dir, base, head string, limit int) (string, bool, error)
	GitLog(ctx context.Context, dir string, since time.Time, max, limit int) (string, int, bool, error)
}

// Engine fires hooks: on their schedules, on task events and by hand.
type Engine struct {
	cfg   Config
	store Store
	act   Actions
	co    Checkouts
	log   *slog.Logger
	wake  chan struct{}

	// tickMu serialises passes of one engine (two engines on one
	// database, or a pass racing a test's, stay exactly-once through the
	// store's firing keys).
	tickMu sync.Mutex
	runs   sync.WaitGroup

	mu sync.Mutex
	// base is Start's context: runs last as long as it, whoever fired
	// them. Before Start and after Run, nothing fires.
	base       context.Context
	cancelBase context.CancelFunc
	stopped    bool
}

// New returns an engine. It starts nothing: call Run.
func New(cfg Config, st Store, act Actions, co Checkouts) (*Engine, error) {
	if st == nil || act == nil || co == nil {
		return nil, errors.New("hooks: New needs a store, actions and checkouts")
	}
	cfg.applyDefaults()
	return &Engine{cfg: cfg, store: st, act: act, co: co, log: cfg.Logger, wake: make(chan struct{}, 1)}, nil
}

// Wake makes the engine look for new task events now. It never blocks.
func (e *Engine) Wake() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Start closes the runs an earlier life left running and readies the
// engine to fire; its runs last until Run ends. Run starts the engine when
// it was not started; the daemon starts it before it takes requests, so
// that no fire by hand can be taken for a leftover.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	started := e.base != nil
	e.mu.Unlock()
	if started {
		return nil
	}
	n, err := e.store.FailRunningHookRuns(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		e.log.Info("hook runs left running by the last stop closed as failed", "count", n)
	}
	e.mu.Lock()
	e.base, e.cancelBase = context.WithCancel(context.WithoutCancel(ctx))
	e.mu.Unlock()
	return nil
}

// Run starts the engine if needed, then fires hooks until ctx ends; then
// it cancels the runs under way (their LLM calls and commands) and waits
// for their ends to be recorded.
func (e *Engine) Run(ctx context.Context) error {
	if err := e.Start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it started
		}
		return err
	}
	defer func() {
		e.mu.Lock()
		e.stopped = true
		e.cancelBase()
		e.mu.Unlock()
		e.runs.Wait()
	}()
	schedule.Loop{Poll: e.cfg.PollInterval, Clock: e.cfg.Clock, Wake: e.wake,
		Failed: func(err error) { e.log.Error("hook pass failed", "err", err) }}.Run(ctx, e.Tick)
	return nil
}

// Wait blocks until the runs started so far have finished.
func (e *Engine) Wait() { e.runs.Wait() }

// Tick makes one pass: it fires the scheduled hooks that are due and the
// event hooks of the task events written since the last pass, starting a
// run for each firing that may run. It returns the next scheduled time of
// any hook (zero when none). Runs go on in the background.
func (e *Engine) Tick(ctx context.Context) (time.Time, error) {
	e.tickMu.Lock()
	defer e.tickMu.Unlock()
	hooks, err := e.store.ListHooks(ctx, "")
	if err != nil {
		return time.Time{}, err
	}
	next, errSched := e.fireSchedules(ctx, hooks)
	errEvents := e.fireEvents(ctx, hooks)
	return next, errors.Join(errSched, errEvents)
}

// fireSchedules fires each enabled scheduled hook that is due.
func (e *Engine) fireSchedules(ctx context.Context, hooks []models.Hook) (time.Time, error) {
	var (
		soonest time.Time
		errs    []error
		lasts   map[string]time.Time
	)
	now := e.cfg.Clock.Now()
	for _, h := range hooks {
		if !h.Enabled || !h.Trigger.Scheduled() {
			continue
		}
		if lasts == nil {
			var err error
			if lasts, err = e.store.LastScheduledFirings(ctx); err != nil {
				return time.Time{}, err
			}
		}
		next, err := e.fireSchedule(ctx, h, lasts[h.ID], now)
		if err != nil {
			errs = append(errs, fmt.Errorf("hook %s: %w", h.ID, err))
			continue
		}
		if !next.IsZero() && (soonest.IsZero() || next.Before(soonest)) {
			soonest = next
		}
	}
	return soonest, errors.Join(errs...)
}

// fireSchedule fires h when a scheduled time is due, given the last one it
// fired for, and returns its next scheduled time (a poll interval away
// while the firing waits for a free place).
func (e *Engine) fireSchedule(ctx context.Context, h models.Hook, last, now time.Time) (next time.Time, err error) {
	defer func() {
		if p := recover(); p != nil {
			e.log.Error("a hook's schedule panicked", "hook_id", h.ID, "panic", p)
			next, err = time.Time{}, fmt.Errorf("schedule of hook %s: internal error", h.ID)
		}
	}()
	sched, err := scheduleOf(h)
	if err != nil {
		return time.Time{}, err
	}
	at, missed, next, ok := sched.Due(last, now)
	if !ok {
		if next.IsZero() {
			e.log.Warn("a hook's schedule has no next time", "hook_id", h.ID)
		}
		return next, nil
	}
	res, err := e.claim(ctx, h, models.HookClaim{HookID: h.ID, FireKey: "schedule:" + at.UTC().Format(time.RFC3339Nano),
		ScheduledAt: &at, TriggerReason: models.ScheduleTrigger(h.Trigger.Type), TriggerDetail: models.ScheduleDetail(at, missed)})
	if err != nil {
		return time.Time{}, err
	}
	if res.Busy {
		return now.Add(e.cfg.PollInterval), nil
	}
	return sched.Next(at), nil
}

// scheduleOf returns the schedule of a periodic or cron hook, counted from
// its ScheduleFrom.
func scheduleOf(h models.Hook) (*schedule.Times, error) {
	t := h.Trigger
	switch t.Type {
	case models.TriggerPeriodic:
		if t.IntervalSeconds < models.MinHookInterval || t.IntervalSeconds > models.MaxHookInterval {
			return nil, models.Errorf(models.CodeInvalid, "trigger.interval_seconds: %d is out of range", t.IntervalSeconds)
		}
		return schedule.Every(time.Duration(t.IntervalSeconds)*time.Second, h.ScheduleFrom)
	case models.TriggerCron:
		sched, loc, err := t.Schedule()
		if err != nil {
			return nil, err
		}
		return schedule.Cron(sched, loc, h.ScheduleFrom), nil
	}
	return nil, models.Errorf(models.CodeInvalid, "trigger.type: %q is not scheduled", t.Type)
}

// fireEvents fires event hooks for the task events after the cursor and
// moves the cursor past what was handled. A firing that must wait for a
// free place stops the pass there: the next pass starts again at its event.
// With no enabled event hook it reads and writes nothing: the store moves
// the cursor to the newest event when the first one is made
// (models.HookEventCursor), so a hook never sees the events from before.
func (e *Engine) fireEvents(ctx context.Context, hooks []models.Hook) error {
	var eventHooks []models.Hook
	for _, h := range hooks {
		if h.Enabled && h.Trigger.Type == models.TriggerEvent {
			eventHooks = append(eventHooks, h)
		}
	}
	if len(eventHooks) == 0 {
		return nil
	}
	cursor, err := e.store.EventCursor(ctx, cursorName)
	if err != nil {
		return err
	}
	for {
		events, last, err := e.store.TaskEventsAfter(ctx, cursor, eventPage)
		if err != nil {
			return err
		}
		if last == cursor {
			return nil
		}
		for _, ev := range events {
			for _, h := range eventHooks {
				if !ev.Matches(h.Trigger, h.ProjectID) {
					continue
				}
				res, err := e.claim(ctx, h, models.HookClaim{HookID: h.ID, FireKey: fmt.Sprintf("event:%d:%s", ev.ID, ev.Type),
					TriggerReason: models.EventTrigger(ev.Type),
					TriggerDetail: models.EventDetail(ev.Type, ev.TaskID), Event: &ev})
				if err == nil && !res.Busy {
					continue
				}
				// Handled up to the event before this one.
				if serr := e.store.SetEventCursor(ctx, cursorName, ev.ID-1); serr != nil {
					err = errors.Join(err, serr)
				}
				return err
			}
		}
		if err := e.store.SetEventCursor(ctx, cursorName, last); err != nil {
			return err
		}
		cursor = last
	}
}

// claim records a firing and starts its run when it may run.
func (e *Engine) claim(ctx context.Context, h models.Hook, c models.HookClaim) (models.HookClaimResult, error) {
	e.mu.Lock()
	base, stopped := e.base, e.stopped
	e.mu.Unlock()
	if base == nil || stopped {
		return models.HookClaimResult{}, models.Errorf(models.CodeConflict, "hooks are not running: the daemon is starting or stopping")
	}
	c.MaxRunning, c.GlobalBudget = e.cfg.MaxRunning, e.cfg.GlobalBudget
	if c.GlobalBudget != nil {
		c.WindowStart = e.cfg.Clock.Now().Add(-e.cfg.Window)
	}
	res, err := e.store.ClaimHookRun(ctx, c)
	if err != nil {
		if models.ErrorCodeOf(err) == models.CodeNotFound {
			return res, nil // deleted meanwhile
		}
		return res, err
	}
	switch {
	case res.Duplicate, res.Busy:
		return res, nil
	case res.Run.Status == models.HookRunSkipped:
		e.log.Info("hook skipped", "hook_id", h.ID, "project_id", h.ProjectID, "run_id", res.Run.ID,
			"reason", *res.Run.SkippedReason)
		e.ended(res.Run)
		return res, nil
	}
	e.log.Info("hook fired", "hook_id", h.ID, "project_id", h.ProjectID, "run_id", res.Run.ID, "trigger", c.TriggerReason,
		"trigger_detail", c.TriggerDetail)
	// Counted under the lock Run's end takes before it waits: a run is
	// either waited for or never begins.
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		r := res.Run
		r.Status, r.Error = models.HookRunFailed, "the daemon stopped before the run began"
		e.finish(ctx, e.log, r)
		return res, nil
	}
	e.runs.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.runs.Done()
		e.execute(base, h, res.Run)
	}()
	return res, nil
}

// Fire fires a hook by hand (by names who: one line of at most
// models.MaxActorLen characters), whatever its trigger and
// cooldown, and returns its run: running, or skipped with the reason. An
// event hook may be given the event to run with.
func (e *Engine) Fire(ctx context.Context, hookID, by string, f models.HookFire) (models.HookRun, error) {
	if err := models.CheckLine("actor", by, models.MaxActorLen); err != nil {
		return models.HookRun{}, err
	}
	h, err := e.store.GetHook(ctx, hookID)
	if err != nil {
		return models.HookRun{}, err
	}
	if f.Event != nil {
		ev := *f.Event
		if ev.Type == "" {
			ev.Type = h.Trigger.EventType
		}
		ev.ID, ev.ProjectID = 0, h.ProjectID
		f.Event = &ev
	}
	if by == "" {
		by = "someone"
	}
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	key := fmt.Sprintf("manual:%s:%x", e.cfg.Clock.Now().UTC().Format(time.RFC3339Nano), nonce)
	res, err := e.claim(ctx, h, models.HookClaim{HookID: h.ID, FireKey: key, TriggerReason: models.TriggerReasonManual, TriggerDetail: models.FiredByDetail(by),
		Event: f.Event, Manual: true})
	if err != nil {
		return models.HookRun{}, err
	}
	switch {
	case res.Busy:
		return models.HookRun{}, models.Errorf(models.CodeConflict,
			"%d hook runs are running already (hooks.max_running); fire %s again when one has finished", e.cfg.MaxRunning, h.ID)
	case res.Duplicate:
		return models.HookRun{}, models.Errorf(models.CodeConflict, "hook %s was fired at this very instant already", h.ID)
	}
	return res.Run, nil
}

// ended records the end of a run for OnRunEnd, and wakes the engine: a
// firing may have waited for the place the run took.
func (e *Engine) ended(r models.HookRun) {
	e.Wake()
	if e.cfg.OnRunEnd != nil {
		e.cfg.OnRunEnd(r)
	}
}

// Check refuses a hook whose steps the engine would refuse at run time as
// things are configured now: a run_command that is not one of its
// project's hook_commands, an http_get of a host off the allow list.
func (e *Engine) Check(ctx context.Context, h models.Hook) error {
	if strings.TrimSpace(h.PromptTemplate) != "" {
		if _, err := e.resolve(h); err != nil {
			return models.Errorf(models.CodeInvalid, "prompt_template: the hook calls an LLM, but none is configured: "+
				"set llm.model in the daemon's configuration (or the hook's llm_config.model), or leave prompt_template empty")
		}
	}
	var p *models.Project
	for i, s := range h.ContextSteps {
		switch s.Type {
		case models.StepRunCommand:
			if p == nil {
				pr, err := e.store.GetProject(ctx, h.ProjectID)
				if err != nil {
					return err
				}
				p = &pr
			}
			if !p.Settings.AllowsHookCommand(s.Command) {
				return models.Errorf(models.CodeInvalid, "context_steps[%d].command: %q is not one of project %s's hook_commands (set them with the project's settings.hook_commands)",
					i, s.Command, h.ProjectID)
			}
		case models.StepHTTPGet:
			u, err := url.Parse(s.URL)
			if err != nil || !allowedHost(e.cfg.HTTPAllowHosts, u.Hostname()) {
				host := s.URL
				if err == nil {
					host = u.Hostname()
				}
				return models.Errorf(models.CodeInvalid, "context_steps[%d].url: host %q is not on the allow list (hooks.http_allow_hosts)", i, host)
			}
		}
	}
	return nil
}
