package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/models"
)

// Defaults of remote runs (docs/runners.md, "Leases and fencing").
const (
	// DefaultLeaseTTL is how long a remote run's lease lasts without a
	// heartbeat of its runner.
	DefaultLeaseTTL = 60 * time.Second
	// DefaultRunnerHeartbeat is how often a runner renews its runs' leases.
	DefaultRunnerHeartbeat = 10 * time.Second
	// DefaultReportHold is the longest a relayed ask's report is held
	// before it is answered "pending" (the runner sends it again): under
	// the idle limit of common reverse proxies.
	DefaultReportHold = 25 * time.Second
)

// Runners is what the orchestrator needs of the runners' connections.
type Runners interface {
	// Connected reports whether runner name is connected now.
	Connected(name string) bool
	// Wake tells runner name that it has something to read.
	Wake(name string)
	// Unresponsive records that runner name let a run's lease expire: it
	// is given no run until it shows life again.
	Unresponsive(name string)
}

// remoteRun is the part of an activeRun that a runner runs.
type remoteRun struct {
	runner string
	// offer is the assignment, given on the runner's polls until the
	// runner takes it up (its first report).
	offer models.RunnerAssignment
	// served is the repository served for the run ("" without one).
	served string

	// apply serialises the reports of the run.
	apply      sync.Mutex
	mu         sync.Mutex
	taken      bool
	leaseUntil time.Time
	lost       bool
	lostCh     chan struct{}
	// seq and answer are the last report applied and its answer; pending
	// is a relayed ask still waiting for its answer.
	seq     int64
	answer  models.RunnerReportAnswer
	pending *pendingAsk
	// unanswered is set when a restarted daemon took the run up while its
	// last report was being applied: its answer is not known. A relayed
	// ask sent again then waits for the question it asked (resumeAsk).
	unanswered bool
	// logSize is how much of the runner's log of the run the daemon has.
	logSize int64
	// isStarted is set once the runner reported the agent started.
	isStarted bool
	// detached is set when the daemon stops and leaves the run to its
	// runner.
	detached bool
	// endReported is set once the runner reported the agent's end.
	endReported bool

	prepared chan preparedReport
	started  chan struct{}
	ended    chan models.RunnerEnded
	once     struct{ started, ended sync.Once }
}

// preparedReport is a runner's prepared report, answered with the launch.
type preparedReport struct {
	report models.RunnerReport
	reply  chan models.RunnerReportAnswer
}

// pendingAsk is a relayed ask waiting for its answer.
type pendingAsk struct {
	seq    int64
	done   chan struct{}
	answer models.RunnerReportAnswer
}

func newRemoteRun(runner string, offer models.RunnerAssignment, leaseUntil time.Time) *remoteRun {
	return &remoteRun{runner: runner, offer: offer, leaseUntil: leaseUntil, lostCh: make(chan struct{}),
		prepared: make(chan preparedReport), started: make(chan struct{}), ended: make(chan models.RunnerEnded, 1)}
}

// runnerOf returns the runner and the agent's name there from a runner
// agent's id (RUNNER/NAME).
func runnerOf(a models.Agent) (runner, name string) {
	_, name, _ = strings.Cut(a.ID, "/")
	return a.RunnerID, name
}

