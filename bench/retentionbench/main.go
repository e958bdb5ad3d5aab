// Command retentionbench measures retention, in two modes.
//
// -mode prune works on the store in-process: it seeds a history of about
// -events task events on tasks completed older than the archive window
// (about five events, a run and a result each), then completes tasks one
// after another (create, claim, start, finish, VERIFY_PASSED) and reports
// the completion latency three times: alone, while the pruner archives the
// whole history in its bounded batches, and alone again; and the time
// each archive write held the writer.
//
// -mode soak runs -tasks trivial tasks through the real daemon binary with
// instant command agents and the retention windows shrunk to -window,
// and samples the database file size (with its WAL) every -sample: the
// curve flattens once the windows have passed.
//
// It prints one line per measure with the machine's load average and
// checks nothing about speed.
//
//	go run ./bench/retentionbench -mode prune -events 1000000
//	go run ./bench/retentionbench -mode soak -tasks 200000 -window 2m
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentqueued/agentqueued/bench/benchdaemon"
	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/retention"
	"github.com/agentqueued/agentqueued/internal/store"
)

// Defaults of the flags.
const (
	defaultEvents      = 1_000_000
	defaultCompletions = 500
	defaultBatch       = retention.DefaultBatch
	defaultTasks       = 200_000
	defaultWindow      = 2 * time.Minute
	defaultSample      = 30 * time.Second
	defaultAgents      = 8
	// historyAge dates the seeded history beyond the 30-day archive window.
	historyAge = 40 * 24 * time.Hour
	// seedChunk is the tasks created per seeding transaction.
	seedChunk = 10_000
	// soakChunk is the tasks the soak creates per request, and the most it
	// keeps unfinished at once.
	soakChunk = 500
	pollEvery = 100 * time.Millisecond
)

type options struct {
	mode                       string
	events, completions, batch int
	tasks, agents              int
	window, sample, tail       time.Duration
	pruneBatch                 int
	rate, duty                 float64
	dir, bin, history          string
	keep                       bool
}

func main() {
	var o options
	flag.StringVar(&o.mode, "mode", "prune", "prune (store, in-process) or soak (the daemon binary)")
	flag.IntVar(&o.events, "events", defaultEvents, "prune: task events of the seeded history")
	flag.IntVar(&o.completions, "completions", defaultCompletions, "prune: completions measured without the pruner (with it: until it is done, at least as many)")
	flag.IntVar(&o.batch, "batch", defaultBatch, "prune: the pruner's batch (tasks per archive transaction)")
	flag.Float64Var(&o.duty, "duty", retention.DefaultDuty, "prune: the pruner's duty (the share of the time it may hold the writer)")
	flag.IntVar(&o.tasks, "tasks", defaultTasks, "soak: tasks run through the daemon")
	flag.IntVar(&o.agents, "agents", defaultAgents, "soak: instant command agents")
	flag.DurationVar(&o.window, "window", defaultWindow, "soak: every retention window")
	flag.DurationVar(&o.sample, "sample", defaultSample, "soak: time between size samples")
	flag.DurationVar(&o.tail, "tail", 0, "soak: keep sampling this long once every task is done")
	flag.Float64Var(&o.rate, "rate", 0, "soak: create at most this many tasks a second (0: keep the agents busy)")
	flag.IntVar(&o.pruneBatch, "prune-batch", 0, "soak: the daemon's retention.batch (0: its default)")
	flag.StringVar(&o.history, "history", "", "prune: start from a copy of this seeded database (seeded there first when missing)")
	flag.StringVar(&o.dir, "dir", "", "working directory (default: a new temporary one, removed at the end)")
	flag.StringVar(&o.bin, "bin", "", "soak: agentqueued binary (default: build ./cmd/agentqueued)")
	flag.BoolVar(&o.keep, "keep", false, "keep the working directory")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the run to `file`")
	flag.Parse()
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	log.SetFlags(0)
	if o.dir == "" {
		d, err := os.MkdirTemp("", "aq-retentionbench")
		if err != nil {
			log.Fatal(err)
		}
		o.dir = d
	} else if err := os.MkdirAll(o.dir, 0o700); err != nil {
		log.Fatal(err)
	}
	if !o.keep {
		defer os.RemoveAll(o.dir)
	}
	var err error
	switch o.mode {
	case "prune":
		err = prune(context.Background(), o)
	case "soak":
		err = soak(context.Background(), o)
	default:
		err = fmt.Errorf("-mode: %q is neither prune nor soak", o.mode)
	}
	if err != nil {
		log.Printf("retentionbench: %v", err)
		if !o.keep {
			os.RemoveAll(o.dir)
		}
		os.Exit(1)
	}
}

