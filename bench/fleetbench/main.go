// Command fleetbench measures the agentqueued daemon with a fleet of
// simulated runners: it builds the real binary, starts it with its
// embedded SQLite in a temporary data directory and no agents of its own,
// registers runners through the API (what `ctl runner add` does) and runs
// them in this process over loopback. Each simulated runner speaks the
// runner protocol through the real internal/api Client, as
// internal/runner does: a hello with its agents, one long poll always
// outstanding, and for each run a heartbeat, a prepared report (a
// directory: the projects have no repository, so no git), the launch, a
// started report, the agent's output and an ended report with exit code 0.
// Each runner dials from its own address (127.0.0.2 … 127.0.0.254 in
// turn), or all from 127.0.0.1 with -one-source (runners behind one NAT).
//
// It measures, one line each with the machine's load average:
//
//   - idle: -idle-runners runners connected and doing nothing but their
//     long polls; the daemon's CPU over -idle as a share of one core, and
//     its RSS growth per idle runner (from before they were registered to
//     -settle after the last one connected);
//   - throughput: -runners runners of -agents agents each and -tasks
//     independent trivial tasks created at once; assignments per second
//     (from the batch's creation to the last assignment read from a
//     poll) and the daemon's CPU time per remote task;
//   - latency: -pairs upstream → dependent pairs one after another, the
//     upstream in a project whose tasks go to runners labelled "up", the
//     dependent in one whose tasks go to runners labelled "down" (every
//     other runner; settings.runner_labels), so that the dependent is
//     offered to another runner; from the moment the upstream's ended
//     report is sent until the dependent's assignment is read from the
//     other runner's poll, p50 and p99;
//   - waste, for each of those phases: polls per assignment, polls that
//     offered only runs the runner had already taken, polls answered with
//     nothing new, and answers 429 (each waited out, its Retry-After, and
//     the request made again).
//
// Every task must end COMPLETED after exactly one run. It checks nothing
// about speed: it fails only when the work stops making progress (the
// stall limit of internal/progresstest), on an error answer, or on a task
// that did not complete once.
//
//	go run ./bench/fleetbench -runners 200 -tasks 800 -pairs 100 -idle-runners 1000
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/agentqueued/agentqueued/bench/benchdaemon"
	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
)

// Defaults of the flags.
const (
	defaultRunners     = 50
	defaultAgents      = 4
	defaultTasks       = 400
	defaultPairs       = 50
	defaultIdleRunners = 200
	defaultIdle        = 10 * time.Second
	defaultSettle      = 2 * time.Second
	// project is the throughput's project, upProject and downProject the
	// latency's; none has a repository.
	project     = "fleet"
	upProject   = "lat-up"
	downProject = "lat-down"
	// pollEvery is how often the benchmark asks the API whether work is
	// done; each ask costs the daemon a little CPU, counted in its figures.
	pollEvery = 20 * time.Millisecond
	// registerAtOnce is how many runners are registered at a time.
	registerAtOnce = 8
)

type options struct {
	runners, agents, tasks, pairs, idleRunners int
	idle, settle                               time.Duration
	oneSource, keep                            bool
	bin, dir                                   string
}

func main() {
	var o options
	flag.IntVar(&o.runners, "runners", defaultRunners, "runners for the throughput and the latency")
	flag.IntVar(&o.agents, "agents", defaultAgents, "agents of each runner")
	flag.IntVar(&o.tasks, "tasks", defaultTasks, "independent trivial tasks for the throughput")
	flag.IntVar(&o.pairs, "pairs", defaultPairs, "upstream → dependent pairs for the latency")
	flag.IntVar(&o.idleRunners, "idle-runners", defaultIdleRunners, "connected idle runners for the idle CPU and RSS")
	flag.DurationVar(&o.idle, "idle", defaultIdle, "interval over which the idle CPU is read")
	flag.DurationVar(&o.settle, "settle", defaultSettle, "quiet time before the idle figures are read")
	flag.BoolVar(&o.oneSource, "one-source", false, "dial every runner from 127.0.0.1 (runners behind one NAT)")
	flag.StringVar(&o.bin, "bin", "", "agentqueued binary to run (default: build ./cmd/agentqueued)")
	flag.StringVar(&o.dir, "dir", "", "working directory (default: a new temporary one, removed at the end)")
	flag.BoolVar(&o.keep, "keep", false, "keep the working directory")
	flag.Parse()
	log.SetFlags(0)
	if err := check(o); err != nil {
		log.Fatalf("fleetbench: %v", err)
	}
	if err := run(o); err != nil {
		log.Fatalf("fleetbench: %v", err)
	}
}

