package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
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

	mu       sync.Mutex
	stopOnce sync.Once
	started  bool // the process is running and the task IN_PROGRESS
	// preparing is set, for a work run, from the claim until the workspace
	// is ready (PrepareTimeout governs it); spawnAt is when it was ready,
	// from which StartTimeout counts (a review's claim: its staging counts
	// as part of its start).
	preparing bool
	spawnAt   time.Time
	// timeout is the task's own cap on the run (Task.Timeout); 0 is none.
	timeout time.Duration
	// waiting counts the asks in progress: while one waits for its answer
	// every time limit of the run is suspended. waitSince is when the
	// first of them began; waited is the time the run has spent waiting,
	// which max_runtime and the task's timeout do not count.
	waiting      int
	waitSince    time.Time
	waited       time.Duration
	lastActivity time.Time
	// lastReport is the agent's last report over the agent RPC (its
	// heartbeat), or the process's start; HeartbeatTimeout counts from it.
	lastReport time.Time
	proc       *agent.Process
	stop       chan struct{} // closed when the loop ends the run
	// Reports made through RPC while the run was going.
	completion *models.Completion
	failure    string
	pause      *models.RateLimit
	// verdict is a reviewer's approve or reject (review runs only).
	verdict *models.Feedback
	// resultSeen is closed when the adapter read the final result.
	resultSeen chan struct{}
	resultOnce sync.Once
	// sessionInvalid is set when the CLI did not know the resumed session.
	sessionInvalid bool
	// Set by the loop when it ends the run: the event and reason to apply.
	endEvent  models.TaskEvent
	endReason string
	// remote is set when a runner runs the run (see remote.go).
	remote *remoteRun
}

func newActiveRun(run models.Run, token string, ag models.Agent, now time.Time) *activeRun {
	return &activeRun{run: run, token: token, agent: ag, lastActivity: now, stop: make(chan struct{}),
		resultSeen: make(chan struct{}), spawnAt: run.StartedAt}
}

func (r *activeRun) touch(now time.Time) {
	r.mu.Lock()
	r.lastActivity = now
	r.mu.Unlock()
}

// reported records a report over the agent RPC: activity, and a heartbeat.
func (r *activeRun) reported(now time.Time) {
	r.mu.Lock()
	r.lastActivity, r.lastReport = now, now
	r.mu.Unlock()
}

// beginWait records that an ask of the run begins to wait for its answer.
func (r *activeRun) beginWait(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.waiting == 0 {
		r.waitSince = now
	}
	r.waiting++
}

// endWait records that an ask of the run stopped waiting (answered, or
// given up): once none waits, the time limits count again, the idle and
// heartbeat timeouts from now.
func (r *activeRun) endWait(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waiting--
	if r.waiting == 0 {
		r.waited += max(now.Sub(r.waitSince), 0)
	}
	r.lastActivity, r.lastReport = now, now
}

// end asks the run to stop, recording why; the first reason wins.
func (r *activeRun) end(event models.TaskEvent, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.endReason != "" {
		return
	}
	r.endEvent, r.endReason = event, reason
	r.stopOnce.Do(func() { close(r.stop) })
}

// requestStop ends the process without deciding the outcome: what the
// agent reported (a pause, a failure) decides it.
func (r *activeRun) requestStop() { r.stopOnce.Do(func() { close(r.stop) }) }