// prune is -mode prune.
func prune(ctx context.Context, o options) error {
	path := filepath.Join(o.dir, "aq.db")
	begin := time.Now()
	if err := history(ctx, o, path); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	st, err := store.Open(ctx, store.Config{Path: path})
	if err != nil {
		return err
	}
	defer st.Close()
	perTask, err := eventsOf(ctx, st)
	if err != nil {
		return err
	}
	stats, err := st.Stats(ctx)
	if err != nil || len(stats.Projects) != 1 {
		return fmt.Errorf("the seeded history: %v", err)
	}
	tasks := stats.Projects[0].ByStatus[models.StatusCompleted]
	benchdaemon.Report(34, "seeded", fmt.Sprintf("%d finished tasks, %d events, %s in %s", tasks, tasks*perTask, size(path),
		time.Since(begin).Round(time.Second)))
	if _, err := st.RegisterAgent(ctx, models.Agent{ID: "a1", AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "/bin/true"}}); err != nil {
		return err
	}

	alone, err := completions(ctx, st, o.completions, nil)
	if err != nil {
		return err
	}
	benchdaemon.Report(34, "completion, pruner idle", summary(alone))

	timed := &timedStore{Store: st}
	p := retention.New(retention.Config{Store: timed, ArchiveTasks: 30 * 24 * time.Hour, Batch: o.batch, Duty: o.duty})
	var (
		done   atomic.Bool
		rep    retention.Report
		perr   error
		took   time.Duration
		wg     sync.WaitGroup
		pBegin = time.Now()
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		rep, perr = p.Pass(ctx)
		took = time.Since(pBegin)
		done.Store(true)
	}()
	during, err := completions(ctx, st, o.completions, &done)
	wg.Wait()
	if err != nil {
		return err
	}
	if perr != nil {
		return perr
	}
	benchdaemon.Report(34, "completion, pruner archiving", summary(during))
	after, err := completions(ctx, st, o.completions, nil)
	if err != nil {
		return err
	}
	benchdaemon.Report(34, "completion, pruner idle again", summary(after))
	idle := append(slices.Clone(alone), after...)
	benchdaemon.Report(34, "completion, pruner idle (both)", summary(idle))
	benchdaemon.Report(34, "archiving against idle (both)", ratios(during, idle))
	batches, calls := timed.durations()
	benchdaemon.Report(34, "pruner", fmt.Sprintf("archived %d tasks (%d events) in %s, %d batches of %d, duty %.2f", rep.Archived,
		rep.Archived*perTask, took.Round(time.Second), len(batches), o.batch, o.duty))
	benchdaemon.Report(34, "pruner write, writer held", summary(batches))
	benchdaemon.Report(34, "pruner write, with the wait", summary(calls))
	benchdaemon.Report(34, "database after", size(path)+" (SQLite reuses the freed pages; the file does not shrink)")
	return nil
}

// seededResult is the result each task of the seeded history ends with.
var seededResult = &models.Completion{Summary: "did what the task asked", FilesChanged: []string{"main.go", "main_test.go"}}