// check refuses flags the benchmark cannot run with.
func check(o options) error {
	switch {
	case o.runners < 1 || o.agents < 1 || o.agents > models.MaxRunnerAgents:
		return fmt.Errorf("-runners must be at least 1 and -agents from 1 to %d", models.MaxRunnerAgents)
	case o.pairs > 0 && o.runners < 2:
		return fmt.Errorf("-pairs needs at least 2 runners: the dependent goes to another one")
	case o.tasks < 0 || o.pairs < 0 || o.idleRunners < 0:
		return fmt.Errorf("-tasks, -pairs and -idle-runners must not be negative")
	case o.idle <= 0 || o.settle < 0:
		return fmt.Errorf("-idle must be positive and -settle not negative")
	}
	return nil
}

func run(o options) error {
	if o.dir == "" {
		d, err := os.MkdirTemp("", "aq-fleetbench")
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
	began := time.Now()
	// No agents of its own: every run goes to a runner.
	d, err := benchdaemon.Start(o.bin, o.dir, "log: {level: info}\n")
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
	admin, err := api.NewClient("http://"+d.Addr, "", nil)
	if err != nil {
		return err
	}
	if _, err := admin.CreateProject(ctx, models.Project{ID: project,
		MaxConcurrentAgents: min(o.runners*o.agents, 1000)}); err != nil {
		return err
	}
	source := "each runner from its own address"
	if o.oneSource {
		source = "every runner from 127.0.0.1"
	}
	benchdaemon.Report(28, "fleet", fmt.Sprintf("%d runners × %d agents, %d idle runners, %s", o.runners, o.agents, o.idleRunners, source))

	// The latency's upstreams go to runners labelled "up", their
	// dependents to runners labelled "down" (every other runner).
	for _, p := range []models.Project{{ID: upProject, Settings: models.ProjectSettings{RunnerLabels: []string{"up"}}},
		{ID: downProject, Settings: models.ProjectSettings{RunnerLabels: []string{"down"}}}} {
		if _, err := admin.CreateProject(ctx, p); err != nil {
			return err
		}
	}
	f := newFleet("http://"+d.Addr, o.dir, admin, o.oneSource)
	defer f.wait()
	defer f.fail()
	if o.idleRunners > 0 {
		if err := idle(ctx, f, d, o); err != nil {
			return err
		}
	}
	if o.tasks == 0 && o.pairs == 0 {
		return nil
	}

	// The working fleet, connected once for the throughput and the latency.
	before := f.cnt.snapshot()
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	if err := connect(fctx, f, admin, "r", o.runners, o.agents); err != nil {
		return err
	}
	benchdaemon.Report(28, "waste: connect", waste(f.cnt.snapshot().sub(before)))
	if o.tasks > 0 {
		before := f.cnt.snapshot()
		perTask, rate, took, err := throughput(ctx, f, d, admin, o.tasks)
		if err != nil {
			return err
		}
		benchdaemon.Report(28, "throughput", fmt.Sprintf("%.1f assignments/s (%d tasks on %d runners × %d agents; all completed in %s)",
			rate, o.tasks, o.runners, o.agents, took.Round(time.Millisecond)))
		benchdaemon.Report(28, "daemon CPU per remote task", fmt.Sprintf("%.2f ms over %d tasks", benchdaemon.Millis(perTask), o.tasks))
		benchdaemon.Report(28, "waste: throughput", waste(f.cnt.snapshot().sub(before)))
	}
	if o.pairs > 0 {
		before := f.cnt.snapshot()
		lat, err := latency(ctx, f, d, admin, o.pairs)
		if err != nil {
			return err
		}
		benchdaemon.Report(28, "ended → dependent offered", fmt.Sprintf("p50 %.1f ms, p99 %.1f ms, max %.1f ms over %d pairs",
			benchdaemon.Millis(benchdaemon.Percentile(lat, 0.50)), benchdaemon.Millis(benchdaemon.Percentile(lat, 0.99)), benchdaemon.Millis(slices.Max(lat)), len(lat)))
		benchdaemon.Report(28, "waste: latency", waste(f.cnt.snapshot().sub(before)))
	}
	stop()
	f.wait()
	return f.failure()
}

// waste describes a phase's requests: polls per assignment, and the polls
// and answers that brought nothing.
func waste(t tally) string {
	per := "no assignment"
	if t.assigned > 0 {
		per = fmt.Sprintf("%.2f polls/assignment", float64(t.polls)/float64(t.assigned))
	}
	return fmt.Sprintf("%s (%d polls, %d assignments; %d offering only runs already taken, %d without news); "+
		"%d answers 429; %d requests (%d hellos, %d heartbeats, %d reports, %d log chunks)",
		per, t.polls, t.assigned, t.pollsAgain, t.pollsEmpty, t.tooMany, t.requests, t.hellos, t.heartbeats, t.reports, t.logs)
}

// connect registers n runners named prefix-NNNN through the API and
// starts them, all at once; it returns once every one said hello and sent
// its first poll.
func connect(ctx context.Context, f *fleet, admin *api.Client, prefix string, n, agents int) error {
	tokens, err := register(ctx, admin, prefix, n)
	if err != nil {
		return err
	}
	f.mu.Lock()
	want := f.ready + n
	f.mu.Unlock()
	for i, tok := range tokens {
		if err := f.start(ctx, i, runnerName(prefix, i), tok, agents); err != nil {
			return err
		}
	}
	return f.await(progresstest.Stall(), fmt.Sprintf("%d runners to connect", n), func() bool { return f.ready >= want })
}

func runnerName(prefix string, i int) string { return fmt.Sprintf("%s-%04d", prefix, i) }

// register adds n runners through the API (POST /api/v1/runners, as `ctl
// runner add` does), labelled "up" and "down" in turn, and returns their
// tokens.
func register(ctx context.Context, admin *api.Client, prefix string, n int) ([]string, error) {
	tokens := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, registerAtOnce)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			labels := []string{"up"}
			if i%2 == 1 {
				labels = []string{"down"}
			}
			_, tokens[i], errs[i] = admin.AddRunner(ctx, runnerName(prefix, i), labels, 0)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("add a runner: %w", err)
		}
	}
	return tokens, nil
}

