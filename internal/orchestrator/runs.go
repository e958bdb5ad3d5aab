package orchestrator

import (
	"context"
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

// activeRun is a run this orchestrator started and still supervises.
type activeRun struct {
	run   models.Run
	token string
	agent models.Agent

	mu           sync.Mutex
	stopOnce     sync.Once
	started      bool // the process is running and the task IN_PROGRESS
	waiting      int  // asks in progress: quiet is expected, not idle
	lastActivity time.Time
	proc         *agent.Process
	stop         chan struct{} // closed when the loop ends the run
	// Reports made through RPC while the run was going.
	completion *models.Completion
	failure    string
	pause      *models.RateLimit
	// Set by the loop when it ends the run: the event and reason to apply,
	// and whether an ask was waiting then.
	endEvent   models.TaskEvent
	endReason  string
	endWaiting bool
}

func (r *activeRun) touch(now time.Time) {
	r.mu.Lock()
	r.lastActivity = now
	r.mu.Unlock()
}

// end asks the run to stop, recording why; the first reason wins.
func (r *activeRun) end(event models.TaskEvent, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.endReason != "" {
		return
	}
	r.endEvent, r.endReason, r.endWaiting = event, reason, r.waiting > 0
	r.stopOnce.Do(func() { close(r.stop) })
}

// requestStop ends the process without deciding the outcome: what the
// agent reported (a pause, a failure) decides it.
func (r *activeRun) requestStop() { r.stopOnce.Do(func() { close(r.stop) }) }

func (o *Orchestrator) limits(a models.Agent) (idle, max time.Duration) {
	idle, max = o.cfg.IdleTimeout, o.cfg.MaxRuntime
	if a.IdleTimeout > 0 {
		idle = a.IdleTimeout.Std()
	}
	if a.MaxRuntime > 0 {
		max = a.MaxRuntime.Std()
	}
	return idle, max
}

// dispatch claims an assignment and starts its run in its own goroutine.
func (o *Orchestrator) dispatch(ctx context.Context, as Assignment) {
	ag, err := o.store.GetAgent(ctx, as.AgentID)
	if err != nil {
		o.log.Warn("dispatch: agent", "agent", as.AgentID, "err", err)
		return
	}
	run, token, err := o.store.ClaimTask(ctx, as.TaskID, as.AgentID)
	if err != nil {
		o.log.Info("dispatch: claim lost", "task_id", as.TaskID, "agent", as.AgentID, "err", err)
		return
	}
	o.log.Info("task assigned", "task_id", as.TaskID, "agent", as.AgentID, "project_id", as.ProjectID,
		"attempt", run.Attempt, "run_id", run.ID, "reason", as.Reason)
	ar := &activeRun{run: run, token: token, agent: ag, lastActivity: o.cfg.Now(), stop: make(chan struct{})}
	o.mu.Lock()
	o.runs[run.ID] = ar
	o.mu.Unlock()
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		res := o.execute(ctx, ar)
		o.mu.Lock()
		delete(o.runs, run.ID)
		o.mu.Unlock()
		if o.cfg.OnRunEnd != nil {
			o.cfg.OnRunEnd(run, res)
		}
		o.Wake()
	}()
}

