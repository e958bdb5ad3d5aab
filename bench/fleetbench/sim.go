package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// The simulated runners: each speaks to the daemon as internal/runner
// does, through the same api.Client methods and in the same order, but
// runs no agent process. A run goes: the assignment on a poll, a
// heartbeat at once (the real runner wakes its heartbeats when it takes a
// run), a prepared report with the run's directory, the launch in its
// answer, a started report, the agent's one line of output as a log
// chunk, and an ended report with exit code 0.

const (
	// answerMargin is how much longer than the daemon's hold a runner
	// waits for a poll's answer, as internal/runner does.
	answerMargin = 30 * time.Second
	// defaultHeartbeat is how often a runner holding runs renews their
	// leases when the assignment does not say (internal/runner's default).
	defaultHeartbeat = 10 * time.Second
	// agentOutput is what the simulated agent prints: one line, sent to
	// the daemon as the real runner's last flush sends it.
	agentOutput = "done\n"
)

// counters are the fleet's requests and what came of them, summed over
// all its runners.
type counters struct {
	requests   atomic.Int64 // every HTTP request a runner made
	tooMany    atomic.Int64 // answered 429 Too Many Requests
	hellos     atomic.Int64
	polls      atomic.Int64 // poll answers read
	pollsNew   atomic.Int64 // answers with a run the runner did not hold yet
	pollsAgain atomic.Int64 // answers offering only runs the runner already took
	pollsEmpty atomic.Int64 // answers with nothing new at all
	heartbeats atomic.Int64
	reports    atomic.Int64
	logs       atomic.Int64
	assigned   atomic.Int64 // distinct runs taken
}

// tally is a snapshot of counters.
type tally struct {
	requests, tooMany, hellos, polls, pollsNew, pollsAgain, pollsEmpty, heartbeats, reports, logs, assigned int64
}

func (c *counters) snapshot() tally {
	return tally{requests: c.requests.Load(), tooMany: c.tooMany.Load(), hellos: c.hellos.Load(), polls: c.polls.Load(),
		pollsNew: c.pollsNew.Load(), pollsAgain: c.pollsAgain.Load(), pollsEmpty: c.pollsEmpty.Load(),
		heartbeats: c.heartbeats.Load(), reports: c.reports.Load(), logs: c.logs.Load(), assigned: c.assigned.Load()}
}

// sub is what happened between an earlier snapshot and t.
func (t tally) sub(e tally) tally {
	return tally{requests: t.requests - e.requests, tooMany: t.tooMany - e.tooMany, hellos: t.hellos - e.hellos,
		polls: t.polls - e.polls, pollsNew: t.pollsNew - e.pollsNew, pollsAgain: t.pollsAgain - e.pollsAgain,
		pollsEmpty: t.pollsEmpty - e.pollsEmpty, heartbeats: t.heartbeats - e.heartbeats, reports: t.reports - e.reports,
		logs: t.logs - e.logs, assigned: t.assigned - e.assigned}
}

// taskSeen is what the fleet saw of one task.
type taskSeen struct {
	runs       map[int64]string // run id → the runner it was given to
	runner     string           // the runner of the first run
	assignedAt time.Time        // when the first run's poll answer was read
	endSentAt  time.Time        // when its ended report was about to be sent
	ends       int              // ended reports the daemon accepted
}

// fleet is a set of simulated runners and what they saw.
type fleet struct {
	base      string      // the daemon's URL
	dir       string      // where runs' directories are made
	admin     *api.Client // the API, for draining runners
	oneSource bool
	cnt       counters

	mu    sync.Mutex
	tasks map[string]*taskSeen
	// gates hold the end of the tasks of these titles until closed: the
	// latency's upstream ends once its dependent exists.
	gates   map[string]chan struct{}
	changed chan struct{} // closed and replaced at each change of tasks or connections
	ready   int           // runners that said hello and sent their first poll
	err     error         // the first failure
	fail    context.CancelFunc
	ctx     context.Context
	wg      sync.WaitGroup
}