// executeRemote runs a claimed run on the runner its agent is on: the
// repository is readied for the runner, the assignment is offered on the
// runner's poll, the runner's reports drive the run, and its end is
// decided as a local run's is.
//
// ctx is the run's; startCtx, which the loop's stop ends, bounds the
// preparation of the served repository.
func (o *Orchestrator) executeRemote(ctx, startCtx context.Context, ar *activeRun, task models.Task, project models.Project,
	adapter agent.Adapter, prof models.Profile, startErr func(string, bool, error) models.TransitionResult) models.TransitionResult {
	log := o.log.With("task_id", ar.run.TaskID, "agent", ar.run.AgentID, "run_id", ar.run.ID, "attempt", ar.run.Attempt)
	runner, name := runnerOf(ar.agent)
	ws, err := o.ws.Serve(startCtx, project, task)
	if models.Fenced(err) {
		return o.finish(ctx, ar, models.RunEnd{RunID: ar.run.ID, Event: models.EventRecovery, ExpectFrom: models.StatusAssigned,
			Reason: "serve the repository: " + models.ReasonOf(err), Outcome: models.RunOutcomeRecovered, Error: err.Error()})
	}
	if err != nil {
		return startErr("serve the repository to the runner", false, err)
	}
	offer := models.RunnerAssignment{RunID: ar.run.ID, Token: ar.token, Agent: name, ProjectID: ar.run.ProjectID,
		Attempt: ar.run.Attempt, Kind: ar.run.Kind, Task: task, LeaseTTL: models.Duration(o.cfg.LeaseTTL),
		Heartbeat: models.Duration(o.cfg.RunnerHeartbeat)}
	if project.Repo != nil {
		offer.Repo = &models.RunnerRepo{ID: project.Repo.ID, DefaultBranch: ws.DefaultBranch, Branch: ws.Branch}
	}
	rr := newRemoteRun(runner, offer, o.cfg.Clock.Now().Add(o.cfg.LeaseTTL))
	rr.served = ws.Dir
	if err := o.store.SaveRemoteRun(ctx, ar.run.ID, 0, nil, models.RemoteRunState{Runner: runner, Served: ws.Dir,
		Branch: ws.Branch, DefaultBranch: ws.DefaultBranch}); err != nil {
		return startErr("record the run on the runner", false, err)
	}
	ar.mu.Lock()
	ar.remote = rr
	ar.mu.Unlock()
	o.wakeRunner(runner)
	o.armTimers() // the lease's expiry

	// The runner prepares its checkout and asks for the launch.
	var pr preparedReport
	select {
	case pr = <-rr.prepared:
	case <-ar.stop:
		o.wakeRunner(runner) // told to end the run, if it took it up
		return startErr("prepare workspace on the runner", false, errors.New("stopped"))
	}
	if msg := pr.report.PrepareError; msg != "" {
		close(pr.reply)
		return startErr("prepare workspace on the runner "+runner, false, errors.New(msg))
	}
	rws := *pr.report.Prepared
	rws.Branch, rws.DefaultBranch = ws.Branch, ws.DefaultBranch
	tc, err := o.taskContext(ctx, project, task, rws, ar.run.Attempt)
	if err != nil {
		close(pr.reply)
		return startErr("assemble the task context", false, err)
	}
	tc.Tools = prof.AllowedTools
	session, sessionUsage, err := o.store.LastSession(ctx, task.ID, ar.agent.ID)
	if err != nil {
		close(pr.reply)
		return startErr("read the last session", false, err)
	}
	prompt, err := o.runPrompt(adapter, prof, tc)
	if err != nil {
		close(pr.reply)
		return startErr("render the prompt", false, err)
	}
	ar.mu.Lock()
	ar.preparing, ar.spawnAt = false, o.cfg.Clock.Now()
	ar.mu.Unlock()
	o.armTimers() // the start deadline
	pr.reply <- models.RunnerReportAnswer{Launch: &models.RunnerLaunch{Profile: prof, Prompt: prompt, SessionID: session,
		SessionUsage: sessionUsage, Env: tc.Run.Env(), ToolTimeout: models.Duration(o.cfg.InputTimeout + ToolTimeoutMargin)}}

	select {
	case <-rr.started:
	case e := <-rr.ended: // the agent could not be started there
		return startErr("start the agent on runner "+runner, true, errors.New(e.StderrTail))
	case <-ar.stop:
		o.wakeRunner(runner)
		o.awaitRemoteEnd(ar, rr)
		return startErr("start the agent on the runner", false, errors.New("stopped"))
	}
	repoID := ""
	if project.Repo != nil {
		repoID = project.Repo.ID
	}
	if _, err := o.store.StartRunWith(ctx, ar.run.ID, models.RunStart{CheckoutPath: ws.Dir, Branch: ws.Branch,
		RepoID: &repoID}); err != nil {
		log.Warn("started remote run not recorded", "err", err)
		ar.end(models.EventExecutionError, "record the start: "+err.Error())
		o.wakeRunner(runner)
		o.awaitRemoteEnd(ar, rr)
		return o.finish(ctx, ar, models.RunEnd{RunID: ar.run.ID, Event: models.EventExecutionError,
			ExpectFrom: models.StatusAssigned, Reason: "record the start: " + err.Error(), Outcome: models.RunOutcomeExecutionError,
			Error: err.Error()})
	}
	// The run's log exists from the start, as a local run's: progress
	// lines are appended to it, and followers find it.
	logPath := filepath.Join(o.cfg.RunDir, task.ID, strconv.Itoa(ar.run.Attempt)+".log")
	if err := mkdirPrivate(filepath.Dir(logPath)); err != nil {
		log.Warn("create the run's log", "err", err)
	} else if f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err != nil {
		log.Warn("create the run's log", "err", err)
	} else {
		f.Close()
	}
	ar.mu.Lock()
	ar.started, ar.lastActivity = true, o.cfg.Clock.Now()
	ar.lastReport = ar.lastActivity
	ar.mu.Unlock()
	o.mu.Lock()
	delete(o.failures, ar.run.ProjectID)
	o.mu.Unlock()
	log.Info("agent started on a runner", "runner", runner, "dir", rws.Dir)
	if o.cfg.OnRunStart != nil {
		o.cfg.OnRunStart(ar.run)
	}
	o.armTimers()

	return o.remoteEnd(ctx, ar, rr, task, project, ws)
}

