// Command daemonbench measures the agentqueued daemon through its real
// binary: it builds the binary, seeds a database with a history of finished
// tasks (90% COMPLETED, 10% BLOCKED, by legal events only), starts the
// daemon with instant command agents and measures, through the API and the
// times the daemon records:
//
//   - latency: an upstream task's completion (its VERIFY_PASSED event) until
//     its dependent's agent process has started (its AGENT_STARTED event,
//     recorded once the process runs; the projects have no repository, so
//     workspace preparation is a directory), p50 and p99 over pairs run one
//     after another;
//   - idle CPU: the daemon's CPU time over a quiet interval, as a share of
//     one core;
//   - CPU per task and throughput: a batch of independent trivial tasks run
//     by the agents at once; the daemon's CPU time per task and the tasks
//     completed per second (from the batch's creation until the last
//     completion the daemon recorded).
//
// It prints one line per measure with the machine's load average. It checks
// nothing about speed: it fails only when the daemon stops making progress
// (the stall limit of internal/progresstest) or answers with an error.
//
//	go run ./bench/daemonbench -history 100000 -inside
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/bench/benchdaemon"
	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/store"
)

// Defaults of the flags.
const (
	defaultHistory = 1_000
	defaultPairs   = 100
	defaultTasks   = 400
	defaultAgents  = 8
	defaultIdle    = 10 * time.Second
	// historyAge is how old history outside the window is: the default
	// window is a day.
	historyAge = 48 * time.Hour
	// pollEvery is how often the benchmark asks the API whether work is
	// done (one task at most); each ask costs the daemon a little CPU,
	// counted in its figures. Every countEvery-th ask counts the unfinished
	// tasks (up to 500), to see that they keep changing.
	pollEvery  = 20 * time.Millisecond
	countEvery = 50
)

type options struct {
	history, pairs, tasks, agents int
	inside, keep                  bool
	idle                          time.Duration
	bin, dir, from, save          string
}

func main() {
	var o options
	flag.IntVar(&o.history, "history", defaultHistory, "finished tasks seeded before the daemon starts")
	flag.BoolVar(&o.inside, "inside", false, "date the history inside the scheduling window (now) instead of two days ago")
	flag.IntVar(&o.pairs, "pairs", defaultPairs, "upstream → dependent pairs for the latency")
	flag.IntVar(&o.tasks, "tasks", defaultTasks, "independent trivial tasks for CPU per task and throughput")
	flag.IntVar(&o.agents, "agents", defaultAgents, "instant command agents")
	flag.DurationVar(&o.idle, "idle", defaultIdle, "quiet interval for the idle CPU")
	flag.StringVar(&o.bin, "bin", "", "agentqueued binary to run (default: build ./cmd/agentqueued)")
	flag.StringVar(&o.dir, "dir", "", "working directory (default: a new temporary one, removed at the end)")
	flag.BoolVar(&o.keep, "keep", false, "keep the working directory")
	flag.StringVar(&o.from, "from", "", "start from a copy of this seeded database instead of seeding")
	flag.StringVar(&o.save, "save", "", "save a copy of the seeded database here")
	flag.Parse()
	log.SetFlags(0)
	if err := run(o); err != nil {
		log.Fatalf("daemonbench: %v", err)
	}
}

