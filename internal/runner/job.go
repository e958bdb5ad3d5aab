package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/models"
)

// Defaults of a run on the runner.
const (
	// DefaultStopGrace is the time between SIGTERM and SIGKILL when the
	// daemon ends a run.
	DefaultStopGrace = 10 * time.Second
	// logEvery is how often a run's new output is sent to the daemon.
	logEvery = 500 * time.Millisecond
	// maxLogChunk is the most one log request carries.
	maxLogChunk = 512 << 10
	// eventsBatch is the most events one report carries.
	eventsBatch = 200
	// shutdownReports is how long a stopping runner keeps trying to report
	// its runs' ends before it leaves them to its journal.
	shutdownReports = 30 * time.Second
)

// job is one run the runner holds.
type job struct {
	r   *Runner
	asg models.RunnerAssignment
	cfg models.Agent // the agent as the runner's configuration has it

	// reportMu keeps reports in order, one at a time.
	reportMu sync.Mutex
	// saveMu orders the journal's writes; forgotten is set (with it held)
	// once the entry is removed, after which nothing is written.
	saveMu    sync.Mutex
	forgotten bool
	seq       int64

	stopOnce sync.Once
	stop     chan struct{}
	// gone is closed when the daemon no longer has the run (its lease was
	// lost, or it ended): nothing more is sent about it.
	gone     chan struct{}
	goneOnce sync.Once

	evMu   sync.Mutex
	events []agent.Event
	evWake chan struct{}

	// logMu guards logPath and logSent: the log is sent by the shipper and
	// before each relayed call.
	logMu   sync.Mutex
	logPath string
	logSent int64
	pid     int
	done    chan struct{}

	// What a detached agent's next life needs (agent.StartDetached),
	// guarded by logMu: the checkout, the launch, the agent's shim and
	// files, and the checkpoint of its output the journal has, up to
	// whose log offset the log is sent.
	detached bool
	ws       *models.Workspace
	launched *models.RunnerLaunch
	shim     *agent.ShimID
	files    *agent.RunFiles
	saved    agent.Checkpoint
	socket   string
	// kind is report seq's kind, and started is set once the daemon has
	// the started report. seq, kind and started are written with both
	// reportMu and logMu held, and read with either.
	kind    string
	started bool

	// cp is the checkpoint of the events queued (evMu); pending are the
	// events of the lines after it, touched only by the agent's reader.
	cp      agent.Checkpoint
	pending []agent.Event
	// output is a detached agent's, once started (logMu).
	output *agent.Detached
}

// readOutput hands on what a detached agent has printed so far.
func (j *job) readOutput() {
	j.logMu.Lock()
	d := j.output
	j.logMu.Unlock()
	if d != nil {
		d.Read()
	}
}

// agentProc is a running agent: on pipes (agent.Process) or detached
// (agent.Detached).
type agentProc interface {
	PID() int
	Done() <-chan struct{}
	Wait(ctx context.Context) (agent.Result, error)
	Stop(grace time.Duration) agent.Result
}

// end asks the job's agent to stop.
func (j *job) end() { j.stopOnce.Do(func() { close(j.stop) }) }

// lose marks the run as no longer the runner's: its agent is stopped and
// nothing more is reported.
func (j *job) lose() {
	j.goneOnce.Do(func() { close(j.gone) })
	j.end()
}

// report sends one report about the run, numbered in order, and returns
// the daemon's answer. A daemon that cannot be reached is tried again
// with the same number until it answers or the run is lost; a relayed ask
// still waiting is sent again until its answer comes.
func (j *job) report(ctx context.Context, rep models.RunnerReport) (models.RunnerReportAnswer, error) {
	j.reportMu.Lock()
	defer j.reportMu.Unlock()
	j.logMu.Lock()
	j.seq++
	rep.Seq = j.seq
	j.kind = rep.Kind
	j.logMu.Unlock()
	j.save() // the number before it is sent: a restart goes on after it
	return j.deliver(ctx, rep, true)
}