// remoteEnd waits for a started remote run's end (the runner's report, or
// the loss of its lease), decides its outcome and records it.
func (o *Orchestrator) remoteEnd(ctx context.Context, ar *activeRun, rr *remoteRun, task models.Task, project models.Project,
	ws models.Workspace) models.TransitionResult {
	log := o.log.With("task_id", ar.run.TaskID, "agent", ar.run.AgentID, "run_id", ar.run.ID, "attempt", ar.run.Attempt)
	var ended models.RunnerEnded
	var got bool
	select {
	case ended = <-rr.ended:
		got = true
	case <-ar.stop:
		o.wakeRunner(rr.runner)
		ended, got = o.awaitRemoteEnd(ar, rr)
	case <-rr.lostCh:
	}
	if rr.isDetached() {
		// The daemon stops and leaves the run to its runner: the next
		// life takes it up (adoptRemote).
		log.Info("the daemon stops; the run goes on on its runner", "runner", rr.runner)
		return models.TransitionResult{}
	}
	result := agent.Result{ExitCode: ended.ExitCode, Signal: ended.Signal, StderrTail: ended.StderrTail, Stopped: !got}
	if !got {
		result.ExitCode, result.Signal = -1, "lease lost"
	}
	end := o.outcome(ctx, ar, result)
	if got && ended.Lost {
		// The runner restarted and ended the agent: not the agent's fault.
		msg := fmt.Sprintf("runner %s restarted and ended the agent", rr.runner)
		end = models.RunEnd{RunID: ar.run.ID, Event: models.EventRecovery, ExpectFrom: models.StatusInProgress, Reason: msg,
			Outcome: models.RunOutcomeRecovered, Error: msg}
	}
	if ar.sessionInvalid {
		if err := o.store.ForgetSessions(ctx, task.ID, ar.agent.ID); err != nil {
			log.Warn("forget sessions", "err", err)
		}
	}
	if end.Event == models.EventAgentCompleted {
		if ended.Refusals != "" {
			end.Error = ended.Refusals
		}
		end = o.sealRemote(ctx, ar, project, task, ws, ended, end)
	}
	res := o.finish(ctx, ar, end)
	if res.To == models.StatusVerifying && !res.Duplicate {
		o.landing.Verify(task.ID)
	}
	return res
}

// awaitRemoteEnd waits, after the loop ended a remote run, for the
// runner's report that its agent ended, or for the run's lease to be
// lost; it reports whether the runner reported.
func (o *Orchestrator) awaitRemoteEnd(ar *activeRun, rr *remoteRun) (models.RunnerEnded, bool) {
	rr.mu.Lock()
	taken := rr.taken
	rr.mu.Unlock()
	if !taken {
		return models.RunnerEnded{}, false
	}
	select {
	case e := <-rr.ended:
		return e, true
	case <-rr.lostCh:
		return models.RunnerEnded{}, false
	}
}