func run(o options) error {
	if o.dir == "" {
		d, err := os.MkdirTemp("", "aq-daemonbench")
		if err != nil {
			return err
		}
		o.dir = d
	}
	if !o.keep {
		defer os.RemoveAll(o.dir)
	}
	ctx := context.Background()
	bin, err := benchdaemon.Build(o.bin, o.dir)
	if err != nil {
		return err
	}
	o.bin = bin
	dbPath := filepath.Join(o.dir, "aq.db")
	start := time.Now()
	if o.from != "" {
		if err := copyFile(o.from, dbPath); err != nil {
			return err
		}
		benchdaemon.Report(28, "seeded", "copied from "+o.from)
	} else {
		if err := seed(ctx, dbPath, o); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
		where := "outside"
		if o.inside {
			where = "inside"
		}
		benchdaemon.Report(28, "seeded", fmt.Sprintf("%d finished tasks %s the window in %s", o.history, where, time.Since(start).Round(time.Second)))
	}
	if o.save != "" {
		if err := copyFile(dbPath, o.save); err != nil {
			return err
		}
	}

	began := time.Now()
	d, err := startDaemon(o, dbPath)
	if err != nil {
		return err
	}
	defer d.Stop()
	healthy, err := d.UntilHealthy()
	if err != nil {
		return err
	}
	benchdaemon.Report(28, "start → healthy", fmt.Sprintf("%s (listening after %s)",
		healthy.Sub(began).Round(time.Millisecond), d.Listening.Sub(began).Round(time.Millisecond)))
	client, err := api.NewClient("http://"+d.Addr, "", nil)
	if err != nil {
		return err
	}

	// Idle: let the daemon settle after its start, then read its CPU.
	if err := waitIdle(ctx, client, d); err != nil {
		return err
	}
	time.Sleep(time.Second) // measuring, not synchronising: the start's work must not count
	cpu0 := d.CPU()
	time.Sleep(o.idle)
	idle := d.CPU() - cpu0
	benchdaemon.Report(28, "idle CPU", fmt.Sprintf("%.2f %% of a core over %s", 100*idle.Seconds()/o.idle.Seconds(), o.idle))

	lat, err := latency(ctx, client, d, o.pairs)
	if err != nil {
		return err
	}
	benchdaemon.Report(28, "complete → dependent start", fmt.Sprintf("p50 %.1f ms, p99 %.1f ms, max %.1f ms over %d pairs",
		benchdaemon.Millis(benchdaemon.Percentile(lat, 0.50)), benchdaemon.Millis(benchdaemon.Percentile(lat, 0.99)), benchdaemon.Millis(slices.Max(lat)), len(lat)))

	perTask, rate, err := throughput(ctx, client, d, o.tasks)
	if err != nil {
		return err
	}
	benchdaemon.Report(28, "daemon CPU per task", fmt.Sprintf("%.2f ms over %d tasks", benchdaemon.Millis(perTask), o.tasks))
	benchdaemon.Report(28, "throughput", fmt.Sprintf("%.1f tasks/s with %d agents", rate, o.agents))
	return nil
}

// copyFile copies a closed database file.
func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o600)
}

// seed creates the benchmark's project and its history. History is made
// the fast legal way: a root task is blocked (ASSIGNED, TIMEOUT), a batch
// depending on it is created BLOCKED by the cascade in one transaction, and
// 90% of the batch is skipped to COMPLETED (ADMIN_SKIP, one commit each).
func seed(ctx context.Context, path string, o options) error {
	clk := clocktest.NewFollowing() // the real time, shifted back while history is seeded
	if !o.inside {
		clk.Advance(-historyAge)
	}
	st, err := store.Open(ctx, store.Config{Path: path, Clock: clk})
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.CreateProject(ctx, models.Project{ID: "p", MaxConcurrentAgents: o.agents}); err != nil {
		return err
	}
	for left := o.history; left > 0; {
		chunk := min(left, 10_000)
		left -= chunk
		roots, err := st.CreateTasks(ctx, models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{{Title: "history root"}}})
		if err != nil {
			return err
		}
		root := roots[0].TaskID
		for _, ev := range []models.TransitionRequest{
			{TaskID: root, Event: models.EventAssigned, AgentID: "seeder", ExpectFrom: models.StatusReady},
			{TaskID: root, Event: models.EventTimeout, ExpectFrom: models.StatusAssigned, Reason: "seeded history"},
		} {
			if _, err := st.ApplyEvent(ctx, ev); err != nil {
				return err
			}
		}
		if chunk == 1 {
			continue
		}
		batch := models.TaskBatch{ProjectID: "p", Tasks: make([]models.BatchTask, chunk-1)}
		for i := range batch.Tasks {
			batch.Tasks[i] = models.BatchTask{Title: fmt.Sprintf("history %d", i),
				Description:  "a finished task of the seeded history, with a description of a realistic length for the rows read",
				Dependencies: []models.BatchDependency{{ID: root}}}
		}
		res, err := st.CreateTasks(ctx, batch)
		if err != nil {
			return err
		}
		for _, r := range res[:chunk*9/10] {
			if _, err := st.ApplyEvent(ctx, models.TransitionRequest{TaskID: r.TaskID, Event: models.EventAdminSkip,
				ExpectFrom: models.StatusBlocked, Reason: "seeded history", Actor: "seeder"}); err != nil {
				return err
			}
		}
	}
	return nil
}