func newFleet(base, dir string, admin *api.Client, oneSource bool) *fleet {
	ctx, cancel := context.WithCancel(context.Background())
	return &fleet{base: base, dir: dir, admin: admin, oneSource: oneSource, tasks: map[string]*taskSeen{},
		gates: map[string]chan struct{}{}, changed: make(chan struct{}), ctx: ctx, fail: cancel}
}

// notifyLocked wakes whoever waits for a change; f.mu is held.
func (f *fleet) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// failed records the first failure and stops every runner.
func (f *fleet) failed(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
		f.notifyLocked()
	}
	f.mu.Unlock()
	f.fail()
}

// failure is the first failure, if any.
func (f *fleet) failure() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// await calls cond under the fleet's lock at each change until it returns
// true, the fleet fails, or nothing changed for stall.
func (f *fleet) await(stall time.Duration, what string, cond func() bool) error {
	for {
		f.mu.Lock()
		ok, err, ch := cond(), f.err, f.changed
		f.mu.Unlock()
		switch {
		case err != nil:
			return err
		case ok:
			return nil
		}
		select {
		case <-ch:
		case <-time.After(stall):
			return fmt.Errorf("no progress for %s waiting for %s", stall, what)
		}
	}
}

// source is the address runner i dials from: 127.0.0.2 … 127.0.0.254 in
// turn, or 127.0.0.1 for all with -one-source.
func (f *fleet) source(i int) net.IP {
	if f.oneSource {
		return net.IPv4(127, 0, 0, 1)
	}
	return net.IPv4(127, 0, 0, byte(2+i%253))
}

// simRunner is one simulated runner.
type simRunner struct {
	f      *fleet
	name   string
	agents int
	api    *api.Client

	mu       sync.Mutex
	held     map[int64]*heldRun // runs taken and not ended
	draining bool
	beat     chan struct{}
}

// heldRun is a run a runner holds.
type heldRun struct {
	every time.Duration // its heartbeat interval
	// ending is set once its ended report is about to be sent: an end the
	// daemon asks for after that is no news (the real runner has let the
	// run go by then).
	ending bool
}

// start runs a runner with token and agents agents, dialling from source
// index i, until ctx ends.
func (f *fleet) start(ctx context.Context, i int, name, token string, agents int) error {
	tr := api.NewTransport(nil)
	tr.DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: f.source(i)}, Timeout: 30 * time.Second,
		KeepAlive: 30 * time.Second}).DialContext
	hc := &http.Client{Transport: &counting{next: tr, cnt: &f.cnt}}
	c, err := api.NewClient(f.base, token, hc)
	if err != nil {
		return err
	}
	r := &simRunner{f: f, name: name, agents: agents, api: c, held: map[int64]*heldRun{}, beat: make(chan struct{}, 1)}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer tr.CloseIdleConnections()
		if err := r.run(ctx); err != nil && ctx.Err() == nil && f.ctx.Err() == nil {
			f.failed(fmt.Errorf("runner %s: %w", name, err))
		}
	}()
	return nil
}

// wait waits for every runner started to have returned.
func (f *fleet) wait() { f.wg.Wait() }

// call makes one request with fn; an answer 429 is waited out (its
// Retry-After) and the request made again, as the brief of a polite
// runner is.
func (r *simRunner) call(ctx context.Context, fn func(ctx context.Context) error) error {
	for {
		var ci callInfo
		err := fn(context.WithValue(ctx, callKey{}, &ci))
		if err == nil || ci.status != http.StatusTooManyRequests {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(ci.retryAfter):
		}
	}
}