// sealRemote is sealWork for a remote run: the runner committed and
// pushed the task branch to the served repository ws.Dir, whose branch is
// what the run changed.
func (o *Orchestrator) sealRemote(ctx context.Context, ar *activeRun, p models.Project, t models.Task, ws models.Workspace,
	ended models.RunnerEnded, end models.RunEnd) models.RunEnd {
	failed := func(msg string) models.RunEnd {
		return models.RunEnd{RunID: ar.run.ID, Event: models.EventAgentFailed, ExpectFrom: models.StatusInProgress,
			Reason: msg, Outcome: models.RunOutcomeFailed, Error: msg}
	}
	if ended.PushError != "" {
		return failed("hand the work back: " + ended.PushError)
	}
	files, err := o.ws.BranchFiles(ctx, p, t, ws.Dir)
	if err != nil {
		return failed("read the pushed work: " + models.ReasonOf(err))
	}
	ar.mu.Lock()
	c := models.Completion{Summary: end.Reason}
	if ar.completion != nil {
		c = *ar.completion
	}
	ar.mu.Unlock()
	if p.Repo != nil {
		c.FilesChanged = files
		c.NoChanges = c.NoChanges && len(files) == 0
	}
	end.Result = &c
	end.Verification = &models.Verification{TaskID: t.ID, Attempt: ar.run.Attempt, Phase: models.PhaseChecks, Source: ws.Dir}
	return end
}

func (o *Orchestrator) wakeRunner(name string) {
	if o.cfg.Runners != nil {
		o.cfg.Runners.Wake(name)
	}
}

// remoteOf returns the remote part of run id of runner, or an error a
// runner understands as "end that run".
func (o *Orchestrator) remoteOf(runner string, id int64) (*activeRun, *remoteRun, error) {
	if !o.recovered.Load() {
		// A restarted daemon may not have taken the run up yet.
		return nil, nil, models.Errorf(models.CodeUnavailable, "the daemon is starting: send the report again")
	}
	o.mu.Lock()
	ar := o.runs[id]
	o.mu.Unlock()
	if ar != nil {
		ar.mu.Lock()
		rr := ar.remote
		ar.mu.Unlock()
		if rr != nil && rr.runner == runner {
			rr.mu.Lock()
			lost := rr.lost
			rr.mu.Unlock()
			if !lost {
				return ar, rr, nil
			}
		}
	}
	return nil, nil, models.Errorf(models.CodeConflict, "run %d is not this runner's: it ended or its lease was lost", id)
}

// RunnerRepo returns the served repository repoID of runner's live runs
// and the task branches those runs may push; ok is false when it holds
// none of that repository.
func (o *Orchestrator) RunnerRepo(runner, repoID string) (dir string, push []string, ok bool) {
	o.mu.Lock()
	list := make([]*activeRun, 0, len(o.runs))
	for _, ar := range o.runs {
		list = append(list, ar)
	}
	o.mu.Unlock()
	for _, ar := range list {
		ar.mu.Lock()
		rr := ar.remote
		ar.mu.Unlock()
		if rr == nil || rr.runner != runner || rr.offer.Repo == nil || rr.offer.Repo.ID != repoID {
			continue
		}
		rr.mu.Lock()
		lost := rr.lost
		rr.mu.Unlock()
		if lost {
			continue
		}
		dir, ok = rr.served, true
		push = append(push, "refs/heads/"+rr.offer.Repo.Branch)
	}
	return dir, push, ok
}

// RunnerWork returns what runner name is to do now: the runs offered to it
// that it has not taken up, and the runs it must end.
func (o *Orchestrator) RunnerWork(runner string) (runs []models.RunnerAssignment, end []models.RunnerEnd) {
	o.mu.Lock()
	list := make([]*activeRun, 0, len(o.runs))
	for _, ar := range o.runs {
		list = append(list, ar)
	}
	o.mu.Unlock()
	for _, ar := range list {
		ar.mu.Lock()
		rr, reason := ar.remote, ar.endReason
		stopping := isClosed(ar.stop)
		ar.mu.Unlock()
		if rr == nil || rr.runner != runner {
			continue
		}
		rr.mu.Lock()
		taken := rr.taken
		rr.mu.Unlock()
		switch {
		case stopping && taken:
			if reason == "" {
				reason = "stopped by the daemon"
			}
			end = append(end, models.RunnerEnd{RunID: ar.run.ID, Reason: reason})
		case !stopping && !taken:
			runs = append(runs, rr.offer)
		}
	}
	return runs, end
}

