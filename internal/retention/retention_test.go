package retention_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/retention"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

const day = 24 * time.Hour

type fixture struct {
	s      *store.Store
	clock  *clocktest.Fake
	runDir string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	clock := clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	dir := t.TempDir()
	s := storetest.OpenAt(t, filepath.Join(dir, "aq.db"), storetest.WithClock(clock))
	ctx := context.Background()
	if _, err := s.CreateProject(ctx, models.Project{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RegisterAgent(ctx, models.Agent{ID: "a1", AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "/bin/true"}}); err != nil {
		t.Fatal(err)
	}
	return &fixture{s: s, clock: clock, runDir: filepath.Join(dir, "runs")}
}

// task creates a task and, when done, runs it to COMPLETED leaving its
// attempt's files in the run directory as the orchestrator does.
func (f *fixture) task(t *testing.T, done bool) (string, models.Run) {
	t.Helper()
	ctx := context.Background()
	res, err := f.s.CreateTasks(ctx, models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{{Title: "t"}}})
	if err != nil {
		t.Fatal(err)
	}
	id := res[0].TaskID
	if !done {
		return id, models.Run{}
	}
	run, _, err := f.s.ClaimTask(ctx, id, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.StartRun(ctx, run.ID, 1, ""); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(f.runDir, id, "1")
	for _, name := range []string{base + ".log", base + ".prompt", base + ".state/session", base + ".review-99.log"} {
		if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.s.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentCompleted, Outcome: "completed"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.ApplyEvent(ctx, models.TransitionRequest{TaskID: id, Event: models.EventVerifyPassed, Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	return id, run
}

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func (f *fixture) pruner(windows func(*retention.Config)) *retention.Pruner {
	cfg := retention.Config{Store: f.s, RunDir: f.runDir, Clock: f.clock, Batch: 2,
		Notices: 7 * day, RunLogs: 7 * day, HookRuns: 30 * day, WorkflowRuns: 30 * day, ArchiveTasks: 30 * day}
	if windows != nil {
		windows(&cfg)
	}
	return retention.New(cfg)
}

// TestPassRunFilesThenArchive: an attempt's files go once the run-log
// window has passed (another run's files, and the task, stay); the task
// and its run directory go at the archive window, in batches.
func TestPassRunFilesThenArchive(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	id, _ := f.task(t, true)
	var others []string
	for range 4 {
		o, _ := f.task(t, true)
		others = append(others, o)
	}
	live, _ := f.task(t, false)
	p := f.pruner(nil)
	base := filepath.Join(f.runDir, id, "1")

	if rep, err := p.Pass(ctx); err != nil || rep != (retention.Report{}) {
		t.Fatalf("first pass pruned %+v (%v) inside every window", rep, err)
	}
	f.clock.Advance(8 * day)
	rep, err := p.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.RunFiles != 5 || rep.Archived != 0 {
		t.Errorf("pass after the run-log window: %+v, want 5 runs' files and nothing archived", rep)
	}
	for _, gone := range []string{base + ".log", base + ".prompt", base + ".state"} {
		if exists(t, gone) {
			t.Errorf("%s kept after the run-log window", gone)
		}
	}
	if !exists(t, base+".review-99.log") {
		t.Error("another run's review files were deleted")
	}
	if _, err := f.s.GetTask(ctx, id); err != nil {
		t.Errorf("task gone before the archive window: %v", err)
	}

	f.clock.Advance(30 * day)
	if rep, err = p.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if rep.Archived != 5 { // three batches of at most two
		t.Errorf("archived %d, want 5", rep.Archived)
	}
	for _, gone := range append([]string{id}, others...) {
		if exists(t, filepath.Join(f.runDir, gone)) {
			t.Errorf("run directory of archived task %s kept", gone)
		}
		d, err := f.s.GetTaskDetail(ctx, gone)
		if err != nil || d.ArchivedAt == nil {
			t.Errorf("archived task %s: %v, archived_at %v", gone, err, d.ArchivedAt)
		}
	}
	if got, err := f.s.GetTask(ctx, live); err != nil || got.Status != models.StatusReady {
		t.Errorf("unfinished task %s: %v %s", live, err, got.Status)
	}
}

// TestZeroWindowKeeps: a window of zero turns its step off.
func TestZeroWindowKeeps(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id, _ := f.task(t, true)
	p := f.pruner(func(c *retention.Config) { c.ArchiveTasks, c.RunLogs = 0, 0 })
	f.clock.Advance(365 * day)
	if rep, err := p.Pass(context.Background()); err != nil || rep.Archived != 0 || rep.RunFiles != 0 {
		t.Fatalf("pass with the windows off: %+v (%v)", rep, err)
	}
	if !exists(t, filepath.Join(f.runDir, id, "1.log")) {
		t.Error("run log deleted with run_logs: 0")
	}
}

// TestRunPassesEveryInterval: Run makes a pass at once and then one each
// interval on the injected clock, and stops with its context.
func TestRunPassesEveryInterval(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id, _ := f.task(t, true)
	p := f.pruner(func(c *retention.Config) { c.Interval = time.Hour })
	ctx, cancel := context.WithCancel(progresstest.Context(t))
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	if err := f.clock.WaitTimer(ctx, time.Hour); err != nil { // the first pass is over
		t.Fatal(err)
	}
	f.clock.Advance(31 * day) // fires the timer: the next pass archives
	w := progresstest.New(t, "the archive pass")
	for {
		if _, err := f.s.GetTask(ctx, id); models.ErrorCodeOf(err) == models.CodeNotFound {
			break
		}
		select {
		case <-w.Done():
			t.Fatal("the task was not archived")
		case <-f.clock.Armed():
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// slowWrites is the store whose archive writes each take held on the fake
// clock.
type slowWrites struct {
	*store.Store
	clock *clocktest.Fake
	held  time.Duration
}

func (s slowWrites) WriteArchiveBatch(ctx context.Context, b store.ArchiveBatch) ([]string, time.Duration, error) {
	ids, _, err := s.Store.WriteArchiveBatch(ctx, b)
	s.clock.Advance(s.held)
	return ids, s.held, err
}

// TestPauseKeepsTheDuty: after each archive write, which held the writer
// 10 ms, the pruner pauses so that its writes take Duty of the time —
// seven times as long as the write at the default 0.125, three times at
// 0.25, as long at 0.5, not at all at 1 — and the pass goes on only when
// the pause is over.
func TestPauseKeepsTheDuty(t *testing.T) {
	t.Parallel()
	const held = 10 * time.Millisecond
	tests := []struct {
		duty  float64
		pause time.Duration
	}{
		{0, 70 * time.Millisecond},
		{0.5, 10 * time.Millisecond},
		{0.25, 30 * time.Millisecond},
		{1, 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.duty), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			for range 3 {
				f.task(t, true)
			}
			f.clock.Advance(31 * day)
			p := f.pruner(func(c *retention.Config) {
				c.Store = slowWrites{Store: f.s, clock: f.clock, held: held}
				c.Duty = tt.duty
				c.Notices, c.RunLogs, c.HookRuns, c.WorkflowRuns = 0, 0, 0, 0
			})
			ctx := progresstest.Context(t)
			type result struct {
				rep retention.Report
				err error
			}
			done := make(chan result, 1)
			go func() {
				rep, err := p.Pass(ctx)
				done <- result{rep, err}
			}()
			if tt.pause > 0 {
				for batch := range 2 { // of two tasks, then of one
					if err := f.clock.WaitTimer(ctx, tt.pause); err != nil {
						t.Fatalf("batch %d: no pause of %s: %v", batch, tt.pause, err)
					}
					select {
					case r := <-done:
						t.Fatalf("the pass ended during the pause after batch %d: %+v", batch, r)
					default:
					}
					f.clock.Advance(tt.pause)
				}
			}
			r := <-done
			if r.err != nil || r.rep.Archived != 3 {
				t.Fatalf("pass: %+v, %v; want 3 archived", r.rep, r.err)
			}
		})
	}
}

// TestNewRefusesADutyOutOfRange: a duty must be a share of the time.
func TestNewRefusesADutyOutOfRange(t *testing.T) {
	t.Parallel()
	for _, duty := range []float64{-0.5, 1.5} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New accepted Duty %v", duty)
				}
			}()
			retention.New(retention.Config{Duty: duty})
		}()
	}
}

// countedCheckpoints is the store counting its checkpoints.
type countedCheckpoints struct {
	*store.Store
	n *int
}

func (s countedCheckpoints) Checkpoint(ctx context.Context) (int, int, error) {
	*s.n++
	return s.Store.Checkpoint(ctx)
}

// TestCheckpointAfterEachArchiveWrite: the pruner copies the log each
// archive write added into the database file before its pause, so that
// SQLite's own checkpoint, which the daemon's writes wait behind, finds
// little to do.
func TestCheckpointAfterEachArchiveWrite(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for range 5 {
		f.task(t, true)
	}
	f.clock.Advance(31 * day)
	var n int
	p := f.pruner(func(c *retention.Config) { c.Store = countedCheckpoints{Store: f.s, n: &n} })
	rep, err := p.Pass(context.Background())
	if err != nil || rep.Archived != 5 {
		t.Fatalf("pass: %+v, %v; want 5 archived", rep, err)
	}
	if n != 3 { // batches of two, two and one
		t.Errorf("%d checkpoints, want 3: one after each archive write", n)
	}
}

// limitsSeen is the store recording the limits the pruner asks for.
type limitsSeen struct {
	*store.Store
	archive, notices, runFiles *[]int
}

func (s limitsSeen) ReadArchiveBatch(ctx context.Context, before time.Time, limit int) (store.ArchiveBatch, error) {
	*s.archive = append(*s.archive, limit)
	return s.Store.ReadArchiveBatch(ctx, before, limit)
}

func (s limitsSeen) PruneOutbox(ctx context.Context, before time.Time, limit int) (int64, error) {
	*s.notices = append(*s.notices, limit)
	return s.Store.PruneOutbox(ctx, before, limit)
}

func (s limitsSeen) RunFilesDue(ctx context.Context, before time.Time, limit int) ([]store.RunFiles, error) {
	*s.runFiles = append(*s.runFiles, limit)
	return s.Store.RunFilesDue(ctx, before, limit)
}

// TestRowStepsTakeRowsPerTask: the archive moves Batch tasks a
// transaction, the steps deleting single rows RowsPerTask times as many.
func TestRowStepsTakeRowsPerTask(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.task(t, true)
	f.clock.Advance(31 * day)
	var archive, notices, runFiles []int
	p := f.pruner(func(c *retention.Config) {
		c.Store = limitsSeen{Store: f.s, archive: &archive, notices: &notices, runFiles: &runFiles}
	})
	if _, err := p.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	rows := 2 * retention.RowsPerTask
	if len(archive) == 0 || archive[0] != 2 || len(notices) == 0 || notices[0] != rows || len(runFiles) == 0 || runFiles[0] != rows {
		t.Errorf("limits: archive %v, notices %v, run files %v; want 2 tasks and %d rows", archive, notices, runFiles, rows)
	}
}

// TestADaemonWithoutItsLeaseDeletesNoFiles: the files of runs past the
// run-log window are deleted only while the daemon holds the database's
// lease with its act margin left. A daemon deposed by another (whose
// windows may keep them longer) or whose lease is about to expire
// without a renewal fails the pass with the lease's error and deletes
// nothing; its database writes alone were refused before, after the files
// were gone.
func TestADaemonWithoutItsLeaseDeletesNoFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		ttl   time.Duration
		other bool // a second daemon takes the lease over
		want  error
	}{
		{"deposed", time.Minute, true, store.ErrLeaseLost},
		{"about to expire", 8*day + time.Hour, false, store.ErrLeaseExpiring},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			ctx := context.Background()
			if err := f.s.AcquireLease(ctx, models.LeaseHolder{Owner: "a", Hostname: "host-a", PID: 1}, tc.ttl); err != nil {
				t.Fatal(err)
			}
			id, _ := f.task(t, true)
			f.clock.Advance(8 * day)
			if tc.other {
				b := storetest.OpenAt(t, filepath.Join(filepath.Dir(f.runDir), "aq.db"), storetest.WithClock(f.clock))
				if err := b.AcquireLease(ctx, models.LeaseHolder{Owner: "b", Hostname: "host-b", PID: 2}, time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := f.pruner(nil).Pass(ctx)
			base := filepath.Join(f.runDir, id, "1")
			for _, kept := range []string{base + ".log", base + ".prompt", base + ".state"} {
				if !exists(t, kept) {
					t.Errorf("%s deleted by a daemon without its lease", kept)
				}
			}
			if !errors.Is(err, tc.want) || rep.RunFiles != 0 {
				t.Fatalf("pass: %+v, %v; want nothing pruned and %v", rep, err, tc.want)
			}
		})
	}
}