// execute prepares, starts, waits for and records one run.
func (o *Orchestrator) execute(ctx context.Context, ar *activeRun) models.TransitionResult {
	log := o.log.With("task_id", ar.run.TaskID, "agent", ar.run.AgentID, "run_id", ar.run.ID, "attempt", ar.run.Attempt)
	// startCtx bounds the preparation: the loop's stop (a start timeout, an
	// admin stop, shutdown) cancels it.
	startCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-ar.stop:
			cancel()
		case <-startCtx.Done():
		}
	}()
	// startErr ends a run that could not start: EXECUTION_ERROR returns the
	// task to READY. When the agent itself is at fault (its type, command or
	// process) it goes to ERROR so that it does not take the task again and
	// again; otherwise (the workspace, the project) the project cools down
	// for a doubling while.
	startErr := func(what string, agentFault bool, err error) models.TransitionResult {
		select {
		case <-ar.stop:
			return o.finish(ctx, ar, o.loopEnd(ar, models.StatusAssigned))
		default:
		}
		end := models.RunEnd{RunID: ar.run.ID, Event: models.EventExecutionError, ExpectFrom: models.StatusAssigned,
			Reason: what + ": " + reasonOf(err), Outcome: "execution_error", Error: what + ": " + err.Error()}
		if agentFault {
			end.AgentError = what
			log.Warn("run did not start; the agent is set aside", "step", what, "err", err)
		} else {
			o.mu.Lock()
			o.failures[ar.run.ProjectID]++
			n := o.failures[ar.run.ProjectID]
			o.mu.Unlock()
			o.coolDown("project:"+ar.run.ProjectID, o.cfg.Now().Add(o.Backoff(n-1)))
			log.Warn("run did not start; the project cools down", "step", what, "err", err, "project_id", ar.run.ProjectID)
		}
		return o.finish(ctx, ar, end)
	}
	task, err := o.store.GetTask(ctx, ar.run.TaskID)
	if err != nil {
		return startErr("read task", false, err)
	}
	project, err := o.store.GetProject(ctx, task.ProjectID)
	if err != nil {
		return startErr("read project", false, err)
	}
	adapter, err := o.adapters.For(ar.agent.AgentType)
	if err != nil {
		return startErr("agent type", true, err)
	}
	ws, err := o.ws.Prepare(startCtx, ar.agent, project, task)
	if err != nil {
		return startErr("prepare workspace", false, err)
	}
	lastErr, err := o.store.LastRunError(ctx, task.ID)
	if err != nil {
		return startErr("read previous attempt", false, err)
	}
	questions, err := o.store.TaskQuestions(ctx, task.ID)
	if err != nil {
		return startErr("read questions", false, err)
	}
	prompt := Prompt(task, ws, lastErr, questions...)
	base := filepath.Join(o.cfg.RunDir, task.ID, strconv.Itoa(ar.run.Attempt))
	if err := os.MkdirAll(filepath.Dir(base), 0o700); err != nil {
		return startErr("run directory", false, err)
	}
	promptFile := base + ".prompt"
	if err := os.WriteFile(promptFile, []byte(prompt), 0o600); err != nil {
		return startErr("write prompt", false, err)
	}
	rc := agent.RunContext{Agent: ar.agent, Task: task, Prompt: prompt, PromptFile: promptFile, Dir: ws.Dir}
	inv, err := adapter.Invocation(rc)
	if err != nil {
		return startErr("build command", true, err)
	}
	env := agent.Environment(o.cfg.Environ, ar.agent.Env, map[string]string{
		"AQ_SOCKET": o.cfg.SocketPath, "AQ_TASK_ID": task.ID, "AQ_RUN_TOKEN": ar.token, "AQ_PROMPT_FILE": promptFile,
		"AQ_PROJECT_ID": task.ProjectID, "AQ_ATTEMPT": strconv.Itoa(ar.run.Attempt),
	})
	select {
	case <-ar.stop: // timed out or stopped before the process existed
		return o.finish(ctx, ar, o.loopEnd(ar, models.StatusAssigned))
	default:
	}
	parser := adapter.NewParser(rc)
	proc, err := agent.Start(agent.Spec{Argv: inv.Argv, Dir: ws.Dir, Env: env, Stdin: inv.Stdin, LogPath: base + ".log",
		OnActivity: func() { ar.touch(o.cfg.Now()) },
		OnLine: func(line []byte) {
			for _, ev := range parser.Line(line) {
				o.adapterEvent(ar, ev)
			}
		}})
	if err != nil {
		return startErr("start process", true, err)
	}
	if _, err := o.store.StartRun(ctx, ar.run.ID, proc.PID(), ws.Dir); err != nil {
		proc.Stop(o.cfg.StopGrace)
		log.Warn("started run not recorded", "err", err)
		return o.finish(ctx, ar, models.RunEnd{RunID: ar.run.ID, Event: models.EventExecutionError,
			ExpectFrom: models.StatusAssigned, Reason: "record the start: " + err.Error(), Outcome: "execution_error",
			Error: err.Error()})
	}
	ar.mu.Lock()
	ar.proc, ar.started, ar.lastActivity = proc, true, o.cfg.Now()
	ar.mu.Unlock()
	o.mu.Lock()
	delete(o.failures, ar.run.ProjectID)
	o.mu.Unlock()
	log.Info("agent started", "pid", proc.PID(), "dir", ws.Dir)
	if o.cfg.OnRunStart != nil {
		o.cfg.OnRunStart(ar.run)
	}
	o.Wake() // arm the run's timers

	var result agent.Result
	select {
	case <-proc.Done():
		result, _ = proc.Wait(context.Background())
	case <-ar.stop:
		result = proc.Stop(o.cfg.StopGrace)
	}
	for _, ev := range parser.End(result.ExitCode) {
		o.adapterEvent(ar, ev)
	}
	end := o.outcome(ar, result)
	res := o.finish(ctx, ar, end)
	if res.To == models.StatusVerifying && !res.Duplicate {
		o.verify(ctx, ar, project, task, ws)
	}
	return res
}

