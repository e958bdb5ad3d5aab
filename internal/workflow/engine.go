package workflow

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/schedule"
)

// Defaults of the engine's configuration.
const (
	DefaultPollInterval = 30 * time.Second
	// cancelPasses bounds the passes that stop a cancelled run's tasks:
	// a task may become READY while its upstream is being stopped.
	cancelPasses = 5
)

// Config configures an Engine.
type Config struct {
	// Dir holds workflow files (*.yaml, *.yml) loaded at start; empty
	// loads none.
	Dir string
	// PollInterval is the longest the engine waits between looks at the
	// schedules.
	PollInterval time.Duration
	// Clock reads the time and waits; nil: clock.Real.
	Clock clock.Clock
	// Logger receives the engine's logs.
	Logger *slog.Logger
	// KnownProfile, when set, says whether a profile a step names is
	// configured: a file naming another is refused.
	KnownProfile func(string) bool
}

// Store is what the engine needs from the store.
type Store interface {
	ListWorkflows(ctx context.Context, projectID string) ([]models.Workflow, error)
	SaveWorkflow(ctx context.Context, w models.Workflow) (models.Workflow, error)
	SetWorkflowNextRun(ctx context.Context, name string, next *time.Time) error
	LastScheduledRuns(ctx context.Context) (map[string]time.Time, error)
	StartWorkflowRun(ctx context.Context, req models.RunRequest) (models.WorkflowRun, bool, error)
	GetWorkflowRun(ctx context.Context, id string) (models.WorkflowRun, error)
	CancelWorkflowRun(ctx context.Context, id, by string) ([]models.Task, error)
	RetryWorkflowRun(ctx context.Context, id, by string) (models.WorkflowRun, error)
	UnfinishedCancels(ctx context.Context) ([]string, error)
}

// Tasks applies events to tasks as a person's would be: a running agent
// is stopped when its task is taken from it (the orchestrator).
type Tasks interface {
	ApplyAdminEvent(ctx context.Context, req models.TransitionRequest) (models.TransitionResult, error)
}

// Engine starts workflow runs — by hand and on schedules — and cancels and
// retries them.
type Engine struct {
	cfg   Config
	store Store
	tasks Tasks
	log   *slog.Logger
	wake  chan struct{}
	// tickMu serialises the engine's passes; two engines (or a pass and a
	// restart) stay exactly-once through the runs' keys.
	tickMu sync.Mutex
}

// New returns an engine. It starts nothing: call LoadDir, then Run.
func New(cfg Config, st Store, tasks Tasks) (*Engine, error) {
	if st == nil || tasks == nil {
		return nil, errors.New("workflow: New needs a store and tasks")
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Engine{cfg: cfg, store: st, tasks: tasks, log: cfg.Logger, wake: make(chan struct{}, 1)}, nil
}

// LoadDir reads every workflow file of the configured directory and saves
// it (a file's workflow replaces one of the same name). An invalid file is
// an error naming every problem with its file and line; nothing is saved
// then.
func (e *Engine) LoadDir(ctx context.Context) error {
	if e.cfg.Dir == "" {
		return nil
	}
	var files []string
	for _, pat := range []string{"*.yaml", "*.yml"} {
		m, err := filepath.Glob(filepath.Join(e.cfg.Dir, pat))
		if err != nil {
			return fmt.Errorf("workflows %s: %w", e.cfg.Dir, err)
		}
		files = append(files, m...)
	}
	sort.Strings(files)
	var (
		ws   []models.Workflow
		errs []string
		seen = map[string]string{}
	)
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		w, err := Parse(f, src)
		if err != nil {
			errs = append(errs, models.ErrorMessageOf(err))
			continue
		}
		if e.cfg.KnownProfile != nil {
			for i, st := range w.Steps {
				if st.Profile != "" && !e.cfg.KnownProfile(st.Profile) {
					errs = append(errs, fmt.Sprintf("%s: steps[%d] (%s).profile: no profile %q is configured", f, i, st.Name, st.Profile))
				}
			}
		}
		if prev, dup := seen[w.Name]; dup {
			errs = append(errs, fmt.Sprintf("%s: workflow %q is also defined in %s", f, w.Name, prev))
			continue
		}
		seen[w.Name] = f
		w.Origin = models.WorkflowFromFile
		ws = append(ws, w)
	}
	if len(errs) > 0 {
		return fmt.Errorf("workflows in %s:\n%s", e.cfg.Dir, strings.Join(errs, "\n"))
	}
	for _, w := range ws {
		if _, err := e.store.SaveWorkflow(ctx, w); err != nil {
			return fmt.Errorf("workflow %s from %s: %s", w.Name, seen[w.Name], models.ErrorMessageOf(err))
		}
		e.log.Info("workflow loaded", "workflow", w.Name, "project_id", w.ProjectID, "file", seen[w.Name])
	}
	return nil
}

// Wake makes the engine look at the schedules now. It never blocks.
func (e *Engine) Wake() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Run starts scheduled runs and finishes the cancels a stop interrupted,
// until ctx ends.
func (e *Engine) Run(ctx context.Context) error {
	schedule.Loop{Poll: e.cfg.PollInterval, Clock: e.cfg.Clock, Wake: e.wake,
		Failed: func(err error) { e.log.Error("workflow pass failed", "err", err) }}.Run(ctx, e.Tick)
	return nil
}