// RenewRuns renews the leases of the runs runner holds: each of ids that is
// still its own gets LeaseTTL more; the others, and those being stopped,
// are returned for the runner to end.
func (o *Orchestrator) RenewRuns(runner string, ids []int64) []models.RunnerEnd {
	if !o.recovered.Load() {
		return nil // a restarted daemon may not have taken them up yet
	}
	now := o.cfg.Clock.Now()
	var end []models.RunnerEnd
	for _, id := range ids {
		ar, rr, err := o.remoteOf(runner, id)
		if err != nil {
			end = append(end, models.RunnerEnd{RunID: id, Reason: models.ErrorMessageOf(err)})
			continue
		}
		rr.mu.Lock()
		rr.taken = true
		rr.leaseUntil = now.Add(o.cfg.LeaseTTL)
		rr.mu.Unlock()
		ar.mu.Lock()
		reason, stopping := ar.endReason, isClosed(ar.stop)
		ar.mu.Unlock()
		if stopping {
			if reason == "" {
				reason = "stopped by the daemon"
			}
			end = append(end, models.RunnerEnd{RunID: id, Reason: reason})
		}
	}
	return end
}

// RemoteReport applies one numbered report of a remote run (see
// models.RunnerReport): in order, each once. call runs a relayed RPC call
// for the run (kind rpc) and returns its HTTP status and answer.
func (o *Orchestrator) RemoteReport(ctx context.Context, runner string, run models.Run, rep models.RunnerReport,
	call func(ctx context.Context) (int, json.RawMessage)) (models.RunnerReportAnswer, error) {
	ar, rr, err := o.remoteOf(runner, run.ID)
	if err != nil {
		return models.RunnerReportAnswer{}, err
	}
	ans, pend, err := o.applyReport(ctx, ar, rr, run, rep, call)
	if pend != nil {
		return o.holdAsk(ctx, pend), nil
	}
	return ans, err
}