// history puts the seeded history at path: a copy of -history when that
// file exists, else a new one (kept as -history when that is set).
func history(ctx context.Context, o options, path string) error {
	if o.history == "" {
		_, err := seed(ctx, path, o.events)
		return err
	}
	if _, err := os.Stat(o.history); errors.Is(err, os.ErrNotExist) {
		if _, err := seed(ctx, o.history, o.events); err != nil {
			return err
		}
	}
	return copyFile(o.history, path)
}

// seed creates a history of about events task events: tasks that ran and
// completed as the daemon completes them (created, claimed, started,
// finished with a result, verified — about five events, a run and a result
// each), all dated historyAge ago, plus one bookkeeping task holding the
// seeding agent's place. The seeding works on a copy of the database in
// memory when /dev/shm is there (its commits cost no fsync) and then moves
// the file to path. It returns the tasks created.
func seed(ctx context.Context, path string, events int) (int, error) {
	work := path
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "aq-retentionbench-seed")
		if err != nil {
			return 0, err
		}
		defer os.RemoveAll(d)
		work = filepath.Join(d, "aq.db")
	}
	clk := clocktest.NewFollowing()
	clk.Advance(-historyAge)
	st, err := store.Open(ctx, store.Config{Path: work, Clock: clk})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	if _, err := st.CreateProject(ctx, models.Project{ID: "p"}); err != nil {
		return 0, err
	}
	if _, err := st.RegisterAgent(ctx, models.Agent{ID: "seeder", AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "/bin/true"}}); err != nil {
		return 0, err
	}
	perTask, tasks := 0, 0
	for made := 0; made < events; {
		chunk := 1 // the first task says how many events a task makes
		if perTask > 0 {
			chunk = max(1, min(seedChunk, (events-made+perTask-1)/perTask))
		}
		batch := models.TaskBatch{ProjectID: "p", Tasks: make([]models.BatchTask, chunk)}
		for i := range batch.Tasks {
			batch.Tasks[i] = models.BatchTask{Title: fmt.Sprintf("history %d", tasks+i),
				Description: "a finished task of the seeded history, with a description of a realistic length for the rows read"}
		}
		res, err := st.CreateTasks(ctx, batch)
		if err != nil {
			return tasks, err
		}
		for _, r := range res {
			if _, err := complete(ctx, st, r.TaskID, "seeder", seededResult); err != nil {
				return tasks, err
			}
		}
		if perTask == 0 {
			d, err := st.GetTaskDetail(ctx, res[0].TaskID)
			if err != nil {
				return tasks, err
			}
			perTask = len(d.Events)
		}
		made += chunk * perTask
		tasks += chunk
	}
	if err := st.Close(); err != nil {
		return tasks, err
	}
	if work != path {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if err := moveFile(work+suffix, path+suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
				return tasks, err
			}
		}
	}
	return tasks, nil
}

// complete takes task id from READY to COMPLETED the daemon's way: the
// agent claims it, its run starts and ends (with result, when set; the
// task goes to VERIFYING), and its verification passes. It returns how
// long the completion took: the run's end and VERIFY_PASSED, two commits.
func complete(ctx context.Context, st *store.Store, id, agent string, result *models.Completion) (time.Duration, error) {
	run, _, err := st.ClaimTask(ctx, id, agent)
	if err != nil {
		return 0, err
	}
	if _, err := st.StartRun(ctx, run.ID, 1, ""); err != nil {
		return 0, err
	}
	t0 := time.Now()
	if _, err := st.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentCompleted, Outcome: "completed",
		Result: result}); err != nil {
		return 0, err
	}
	if _, err := st.ApplyEvent(ctx, models.TransitionRequest{TaskID: id, Event: models.EventVerifyPassed, Actor: "bench"}); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// moveFile moves a file across file systems (os.Rename cannot).
func moveFile(from, to string) error {
	if err := copyFile(from, to); err != nil {
		return err
	}
	return os.Remove(from)
}