// deliver sends report rep until the daemon answers it or the run is
// lost; a relayed ask still waiting is sent again until its answer comes
// when untilAnswered, else its waiting is the answer. Call it with
// reportMu held.
func (j *job) deliver(ctx context.Context, rep models.RunnerReport, untilAnswered bool) (models.RunnerReportAnswer, error) {
	failures := 0
	for {
		select {
		case <-j.gone:
			return models.RunnerReportAnswer{}, errRunGone
		default:
		}
		ans, err := j.r.api.RunnerReport(ctx, j.asg.RunID, j.asg.Token, rep)
		switch {
		case err == nil && ans.Pending && untilAnswered:
			failures = 0
			continue
		case err == nil:
			return ans, nil
		case ctx.Err() != nil:
			return ans, ctx.Err()
		}
		switch models.ErrorCodeOf(err) {
		case models.CodeConflict, models.CodeUnauthorized: // the run, or the runner, is gone
			j.r.log.Warn("the daemon no longer has the run; ending it", "run_id", j.asg.RunID, "task_id", j.asg.Task.ID,
				"reason", models.ErrorMessageOf(err))
			j.lose()
			return ans, errRunGone
		case models.CodeInvalid, models.CodeNotFound:
			return ans, err // refused for good: retrying changes nothing
		}
		failures++
		// Capped at the heartbeat: a daemon back from a restart gets the
		// run's reports soon.
		wait := min(j.r.backoff(failures), DefaultHeartbeat)
		j.r.log.Info("report not delivered; trying again", "run_id", j.asg.RunID, "seq", rep.Seq, "err", err, "after", wait)
		select {
		case <-ctx.Done():
			return ans, ctx.Err()
		case <-j.gone:
			return ans, errRunGone
		case <-j.r.clock.After(wait):
		}
	}
}

// errRunGone is a report about a run the daemon no longer gives this
// runner.
var errRunGone = errors.New("the run is no longer this runner's")

// run prepares, launches and watches the job's agent, then hands its work
// back and reports its end.
//
// stopCtx ends with the runner: the agent is stopped and its end reported
// as lost by the runner (the task goes back to READY without a retry
// used); its reports go on a while longer, and what could not be sent is
// left in the journal for the runner's next life.
func (j *job) run(stopCtx context.Context) {
	defer close(j.done)
	ctx, cancel := j.contexts(stopCtx)
	defer cancel()
	keep := false // the journal keeps a run whose end did not reach the daemon
	defer func() {
		if !keep {
			j.forget()
		}
	}()
	log := j.logger()
	project := j.project()
	ws, err := j.r.ws.Prepare(ctx, j.cfg, project, j.asg.Task)
	if err == nil && j.asg.Repo != nil && ws.Branch != j.asg.Repo.Branch {
		err = fmt.Errorf("the checkout's branch %s is not the daemon's %s", ws.Branch, j.asg.Repo.Branch)
	}
	if err != nil {
		log.Warn("checkout not prepared", "err", err)
		_, _ = j.report(ctx, models.RunnerReport{Kind: models.ReportPrepared, PrepareError: models.RedactURL(err.Error())})
		return
	}
	ans, err := j.report(ctx, models.RunnerReport{Kind: models.ReportPrepared, Prepared: &ws})
	if err != nil || ans.Launch == nil {
		log.Warn("no launch for the run", "err", err)
		return
	}
	proc, parser, err := j.launch(ws, *ans.Launch)
	if err != nil {
		log.Warn("agent not started", "err", err)
		keep = !j.ended(ctx, models.RunnerEnded{ExitCode: -1, StderrTail: models.RedactURL(err.Error())})
		return
	}
	if _, err := j.report(ctx, models.RunnerReport{Kind: models.ReportStarted}); err != nil {
		proc.Stop(DefaultStopGrace)
		return
	}
	log.Info("agent started", "pid", proc.PID(), "dir", ws.Dir)
	j.logMu.Lock()
	j.started = true
	j.pid = proc.PID()
	j.logMu.Unlock()
	j.save()
	keep = !j.supervise(ctx, stopCtx, proc, parser, ws)
}

// contexts returns the context of a job's requests, which outlives
// stopCtx (the runner's) by shutdownReports, and its cancel; stopCtx's
// end also asks the agent to stop.
func (j *job) contexts(stopCtx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(stopCtx))
	stopping := context.AfterFunc(stopCtx, func() {
		j.end()
		// The last reports get a while, then give up: the journal keeps
		// the run for the next life.
		go func() {
			select {
			case <-j.r.clock.After(shutdownReports):
				cancel()
			case <-ctx.Done():
			}
		}()
	})
	return ctx, func() {
		stopping()
		cancel()
	}
}