// applyReport applies a report under the run's apply lock; a relayed ask
// is returned as pending, for the caller to wait on without the lock.
// The report's number is recorded in the database before it is applied
// and its answer after: a daemon that dies while applying it does not
// apply it again when the runner sends it again (it answers "ok"), and one
// that restarts answers a report it applied as it did.
func (o *Orchestrator) applyReport(ctx context.Context, ar *activeRun, rr *remoteRun, run models.Run, rep models.RunnerReport,
	call func(ctx context.Context) (int, json.RawMessage)) (models.RunnerReportAnswer, *pendingAsk, error) {
	rr.apply.Lock()
	defer rr.apply.Unlock()
	rr.mu.Lock()
	rr.taken = true
	rr.leaseUntil = o.cfg.Clock.Now().Add(o.cfg.LeaseTTL) // a report is a sign of life
	resume := false
	switch {
	case rep.Seq == rr.seq+1:
		rr.mu.Unlock()
	case rep.Seq == rr.seq && rr.unanswered && rr.pending == nil && rep.Kind == models.ReportRPC && rep.Tool == "ask":
		// A relayed ask whose application the daemon's last life began:
		// its question may be open. Applied again, it waits for that
		// question rather than asking another (resumeAsk).
		rr.unanswered, resume = false, true
		rr.mu.Unlock()
	case rep.Seq <= rr.seq:
		ans, pend, last := rr.answer, rr.pending, rr.seq
		rr.mu.Unlock()
		if rep.Seq < last {
			return models.RunnerReportAnswer{}, nil, nil // applied long ago; its answer was read
		}
		if pend != nil && pend.seq == rep.Seq {
			return models.RunnerReportAnswer{}, pend, nil
		}
		return ans, nil, nil
	default:
		want := rr.seq + 1
		rr.mu.Unlock()
		return models.RunnerReportAnswer{}, nil, models.Errorf(models.CodeConflict,
			"report %d of run %d is out of order: the next is %d", rep.Seq, run.ID, want)
	}
	// Validated before anything is recorded: a malformed report is
	// refused and may be sent again corrected.
	var evs []agent.Event
	if rep.Kind == models.ReportEvents {
		if err := json.Unmarshal(rep.Events, &evs); err != nil {
			return models.RunnerReportAnswer{}, nil, models.Errorf(models.CodeInvalid, "events: %v", err)
		}
		if len(evs) > models.MaxRunnerEvents {
			return models.RunnerReportAnswer{}, nil, models.Errorf(models.CodeInvalid, "events: at most %d in one report",
				models.MaxRunnerEvents)
		}
	}
	if err := o.store.SaveRemoteRun(ctx, run.ID, rep.Seq, nil, o.remoteState(ar, rr)); err != nil {
		return models.RunnerReportAnswer{}, nil, err
	}
	rr.mu.Lock()
	rr.seq, rr.answer = rep.Seq, okAnswer
	rr.mu.Unlock()
	ar.touch(o.cfg.Clock.Now())
	var ans models.RunnerReportAnswer
	switch rep.Kind {
	case models.ReportPrepared:
		pr := preparedReport{report: rep, reply: make(chan models.RunnerReportAnswer, 1)}
		select {
		case rr.prepared <- pr:
		case <-ar.stop:
			return models.RunnerReportAnswer{}, nil, models.Errorf(models.CodeConflict, "run %d is being stopped", run.ID)
		}
		a, ok := <-pr.reply
		if !ok {
			return models.RunnerReportAnswer{}, nil, models.Errorf(models.CodeConflict, "run %d did not start", run.ID)
		}
		ans = a
	case models.ReportStarted:
		rr.mu.Lock()
		rr.isStarted = true
		rr.mu.Unlock()
		rr.once.started.Do(func() { close(rr.started) })
	case models.ReportEvents:
		for _, ev := range evs {
			o.adapterEvent(ctx, ar, ev)
		}
	case models.ReportRPC:
		if rep.Tool == "ask" {
			p := &pendingAsk{seq: rep.Seq, done: make(chan struct{})}
			rr.mu.Lock()
			rr.pending = p
			rr.mu.Unlock()
			actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
			if resume {
				actx = context.WithValue(actx, resumeAskKey{}, true)
			}
			go func() {
				defer cancel()
				go func() {
					select {
					case <-rr.lostCh:
						cancel()
					case <-actx.Done():
					}
				}()
				st, body := call(actx)
				p.answer = models.RunnerReportAnswer{Status: st, Answer: body}
				o.recordAnswer(actx, ar, rr, run.ID, p.seq, p.answer)
				close(p.done)
				rr.mu.Lock()
				if rr.pending == p {
					rr.pending, rr.answer = nil, p.answer
				}
				rr.mu.Unlock()
			}()
			return models.RunnerReportAnswer{}, p, nil
		}
		st, body := call(ctx)
		ans = models.RunnerReportAnswer{Status: st, Answer: body}
	case models.ReportEnded:
		e := *rep.Ended
		rr.mu.Lock()
		rr.endReported = true // the lease has served its purpose
		rr.mu.Unlock()
		rr.once.ended.Do(func() { rr.ended <- e })
		return ans, nil, nil // the run ends: nothing more to record
	}
	o.recordAnswer(ctx, ar, rr, run.ID, rep.Seq, ans)
	rr.mu.Lock()
	rr.answer = ans
	rr.mu.Unlock()
	return ans, nil, nil
}

// resumeAskKey marks the context of a relayed ask sent again after the
// daemon restarted while applying it: Ask waits for the run's open
// question instead of asking another.
type resumeAskKey struct{}

// resumingAsk reports whether ctx is a resumed ask's (resumeAskKey).
func resumingAsk(ctx context.Context) bool {
	v, _ := ctx.Value(resumeAskKey{}).(bool)
	return v
}

// okAnswer answers a report sent again whose first sending was being
// applied when the daemon stopped: it was applied at most once, and its
// answer is lost.
var okAnswer = models.RunnerReportAnswer{Status: 200, Answer: json.RawMessage(`{"ok":true}`)}

// recordAnswer records a report's answer with the run's state.
func (o *Orchestrator) recordAnswer(ctx context.Context, ar *activeRun, rr *remoteRun, runID, seq int64, ans models.RunnerReportAnswer) {
	data, err := json.Marshal(ans)
	if err == nil {
		err = o.store.SaveRemoteRun(context.WithoutCancel(ctx), runID, seq, data, o.remoteState(ar, rr))
	}
	if err != nil && models.ErrorCodeOf(err) != models.CodeConflict {
		o.log.Warn("record a remote run's report", "run_id", runID, "seq", seq, "err", err)
	}
}