// Tick makes one pass: it starts a run for each schedule that is due (one
// for the latest time missed while the daemon was down) and stops the
// unfinished tasks of cancelled runs. It returns the soonest next
// scheduled time (zero when none).
func (e *Engine) Tick(ctx context.Context) (time.Time, error) {
	e.tickMu.Lock()
	defer e.tickMu.Unlock()
	var errs []error
	next, err := e.fireSchedules(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	ids, err := e.store.UnfinishedCancels(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	for _, id := range ids {
		if _, err := e.Cancel(ctx, id, "workflow"); err != nil {
			errs = append(errs, err)
		}
	}
	return next, errors.Join(errs...)
}

// fireSchedules starts the runs of due schedules and records each
// workflow's next scheduled time.
func (e *Engine) fireSchedules(ctx context.Context) (time.Time, error) {
	ws, err := e.store.ListWorkflows(ctx, "")
	if err != nil {
		return time.Time{}, err
	}
	var (
		lasts   map[string]time.Time
		soonest time.Time
		errs    []error
	)
	now := e.cfg.Clock.Now()
	for _, w := range ws {
		if w.Schedule == "" || !w.ScheduleEnabled {
			continue
		}
		if lasts == nil {
			if lasts, err = e.store.LastScheduledRuns(ctx); err != nil {
				return time.Time{}, err
			}
		}
		sched, loc, err := models.ParseCron(w.Schedule, w.Timezone, "schedule", "timezone")
		if err != nil {
			errs = append(errs, fmt.Errorf("workflow %s: %w", w.Name, err))
			continue
		}
		times := schedule.Cron(sched, loc, w.ScheduleFrom)
		at, missed, next, due := times.Due(lasts[w.Name], now)
		if due {
			by := "schedule"
			if missed > 0 {
				by = fmt.Sprintf("schedule (catch-up after downtime: %d earlier scheduled times missed)", missed)
			}
			run, dup, err := e.store.StartWorkflowRun(ctx, models.RunRequest{Workflow: w.Name, Trigger: models.TriggerBySchedule,
				TriggeredBy: by, FireKey: "schedule:" + at.UTC().Format(time.RFC3339Nano), ScheduledAt: &at})
			if err != nil {
				errs = append(errs, fmt.Errorf("workflow %s: %w", w.Name, err))
				continue
			}
			if !dup {
				e.log.Info("workflow run started", "workflow", w.Name, "project_id", w.ProjectID, "run_id", run.ID,
					"trigger", by, "scheduled_at", at)
			}
			next = times.Next(at)
		}
		if next.IsZero() {
			continue
		}
		if w.NextRun == nil || !w.NextRun.Equal(next) {
			if err := e.store.SetWorkflowNextRun(ctx, w.Name, &next); err != nil {
				errs = append(errs, err)
			}
		}
		if soonest.IsZero() || next.Before(soonest) {
			soonest = next
		}
	}
	return soonest, errors.Join(errs...)
}

// Trigger starts a run of a workflow by hand; by names who (one line of
// at most models.MaxActorLen characters). The run's inputs are the
// workflow's defaults.
func (e *Engine) Trigger(ctx context.Context, name, by string) (models.WorkflowRun, error) {
	return e.TriggerWith(ctx, name, by, nil)
}

// TriggerWith starts a run of a workflow by hand with the values given for
// its inputs; ResolveInputs checks them and fills in the defaults.
func (e *Engine) TriggerWith(ctx context.Context, name, by string, inputs map[string]string) (models.WorkflowRun, error) {
	if err := models.CheckLine("actor", by, models.MaxActorLen); err != nil {
		return models.WorkflowRun{}, err
	}
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	key := fmt.Sprintf("manual:%s:%x", e.cfg.Clock.Now().UTC().Format(time.RFC3339Nano), nonce)
	run, _, err := e.store.StartWorkflowRun(ctx, models.RunRequest{Workflow: name, Trigger: models.TriggerByHand,
		TriggeredBy: by, FireKey: key, Inputs: inputs})
	if err != nil {
		return models.WorkflowRun{}, err
	}
	e.log.Info("workflow run started", "workflow", name, "project_id", run.ProjectID, "run_id", run.ID, "trigger", "by "+by)
	return run, nil
}

// Cancel cancels a run: the store stops its idle tasks with the run, and
// the tasks agents are working on are stopped through the orchestrator,
// each with the reason "cancelled".
func (e *Engine) Cancel(ctx context.Context, id, by string) (models.WorkflowRun, error) {
	if err := models.CheckLine("actor", by, models.MaxActorLen); err != nil {
		return models.WorkflowRun{}, err
	}
	for range cancelPasses {
		running, err := e.store.CancelWorkflowRun(ctx, id, by)
		if err != nil {
			return models.WorkflowRun{}, err
		}
		if len(running) == 0 {
			break
		}
		for _, t := range running {
			_, err := e.tasks.ApplyAdminEvent(ctx, models.TransitionRequest{TaskID: t.ID, Event: models.EventRunStopped,
				ExpectFrom: t.Status, Reason: "cancelled", Actor: by})
			if err != nil && models.ErrorCodeOf(err) != models.CodeConflict && models.ErrorCodeOf(err) != models.CodeNotFound {
				e.log.Error("stopping a task of a cancelled run failed", "task_id", t.ID, "run_id", id, "err", err)
			}
		}
	}
	e.log.Info("workflow run cancelled", "run_id", id, "by", by)
	return e.store.GetWorkflowRun(ctx, id)
}

// Retry starts a failed or cancelled run's failed and blocked tasks again
// (no agent works on them); the tasks blocked behind them follow.
func (e *Engine) Retry(ctx context.Context, id, by string) (models.WorkflowRun, error) {
	if err := models.CheckLine("actor", by, models.MaxActorLen); err != nil {
		return models.WorkflowRun{}, err
	}
	run, err := e.store.RetryWorkflowRun(ctx, id, by)
	if err != nil {
		return models.WorkflowRun{}, err
	}
	e.log.Info("workflow run retried", "run_id", id, "by", by)
	return run, nil
}