func (j *job) logger() *slog.Logger {
	return j.r.log.With("run_id", j.asg.RunID, "task_id", j.asg.Task.ID, "agent", j.asg.Agent)
}

// project is the run's project as the runner knows it: its repository is
// the daemon's served one.
func (j *job) project() models.Project {
	project := models.Project{ID: j.asg.ProjectID}
	if j.asg.Repo != nil {
		project.Repo = &models.RepoConfig{ID: j.asg.Repo.ID, SourceType: models.RepoClone, URL: j.r.repoURL(j.asg.Repo.ID),
			DefaultBranch: j.asg.Repo.DefaultBranch}
	}
	return project
}

// supervise ships the agent's output and events while it runs, stops it
// when asked, then hands its work back and reports its end. It reports
// whether the daemon has the end, or no longer has the run.
func (j *job) supervise(ctx, stopCtx context.Context, proc agentProc, parser agent.Parser, ws models.Workspace) bool {
	shipped := make(chan struct{})
	sctx, stopShipping := context.WithCancel(ctx)
	go func() {
		defer close(shipped)
		j.ship(sctx)
	}()
	var res agent.Result
	select {
	case <-proc.Done():
		res, _ = proc.Wait(context.Background())
	case <-j.stop:
		res = proc.Stop(DefaultStopGrace)
	}
	stopShipping()
	<-shipped
	j.queue(parser.End(res.ExitCode)...)
	end := models.RunnerEnded{ExitCode: res.ExitCode, Signal: res.Signal, StderrTail: res.StderrTail}
	if sr, ok := parser.(agent.StderrReader); ok {
		end.Refusals = sr.Refusals()
	}
	project := j.project()
	if project.Repo != nil {
		if _, err := j.r.ws.Seal(ctx, project, j.asg.Task, ws); err != nil {
			end.PushError = models.RedactURL(err.Error())
		} else if commit, err := j.r.ws.PushTask(ctx, project, ws); err != nil {
			end.PushError = models.RedactURL(err.Error())
		} else {
			end.Pushed = commit
		}
	}
	end.Lost = stopCtx.Err() != nil
	delivered := j.ended(ctx, end)
	j.logger().Info("run ended", "exit", res.ExitCode, "signal", res.Signal, "pushed", end.Pushed, "push_error", end.PushError)
	return delivered
}

// ended sends what is left of the output and events, then the end.
//
// It reports whether the daemon has the end, or no longer has the run:
// either way the journal may forget it.
func (j *job) ended(ctx context.Context, end models.RunnerEnded) bool {
	if err := j.flush(ctx); err != nil {
		return errors.Is(err, errRunGone)
	}
	j.logMu.Lock()
	end.LogSize = j.logSent
	j.logMu.Unlock()
	_, err := j.report(ctx, models.RunnerReport{Kind: models.ReportEnded, Ended: &end})
	return err == nil || errors.Is(err, errRunGone)
}

// base is the path, without its suffix, of the run's files on the
// runner: .prompt, .state, .log and .run (a detached agent's files).
func (j *job) base() string {
	return filepath.Join(j.r.cfg.DataDir, "runs", j.asg.Task.ID, strconv.Itoa(j.asg.Attempt))
}

// runContext is what the adapter is given for the run, and the run's own
// environment.
func (j *job) runContext(ws models.Workspace, l models.RunnerLaunch) (agent.RunContext, map[string]string) {
	base := j.base()
	promptFile := base + ".prompt"
	runEnv := map[string]string{"AQ_SOCKET": j.r.cfg.SocketPath, "AQ_TASK_ID": j.asg.Task.ID, "AQ_RUN_TOKEN": j.asg.Token,
		"AQ_PROMPT_FILE": promptFile, "AQ_PROJECT_ID": j.asg.ProjectID, "AQ_ATTEMPT": strconv.Itoa(j.asg.Attempt),
		"AQ_RUN_KIND": j.asg.Kind}
	var servers []models.MCPServer
	if exe := j.r.cfg.Executable; exe != "" {
		runEnv["AQ_BIN"] = exe
		servers = append(servers, models.MCPServer{Name: "agentqueued", Command: exe, Args: []string{"mcp"},
			Env: map[string]string{"AQ_SOCKET": runEnv["AQ_SOCKET"], "AQ_TASK_ID": j.asg.Task.ID, "AQ_RUN_TOKEN": j.asg.Token}})
	}
	for _, s := range l.Profile.MCPServers {
		if s.Name != "agentqueued" {
			servers = append(servers, s)
		}
	}
	maps.Copy(runEnv, l.Env)
	rc := agent.RunContext{Agent: j.cfg, Task: j.asg.Task, Profile: l.Profile, MCPServers: servers, Dir: ws.Dir,
		Prompt: l.Prompt, PromptFile: promptFile, StateDir: base + ".state", SessionID: l.SessionID, SessionUsage: l.SessionUsage,
		Executable: j.r.cfg.Executable, ToolTimeout: l.ToolTimeout.Std()}
	return rc, runEnv
}