// idle connects the idle runners, reads the daemon's CPU and RSS with
// them, then stops and removes them.
func idle(ctx context.Context, f *fleet, d *benchdaemon.Daemon, o options) error {
	time.Sleep(o.settle) // measuring, not synchronising: the start's work must not count
	rss0 := d.RSS()
	before := f.cnt.snapshot()
	ictx, stop := context.WithCancel(ctx)
	defer stop()
	if err := connect(ictx, f, f.admin, "idle", o.idleRunners, o.agents); err != nil {
		return err
	}
	connected := f.cnt.snapshot()
	benchdaemon.Report(28, "waste: idle connect", waste(connected.sub(before)))
	time.Sleep(o.settle) // measuring: the connections' work must not count
	rss1 := d.RSS()
	cpu0 := d.CPU()
	mid := f.cnt.snapshot()
	time.Sleep(o.idle)
	used := d.CPU() - cpu0
	after := f.cnt.snapshot()
	if err := f.failure(); err != nil {
		return err
	}
	benchdaemon.Report(28, "idle CPU", fmt.Sprintf("%.2f %% of a core over %s with %d runners connected",
		100*used.Seconds()/o.idle.Seconds(), o.idle, o.idleRunners))
	benchdaemon.Report(28, "idle RSS per runner", fmt.Sprintf("%.1f KiB (RSS %.1f → %.1f MiB with %d runners)",
		float64(rss1-rss0)/1024/float64(o.idleRunners), float64(rss0)/(1<<20), float64(rss1)/(1<<20), o.idleRunners))
	benchdaemon.Report(28, "waste: idle", waste(after.sub(mid)))

	// Stop them, then remove them: the throughput's scheduling rounds see
	// only the working fleet.
	stop()
	f.wait()
	if err := f.failure(); err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, o.idleRunners)
	sem := make(chan struct{}, registerAtOnce)
	for i := range o.idleRunners {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = f.admin.RemoveRunner(ctx, runnerName("idle", i))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("remove an idle runner: %w", err)
		}
	}
	return nil
}

// throughput creates n independent tasks at once and returns the daemon's
// CPU time per task, the assignments per second and the time until all
// completed.
func throughput(ctx context.Context, f *fleet, d *benchdaemon.Daemon, admin *api.Client, n int) (time.Duration, float64, time.Duration, error) {
	batch := models.TaskBatch{ProjectID: project, Tasks: make([]models.BatchTask, n)}
	for i := range batch.Tasks {
		batch.Tasks[i] = models.BatchTask{Title: fmt.Sprintf("trivial %d", i)}
	}
	cpu0 := d.CPU()
	begin := time.Now()
	res, err := admin.CreateTasks(ctx, batch)
	if err != nil {
		return 0, 0, 0, err
	}
	ids := make([]string, len(res))
	for i, r := range res {
		ids[i] = r.TaskID
	}
	if err := allEnded(f, ids); err != nil {
		return 0, 0, 0, err
	}
	if err := waitIdle(ctx, admin, d, project); err != nil {
		return 0, 0, 0, err
	}
	took := time.Since(begin)
	used := d.CPU() - cpu0
	var last time.Time
	f.mu.Lock()
	for _, id := range ids {
		if t := f.tasks[id].assignedAt; t.After(last) {
			last = t
		}
	}
	f.mu.Unlock()
	if err := completedOnce(ctx, f, admin, ids); err != nil {
		return 0, 0, 0, err
	}
	return used / time.Duration(n), float64(n) / last.Sub(begin).Seconds(), took, nil
}