// loopEnd is the end the loop asked for, applied from status from.
func (o *Orchestrator) loopEnd(ar *activeRun, from models.TaskStatus) models.RunEnd {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	end := models.RunEnd{RunID: ar.run.ID, Event: ar.endEvent, ExpectFrom: from, Reason: ar.endReason,
		Outcome: "stopped", Error: ar.endReason}
	if ar.endWaiting {
		// Ended mid-question: the task pauses until an answer comes (which
		// resumes it at once) or the input timeout passes.
		at := o.cfg.Now().Add(o.cfg.InputTimeout)
		end.ResumeAfter = &at
	}
	if ar.endEvent == models.EventTimeout {
		end.Outcome = "timeout"
	}
	return end
}

// outcome decides what a finished process means for its task.
func (o *Orchestrator) outcome(ar *activeRun, r agent.Result) models.RunEnd {
	ar.mu.Lock()
	stoppedByLoop := ar.endReason != ""
	completion, failure, pause := ar.completion, ar.failure, ar.pause
	ar.mu.Unlock()
	end := models.RunEnd{RunID: ar.run.ID, ExpectFrom: models.StatusInProgress}
	switch {
	case stoppedByLoop:
		return o.loopEnd(ar, models.StatusInProgress)
	case pause != nil:
		at := o.cfg.Now().Add(o.cfg.PauseDelay)
		if pause.ResetAt != nil && pause.ResetAt.After(o.cfg.Now()) {
			at = *pause.ResetAt
		}
		end.Event, end.ResumeAfter, end.Outcome = models.EventTokensExhausted, &at, "paused"
		end.Reason = fmt.Sprintf("%s until %s", pauseWhat(pause), at.UTC().Format(time.RFC3339))
		// The agent's account is limited too: it sits out until the reset
		// rather than pause every READY task in turn.
		o.coolDown("agent:"+ar.run.AgentID, at)
		if pause.Message != "" {
			end.Reason += ": " + pause.Message
		}
	case failure != "":
		end.Event, end.Reason, end.Outcome, end.Error = models.EventAgentFailed, failure, "failed", failure
	case completion != nil || r.ExitCode == 0:
		end.Event, end.Outcome = models.EventAgentCompleted, "completed"
		if completion != nil {
			end.Reason = completion.Summary
		}
	default:
		msg := exitText(r)
		end.Event, end.Reason, end.Outcome, end.Error = models.EventAgentFailed, msg, "failed", msg
	}
	return end
}

// reasonOf is the text kept for an error the system met: the user-safe
// message of a *models.Error, else the error itself (a git or file error
// the task's owner needs to see; it carries no secret).
func reasonOf(err error) string {
	if models.ErrorCodeOf(err) != models.CodeInternal {
		return models.ErrorMessageOf(err)
	}
	return err.Error()
}

func pauseWhat(p *models.RateLimit) string {
	if p.Kind == "tokens" {
		return "out of tokens"
	}
	return "rate limited"
}