// launch starts the job's agent with the daemon's launch: detached, under
// a shim, when the runner has one (Config.Shim), so that its next life can
// take the agent up again.
func (j *job) launch(ws models.Workspace, l models.RunnerLaunch) (agentProc, agent.Parser, error) {
	adapter, err := j.r.cfg.Adapters.For(j.cfg.AgentType)
	if err != nil {
		return nil, nil, err
	}
	rc, runEnv := j.runContext(ws, l)
	base := j.base()
	if err := os.MkdirAll(filepath.Dir(base), 0o700); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(rc.PromptFile, []byte(l.Prompt), 0o600); err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(rc.StateDir, 0o700); err != nil {
		return nil, nil, err
	}
	inv, err := adapter.Invocation(rc)
	if err != nil {
		return nil, nil, err
	}
	for name, content := range inv.Files {
		if name != filepath.Base(name) || name == "." || name == ".." {
			return nil, nil, fmt.Errorf("adapter file name %q is not a plain name", name)
		}
		if err := os.WriteFile(filepath.Join(rc.StateDir, name), []byte(content), 0o600); err != nil {
			return nil, nil, err
		}
	}
	extra, _ := agent.PassEnv(j.r.cfg.Environ, j.cfg.PassEnv)
	if extra == nil {
		extra = map[string]string{}
	}
	maps.Copy(extra, j.cfg.Env)
	maps.Copy(extra, inv.Env)
	env := agent.Environment(j.r.cfg.Environ, extra, runEnv)
	parser := adapter.NewParser(rc)
	var onStderr func([]byte)
	if sr, ok := parser.(agent.StderrReader); ok {
		onStderr = sr.StderrLine
	}
	j.logMu.Lock()
	j.logPath = base + ".log"
	j.logMu.Unlock()
	if len(j.r.cfg.Shim) > 0 {
		files := agent.FilesIn(base + ".run")
		j.logMu.Lock()
		j.detached, j.ws, j.launched, j.files, j.socket = true, &ws, &l, &files, j.r.cfg.SocketPath
		j.logMu.Unlock()
		spec := j.detachedSpec(parser, files)
		spec.Argv, spec.Dir, spec.Env, spec.Stdin = inv.Argv, ws.Dir, env, inv.Stdin
		d, err := agent.StartDetached(spec)
		if err != nil {
			return nil, nil, err
		}
		// In the journal before anything is reported: a runner that dies
		// now finds its agent in its next life.
		j.logMu.Lock()
		id := d.ID()
		j.shim, j.pid, j.output = &id, d.PID(), d
		j.logMu.Unlock()
		j.save()
		return d, parser, nil
	}
	proc, err := agent.Start(agent.Spec{Argv: inv.Argv, Dir: ws.Dir, Env: env, Stdin: inv.Stdin, LogPath: j.logPath,
		OnStderrLine: onStderr,
		OnLine: func(line []byte) {
			j.queue(parser.Line(line)...)
		}})
	if err != nil {
		return nil, nil, err
	}
	return proc, parser, nil
}