// allEnded waits until the fleet has had each of ids' ended report
// accepted, as long as some task keeps ending within the stall limit.
func allEnded(f *fleet, ids []string) error {
	for {
		done := 0
		err := f.await(progresstest.Stall(), fmt.Sprintf("%d tasks to end", len(ids)), func() bool {
			n := 0
			for _, id := range ids {
				if ts := f.tasks[id]; ts != nil && ts.ends > 0 {
					n++
				}
			}
			if n == done {
				return false
			}
			done = n
			return true
		})
		if err != nil {
			return fmt.Errorf("%w (%d of %d ended)", err, done, len(ids))
		}
		if done == len(ids) {
			return nil
		}
	}
}

// completedOnce checks through the API that each of ids is COMPLETED after
// exactly one run, and that the fleet took each once and reported its end
// once.
func completedOnce(ctx context.Context, f *fleet, admin *api.Client, ids []string) error {
	for _, id := range ids {
		det, err := admin.GetTask(ctx, id)
		if err != nil {
			return err
		}
		f.mu.Lock()
		ts := f.tasks[id]
		runs, ends := len(ts.runs), ts.ends
		f.mu.Unlock()
		if det.Task.Status != models.StatusCompleted || len(det.Runs) != 1 || runs != 1 || ends != 1 {
			return fmt.Errorf("task %s is %s (%q) after %d runs (the fleet took %d and ended %d): each must complete once",
				id, det.Task.Status, det.Task.StatusReason, len(det.Runs), runs, ends)
		}
	}
	return nil
}

// latency runs pairs one after another: the upstream in a project whose
// tasks go to runners labelled "up", its dependent in one whose tasks go
// to runners labelled "down", so the dependent is offered to another
// runner. The upstream's runner holds its end until the dependent exists.
// Each latency is from the upstream's ended report to the dependent's
// assignment read from a poll.
func latency(ctx context.Context, f *fleet, d *benchdaemon.Daemon, admin *api.Client, pairs int) ([]time.Duration, error) {
	var out []time.Duration
	for i := range pairs {
		title := fmt.Sprintf("upstream %d", i)
		gate := make(chan struct{})
		f.mu.Lock()
		f.gates[title] = gate
		f.mu.Unlock()
		res, err := admin.CreateTasks(ctx, models.TaskBatch{ProjectID: upProject, Tasks: []models.BatchTask{{Title: title}}})
		if err != nil {
			return nil, err
		}
		up := res[0].TaskID
		res, err = admin.CreateTasks(ctx, models.TaskBatch{ProjectID: downProject, Tasks: []models.BatchTask{
			{Title: fmt.Sprintf("dependent %d", i), Dependencies: []models.BatchDependency{{ID: up}}}}})
		if err != nil {
			return nil, err
		}
		down := res[0].TaskID
		close(gate)
		if err := allEnded(f, []string{up, down}); err != nil {
			return nil, err
		}
		for _, p := range []string{upProject, downProject} {
			if err := waitIdle(ctx, admin, d, p); err != nil {
				return nil, err
			}
		}
		if err := completedOnce(ctx, f, admin, []string{up, down}); err != nil {
			return nil, err
		}
		f.mu.Lock()
		u, w := f.tasks[up], f.tasks[down]
		f.mu.Unlock()
		if u.runner == w.runner {
			return nil, fmt.Errorf("pair %d: the dependent ran on the upstream's runner %s", i, u.runner)
		}
		out = append(out, w.assignedAt.Sub(u.endSentAt))
	}
	return out, nil
}

var unfinished = []models.TaskStatus{models.StatusDefined, models.StatusReady, models.StatusAssigned, models.StatusInProgress,
	models.StatusVerifying, models.StatusFailed, models.StatusPaused, models.StatusWaitingInput, models.StatusAwaitingApproval}

// waitIdle waits until no task of project is unfinished, as long as
// the number of unfinished tasks keeps changing within the stall limit.
func waitIdle(ctx context.Context, c *api.Client, d *benchdaemon.Daemon, project string) error {
	last, moved := -1, time.Now()
	for {
		page, err := c.ListTasksPage(ctx, models.TaskFilter{ProjectID: project, Statuses: unfinished, Limit: 500})
		if err != nil {
			return err
		}
		n := len(page.Tasks)
		if n == 0 {
			return nil
		}
		if n != last {
			last, moved = n, time.Now()
		} else if time.Since(moved) > progresstest.Stall() {
			return fmt.Errorf("no progress for %s: %d tasks unfinished", progresstest.Stall(), n)
		}
		select {
		case <-d.Exited:
			return fmt.Errorf("the daemon exited: %v", d.Err)
		case <-time.After(pollEvery):
		}
	}
}