// exitText describes a failed exit with the tail of stderr.
func exitText(r agent.Result) string {
	how := fmt.Sprintf("exit status %d", r.ExitCode)
	if r.Signal != "" {
		how = "killed by signal " + r.Signal
	}
	if tail := strings.TrimSpace(r.StderrTail); tail != "" {
		return how + ": " + tail
	}
	return how
}

// finish records a run's end; a refused event (the task moved on, for
// example an admin stopped it) still closes the run and frees the agent.
func (o *Orchestrator) finish(ctx context.Context, ar *activeRun, end models.RunEnd) models.TransitionResult {
	res, err := o.store.FinishRun(ctx, end)
	if err != nil && end.Event != "" {
		switch models.ErrorCodeOf(err) {
		case models.CodeConflict, models.CodeInvalid:
			// The task moved on (an admin acted): close the run only.
		default:
			// A store error: try once more before giving up the event; the
			// loop's reconciliation repairs a task left without its run.
			if res, err = o.store.FinishRun(ctx, end); err == nil {
				break
			}
		}
		if err != nil {
			o.log.Info("run end event not applied; closing the run", "task_id", ar.run.TaskID, "run_id", ar.run.ID,
				"event", end.Event, "err", err)
			end.Event = ""
			res, err = o.store.FinishRun(ctx, end)
		}
	}
	if err != nil {
		o.log.Error("finish run", "task_id", ar.run.TaskID, "run_id", ar.run.ID, "err", err)
		return res
	}
	o.log.Info("run ended", "task_id", ar.run.TaskID, "agent", ar.run.AgentID, "run_id", ar.run.ID, "outcome", end.Outcome,
		"to", res.To)
	return res
}

// verify finishes a task the agent completed: the fast path delivers the
// branch to the default branch and passes verification.
func (o *Orchestrator) verify(ctx context.Context, ar *activeRun, p models.Project, t models.Task, ws models.Workspace) {
	req := models.TransitionRequest{TaskID: t.ID, Event: models.EventVerifyPassed, ExpectFrom: models.StatusVerifying,
		Actor: "system", Reason: "delivered to " + defaultBranch(p)}
	if err := o.ws.Deliver(ctx, ar.agent, p, t, ws); err != nil {
		req.Event, req.Reason = models.EventVerifyFailed, "deliver: "+reasonOf(err)
		o.log.Warn("deliver failed", "task_id", t.ID, "err", err)
		if ar.run.ID != 0 {
			if err := o.store.RecordRunFailure(ctx, ar.run.ID, "deliver_failed", req.Reason); err != nil {
				o.log.Warn("record delivery failure", "task_id", t.ID, "err", err)
			}
		}
	}
	o.apply(ctx, req)
}

func defaultBranch(p models.Project) string {
	if p.Repo == nil {
		return "the project (no repo)"
	}
	return p.Repo.DefaultBranch
}

// adapterEvent applies what an adapter read from the output stream.
func (o *Orchestrator) adapterEvent(ar *activeRun, ev agent.Event) {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	switch ev.Kind {
	case agent.EventRateLimit:
		ar.pause = &models.RateLimit{ResetAt: ev.ResetAt, Kind: "rate_limit", Message: ev.Error}
	case agent.EventResult:
		if ev.IsError {
			ar.failure = ev.Error
		} else if ar.completion == nil {
			ar.completion = &models.Completion{Summary: ev.Summary}
		}
	}
}

// superviseRuns ends runs past their deadlines; it returns the next
// deadline (zero if none).
func (o *Orchestrator) superviseRuns(now time.Time) time.Time {
	o.mu.Lock()
	runs := make([]*activeRun, 0, len(o.runs))
	for _, r := range o.runs {
		runs = append(runs, r)
	}
	o.mu.Unlock()
	var next time.Time
	consider := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, r := range runs {
		idle, max := o.limits(r.agent)
		r.mu.Lock()
		started, last, waiting := r.started, r.lastActivity, r.waiting > 0
		r.mu.Unlock()
		if !started {
			deadline := r.run.StartedAt.Add(o.cfg.StartTimeout)
			if !now.Before(deadline) {
				r.end(models.EventTimeout, fmt.Sprintf("did not start within %s", o.cfg.StartTimeout))
				continue
			}
			consider(deadline)
			continue
		}
		if wall := r.run.StartedAt.Add(max); !now.Before(wall) {
			r.end(models.EventTimeout, fmt.Sprintf("ran longer than %s", max))
			continue
		} else {
			consider(wall)
		}
		if waiting {
			continue // the input timeout governs a run waiting for an answer
		}
		if quiet := last.Add(idle); !now.Before(quiet) {
			r.end(models.EventTimeout, fmt.Sprintf("no output and no report for %s", idle))
			continue
		} else {
			consider(quiet)
		}
	}
	return next
}