// copyFile copies a file and syncs the copy.
func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// eventsOf returns the events of the first archivable task of the history.
func eventsOf(ctx context.Context, st *store.Store) (int, error) {
	ts, err := st.ListTasks(ctx, models.TaskFilter{ProjectID: "p", Limit: 2})
	if err != nil || len(ts) < 2 {
		return 0, fmt.Errorf("the seeded history: %v", err)
	}
	d, err := st.GetTaskDetail(ctx, ts[1].ID)
	if err != nil {
		return 0, err
	}
	return len(d.Events), nil
}

// completions completes tasks one after another, at least n, and until
// until (when set) is true, returning how long each completion took: its
// run's end (RUN_SUCCEEDED → VERIFYING) and VERIFY_PASSED, two commits.
func completions(ctx context.Context, st *store.Store, n int, until *atomic.Bool) ([]time.Duration, error) {
	var out []time.Duration
	for i := 0; i < n || (until != nil && !until.Load()); i++ {
		res, err := st.CreateTasks(ctx, models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{{Title: fmt.Sprintf("work %d", i)}}})
		if err != nil {
			return nil, err
		}
		took, err := complete(ctx, st, res[0].TaskID, "a1", nil)
		if err != nil {
			return nil, err
		}
		out = append(out, took)
	}
	return out, nil
}

// timedStore keeps the time each WriteArchiveBatch call held the writer,
// and how long the call took (waiting for the writer included).
type timedStore struct {
	*store.Store
	mu          sync.Mutex
	held, calls []time.Duration
}

func (t *timedStore) WriteArchiveBatch(ctx context.Context, b store.ArchiveBatch) ([]string, time.Duration, error) {
	t0 := time.Now()
	ids, held, err := t.Store.WriteArchiveBatch(ctx, b)
	d := time.Since(t0)
	t.mu.Lock()
	t.held = append(t.held, held)
	t.calls = append(t.calls, d)
	t.mu.Unlock()
	return ids, held, err
}

func (t *timedStore) durations() (held, calls []time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.held), slices.Clone(t.calls)
}

func summary(d []time.Duration) string {
	if len(d) == 0 {
		return "none"
	}
	q := quantiles(d)
	return fmt.Sprintf("p50 %.2f ms, mean %.2f ms, p99 %.2f ms, max %.2f ms over %d", q[0], q[1], q[2],
		ms(slices.Max(d)), len(d))
}

// ratios compares the p50, mean and p99 of d with those of base.
func ratios(d, base []time.Duration) string {
	a, b := quantiles(d), quantiles(base)
	return fmt.Sprintf("p50 %+.0f %%, mean %+.0f %%, p99 %+.0f %%", 100*(a[0]/b[0]-1), 100*(a[1]/b[1]-1), 100*(a[2]/b[2]-1))
}