// limits returns a run's idle timeout and its longest wall-clock time: the
// agent's, else the daemon's; a task's own timeout, when smaller, caps the
// latter.
func (o *Orchestrator) limits(a models.Agent, taskTimeout time.Duration) (idle, max time.Duration) {
	idle, max = o.cfg.IdleTimeout, o.cfg.MaxRuntime
	if a.IdleTimeout > 0 {
		idle = a.IdleTimeout.Std()
	}
	if a.MaxRuntime > 0 {
		max = a.MaxRuntime.Std()
	}
	if taskTimeout > 0 && taskTimeout < max {
		max = taskTimeout
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
	ar := newActiveRun(run, token, ag, o.cfg.Clock.Now())
	ar.preparing = true // a work run prepares its workspace first
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
	coolProject := func(what, msg string) {
		o.mu.Lock()
		o.failures[ar.run.ProjectID]++
		n := o.failures[ar.run.ProjectID]
		o.mu.Unlock()
		o.coolDown("project:"+ar.run.ProjectID, o.cfg.Clock.Now().Add(o.Backoff(n-1)))
		log.Warn("run did not start; the project cools down", "step", what, "err", msg, "project_id", ar.run.ProjectID)
	}
	startErr := func(what string, agentFault bool, err error) models.TransitionResult {
		select {
		case <-ar.stop:
			end := o.loopEnd(ar, models.StatusAssigned)
			if end.Event == models.EventExecutionError { // the preparation ran out of time
				coolProject("prepare workspace", end.Reason)
			}
			return o.finish(ctx, ar, end)
		default:
		}
		end := models.RunEnd{RunID: ar.run.ID, Event: models.EventExecutionError, ExpectFrom: models.StatusAssigned,
			Reason: what + ": " + models.ReasonOf(err), Outcome: models.RunOutcomeExecutionError, Error: what + ": " + models.RedactURL(err.Error())}
		if agentFault {
			end.AgentError = what
			log.Warn("run did not start; the agent is set aside", "step", what, "err", models.RedactURL(err.Error()))
		} else {
			coolProject(what, models.RedactURL(err.Error()))
		}
		return o.finish(ctx, ar, end)
	}
	task, err := o.store.GetTask(ctx, ar.run.TaskID)
	if err != nil {
		return startErr("read task", false, err)
	}
	ar.mu.Lock()
	ar.timeout = task.Timeout.Std()
	ar.mu.Unlock()
	project, err := o.store.GetProject(ctx, task.ProjectID)
	if err != nil {
		return startErr("read project", false, err)
	}
	adapter, err := o.adapters.For(ar.agent.AgentType)
	if err != nil {
		return startErr("agent type", true, err)
	}
	prof, err := o.profile(ar.agent, project, task)
	if err != nil {
		return startErr("profile", false, err)
	}
	if ar.agent.RunnerID != "" {
		return o.executeRemote(ctx, startCtx, ar, task, project, adapter, prof, startErr)
	}
	ws, err := o.ws.Prepare(startCtx, ar.agent, project, task)
	if models.Fenced(err) {
		// The lease's fence refused to touch the checkout: neither the
		// project's fault nor the agent's. The task is READY again without
		// a retry consumed, as after a restart.
		log.Warn("run did not start: the lease's fence refused to prepare the checkout", "err", err)
		return o.finish(ctx, ar, models.RunEnd{RunID: ar.run.ID, Event: models.EventRecovery, ExpectFrom: models.StatusAssigned,
			Reason: "prepare workspace: " + models.ReasonOf(err), Outcome: models.RunOutcomeRecovered, Error: err.Error()})
	}
	if err != nil {
		return startErr("prepare workspace", false, err)
	}
	// The workspace is ready: from now StartTimeout governs the start.
	ar.mu.Lock()
	ar.preparing, ar.spawnAt = false, o.cfg.Clock.Now()
	ar.mu.Unlock()
	o.armTimers() // arm the start deadline
	released := false
	release := func() {
		if !released {
			released = true
			o.ws.Release(ws)
		}
	}
	defer release()
	if ws.Rescued != "" {
		log.Warn("uncommitted changes in the checkout were kept on a rescue branch", "branch", ws.Rescued, "dir", ws.Dir)
	}
	tc, err := o.taskContext(ctx, project, task, ws, ar.run.Attempt)
	if err != nil {
		return startErr("assemble the task context", false, err)
	}
	tc.Tools = prof.AllowedTools
	if vp, ok := adapter.(agent.VersionProber); ok {
		o.probeVersion(startCtx, ar, vp)
	}
	session, sessionUsage, err := o.store.LastSession(ctx, task.ID, ar.agent.ID)
	if err != nil {
		return startErr("read the last session", false, err)
	}
	base := filepath.Join(o.cfg.RunDir, task.ID, strconv.Itoa(ar.run.Attempt))
	proc, parser, err := o.launch(ctx, ar, adapter, launchSpec{task: task, profile: prof, tc: tc,
		dir: ws.Dir, base: base, session: session, sessionUsage: sessionUsage})
	if err != nil {
		var se *startError
		if errors.As(err, &se) {
			return startErr(se.step, se.agentFault, se.err)
		}
		return startErr("start process", true, err)
	}
	// The start records the task's branch and the repository of the
	// agent's checkout with it (one commit).
	repoID := ""
	if project.Repo != nil {
		repoID = project.Repo.ID
	}
	if _, err := o.store.StartRunWith(ctx, ar.run.ID, models.RunStart{PID: proc.PID(), CheckoutPath: ws.Dir,
		Branch: ws.Branch, RepoID: &repoID}); err != nil {
		proc.Stop(o.cfg.StopGrace) // still held: the agent never ran
		log.Warn("started run not recorded", "err", err)
		return o.finish(ctx, ar, models.RunEnd{RunID: ar.run.ID, Event: models.EventExecutionError,
			ExpectFrom: models.StatusAssigned, Reason: "record the start: " + err.Error(), Outcome: models.RunOutcomeExecutionError,
			Error: err.Error()})
	}
	// Recorded: the agent may run now. A gate that cannot be released has
	// ended, and the run ends with it (its exit is the failure).
	if err := proc.Release(); err != nil {
		log.Warn("agent process not released", "err", err)
	}
	ar.mu.Lock()
	ar.proc, ar.started, ar.lastActivity = proc, true, o.cfg.Clock.Now()
	ar.lastReport = ar.lastActivity
	ar.mu.Unlock()
	o.mu.Lock()
	delete(o.failures, ar.run.ProjectID)
	o.mu.Unlock()
	log.Info("agent started", "pid", proc.PID(), "dir", ws.Dir, "session", session)
	if o.cfg.OnRunStart != nil {
		o.cfg.OnRunStart(ar.run)
	}
	o.armTimers()

	result := o.await(ar, proc, parser)
	end := o.outcome(ctx, ar, result)
	if ar.sessionInvalid {
		if err := o.store.ForgetSessions(ctx, task.ID, ar.agent.ID); err != nil {
			log.Warn("forget sessions", "err", err)
		}
	}
	switch {
	case end.Event == models.EventAgentCompleted:
		if sr, ok := parser.(agent.StderrReader); ok {
			// What the CLI refused stays on the completed run: the
			// verification names it when the run changed nothing.
			if note := sr.Refusals(); note != "" {
				log.Warn("the agent's CLI refused writes", "refusals", note)
				end.Error = note
			}
		}
		end = o.sealWork(ctx, ar, project, task, ws, end)
	case o.resumesLater(ctx, task.ID, end):
		// Before the run's end is recorded: that frees the agent, and its
		// next run may prepare this checkout at once.
		o.keepWork(ctx, ar, project, task, ws)
	}
	res := o.finish(ctx, ar, end)
	release() // verification works in its own checkout; the next run may take this one
	if res.To == models.StatusVerifying && !res.Duplicate {
		o.landing.Verify(task.ID)
	}
	return res
}

// launchSpec is what launch needs besides the run.
type launchSpec struct {
	task         models.Task
	profile      models.Profile
	tc           models.TaskContext
	dir, base    string
	session      string
	sessionUsage models.TokenUsage
}

// startError is a launch step that failed before a process existed.
type startError struct {
	step       string
	agentFault bool
	err        error
}

func (e *startError) Error() string { return e.step + ": " + e.err.Error() }

// runPrompt renders the prompt of a run of adapter with profile p: it
// offers only the ways of reporting the adapter's CLI has. The run's MCP
// servers are named, and agentqueued's MCP tools offered, only when the
// adapter gives the CLI the servers (claude, codex); `<AQ_BIN> agent …` in
// a shell only when the CLI can run it.
func (o *Orchestrator) runPrompt(adapter agent.Adapter, p models.Profile, tc models.TaskContext) (string, error) {
	if agent.PassesMCPServers(adapter, p) {
		for _, s := range o.mcpServers(p, nil) {
			// Names and endpoints only: a server's env (the run token)
			// stays out of the prompt.
			tc.MCPServers = append(tc.MCPServers, models.MCPServer{Name: s.Name, Command: s.Command, Args: s.Args,
				URL: models.RedactURL(s.URL)})
		}
	}
	if o.cfg.Executable != "" && agent.ShellFallback(adapter, p) {
		tc.AgentCommand = agent.AgentCommand(o.cfg.Executable)
	}
	return RenderPrompt(tc)
}

// launch renders the prompt, builds the adapter's invocation and starts the
// process of a run (work or review) with its parser wired to the run. The
// process is held: it runs nothing until the caller has recorded its pid
// with StartRun and released it (agent.Process.Release).
func (o *Orchestrator) launch(ctx context.Context, ar *activeRun, adapter agent.Adapter, ls launchSpec) (*agent.Process, agent.Parser, error) {
	prompt, err := o.runPrompt(adapter, ls.profile, ls.tc)
	if err != nil {
		return nil, nil, &startError{"render the prompt", false, err}
	}
	if err := mkdirPrivate(filepath.Dir(ls.base)); err != nil {
		return nil, nil, &startError{"run directory", false, err}
	}
	promptFile := ls.base + ".prompt"
	if err := os.WriteFile(promptFile, []byte(prompt), 0o600); err != nil {
		return nil, nil, &startError{"write prompt", false, err}
	}
	stateDir := ls.base + ".state"
	runEnv := map[string]string{
		"AQ_SOCKET": o.cfg.SocketPath, "AQ_TASK_ID": ar.run.TaskID, "AQ_RUN_TOKEN": ar.token, "AQ_PROMPT_FILE": promptFile,
		"AQ_PROJECT_ID": ar.run.ProjectID, "AQ_ATTEMPT": strconv.Itoa(ar.run.Attempt), "AQ_RUN_KIND": ar.run.Kind,
	}
	if o.cfg.Executable != "" {
		runEnv["AQ_BIN"] = o.cfg.Executable
	}
	maps.Copy(runEnv, ls.tc.Run.Env()) // a task of a workflow run: its place in it
	rc := agent.RunContext{Agent: ar.agent, Task: ls.task, Profile: ls.profile, MCPServers: o.mcpServers(ls.profile, runEnv),
		Dir: ls.dir, Prompt: prompt, PromptFile: promptFile, StateDir: stateDir, SessionID: ls.session,
		SessionUsage: ls.sessionUsage, Executable: o.cfg.Executable, ToolTimeout: o.cfg.InputTimeout + ToolTimeoutMargin}
	inv, err := adapter.Invocation(rc)
	if err != nil {
		return nil, nil, &startError{"build command", true, err}
	}
	// The state directory exists when the invocation uses it: files to
	// write, or its path in the arguments or environment (an agent that
	// keeps its own files there). A command agent's run creates none.
	if usesDir(inv, stateDir) {
		if err := mkdirPrivate(stateDir); err != nil {
			return nil, nil, &startError{"run directory", false, err}
		}
	}
	for name, content := range inv.Files {
		if name != filepath.Base(name) || name == "." || name == ".." {
			return nil, nil, &startError{"build command", true, fmt.Errorf("adapter file name %q is not a plain name", name)}
		}
		if err := os.WriteFile(filepath.Join(stateDir, name), []byte(content), 0o600); err != nil {
			return nil, nil, &startError{"write adapter files", false, err}
		}
	}
	env := agent.Environment(o.cfg.Environ, o.agentEnv(ar, inv), runEnv)
	select {
	case <-ar.stop: // timed out or stopped before the process existed
		return nil, nil, &startError{"start", false, errors.New("stopped before the process started")}
	default:
	}
	parser := adapter.NewParser(rc)
	var onStderr func([]byte)
	if sr, ok := parser.(agent.StderrReader); ok {
		onStderr = sr.StderrLine
	}
	// Held until the caller has recorded its pid (see Release).
	proc, err := agent.Start(agent.Spec{Argv: inv.Argv, Dir: ls.dir, Env: env, Stdin: inv.Stdin, LogPath: ls.base + ".log", Hold: true,
		OnStderrLine: onStderr,
		OnActivity: func() {
			ar.touch(o.cfg.Clock.Now())
			o.outputGrew(ar.run.TaskID)
		},
		OnLine: func(line []byte) {
			for _, ev := range parser.Line(line) {
				o.adapterEvent(ctx, ar, ev)
			}
		}})
	if err != nil {
		return nil, nil, &startError{"start process", true, err}
	}
	return proc, parser, nil
}

// usesDir reports whether inv has files to write or names dir in its
// arguments or environment.
func usesDir(inv agent.Invocation, dir string) bool {
	if len(inv.Files) > 0 {
		return true
	}
	for _, a := range inv.Argv {
		if strings.Contains(a, dir) {
			return true
		}
	}
	for _, v := range inv.Env {
		if strings.Contains(v, dir) {
			return true
		}
	}
	return false
}

// mkdirPrivate makes the directory dir (mode 0700) when it does not exist,
// with one system call when its parent exists (the common case: a run's
// directory under the runs directory).
func mkdirPrivate(dir string) error {
	err := os.Mkdir(dir, 0o700)
	if err == nil {
		return nil
	}
	if errors.Is(err, fs.ErrExist) || errors.Is(err, fs.ErrNotExist) {
		return os.MkdirAll(dir, 0o700) // checks that it is a directory, or makes its parents
	}
	return err
}

// agentEnv is what a run adds to the scrubbed environment besides its AQ_
// variables: the daemon's variables the agent's pass_env names, then the
// agent's env, then the adapter's. Names pass_env gives that the daemon's
// environment lacks are skipped, with one warning a run naming them (never
// a value).
func (o *Orchestrator) agentEnv(ar *activeRun, inv agent.Invocation) map[string]string {
	extra, missing := agent.PassEnv(o.cfg.Environ, ar.agent.PassEnv)
	if extra == nil {
		extra = map[string]string{}
	}
	if len(missing) > 0 {
		o.log.Warn("pass_env names variables the daemon's environment lacks; the run goes on without them",
			"task_id", ar.run.TaskID, "agent", ar.agent.ID, "run_id", ar.run.ID, "missing", missing)
	}
	maps.Copy(extra, ar.agent.Env)
	maps.Copy(extra, inv.Env)
	return extra
}

// await waits for a run's process to end: by itself, stopped by the loop,
// or stopped ResultGrace after its final result when it lingers. The
// parser's last word is applied before it returns.
func (o *Orchestrator) await(ar *activeRun, proc *agent.Process, parser agent.Parser) agent.Result {
	var result agent.Result
	select {
	case <-proc.Done():
		result, _ = proc.Wait(context.Background())
	case <-ar.stop:
		result = proc.Stop(o.cfg.StopGrace)
	case <-ar.resultSeen:
		select {
		case <-proc.Done():
			result, _ = proc.Wait(context.Background())
		case <-ar.stop:
			result = proc.Stop(o.cfg.StopGrace)
		case <-o.cfg.Clock.After(o.cfg.ResultGrace):
			o.log.Info("process lingers after its result; stopping it", "task_id", ar.run.TaskID, "run_id", ar.run.ID)
			result = proc.Stop(o.cfg.StopGrace)
		}
	}
	for _, ev := range parser.End(result.ExitCode) {
		o.adapterEvent(context.Background(), ar, ev)
	}
	return result
}

// resumesLater reports whether the task of a run ending without a
// completion goes on with its session: paused (a rate limit, its question
// waiting or abandoned) or failed for a retry. A task a person or the loop
// has stopped, cancelled or timed out does not: its checkout's leftovers
// are rescued as a killed run's.
func (o *Orchestrator) resumesLater(ctx context.Context, taskID string, end models.RunEnd) bool {
	switch end.Event {
	case models.EventTimeout, models.EventTimeoutFailed, models.EventAdminStop, models.EventAdminCancel, models.EventExecutionError:
		return false
	}
	cur, err := o.store.GetTask(ctx, taskID)
	if err != nil {
		return false
	}
	return cur.Status != models.StatusBlocked && cur.Status != models.StatusCompleted
}

// keepWork commits what a run that did not complete left uncommitted on
// its task branch when its task goes on (see resumesLater): the next run
// resumes the session and expects its files, which the next preparation
// would otherwise move to a rescue branch as a killed run's leftovers. A checkout that cannot be
// sealed (conflicts left unresolved) stays as it is, and the next
// preparation rescues it.
func (o *Orchestrator) keepWork(ctx context.Context, ar *activeRun, p models.Project, t models.Task, ws models.Workspace) {
	if p.Repo == nil || ws.Branch == "" {
		return
	}
	if _, err := o.ws.Seal(ctx, p, t, ws); err != nil {
		o.log.Warn("keep a paused run's work on its branch", "task_id", t.ID, "run_id", ar.run.ID, "err", err)
	}
}

// sealWork finishes a completed run's work in its checkout: a plan file
// becomes the task's pending plan, what the agent left uncommitted is
// committed, the result is kept for dependents, and the verification's
// first phase is recorded (both with the run's end, in the transaction of
// FinishRun: one commit instead of three). A failure turns the completion into
// AGENT_FAILED with the reason; a refusal of the lease's fence into
// RECOVERY.
func (o *Orchestrator) sealWork(ctx context.Context, ar *activeRun, p models.Project, t models.Task, ws models.Workspace, end models.RunEnd) models.RunEnd {
	failed := func(what string, err error) models.RunEnd {
		msg := what + ": " + models.ReasonOf(err)
		if models.Fenced(err) {
			// Not the agent's failure: the lease's fence refused the act.
			// The task is READY again without a retry consumed; what the
			// run left uncommitted stays in the checkout, and the next
			// preparation keeps it on a rescue branch.
			return models.RunEnd{RunID: ar.run.ID, Event: models.EventRecovery, ExpectFrom: models.StatusInProgress,
				Reason: msg, Outcome: models.RunOutcomeRecovered, Error: msg}
		}
		return models.RunEnd{RunID: ar.run.ID, Event: models.EventAgentFailed, ExpectFrom: models.StatusInProgress,
			Reason: msg, Outcome: models.RunOutcomeFailed, Error: msg}
	}
	if !t.IsPlanSubtask {
		if err := o.readPlanFile(ctx, t, ws.Dir); err != nil {
			return failed("plan file", err)
		}
	}
	files, err := o.ws.Seal(ctx, p, t, ws)
	if err != nil {
		return failed("commit the work", err)
	}
	ar.mu.Lock()
	c := models.Completion{Summary: end.Reason}
	if ar.completion != nil {
		c = *ar.completion
	}
	ar.mu.Unlock()
	if p.Repo != nil {
		// What the branch changes, not what the agent said it changed; a
		// run that changed nothing completes only when its agent said so
		// (the verification fails it otherwise).
		c.FilesChanged = files
		c.NoChanges = c.NoChanges && len(files) == 0
	} else if len(files) > 0 {
		c.FilesChanged = files
	}
	// The result and the verification's start are saved with the run's
	// end, in its transaction.
	end.Result = &c
	end.Verification = &models.Verification{TaskID: t.ID, Attempt: ar.run.Attempt, Phase: models.PhaseChecks, Source: ws.Dir}
	return end
}

// loopEnd is the end the loop asked for, applied from status from.
func (o *Orchestrator) loopEnd(ar *activeRun, from models.TaskStatus) models.RunEnd {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	// A run ended mid-question leaves its task waiting for the answer (see
	// Store.FinishRun), whatever the event says.
	end := models.RunEnd{RunID: ar.run.ID, Event: ar.endEvent, ExpectFrom: from, Reason: ar.endReason,
		Outcome: models.RunOutcomeStopped, Error: ar.endReason}
	switch ar.endEvent {
	case models.EventTimeout, models.EventTimeoutFailed:
		end.Outcome = models.RunOutcomeTimeout
	case models.EventExecutionError:
		end.Outcome = models.RunOutcomeExecutionError
	}
	return end
}

// outcome decides what a finished process means for its task.
func (o *Orchestrator) outcome(ctx context.Context, ar *activeRun, r agent.Result) models.RunEnd {
	ar.mu.Lock()
	stoppedByLoop := ar.endReason != ""
	completion, failure, pause, waiting := ar.completion, ar.failure, ar.pause, ar.waiting > 0
	ar.mu.Unlock()
	end := models.RunEnd{RunID: ar.run.ID, ExpectFrom: models.StatusInProgress}
	switch {
	case stoppedByLoop:
		return o.loopEnd(ar, models.StatusInProgress)
	case waiting && completion == nil && failure == "" && pause == nil:
		// The process ended while its question waited (its CLI gave up
		// on the call and finished): no outcome of the task's; it waits on
		// for the answer (an answer that came meanwhile requeues it).
		msg := "the agent's process ended while its question waited: " + exitText(r)
		end.Reason, end.Outcome, end.Error = msg, models.RunOutcomeStopped, msg
	case pause != nil:
		at := o.cfg.Clock.Now().Add(o.cfg.PauseDelay)
		if pause.ResetAt != nil && pause.ResetAt.After(o.cfg.Clock.Now()) {
			at = *pause.ResetAt
		}
		end.Event, end.ResumeAfter, end.Outcome = models.EventTokensExhausted, &at, models.RunOutcomePaused
		end.Reason = fmt.Sprintf("%s until %s", pauseWhat(pause), at.UTC().Format(time.RFC3339))
		// The agent's account is limited too: it rests until the reset
		// rather than pause every READY task in turn.
		o.rest(ctx, ar.run.AgentID, at, restReason(pause, ar.run.TaskID))
		if pause.Message != "" {
			end.Reason += ": " + pause.Message
		}
	case failure != "":
		end.Event, end.Reason, end.Outcome, end.Error = models.EventAgentFailed, failure, models.RunOutcomeFailed, failure
	case completion != nil || r.ExitCode == 0:
		end.Event, end.Outcome = models.EventAgentCompleted, models.RunOutcomeCompleted
		if completion != nil {
			end.Reason = completion.Summary
		}
	default:
		msg := exitText(r)
		end.Event, end.Reason, end.Outcome, end.Error = models.EventAgentFailed, msg, models.RunOutcomeFailed, msg
	}
	return end
}

// rest keeps an agent whose provider refused work out of scheduling until
// until: in the store, so that the rest outlives a restart, and in the
// cooldowns the scheduler's snapshot leaves out. A rest that could not be
// stored still holds in this life of the daemon.
func (o *Orchestrator) rest(ctx context.Context, agentID string, until time.Time, reason string) {
	if err := o.store.RestAgent(ctx, agentID, until, reason); err != nil {
		o.log.Warn("agent rest not stored; it holds until the daemon stops", "agent", agentID, "until", until, "err", err)
	}
	o.log.Info("agent rests", "agent", agentID, "until", until, "reason", reason)
	o.coolDown("agent:"+agentID, until)
}

// SetAgentPaused pauses an agent or resumes it (see the store's
// SetAgentPaused); resuming also ends the agent's rest after a rate limit
// here, so that it may take work in the next round.
func (o *Orchestrator) SetAgentPaused(ctx context.Context, id string, paused bool) (models.Agent, error) {
	a, err := o.store.SetAgentPaused(ctx, id, paused)
	if err != nil || paused {
		return a, err
	}
	o.mu.Lock()
	delete(o.cooldown, "agent:"+id)
	o.mu.Unlock()
	o.Wake()
	return a, nil
}

// restReason says why an agent rests after a run reported pause.
func restReason(p *models.RateLimit, taskID string) string {
	r := pauseWhat(p) + " during task " + taskID
	if p.Message != "" {
		r += ": " + p.Message
	}
	return models.CleanLine(r, maxRestReason)
}

// maxRestReason bounds the reason kept for an agent's rest.
const maxRestReason = 500

// loadRests puts the stored rests of agents that last beyond now into the
// cooldowns, so that an agent rate-limited before a restart is not handed
// work until its reset.
func (o *Orchestrator) loadRests(ctx context.Context) error {
	now := o.cfg.Clock.Now()
	as, err := o.store.RestingAgents(ctx, now)
	if err != nil {
		return fmt.Errorf("load agents' rests: %w", err)
	}
	for _, a := range as {
		o.log.Info("agent rests after a restart", "agent", a.ID, "until", *a.RestUntil, "reason", a.RestReason)
		o.coolDown("agent:"+a.ID, *a.RestUntil)
	}
	return nil
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
	// Reasons are shown in answers and notices: no URL keeps credentials.
	end.Reason, end.Error = models.RedactURL(end.Reason), models.RedactURL(end.Error)
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

// adapterEvent applies what an adapter read from the output stream.
func (o *Orchestrator) adapterEvent(ctx context.Context, ar *activeRun, ev agent.Event) {
	switch ev.Kind {
	case agent.EventSession:
		if ev.SessionID != "" {
			if err := o.store.RecordRunSession(ctx, ar.run.ID, ev.SessionID); err != nil {
				o.log.Warn("record session", "task_id", ar.run.TaskID, "run_id", ar.run.ID, "err", err)
			}
		}
		return
	case agent.EventCLI:
		o.recordCLI(ctx, ar, models.RunCLI{CLI: ar.agent.AgentType, Version: ev.Version, MCPNotReady: ev.MCPNotReady})
		return
	case agent.EventUsage:
		if _, err := o.store.RecordRunUsage(ctx, ar.run.ID, ev.Usage); err != nil {
			o.log.Warn("record usage", "task_id", ar.run.TaskID, "run_id", ar.run.ID, "err", err)
		}
		return
	case agent.EventMessage:
		// What the agent says goes to the task's thread as progress, which
		// chat condenses.
		o.log.Debug("agent says", "task_id", ar.run.TaskID, "run_id", ar.run.ID, "text", ev.Text)
		key := fmt.Sprintf("agent_message:%d:%d", ar.run.ID, o.noticeSeq.Add(1))
		if err := o.store.Notify(ctx, key, models.NewProgressNotice(ar.run.ProjectID, models.ProgressNotice{
			TaskID: ar.run.TaskID, RunID: ar.run.ID, Message: ev.Text, Source: "agent"})); err != nil {
			o.log.Warn("record agent message", "task_id", ar.run.TaskID, "run_id", ar.run.ID, "err", err)
		}
		return
	}
	if ev.Kind == agent.EventResult && (ev.CostUSD != nil || len(ev.Denied) > 0) {
		// Written before the run's lock is taken: the supervisor and the
		// agent's RPC calls wait on that lock, not on the writer.
		var denied []string
		for _, d := range ev.Denied {
			denied = append(denied, d.Tool)
		}
		if len(denied) > 0 {
			o.log.Warn("the agent's CLI denied tool calls; the run fails", "task_id", ar.run.TaskID, "run_id", ar.run.ID,
				"agent", ar.run.AgentID, "denied", denied)
		}
		if err := o.store.RecordRunResult(ctx, ar.run.ID, ev.CostUSD, denied); err != nil {
			o.log.Warn("record run result", "task_id", ar.run.TaskID, "run_id", ar.run.ID, "err", err)
		}
	}
	ar.mu.Lock()
	defer ar.mu.Unlock()
	switch ev.Kind {
	case agent.EventRateLimit:
		kind := "rate_limit"
		if ev.UsageCap {
			kind = "tokens"
		}
		ar.pause = &models.RateLimit{ResetAt: ev.ResetAt, Kind: kind, Message: ev.Error}
	case agent.EventResult:
		if ev.SessionInvalid {
			ar.sessionInvalid = true
		}
		if ev.IsError {
			if ar.failure == "" {
				ar.failure = ev.Error
				if ar.failure == "" {
					ar.failure = "the agent reported an error"
				}
			}
		} else if ar.completion == nil {
			ar.completion = &models.Completion{Summary: ev.Summary}
		}
		ar.resultOnce.Do(func() { close(ar.resultSeen) })
	}
}

// versionProbeTimeout bounds a CLI's --version.
const versionProbeTimeout = 10 * time.Second

// probeVersion records the version of a CLI whose stream does not carry
// it, read once per command file (path, size and time of change) in this
// life of the daemon. A probe that fails is logged; the run goes on.
func (o *Orchestrator) probeVersion(ctx context.Context, ar *activeRun, vp agent.VersionProber) {
	argv := vp.VersionArgv(ar.agent)
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return // the start fails with its own error
	}
	key := path
	if fi, err := os.Stat(path); err == nil {
		key = fmt.Sprintf("%s|%d|%d", path, fi.Size(), fi.ModTime().UnixNano())
	}
	o.mu.Lock()
	v, ok := o.cliVersions[key]
	o.mu.Unlock()
	if !ok {
		pctx, cancel := context.WithTimeout(ctx, versionProbeTimeout)
		v, err = agent.ProbeVersion(pctx, argv, agent.Environment(o.cfg.Environ, nil, nil))
		cancel()
		if err != nil {
			o.log.Info("agent CLI version not read", "task_id", ar.run.TaskID, "run_id", ar.run.ID, "agent", ar.run.AgentID,
				"err", err)
			return
		}
		o.mu.Lock()
		o.cliVersions[key] = v
		o.mu.Unlock()
	}
	o.recordCLI(ctx, ar, models.RunCLI{CLI: ar.agent.AgentType, Version: v})
}

// ownMCPServer is the name agentqueued's own MCP server has in every run.
const ownMCPServer = "agentqueued"

// recordCLI keeps what a run's CLI showed of itself, and warns about a
// version older than the known-good one and about agentqueued's own MCP
// server not being connected when the CLI began (its first turn then had
// none of the daemon's tools).
func (o *Orchestrator) recordCLI(ctx context.Context, ar *activeRun, c models.RunCLI) {
	if err := o.store.RecordRunCLI(ctx, ar.run.ID, c); err != nil {
		o.log.Warn("record the run's CLI", "task_id", ar.run.TaskID, "run_id", ar.run.ID, "err", err)
	}
	if w := models.CLIVersionWarning(c.CLI, c.Version); w != "" {
		o.log.Warn("agent CLI older than the known-good version", "task_id", ar.run.TaskID, "run_id", ar.run.ID,
			"agent", ar.run.AgentID, "cli", c.CLI, "version", c.Version, "known_good", models.KnownGoodCLIVersion(c.CLI))
	}
	for _, s := range c.MCPNotReady {
		level := slog.LevelInfo
		if strings.HasPrefix(s, ownMCPServer+" ") {
			level = slog.LevelWarn
		}
		o.log.Log(ctx, level, "MCP server not connected when the agent's CLI began; its tools may appear a moment later",
			"task_id", ar.run.TaskID, "run_id", ar.run.ID, "agent", ar.run.AgentID, "server", s, "version", c.Version)
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
		r.mu.Lock()
		rr := r.remote
		r.mu.Unlock()
		if rr != nil {
			until, ok := o.superviseRemote(r, rr, now)
			if !ok {
				continue
			}
			consider(until)
		}
		r.mu.Lock()
		started, last, waiting := r.started, r.lastActivity, r.waiting > 0
		lastReport, waited := r.lastReport, r.waited
		preparing, spawnAt, taskTimeout := r.preparing, r.spawnAt, r.timeout
		r.mu.Unlock()
		if started && waiting {
			// Waiting for an answer stops every clock of the run; the
			// question's expiry (a timer of the round) governs the wait.
			continue
		}
		idle, max := o.limits(r.agent, taskTimeout)
		if !started && preparing {
			// A slow preparation (a first clone) is not a start that hangs:
			// it ends as a failed preparation, and the task is READY again.
			deadline := r.run.StartedAt.Add(o.cfg.PrepareTimeout)
			if !now.Before(deadline) {
				r.end(models.EventExecutionError, fmt.Sprintf("prepare workspace: did not finish within %s", o.cfg.PrepareTimeout))
				continue
			}
			consider(deadline)
			continue
		}
		if !started {
			deadline := spawnAt.Add(o.cfg.StartTimeout)
			if !now.Before(deadline) {
				r.end(models.EventTimeoutFailed, fmt.Sprintf("did not start within %s", o.cfg.StartTimeout))
				continue
			}
			consider(deadline)
			continue
		}
		// The wall-clock limit counts the run's time without its waits for
		// answers.
		if wall := r.run.StartedAt.Add(max + waited); !now.Before(wall) {
			reason := fmt.Sprintf("ran longer than %s", max)
			if taskTimeout == max {
				reason = fmt.Sprintf("ran longer than the task's timeout of %s", max)
			}
			r.end(models.EventTimeoutFailed, reason)
			continue
		} else {
			consider(wall)
		}
		if quiet := last.Add(idle); !now.Before(quiet) {
			r.end(models.EventTimeoutFailed, fmt.Sprintf("no output and no report for %s", idle))
			continue
		} else {
			consider(quiet)
		}
		if hb := r.agent.HeartbeatTimeout.Std(); hb > 0 {
			if deadline := lastReport.Add(hb); !now.Before(deadline) {
				r.end(models.EventTimeoutFailed, fmt.Sprintf("no heartbeat for %s", hb))
				continue
			} else {
				consider(deadline)
			}
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
// runIDsOf returns the ids of a task's runs under way.
func (o *Orchestrator) runIDsOf(taskID string) []int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ids []int64
	for id, r := range o.runs {
		if r.run.TaskID == taskID {
			ids = append(ids, id)
		}
	}
	return ids
}

// endRuns ends the runs of ids still under way.
func (o *Orchestrator) endRuns(ids []int64, reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, id := range ids {
		if r, ok := o.runs[id]; ok {
			r.end("", reason)
		}
	}
}

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
	o.landing.Shutdown() // checks and merges stop; the next life resumes them
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range o.runs {
		r.mu.Lock()
		rr := r.remote
		r.mu.Unlock()
		if rr != nil && rr.detach() {
			continue // its runner works on; the next life takes it up
		}
		r.end(models.EventRecovery, "the daemon is shutting down")
		if rr != nil {
			rr.lose()
		}
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
		if o.adoptRemote(ctx, r) {
			continue // a runner works on it: supervised again
		}
		ended, err := o.endLeftover(ctx, r, "recovery")
		if err != nil {
			return err
		}
		if !ended {
			continue // its checkout is not free yet: reconcile tries again
		}
		end := models.RunEnd{RunID: r.ID, Event: models.EventRecovery, Reason: "the daemon restarted during this run",
			Outcome: models.RunOutcomeRecovered}
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
	verifying, err := o.store.ListTasks(ctx, models.TaskFilter{Statuses: []models.TaskStatus{models.StatusVerifying}, Limit: 10_000})
	if err != nil {
		return err
	}
	for _, t := range verifying {
		// Checks and deliveries start again (both are idempotent); a
		// review is dispatched again by the loop; a person's decision is
		// still awaited. Run starts them once its run context exists.
		o.resume = append(o.resume, t.ID)
	}
	return nil
}

// reconcile repairs what no run will repair: tasks holding an agent
// (ASSIGNED, IN_PROGRESS) without a run of this orchestrator are requeued,
// and open runs this orchestrator does not supervise are closed (a task
// whose run asked a question waits on for its answer in WAITING_INPUT
// without a run: that needs no repair). It runs at start and in every
// round, after dispatch, on the loop's goroutine. A leftover's process
// group is signalled only through the lease's fence (see endLeftover); a
// refusal ends the pass with the fence's error, and nothing is requeued.
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
		ended, err := o.endLeftover(ctx, r, "reconcile")
		if err != nil {
			return err
		}
		if !ended {
			// Its process group outlives SIGKILL for now: the run stays
			// open, its agent (and checkout) taken, its task held.
			live[r.TaskID] = true
			continue
		}
		if _, err := o.store.FinishRun(ctx, models.RunEnd{RunID: r.ID, Event: models.EventRecovery,
			Reason: "its run is not supervised (the daemon restarted or lost it)", Outcome: models.RunOutcomeRecovered}); err != nil {
			if _, err := o.store.FinishRun(ctx, models.RunEnd{RunID: r.ID, Outcome: models.RunOutcomeRecovered}); err != nil {
				return err
			}
		}
		o.log.Info("closed an unsupervised run", "task_id", r.TaskID, "run_id", r.ID, "agent", r.AgentID)
	}
	held, err := o.store.ListTasks(ctx, models.TaskFilter{Statuses: []models.TaskStatus{models.StatusAssigned,
		models.StatusInProgress}, Limit: MaxReconcile})
	if err != nil {
		return err
	}
	for _, t := range held {
		if live[t.ID] {
			continue
		}
		o.apply(ctx, models.TransitionRequest{TaskID: t.ID, Event: models.EventRecovery, ExpectFrom: t.Status, Actor: "system",
			Reason: "no run is in flight for it"})
	}
	return nil
}

// endLeftover ends the process group an open run that nothing supervises
// left behind (a run of an earlier life of the daemon), and reports whether
// the run may be closed: true once nothing of it is alive, so that its
// agent and checkout are handed to the next run only after its last
// process has gone. The first look at a run waits up to LeftoverWait for
// the killed group to end; a run whose group outlived that is looked at
// again in later rounds without waiting.
//
// The pid is read from the database: once another daemon has taken the
// database over it may be that daemon's run. A run claimed under a newer
// lease generation than this daemon's is never touched: the daemon has
// been deposed, and the error wraps models.ErrLeaseLost. Any other group
// is signalled only after the store confirmed the lease (ConfirmLease)
// immediately before; its refusal is returned, nothing signalled.
func (o *Orchestrator) endLeftover(ctx context.Context, r models.Run, step string) (bool, error) {
	if own := o.store.LeaseGeneration(); own > 0 && r.LeaseGeneration > own {
		return false, fmt.Errorf("run %d of task %s was claimed under lease generation %d, newer than this daemon's %d: %w",
			r.ID, r.TaskID, r.LeaseGeneration, own, models.ErrLeaseLost)
	}
	if r.PID == nil {
		// Never recorded: its process was held and has ended by itself
		// (its gate read end of file when the daemon that held it died).
		return true, nil
	}
	o.mu.Lock()
	wait := LeftoverWait
	if o.stuck[r.ID] {
		wait = 0
	}
	o.mu.Unlock()
	var refused error
	found, err := agent.EndLeftover(*r.PID, r.TaskID, wait, func() error {
		refused = o.store.ConfirmLease(ctx)
		return refused
	})
	if refused != nil {
		o.log.Warn(step+": the leftover process group of a run was left alone: the lease was not confirmed", "task_id", r.TaskID,
			"run_id", r.ID, "agent", r.AgentID, "pid", *r.PID, "err", refused)
		return false, fmt.Errorf("end the leftover process group of run %d: %w", r.ID, refused)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		if !o.stuck[r.ID] {
			o.log.Warn(step+": a leftover process group of the run is still alive; its run stays open", "task_id", r.TaskID,
				"run_id", r.ID, "agent", r.AgentID, "pid", *r.PID, "err", err)
		}
		o.stuck[r.ID] = true
		return false, nil
	}
	delete(o.stuck, r.ID)
	if found {
		o.log.Info(step+": ended the leftover process group of a run", "task_id", r.TaskID, "run_id", r.ID, "agent", r.AgentID,
			"pid", *r.PID)
	}
	return true, nil
}

// LeftoverWait bounds the wait for a leftover run's killed process group
// to end.
const LeftoverWait = 5 * time.Second

// MaxReconcile bounds the tasks one reconciliation reads.
const MaxReconcile = 10_000