// StopTask ends a task's run, if this orchestrator has one, and blocks the
// task: ADMIN_STOP from IN_PROGRESS; a task still starting is stopped too.
func (o *Orchestrator) StopTask(ctx context.Context, taskID, reason, actor string) (models.TransitionResult, error) {
	res, err := o.store.ApplyEvent(ctx, models.TransitionRequest{TaskID: taskID, Event: models.EventAdminStop,
		Reason: reason, Actor: actor})
	if err != nil {
		return res, err
	}
	o.endRunsOf(taskID, "stopped by "+actor)
	return res, nil
}

// endRunsOf stops this orchestrator's runs of a task without applying an
// event (the task has already moved on).
func (o *Orchestrator) endRunsOf(taskID, reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range o.runs {
		if r.run.TaskID == taskID {
			r.end("", reason)
		}
	}
}

// shutdown stops every run; their tasks return to READY by RECOVERY so the
// next life of the daemon runs them again.
func (o *Orchestrator) shutdown() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range o.runs {
		r.end(models.EventRecovery, "the daemon is shutting down")
	}
}

// recover repairs what an earlier life left in flight: runs still open
// (their process is ended if it survived), their tasks returned to READY,
// agents freed, and ASSIGNED or IN_PROGRESS tasks without a run requeued.
func (o *Orchestrator) recover(ctx context.Context) error {
	open, err := o.store.OpenRuns(ctx)
	if err != nil {
		return err
	}
	for _, r := range open {
		if r.PID != nil && agent.Alive(*r.PID) && agent.IsRunOf(*r.PID, r.TaskID) {
			if err := agent.KillGroup(*r.PID); err != nil {
				o.log.Warn("recovery: end leftover process", "run_id", r.ID, "pid", *r.PID, "err", err)
			}
		}
		end := models.RunEnd{RunID: r.ID, Event: models.EventRecovery, Reason: "the daemon restarted during this run",
			Outcome: "recovered"}
		if _, err := o.store.FinishRun(ctx, end); err != nil {
			end.Event = "" // the task is not ASSIGNED or IN_PROGRESS: just close the run
			if _, err := o.store.FinishRun(ctx, end); err != nil {
				return err
			}
		}
		o.log.Info("recovered run", "task_id", r.TaskID, "run_id", r.ID, "agent", r.AgentID)
	}
	if freed, err := o.store.FreeOrphanAgents(ctx); err != nil {
		return err
	} else if len(freed) > 0 {
		o.log.Info("recovery freed agents", "agents", freed)
	}
	if err := o.reconcile(ctx); err != nil {
		return err
	}
	if n, err := o.store.FailRunningHookRuns(ctx); err != nil {
		return err
	} else if n > 0 {
		o.log.Info("recovery closed hook runs left running", "count", n)
	}
	verifying, err := o.store.ListTasks(ctx, models.TaskFilter{Statuses: []models.TaskStatus{models.StatusVerifying}, Limit: 10_000})
	if err != nil {
		return err
	}
	for _, t := range verifying {
		// The fast path has one phase: deliver again (idempotent) and pass.
		p, err := o.store.GetProject(ctx, t.ProjectID)
		if err != nil {
			return err
		}
		var ag models.Agent
		if t.AssignedAgentID != nil {
			ag, _ = o.store.GetAgent(ctx, *t.AssignedAgentID)
		}
		o.verify(ctx, &activeRun{agent: ag}, p, t, models.Workspace{})
	}
	return nil
}