// quantiles returns the p50, mean and p99 of d in milliseconds.
func quantiles(d []time.Duration) [3]float64 {
	if len(d) == 0 {
		return [3]float64{}
	}
	s := slices.Sorted(slices.Values(d))
	var sum time.Duration
	for _, x := range s {
		sum += x
	}
	pct := func(q float64) time.Duration { return s[min(int(q*float64(len(s))), len(s)-1)] }
	return [3]float64{ms(pct(0.5)), ms(sum / time.Duration(len(s))), ms(pct(0.99))}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// size is the database file's size with its WAL.
func size(path string) string {
	return fmt.Sprintf("%.1f MiB", float64(bytesOf(path))/(1<<20))
}

func bytesOf(path string) int64 {
	var n int64
	for _, f := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(f); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// soak is -mode soak.
func soak(ctx context.Context, o options) error {
	bin, err := benchdaemon.Build(o.bin, o.dir)
	if err != nil {
		return err
	}
	o.bin = bin
	dbPath := filepath.Join(o.dir, "aq.db")
	d, err := startDaemon(o, dbPath)
	if err != nil {
		return err
	}
	defer d.Stop()
	client, err := api.NewClient("http://"+d.Addr, "", nil)
	if err != nil {
		return err
	}
	if _, err := client.CreateProject(ctx, models.Project{ID: "p", MaxConcurrentAgents: o.agents}); err != nil {
		return err
	}
	begin := time.Now()
	nextSample := begin
	created, last, moved := 0, -1, time.Now()
	var finished time.Time
	fmt.Printf("%-10s %-10s %-12s %-10s\n", "ELAPSED", "TASKS", "DB+WAL MiB", "ARCHIVED")
	for {
		page, err := client.ListTasksPage(ctx, models.TaskFilter{ProjectID: "p", Statuses: unfinished, Limit: soakChunk})
		if err != nil {
			return err
		}
		open := len(page.Tasks)
		allowed := o.tasks
		if o.rate > 0 {
			allowed = min(o.tasks, int(o.rate*time.Since(begin).Seconds()))
		}
		if open < soakChunk/2 && created < allowed {
			n := min(soakChunk, allowed-created)
			batch := models.TaskBatch{ProjectID: "p", Tasks: make([]models.BatchTask, n)}
			for i := range batch.Tasks {
				batch.Tasks[i] = models.BatchTask{Title: fmt.Sprintf("soak %d", created+i)}
			}
			if _, err := client.CreateTasks(ctx, batch); err != nil {
				return err
			}
			created, open = created+n, open+n
		}
		done := created - open
		if done != last || !finished.IsZero() {
			last, moved = done, time.Now()
		} else if time.Since(moved) > progresstest.Stall() {
			return fmt.Errorf("no progress for %s: %d of %d done", progresstest.Stall(), done, created)
		}
		if now := time.Now(); !now.Before(nextSample) || (open == 0 && created >= o.tasks && finished.IsZero()) {
			st, err := client.Stats(ctx)
			if err != nil {
				return err
			}
			archived := 0
			for _, p := range st.Projects {
				archived += p.Archived
			}
			fmt.Printf("%-10s %-10d %-12.1f %-10d\n", now.Sub(begin).Round(time.Second), done,
				float64(bytesOf(dbPath))/(1<<20), archived)
			nextSample = nextSample.Add(o.sample)
			if open == 0 && created >= o.tasks {
				if finished.IsZero() {
					finished = now
				}
				if now.Sub(finished) >= o.tail {
					break
				}
			}
		}
		select {
		case <-d.Exited:
			return fmt.Errorf("the daemon exited: %v", d.Err)
		case <-time.After(pollEvery):
		}
	}
	benchdaemon.Report(34, "soak", fmt.Sprintf("%d tasks in %s, windows %s, final %s", o.tasks, time.Since(begin).Round(time.Second),
		o.window, size(dbPath)))
	return nil
}

var unfinished = []models.TaskStatus{models.StatusDefined, models.StatusReady, models.StatusAssigned, models.StatusInProgress,
	models.StatusVerifying, models.StatusFailed, models.StatusPaused, models.StatusWaitingInput, models.StatusAwaitingApproval}

func startDaemon(o options, dbPath string) (*benchdaemon.Daemon, error) {
	var cfg strings.Builder
	w := o.window.String()
	fmt.Fprintf(&cfg, "log: {level: info}\ndatabase: {path: %q}\n", dbPath)
	fmt.Fprintf(&cfg, "retention: {notices: %s, run_logs: %s, hook_runs: %s, workflow_runs: %s, archive_tasks: %s, archived: %s, interval: %s",
		w, w, w, w, w, w, max(o.window/4, time.Second))
	if o.pruneBatch > 0 {
		fmt.Fprintf(&cfg, ", batch: %d", o.pruneBatch)
	}
	fmt.Fprintf(&cfg, "}\n")
	fmt.Fprintf(&cfg, "agents:\n")
	for i := range o.agents {
		fmt.Fprintf(&cfg, "  - {name: a%d, type: command, command: /bin/true}\n", i)
	}
	return benchdaemon.Start(o.bin, o.dir, cfg.String())
}