// remoteState is what the database keeps of a remote run now.
func (o *Orchestrator) remoteState(ar *activeRun, rr *remoteRun) models.RemoteRunState {
	rr.mu.Lock()
	st := models.RemoteRunState{Runner: rr.runner, Served: rr.served, Started: rr.isStarted, LogSize: rr.logSize}
	if rr.offer.Repo != nil {
		st.Branch, st.DefaultBranch = rr.offer.Repo.Branch, rr.offer.Repo.DefaultBranch
	}
	rr.mu.Unlock()
	ar.mu.Lock()
	st.Completion, st.Failure, st.Pause = ar.completion, ar.failure, ar.pause
	ar.mu.Unlock()
	return st
}

// holdAsk waits up to the report hold for a relayed ask's answer.
func (o *Orchestrator) holdAsk(ctx context.Context, p *pendingAsk) models.RunnerReportAnswer {
	select {
	case <-p.done:
		return p.answer
	case <-ctx.Done():
	case <-o.cfg.Clock.After(o.cfg.ReportHold):
	}
	return models.RunnerReportAnswer{Pending: true}
}

// superviseRemote ends a remote run whose lease expired: its task goes
// back to READY by RECOVERY, no retry used. It returns the lease's expiry
// when it holds.
func (o *Orchestrator) superviseRemote(r *activeRun, rr *remoteRun, now time.Time) (time.Time, bool) {
	rr.mu.Lock()
	until, lost, over := rr.leaseUntil, rr.lost, rr.endReported
	rr.mu.Unlock()
	if lost || over {
		// Lost, or the runner reported the end: the daemon is recording
		// it, and a lease running out meanwhile is no news of the runner.
		return time.Time{}, false
	}
	if now.Before(until) {
		return until, true
	}
	o.log.Warn("remote run's lease expired; its task goes back to READY", "task_id", r.run.TaskID, "run_id", r.run.ID,
		"runner", rr.runner)
	if o.cfg.Runners != nil {
		o.cfg.Runners.Unresponsive(rr.runner)
	}
	// The end's reason first: whoever sees the lease lost finds it.
	r.end(models.EventRecovery, fmt.Sprintf("runner %s stopped renewing the run's lease (%s)", rr.runner, o.cfg.LeaseTTL))
	rr.lose()
	return time.Time{}, false
}

// detach leaves a started run to its runner when the daemon stops: the
// run stays open in the database, and the next life of the daemon takes it
// up. It reports whether the run had started (a run not started yet is
// ended as any other).
func (rr *remoteRun) detach() bool {
	rr.mu.Lock()
	if !rr.isStarted {
		rr.mu.Unlock()
		return false
	}
	rr.detached = true
	rr.mu.Unlock()
	rr.lose()
	return true
}

func (rr *remoteRun) isDetached() bool {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return rr.detached
}

// lose ends the run's lease now: nothing waits for the runner any more.
func (rr *remoteRun) lose() {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if !rr.lost {
		rr.lost = true
		close(rr.lostCh)
	}
}

// isClosed reports whether ch is closed.
func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// MaxRemoteLogChunk caps one chunk of a remote run's log.
const MaxRemoteLogChunk = 1 << 20

// RemoteLog appends a chunk of a remote run's output, which starts at byte
// offset of the runner's log, to the run's log here, and returns how much
// of the runner's log the daemon has. A chunk sent again is not appended
// twice; one that leaves a gap is not appended (the answer says where to
// send from).
func (o *Orchestrator) RemoteLog(ctx context.Context, runner string, run models.Run, offset int64, data []byte) (int64, error) {
	ar, rr, err := o.remoteOf(runner, run.ID)
	if err != nil {
		return 0, err
	}
	if len(data) > MaxRemoteLogChunk {
		return 0, models.Errorf(models.CodeInvalid, "log chunk: at most %d bytes (got %d)", MaxRemoteLogChunk, len(data))
	}
	rr.mu.Lock()
	defer rr.mu.Unlock()
	rr.leaseUntil = o.cfg.Clock.Now().Add(o.cfg.LeaseTTL) // a sign of life
	have := rr.logSize
	switch {
	case offset > have, offset+int64(len(data)) <= have:
		// A gap (the runner sends again from what the daemon has), or a
		// chunk the daemon has already.
		return have, nil
	}
	data = data[have-offset:]
	path := filepath.Join(o.cfg.RunDir, run.TaskID, strconv.Itoa(run.Attempt)+".log")
	if err := mkdirPrivate(filepath.Dir(path)); err != nil {
		return have, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return have, err
	}
	_, werr := f.Write(data)
	if err := errors.Join(werr, f.Close()); err != nil {
		return have, fmt.Errorf("append to the log of run %d: %w", run.ID, err)
	}
	rr.logSize += int64(len(data))
	ar.touch(o.cfg.Clock.Now())
	o.outputGrew(run.TaskID)
	return rr.logSize, nil
}