func startDaemon(o options, dbPath string) (*benchdaemon.Daemon, error) {
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "log: {level: info}\ndatabase: {path: %q}\nagents:\n", dbPath)
	for i := range o.agents {
		fmt.Fprintf(&cfg, "  - {name: a%d, type: command, command: /bin/true}\n", i)
	}
	return benchdaemon.Start(o.bin, o.dir, cfg.String())
}

var unfinished = []models.TaskStatus{models.StatusDefined, models.StatusReady, models.StatusAssigned, models.StatusInProgress,
	models.StatusVerifying, models.StatusFailed, models.StatusPaused, models.StatusWaitingInput, models.StatusAwaitingApproval}

// waitIdle waits until no task of the project is unfinished, as long as
// the number of unfinished tasks keeps changing within the stall limit.
func waitIdle(ctx context.Context, c *api.Client, d *benchdaemon.Daemon) error {
	last, moved := -1, time.Now()
	for i := 0; ; i++ {
		limit := 1
		if i%countEvery == 0 {
			limit = 500
		}
		page, err := c.ListTasksPage(ctx, models.TaskFilter{ProjectID: "p", Statuses: unfinished, Limit: limit})
		if err != nil {
			return err
		}
		n := len(page.Tasks)
		if n == 0 {
			return nil
		}
		if limit > 1 { // a count, not only whether work is left
			if n != last {
				last, moved = n, time.Now()
			} else if time.Since(moved) > progresstest.Stall() {
				return fmt.Errorf("no progress for %s: %d tasks unfinished", progresstest.Stall(), n)
			}
		}
		select {
		case <-d.Exited:
			return fmt.Errorf("the daemon exited: %v", d.Err)
		case <-time.After(pollEvery):
		}
	}
}

// latency runs pairs one after another and returns, for each, the time
// from the upstream's VERIFY_PASSED to the dependent's AGENT_STARTED.
func latency(ctx context.Context, c *api.Client, d *benchdaemon.Daemon, pairs int) ([]time.Duration, error) {
	var out []time.Duration
	for i := range pairs {
		res, err := c.CreateTasks(ctx, models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{
			{LocalID: "up", Title: fmt.Sprintf("upstream %d", i)},
			{LocalID: "down", Title: fmt.Sprintf("dependent %d", i), Dependencies: []models.BatchDependency{{ID: "up"}}}}})
		if err != nil {
			return nil, err
		}
		if err := waitIdle(ctx, c, d); err != nil {
			return nil, err
		}
		done, err := eventTime(ctx, c, res[0].TaskID, models.EventVerifyPassed)
		if err != nil {
			return nil, err
		}
		started, err := eventTime(ctx, c, res[1].TaskID, models.EventAgentStarted)
		if err != nil {
			return nil, err
		}
		out = append(out, started.Sub(done))
	}
	return out, nil
}

// throughput runs n independent tasks at once and returns the daemon's CPU
// time per task and the tasks completed per second.
func throughput(ctx context.Context, c *api.Client, d *benchdaemon.Daemon, n int) (time.Duration, float64, error) {
	batch := models.TaskBatch{ProjectID: "p", Tasks: make([]models.BatchTask, n)}
	for i := range batch.Tasks {
		batch.Tasks[i] = models.BatchTask{Title: fmt.Sprintf("trivial %d", i)}
	}
	cpu0 := d.CPU()
	begin := time.Now()
	res, err := c.CreateTasks(ctx, batch)
	if err != nil {
		return 0, 0, err
	}
	if err := waitIdle(ctx, c, d); err != nil {
		return 0, 0, err
	}
	used := d.CPU() - cpu0
	var last time.Time
	for _, r := range res {
		t, err := eventTime(ctx, c, r.TaskID, models.EventVerifyPassed)
		if err != nil {
			return 0, 0, err
		}
		if t.After(last) {
			last = t
		}
	}
	return used / time.Duration(n), float64(n) / last.Sub(begin).Seconds(), nil
}

// eventTime returns when task id last had event ev.
func eventTime(ctx context.Context, c *api.Client, id string, ev models.TaskEvent) (time.Time, error) {
	det, err := c.GetTask(ctx, id)
	if err != nil {
		return time.Time{}, err
	}
	for i := len(det.Events) - 1; i >= 0; i-- {
		if det.Events[i].Event == ev {
			return det.Events[i].CreatedAt, nil
		}
	}
	return time.Time{}, fmt.Errorf("task %s (%s %q) has no %s event", id, det.Task.Status, det.Task.StatusReason, ev)
}