// Prompt renders the text handed to an agent for a task.
func Prompt(t models.Task, ws models.Workspace, previousError string, questions ...models.Question) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Task %s: %s\n\n", t.ID, t.Title)
	if t.Description != "" {
		b.WriteString(strings.TrimSpace(t.Description) + "\n\n")
	}
	if len(t.AcceptanceCriteria) > 0 {
		b.WriteString("## Acceptance criteria\n\n")
		for _, c := range t.AcceptanceCriteria {
			b.WriteString("- " + c + "\n")
		}
		b.WriteString("\n")
	}
	if len(t.TestCommands) > 0 {
		b.WriteString("## Tests that must pass\n\n")
		for _, c := range t.TestCommands {
			b.WriteString("    " + c + "\n")
		}
		b.WriteString("\n")
	}
	if ws.Branch != "" {
		fmt.Fprintf(&b, "Work on the branch %s in %s and commit your changes there.\n\n", ws.Branch, ws.Dir)
	}
	if previousError != "" {
		fmt.Fprintf(&b, "## The previous attempt failed\n\n%s\n\n", strings.TrimSpace(previousError))
	}
	answered := false
	for _, q := range questions {
		if q.Answer == nil {
			continue
		}
		if !answered {
			b.WriteString("## Answers to earlier questions\n\n")
			answered = true
		}
		fmt.Fprintf(&b, "Q: %s\nA: %s\n\n", strings.TrimSpace(q.Text), strings.TrimSpace(*q.Answer))
	}
	b.WriteString("When you are done, report completion with a short summary (agentqueued agent complete); " +
		"if you cannot go on without a decision, ask (agentqueued agent ask).\n")
	return b.String()
}

// reconcile repairs what no run will repair: tasks holding an agent (ASSIGNED,
// IN_PROGRESS, WAITING_INPUT) without a run of this orchestrator are
// requeued (a waiting one is paused, to resume with its answer), and open
// runs this orchestrator does not supervise are closed. It runs at start
// and in every round, after dispatch, on the loop's goroutine.
func (o *Orchestrator) reconcile(ctx context.Context) error {
	o.mu.Lock()
	live := map[string]bool{}
	liveRuns := map[int64]bool{}
	for id, r := range o.runs {
		live[r.run.TaskID], liveRuns[id] = true, true
	}
	o.mu.Unlock()
	open, err := o.store.OpenRuns(ctx)
	if err != nil {
		return err
	}
	for _, r := range open {
		if liveRuns[r.ID] {
			continue
		}
		if r.PID != nil && agent.Alive(*r.PID) && agent.IsRunOf(*r.PID, r.TaskID) {
			if err := agent.KillGroup(*r.PID); err != nil {
				o.log.Warn("reconcile: end leftover process", "run_id", r.ID, "pid", *r.PID, "err", err)
			}
		}
		if _, err := o.store.FinishRun(ctx, models.RunEnd{RunID: r.ID, Event: models.EventRecovery,
			Reason: "its run is not supervised (the daemon restarted or lost it)", Outcome: "recovered"}); err != nil {
			if _, err := o.store.FinishRun(ctx, models.RunEnd{RunID: r.ID, Outcome: "recovered"}); err != nil {
				return err
			}
		}
		o.log.Info("closed an unsupervised run", "task_id", r.TaskID, "run_id", r.ID, "agent", r.AgentID)
	}
	held, err := o.store.ListTasks(ctx, models.TaskFilter{Statuses: []models.TaskStatus{models.StatusAssigned,
		models.StatusInProgress, models.StatusWaitingInput}, Limit: MaxReconcile})
	if err != nil {
		return err
	}
	for _, t := range held {
		if live[t.ID] {
			continue
		}
		req := models.TransitionRequest{TaskID: t.ID, Event: models.EventRecovery, ExpectFrom: t.Status, Actor: "system",
			Reason: "no run is in flight for it"}
		if t.Status == models.StatusWaitingInput {
			at := o.cfg.Now().Add(o.cfg.InputTimeout)
			req.Event, req.ResumeAfter, req.Reason = models.EventInputTimeout, &at, "its run ended while waiting for an answer"
		}
		o.apply(ctx, req)
	}
	return nil
}

// MaxReconcile bounds the tasks one reconciliation reads.
const MaxReconcile = 10_000
