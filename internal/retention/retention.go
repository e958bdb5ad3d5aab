package retention

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
)

// Defaults of Config.
const (
	DefaultInterval = 10 * time.Minute
	// DefaultBatch and DefaultDuty keep a completion's latency within 20 %
	// of its latency without the pruner while the pruner drains a backlog
	// (docs/performance.md, "Retention").
	DefaultBatch = 5
	DefaultDuty  = 0.125
	// RowsPerTask is how many rows the steps other than the archive's
	// delete per transaction for each task Batch lets the archive move:
	// a notice, a hook run, a run's files or an archived task is one row
	// with a few index entries, a task moved is its row, its events, runs,
	// result and edges, and an archive row written. Each transaction then
	// holds the writer about as long.
	RowsPerTask = 4
)

// Store is what the pruner needs of the store.
type Store interface {
	ReadArchiveBatch(ctx context.Context, before time.Time, limit int) (store.ArchiveBatch, error)
	WriteArchiveBatch(ctx context.Context, b store.ArchiveBatch) ([]string, time.Duration, error)
	PruneOutbox(ctx context.Context, before time.Time, limit int) (int64, error)
	PruneHookRuns(ctx context.Context, before time.Time, limit int) (int64, error)
	PruneWorkflowRuns(ctx context.Context, before time.Time, limit int) (int64, error)
	PruneArchive(ctx context.Context, before time.Time, limit int) (int64, error)
	RunFilesDue(ctx context.Context, before time.Time, limit int) ([]store.RunFiles, error)
	MarkRunFilesPruned(ctx context.Context, ids []int64) error
	// ConfirmLease confirms, immediately before files under the run
	// directory are deleted, that this daemon still holds the database's
	// lease (the daemon that took it over keeps history by its own
	// windows); an error refuses the deletion.
	ConfirmLease(ctx context.Context) error
}

// Config configures a Pruner. A zero window keeps that history for ever.
type Config struct {
	Store Store
	// RunDir is the orchestrator's run directory (RunDir/<task>/<attempt>.*);
	// empty: no files are pruned.
	RunDir string
	// Notices, RunLogs, HookRuns, WorkflowRuns and ArchiveTasks are the
	// windows (see config.RetentionConfig).
	Notices, RunLogs, HookRuns, WorkflowRuns, ArchiveTasks, Archived time.Duration
	// Interval is the time between passes; default DefaultInterval.
	Interval time.Duration
	// Batch caps the tasks one archive transaction moves, and a quarter
	// of the rows any other step's transaction deletes (RowsPerTask);
	// default DefaultBatch.
	Batch int
	// Duty is the largest share of the time the pruner holds the writer
	// while a backlog drains: after each write transaction it pauses for
	// as long as keeps it to that share. From 0 (exclusive) to 1; zero
	// means DefaultDuty.
	Duty float64
	// Clock is the daemon's clock; nil: clock.Real.
	Clock clock.Clock
	// Logger receives a line per pass that pruned something; default discards.
	Logger *slog.Logger
}

// Report counts what one pass pruned.
type Report struct {
	Archived     int
	Notices      int64
	HookRuns     int64
	WorkflowRuns int64
	// Expired counts archived tasks deleted for good.
	Expired  int64
	RunFiles int
}

// Pruner applies the retention windows; see the package doc.
type Pruner struct {
	cfg   Config
	clock clock.Clock
	log   *slog.Logger
}