// run says hello, then keeps one poll outstanding and renews the leases
// of the runs it holds, until ctx ends or a request fails.
func (r *simRunner) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(r.f.ctx, cancel) // the fleet failed
	defer stop()
	agents := make([]models.RunnerAgent, r.agents)
	for i := range agents {
		agents[i] = models.RunnerAgent{Name: "a" + strconv.Itoa(i), AgentType: "command"}
	}
	var welcome models.RunnerWelcome
	err := r.call(ctx, func(ctx context.Context) error {
		var err error
		welcome, err = r.api.RunnerHello(ctx, models.RunnerHello{Name: r.name, Version: "fleetbench", Agents: agents})
		return err
	})
	if err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	r.f.cnt.hellos.Add(1)
	hold := welcome.PollHold.Std()

	beats := make(chan struct{})
	go func() {
		defer close(beats)
		if err := r.heartbeats(ctx); err != nil && ctx.Err() == nil {
			r.f.failed(fmt.Errorf("runner %s: %w", r.name, err)) // which ends ctx
		}
	}()
	defer func() {
		cancel()
		<-beats
	}()
	var jobs sync.WaitGroup
	defer jobs.Wait()
	first := true
	for {
		if first {
			// The poll is about to be sent: the runner counts as connected.
			r.f.mu.Lock()
			r.f.ready++
			r.f.notifyLocked()
			r.f.mu.Unlock()
			first = false
		}
		var poll models.RunnerPoll
		err := r.call(ctx, func(ctx context.Context) error {
			pctx, pcancel := context.WithTimeout(ctx, hold+answerMargin)
			defer pcancel()
			var err error
			poll, err = r.api.RunnerPoll(pctx)
			return err
		})
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("poll: %w", err)
		}
		if err := r.take(ctx, poll, &jobs); err != nil {
			return err
		}
	}
}

// take counts a poll's answer and starts the runs it offers that the
// runner does not hold yet. The daemon ends no run in this benchmark: an
// end is a failure.
func (r *simRunner) take(ctx context.Context, poll models.RunnerPoll, jobs *sync.WaitGroup) error {
	now := time.Now()
	c := &r.f.cnt
	c.polls.Add(1)
	if err := r.ends(poll.End); err != nil {
		return err
	}
	r.mu.Lock()
	news := poll.Draining != r.draining
	r.draining = poll.Draining
	var taken []models.RunnerAssignment
	for _, asg := range poll.Runs {
		if _, ok := r.held[asg.RunID]; ok {
			continue // offered again: the runner takes each run once
		}
		every := asg.Heartbeat.Std()
		if every <= 0 {
			every = defaultHeartbeat
		}
		r.held[asg.RunID] = &heldRun{every: every}
		taken = append(taken, asg)
	}
	r.mu.Unlock()
	switch {
	case len(taken) > 0:
		c.pollsNew.Add(1)
	case len(poll.Runs) > 0:
		c.pollsAgain.Add(1)
	case !news:
		c.pollsEmpty.Add(1)
	}
	if len(taken) == 0 {
		return nil
	}
	c.assigned.Add(int64(len(taken)))
	r.f.mu.Lock()
	for _, asg := range taken {
		ts := r.f.tasks[asg.Task.ID]
		if ts == nil {
			ts = &taskSeen{runs: map[int64]string{}, runner: r.name, assignedAt: now}
			r.f.tasks[asg.Task.ID] = ts
		}
		ts.runs[asg.RunID] = r.name
	}
	r.f.notifyLocked()
	r.f.mu.Unlock()
	select {
	case r.beat <- struct{}{}: // the new runs' leases are renewed at once
	default:
	}
	for _, asg := range taken {
		jobs.Add(1)
		go func() {
			defer jobs.Done()
			err := r.job(ctx, asg)
			r.mu.Lock()
			delete(r.held, asg.RunID)
			r.mu.Unlock()
			if err != nil && ctx.Err() == nil {
				r.f.failed(fmt.Errorf("runner %s, run %d of task %s: %w", r.name, asg.RunID, asg.Task.ID, err))
			}
		}()
	}
	return nil
}

// ends checks the runs the daemon asks the runner to end. The daemon
// ends no run in this benchmark: an end of a run the runner holds, and
// has not reported ended, is a failure. One it no longer holds, or whose
// end it is reporting, is ignored as internal/runner ignores it (a
// heartbeat sent just before the end names the run).
func (r *simRunner) ends(end []models.RunnerEnd) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range end {
		if h := r.held[e.RunID]; h != nil && !h.ending {
			return fmt.Errorf("the daemon ends run %d: %s", e.RunID, e.Reason)
		}
	}
	return nil
}