// adoptRemote takes up, when the daemon starts, a run that a runner was
// working on when the daemon stopped: a started work run of a task still
// IN_PROGRESS is supervised again with a fresh lease, so that the runner,
// which kept its agent working, renews it and delivers its reports; it
// reports whether it did. Any other run is recovered as a local one is
// (its runner's later reports are refused, which ends its agent).
func (o *Orchestrator) adoptRemote(ctx context.Context, r models.Run) bool {
	if !strings.Contains(r.AgentID, "/") || r.Kind != models.RunWork {
		return false // the daemon's own agents' ids have no '/'
	}
	seq, answer, st, ok, err := o.store.RemoteRun(ctx, r.ID)
	if err != nil || !ok || !st.Started {
		return false
	}
	task, err := o.store.GetTask(ctx, r.TaskID)
	// WAITING_INPUT: its agent waits on a relayed ask; the runner sends
	// the ask again, which waits for the question the run asked.
	if err != nil || task.Status != models.StatusInProgress && task.Status != models.StatusWaitingInput {
		return false
	}
	project, err := o.store.GetProject(ctx, task.ProjectID)
	if err != nil {
		return false
	}
	ag, err := o.store.GetAgent(ctx, r.AgentID)
	if err != nil || ag.RunnerID != st.Runner {
		return false
	}
	now := o.cfg.Clock.Now()
	_, name := runnerOf(ag)
	offer := models.RunnerAssignment{RunID: r.ID, Agent: name, ProjectID: r.ProjectID, Attempt: r.Attempt, Kind: r.Kind,
		Task: task, LeaseTTL: models.Duration(o.cfg.LeaseTTL), Heartbeat: models.Duration(o.cfg.RunnerHeartbeat)}
	if project.Repo != nil {
		offer.Repo = &models.RunnerRepo{ID: project.Repo.ID, DefaultBranch: st.DefaultBranch, Branch: st.Branch}
	}
	rr := newRemoteRun(st.Runner, offer, now.Add(o.cfg.LeaseTTL))
	rr.served, rr.taken, rr.isStarted, rr.seq, rr.logSize = st.Served, true, true, seq, st.LogSize
	rr.answer, rr.unanswered = okAnswer, answer == nil
	if answer != nil {
		var a models.RunnerReportAnswer
		if json.Unmarshal(answer, &a) == nil {
			rr.answer = a
		}
	}
	rr.once.started.Do(func() { close(rr.started) })
	ar := newActiveRun(r, "", ag, now)
	ar.started, ar.lastReport, ar.timeout, ar.remote = true, now, task.Timeout.Std(), rr
	ar.completion, ar.failure, ar.pause = st.Completion, st.Failure, st.Pause
	ws := models.Workspace{Dir: st.Served, Branch: st.Branch, DefaultBranch: st.DefaultBranch}
	o.mu.Lock()
	o.runs[r.ID] = ar
	o.mu.Unlock()
	o.log.Info("took up a run its runner works on", "task_id", r.TaskID, "run_id", r.ID, "agent", r.AgentID,
		"runner", st.Runner, "report", seq)
	o.adopted = append(o.adopted, func(ctx context.Context) {
		o.wg.Add(1)
		go o.superviseAdopted(ctx, ar, rr, task, project, ws)
	})
	return true
}

// superviseAdopted waits for the end of a run recovery took up.
func (o *Orchestrator) superviseAdopted(ctx context.Context, ar *activeRun, rr *remoteRun, task models.Task, project models.Project,
	ws models.Workspace) {
	r := ar.run
	func() {
		defer o.wg.Done()
		res := o.remoteEnd(ctx, ar, rr, task, project, ws)
		o.mu.Lock()
		delete(o.runs, r.ID)
		o.mu.Unlock()
		if o.cfg.OnRunEnd != nil {
			o.cfg.OnRunEnd(r, res)
		}
		o.Wake()
	}()
}