// New returns a pruner; it starts nothing (Run does).
func New(cfg Config) *Pruner {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Duty == 0 {
		cfg.Duty = DefaultDuty
	}
	if !(cfg.Duty > 0 && cfg.Duty <= 1) {
		panic(fmt.Sprintf("retention.New: Duty %v is not in (0, 1]", cfg.Duty))
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Pruner{cfg: cfg, clock: clock.Or(cfg.Clock), log: log}
}

// Run makes a pass at once and then every Interval until ctx ends. A
// failed pass is logged and retried at the next interval.
func (p *Pruner) Run(ctx context.Context) error {
	for {
		if rep, err := p.Pass(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			p.log.Warn("retention pass failed", "err", err)
		} else if rep != (Report{}) {
			p.log.Info("retention pass", "archived", rep.Archived, "notices", rep.Notices, "hook_runs", rep.HookRuns,
				"workflow_runs", rep.WorkflowRuns, "run_files", rep.RunFiles, "expired", rep.Expired)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.clock.After(p.cfg.Interval):
		}
	}
}

// Pass applies every window once, batch by batch, until nothing more is
// due, and says what it pruned.
func (p *Pruner) Pass(ctx context.Context) (Report, error) {
	var rep Report
	now := p.clock.Now()
	if w := p.cfg.ArchiveTasks; w > 0 {
		for {
			// The batch is read without the writer; only the time its
			// write held the writer is paid for with a pause.
			b, err := p.cfg.Store.ReadArchiveBatch(ctx, now.Add(-w), p.cfg.Batch)
			if err != nil {
				return rep, err
			}
			if b.Len() == 0 {
				break
			}
			t0 := p.clock.Now()
			ids, held, err := p.cfg.Store.WriteArchiveBatch(ctx, b)
			if err != nil {
				return rep, err
			}
			// The store times the write on its clock; on the pruner's it
			// took no longer than the call (a fake clock that stands
			// still: no pause at all).
			held = min(held, p.clock.Now().Sub(t0))
			rep.Archived += len(ids)
			// The run directories go before the pause: a pass that ends
			// during it leaves none behind, since nothing names them after
			// (unless the lease's fence refuses: a daemon that lost the
			// database leaves them rather than delete another's files).
			if err := p.cfg.Store.ConfirmLease(ctx); err != nil {
				return rep, fmt.Errorf("remove the run directories of archived tasks: %w", err)
			}
			for _, id := range ids {
				if err := p.removeAll(filepath.Join(p.cfg.RunDir, id)); err != nil {
					return rep, err
				}
			}
			p.checkpoint(ctx)
			if err := p.pause(ctx, held); err != nil {
				return rep, err
			}
			// A short batch was the last; a full one that archived none
			// (all of it changed since its read) ends the pass too, and
			// the next reads it again.
			if b.Len() < p.cfg.Batch || len(ids) == 0 {
				break
			}
		}
	}
	if w := p.cfg.RunLogs; w > 0 {
		n, err := p.pruneRunFiles(ctx, now.Add(-w))
		rep.RunFiles += n
		if err != nil {
			return rep, err
		}
	}
	for _, step := range []struct {
		window time.Duration
		prune  func(context.Context, time.Time, int) (int64, error)
		count  *int64
	}{
		{p.cfg.Notices, p.cfg.Store.PruneOutbox, &rep.Notices},
		{p.cfg.HookRuns, p.cfg.Store.PruneHookRuns, &rep.HookRuns},
		{p.cfg.WorkflowRuns, p.cfg.Store.PruneWorkflowRuns, &rep.WorkflowRuns},
		{p.cfg.Archived, p.cfg.Store.PruneArchive, &rep.Expired},
	} {
		if step.window <= 0 {
			continue
		}
		for {
			t0 := p.clock.Now()
			n, err := step.prune(ctx, now.Add(-step.window), p.rows())
			if err != nil {
				return rep, err
			}
			if err := p.yield(ctx, t0); err != nil {
				return rep, err
			}
			*step.count += n
			if n < int64(p.rows()) {
				break
			}
		}
	}
	return rep, nil
}

// rows is the batch of the steps that delete rows (see RowsPerTask).
func (p *Pruner) rows() int { return RowsPerTask * p.cfg.Batch }

// pruneRunFiles deletes the files of runs ended before before, a batch at
// a time: the files first, then the record, so a crash between them only
// deletes nothing twice.
func (p *Pruner) pruneRunFiles(ctx context.Context, before time.Time) (int, error) {
	total := 0
	for {
		// RunFilesDue reads without the writer.
		due, err := p.cfg.Store.RunFilesDue(ctx, before, p.rows())
		if err != nil {
			return total, err
		}
		ids := make([]int64, 0, len(due))
		if len(due) > 0 {
			if err := p.cfg.Store.ConfirmLease(ctx); err != nil {
				return total, fmt.Errorf("prune run files: %w", err)
			}
		}
		for _, r := range due {
			for _, f := range runFiles(p.cfg.RunDir, r) {
				if err := p.removeAll(f); err != nil {
					return total, err
				}
			}
			ids = append(ids, r.RunID)
		}
		t0 := p.clock.Now() // the files' deletion did not hold the writer
		if err := p.cfg.Store.MarkRunFilesPruned(ctx, ids); err != nil {
			return total, err
		}
		if err := p.yield(ctx, t0); err != nil {
			return total, err
		}
		total += len(due)
		if len(due) < p.rows() {
			return total, nil
		}
	}
}

// Checkpointer is what a Store may also do: copy the write-ahead log into
// the database file without holding the writer (store.Store.Checkpoint).
type Checkpointer interface {
	Checkpoint(ctx context.Context) (logPages, copied int, err error)
}

// checkpoint copies the pages an archive write added to the write-ahead
// log into the database file, off the writer, when the store can: else
// the next commit past SQLite's threshold copies them while every writer
// waits. A failure is logged; SQLite's own checkpoint still runs.
func (p *Pruner) checkpoint(ctx context.Context) {
	c, ok := p.cfg.Store.(Checkpointer)
	if !ok {
		return
	}
	if _, _, err := c.Checkpoint(ctx); err != nil && ctx.Err() == nil {
		p.log.Warn("retention checkpoint failed", "err", err)
	}
}

// yield pauses after a write call begun at t0 (its wait for the writer
// included): see pause.
func (p *Pruner) yield(ctx context.Context, t0 time.Time) error {
	return p.pause(ctx, p.clock.Now().Sub(t0))
}

// pause waits after a write transaction that held the writer for held so
// that the pruner holds it at most Duty of the time while a backlog
// drains, and the daemon's own writes get their turn.
func (p *Pruner) pause(ctx context.Context, held time.Duration) error {
	wait := time.Duration(float64(held) * (1 - p.cfg.Duty) / p.cfg.Duty)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-p.clock.After(wait):
		return nil
	}
}

// runFiles names the files one run leaves under dir: a work attempt's
// prompt, log and state directory, or a review's files.
func runFiles(dir string, r store.RunFiles) []string {
	if dir == "" {
		return nil
	}
	if r.Kind == models.RunReview {
		// <verification attempt>.review-<run>.*: the run id alone names it.
		matches, _ := filepath.Glob(filepath.Join(dir, r.TaskID, fmt.Sprintf("*.review-%d.*", r.RunID)))
		return matches
	}
	base := filepath.Join(dir, r.TaskID, strconv.Itoa(r.Attempt))
	return []string{base + ".log", base + ".prompt", base + ".state"}
}

// removeAll deletes path, which must lie strictly inside RunDir below a
// task's directory: a malformed id never reaches beyond it.
func (p *Pruner) removeAll(path string) error {
	if p.cfg.RunDir == "" {
		return nil
	}
	rel, err := filepath.Rel(p.cfg.RunDir, path)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("prune %s: not inside the run directory %s", path, p.cfg.RunDir)
	}
	if err := os.RemoveAll(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("prune %s: %w", path, err)
	}
	return nil
}