// heartbeats renews the leases of the runs the runner holds, at once when
// it takes a run and then at their interval, as internal/runner does: a
// runner holding no run sends none (its polls are its presence).
func (r *simRunner) heartbeats(ctx context.Context) error {
	for {
		r.mu.Lock()
		ids := make([]int64, 0, len(r.held))
		every := defaultHeartbeat
		for id, h := range r.held {
			ids = append(ids, id)
			every = min(every, h.every)
		}
		r.mu.Unlock()
		if len(ids) > 0 {
			var ans models.RunnerHeartbeatAnswer
			err := r.call(ctx, func(ctx context.Context) error {
				var err error
				ans, err = r.api.RunnerHeartbeat(ctx, models.RunnerHeartbeat{Runs: ids})
				return err
			})
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				return fmt.Errorf("heartbeat: %w", err)
			}
			r.f.cnt.heartbeats.Add(1)
			if err := r.ends(ans.End); err != nil {
				return fmt.Errorf("heartbeat: %w", err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.beat:
		case <-time.After(every):
		}
	}
}

// job is one run: prepared (a directory: the projects have no
// repository), started, the agent's output, ended with exit code 0.
func (r *simRunner) job(ctx context.Context, asg models.RunnerAssignment) error {
	var seq int64
	report := func(rep models.RunnerReport) (models.RunnerReportAnswer, error) {
		seq++
		rep.Seq = seq
		var ans models.RunnerReportAnswer
		err := r.call(ctx, func(ctx context.Context) error {
			var err error
			ans, err = r.api.RunnerReport(ctx, asg.RunID, asg.Token, rep)
			return err
		})
		if err == nil {
			r.f.cnt.reports.Add(1)
		}
		return ans, err
	}
	dir := filepath.Join(r.f.dir, "runners", r.name, "work", asg.Task.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ans, err := report(models.RunnerReport{Kind: models.ReportPrepared, Prepared: &models.Workspace{Dir: dir}})
	if err != nil {
		return fmt.Errorf("prepared: %w", err)
	}
	if ans.Launch == nil {
		return errors.New("prepared: the answer has no launch")
	}
	if _, err := report(models.RunnerReport{Kind: models.ReportStarted}); err != nil {
		return fmt.Errorf("started: %w", err)
	}
	var have int64
	err = r.call(ctx, func(ctx context.Context) error {
		var err error
		have, err = r.api.RunnerLog(ctx, asg.RunID, asg.Token, 0, []byte(agentOutput))
		return err
	})
	if err != nil {
		return fmt.Errorf("log: %w", err)
	}
	r.f.cnt.logs.Add(1)
	r.f.mu.Lock()
	gate := r.f.gates[asg.Task.Title]
	r.f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.mu.Lock()
	r.held[asg.RunID].ending = true
	r.mu.Unlock()
	r.f.mu.Lock()
	if ts := r.f.tasks[asg.Task.ID]; ts != nil {
		ts.endSentAt = time.Now()
	}
	r.f.mu.Unlock()
	if _, err := report(models.RunnerReport{Kind: models.ReportEnded, Ended: &models.RunnerEnded{ExitCode: 0, LogSize: have}}); err != nil {
		return fmt.Errorf("ended: %w", err)
	}
	r.f.mu.Lock()
	if ts := r.f.tasks[asg.Task.ID]; ts != nil {
		ts.ends++
	}
	r.f.notifyLocked()
	r.f.mu.Unlock()
	return nil
}

// callKey keys a request's *callInfo in its context.
type callKey struct{}

// callInfo is what the transport saw of one request's answer: its status
// and, for a 429, how long it said to wait.
type callInfo struct {
	status     int
	retryAfter time.Duration
}

// counting is the runners' transport: it counts their requests and the
// answers 429, and tells the caller of a 429 its Retry-After (the
// api.Client's error does not carry the header).
type counting struct {
	next http.RoundTripper
	cnt  *counters
}

func (t *counting) RoundTrip(req *http.Request) (*http.Response, error) {
	t.cnt.requests.Add(1)
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	ci, _ := req.Context().Value(callKey{}).(*callInfo)
	if ci != nil {
		ci.status = resp.StatusCode
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		t.cnt.tooMany.Add(1)
		if ci != nil {
			secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			ci.retryAfter = time.Duration(max(secs, 1)) * time.Second
		}
	}
	return resp, nil
}