// detachedSpec is the part of a detached agent's spec that reads its
// output: lines go to parser, their events are queued at each checkpoint.
func (j *job) detachedSpec(parser agent.Parser, files agent.RunFiles) agent.DetachedSpec {
	spec := agent.DetachedSpec{Spec: agent.Spec{LogPath: j.base() + ".log",
		OnLine: func(line []byte) { j.pending = append(j.pending, parser.Line(line)...) }},
		Shim: j.r.cfg.Shim, Files: files, OnCheckpoint: j.checkpoint,
		Poll:   func() <-chan time.Time { return j.r.clock.After(j.r.cfg.OutputPoll) },
		Replay: func(line []byte) { parser.Line(line) }}
	if sr, ok := parser.(agent.StderrReader); ok {
		spec.OnStderrLine = sr.StderrLine
	}
	return spec
}

// checkpoint queues the events of the lines read up to cp.
func (j *job) checkpoint(cp agent.Checkpoint) {
	j.evMu.Lock()
	added := len(j.pending) > 0
	j.events = append(j.events, j.pending...)
	j.cp = cp
	j.evMu.Unlock()
	j.pending = j.pending[:0]
	if added {
		select {
		case j.evWake <- struct{}{}:
		default:
		}
	}
}

// queue keeps events for the next events report.
func (j *job) queue(evs ...agent.Event) {
	if len(evs) == 0 {
		return
	}
	j.evMu.Lock()
	j.events = append(j.events, evs...)
	j.evMu.Unlock()
	select {
	case j.evWake <- struct{}{}:
	default:
	}
}

// ship sends the run's new output and events every logEvery until ctx
// ends.
func (j *job) ship(ctx context.Context) {
	for {
		if err := j.flush(ctx); errors.Is(err, errRunGone) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-j.evWake:
		case <-j.r.clock.After(logEvery):
		}
	}
}

// flush sends the queued events, then what the log gained since the
// last chunk. For a detached agent, the checkpoint the events were queued
// at goes to the journal between the two, and the log is sent only up to
// it: a next life that reads the output again from the journal's
// checkpoint neither reports an event the daemon has (unless the runner
// died between the events and the journal) nor sends the daemon a log
// that differs from the one it has.
func (j *job) flush(ctx context.Context) error {
	j.evMu.Lock()
	cp, left := j.cp, len(j.events)
	j.evMu.Unlock()
	for left > 0 {
		j.evMu.Lock()
		n := min(len(j.events), eventsBatch, left)
		batch := j.events[:n:n]
		j.events = j.events[n:]
		j.evMu.Unlock()
		if n == 0 {
			break
		}
		left -= n
		data, err := json.Marshal(batch)
		if err != nil {
			return err
		}
		if _, err := j.report(ctx, models.RunnerReport{Kind: models.ReportEvents, Events: data}); err != nil {
			return err
		}
	}
	j.commit(cp)
	j.logMu.Lock()
	before := j.logSent
	j.logMu.Unlock()
	err := j.sendLog(ctx)
	j.logMu.Lock()
	sent := j.detached && j.logSent != before
	j.logMu.Unlock()
	if sent { // the journal has what the daemon has: a next life sends on from there
		j.save()
	}
	return err
}

// commit records checkpoint cp, whose events the daemon has, in the
// journal of a detached agent. It does not wait for a report under way (a
// relayed ask may wait long for its answer): the log goes on meanwhile.
func (j *job) commit(cp agent.Checkpoint) {
	j.logMu.Lock()
	changed := j.detached && j.saved != cp
	if changed {
		j.saved = cp
	}
	j.logMu.Unlock()
	if changed {
		j.save()
	}
}

// sendLog sends the log's bytes the daemon does not have yet: for a
// detached agent, up to the journal's checkpoint.
func (j *job) sendLog(ctx context.Context) error {
	j.logMu.Lock()
	defer j.logMu.Unlock()
	if j.logPath == "" {
		return nil
	}
	f, err := os.Open(j.logPath)
	if err != nil {
		return nil // nothing written yet
	}
	defer f.Close()
	var r io.ReaderAt = f
	if j.detached {
		r = io.NewSectionReader(f, 0, j.saved.Log)
	}
	buf := make([]byte, maxLogChunk)
	for {
		n, err := r.ReadAt(buf, j.logSent)
		if n == 0 {
			if err == nil || errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		have, err := j.r.api.RunnerLog(ctx, j.asg.RunID, j.asg.Token, j.logSent, buf[:n])
		if models.ErrorCodeOf(err) == models.CodeConflict && have == 0 {
			j.lose()
			return errRunGone
		}
		if err != nil {
			return err
		}
		j.logSent = have
	}
}
