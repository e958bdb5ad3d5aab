package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/models"
)

// leftoverWait bounds the wait for a killed leftover agent to be gone.
const leftoverWait = 10 * time.Second

// journalEntry is what the runner keeps on disk of a run it holds, so
// that after a restart it takes up the run's agent where it was, or, when
// that agent cannot be taken up, ends it and tells the daemon.
type journalEntry struct {
	Assignment models.RunnerAssignment `json:"assignment"`
	// Seq is the number of the last report sent, or being sent, and Kind
	// that report's kind; Started is set once the daemon has the started
	// report.
	Seq     int64  `json:"seq"`
	Kind    string `json:"kind,omitempty"`
	Started bool   `json:"started,omitempty"`
	// PID is the agent's process (and process group), once started: a
	// detached agent's shim.
	PID     int    `json:"pid,omitempty"`
	LogPath string `json:"log_path,omitempty"`
	// LogSent is how much of the log the daemon has.
	LogSent int64 `json:"log_sent,omitempty"`

	// A detached agent (agent.StartDetached): its shim, its files, how
	// far its output was read and its events reported (the log is sent up
	// to Checkpoint.Log), the checkout and the launch it runs with, and
	// the socket it was given.
	Shim       *agent.ShimID        `json:"shim,omitempty"`
	Files      *agent.RunFiles      `json:"files,omitempty"`
	Checkpoint agent.Checkpoint     `json:"checkpoint"`
	Workspace  *models.Workspace    `json:"workspace,omitempty"`
	Launch     *models.RunnerLaunch `json:"launch,omitempty"`
	SocketPath string               `json:"socket_path,omitempty"`
}

// reattachable reports whether the entry has all a detached agent's next
// life needs.
func (e journalEntry) reattachable() bool {
	return e.Shim != nil && e.Files != nil && e.Workspace != nil && e.Launch != nil && e.LogPath != ""
}

func (r *Runner) journalDir() string { return filepath.Join(r.cfg.DataDir, "journal") }

func (r *Runner) journalPath(runID int64) string {
	return filepath.Join(r.journalDir(), strconv.FormatInt(runID, 10)+".json")
}

// save writes the job's journal entry (a new file renamed into place).
func (j *job) save() {
	if j.r.cfg.DataDir == "" {
		return
	}
	// One write at a time, each of what is known when it begins: a later
	// state is never overwritten by an earlier one.
	j.saveMu.Lock()
	defer j.saveMu.Unlock()
	if j.forgotten {
		return
	}
	j.logMu.Lock()
	e := journalEntry{Assignment: j.asg, Seq: j.seq, Kind: j.kind, Started: j.started, PID: j.pid, LogPath: j.logPath,
		LogSent: j.logSent, Shim: j.shim, Files: j.files, Checkpoint: j.saved, Workspace: j.ws, Launch: j.launched,
		SocketPath: j.socket}
	j.logMu.Unlock()
	data, err := json.Marshal(e)
	if err == nil {
		err = writeFileAtomic(j.r.journalPath(j.asg.RunID), data)
	}
	if err != nil {
		j.r.log.Warn("journal of the run not written", "run_id", j.asg.RunID, "err", err)
	}
}

// forget removes the job's journal entry: the daemon knows how it ended.
func (j *job) forget() {
	if j.r.cfg.DataDir == "" {
		return
	}
	j.saveMu.Lock()
	defer j.saveMu.Unlock()
	j.forgotten = true
	if err := os.Remove(j.r.journalPath(j.asg.RunID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		j.r.log.Warn("journal of the run not removed", "run_id", j.asg.RunID, "err", err)
	}
}

// writeFileAtomic writes data to path through a temporary file renamed
// into place, mode 0600.
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// recoverJournal takes up what an earlier life of the runner left: each
// run in the journal whose detached agent is still running — its shim has
// the recorded pid and start time — or ended and wrote its status is
// taken up (resume). Of any other run, the agent's process group is killed
// (only when it is still that run's: its environment carries the run's
// task id), and the rest of its output and its end are reported to the
// daemon as lost by the runner (the daemon returns the task to READY
// without using a retry). It returns at once; the runs go on in the
// background, and the sockets their agents were given besides the
// runner's are returned, to be listened on.
func (r *Runner) recoverJournal(ctx context.Context) ([]string, error) {
	entries, err := os.ReadDir(r.journalDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("runner: journal: %w", err)
	}
	var sockets []string
	for _, de := range entries {
		if !strings.HasSuffix(de.Name(), ".json") {
			continue
		}
		path := filepath.Join(r.journalDir(), de.Name())
		e, err := readEntry(path)
		if err != nil {
			r.log.Warn("a journal entry that cannot be read is set aside", "file", path, "err", err)
			_ = os.Rename(path, path+".bad")
			continue
		}
		j := &job{r: r, asg: e.Assignment, seq: e.Seq, kind: e.Kind, started: e.Started, stop: make(chan struct{}),
			gone: make(chan struct{}), evWake: make(chan struct{}, 1), done: make(chan struct{}), pid: e.PID,
			logPath: e.LogPath, logSent: e.LogSent}
		if e.reattachable() {
			_, statusErr := os.Stat(e.Files.Status)
			if agent.ShimAlive(*e.Shim) || statusErr == nil {
				j.cfg = r.agents[e.Assignment.Agent]
				j.detached, j.shim, j.files, j.ws, j.launched, j.socket = true, e.Shim, e.Files, e.Workspace, e.Launch, e.SocketPath
				j.saved, j.cp = e.Checkpoint, e.Checkpoint
				if e.SocketPath != "" && e.SocketPath != r.cfg.SocketPath && !slices.Contains(sockets, e.SocketPath) {
					sockets = append(sockets, e.SocketPath)
				}
				r.mu.Lock()
				r.jobs[j.asg.RunID] = j // heartbeats and the relay find it
				r.mu.Unlock()
				r.log.Info("taking up a run the runner's earlier life left", "run_id", j.asg.RunID, "task_id", j.asg.Task.ID,
					"shim", e.Shim.PID, "ended", statusErr == nil)
				r.wg.Add(1)
				go func() {
					defer r.wg.Done()
					j.resume(ctx)
					r.mu.Lock()
					delete(r.jobs, j.asg.RunID)
					r.mu.Unlock()
				}()
				continue
			}
		}
		if err := j.endLeftover(); err != nil {
			return nil, err
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer close(j.done)
			j.reportLost(context.WithoutCancel(ctx))
		}()
	}
	return sockets, nil
}

// readEntry reads a journal entry.
func readEntry(path string) (journalEntry, error) {
	var e journalEntry
	data, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(data, &e)
	}
	if err == nil && e.Assignment.RunID <= 0 {
		err = errors.New("no run id")
	}
	return e, err
}

// endLeftover kills the process group the run's agent left, when it is
// still the run's.
func (j *job) endLeftover() error {
	if found, err := agent.EndLeftover(j.pid, j.asg.Task.ID, leftoverWait, nil); err != nil {
		return fmt.Errorf("runner: end the agent of run %d left by the runner's earlier life: %w", j.asg.RunID, err)
	} else if found {
		j.r.log.Warn("ended an agent the runner's earlier life left running", "run_id", j.asg.RunID,
			"task_id", j.asg.Task.ID, "pid", j.pid)
	}
	return nil
}

// reportLost reports the end of a run whose agent the runner lost, and
// forgets the run once the daemon has it.
func (j *job) reportLost(ctx context.Context) {
	if j.ended(ctx, models.RunnerEnded{ExitCode: -1, Signal: "KILL", Lost: true,
		StderrTail: "the runner restarted and ended the agent"}) {
		j.forget()
	}
}

// resume takes up a detached agent the runner's earlier life started: the
// report that life sent last is sent again (the daemon answers it as
// before, or applies it if it never came), then the agent's output is
// read on from the journal's checkpoint and its end reported as a
// launched run's. A daemon that no longer has the run has the agent
// ended.
func (j *job) resume(stopCtx context.Context) {
	defer close(j.done)
	ctx, cancel := j.contexts(stopCtx)
	defer cancel()
	log := j.logger()
	if err := j.resync(ctx); err != nil {
		if errors.Is(err, errRunGone) {
			log.Warn("the daemon no longer has the run the runner takes up; ending its agent")
			_ = j.endLeftover()
			j.forget()
		}
		// Else the runner stops: its next life tries again.
		return
	}
	adapter, err := j.r.cfg.Adapters.For(j.cfg.AgentType)
	if j.cfg.ID == "" {
		err = fmt.Errorf("the runner has no agent %s any more", j.asg.Agent)
	}
	if err != nil {
		log.Warn("the agent cannot be taken up; ending it", "err", err)
		if err := j.endLeftover(); err != nil {
			log.Warn("the agent left running", "err", err)
			return
		}
		j.reportLost(ctx)
		return
	}
	rc, _ := j.runContext(*j.ws, *j.launched)
	parser := adapter.NewParser(rc)
	d, err := agent.Attach(j.detachedSpec(parser, *j.files), *j.shim, j.saved)
	if err != nil {
		log.Warn("the agent cannot be taken up; ending it", "err", err)
		_ = j.endLeftover()
		j.reportLost(ctx)
		return
	}
	j.logMu.Lock()
	j.output = d
	j.logMu.Unlock()
	if !j.started {
		if _, err := j.report(ctx, models.RunnerReport{Kind: models.ReportStarted}); err != nil {
			d.Stop(DefaultStopGrace)
			if errors.Is(err, errRunGone) {
				j.forget()
			}
			return
		}
		j.reportMu.Lock()
		j.logMu.Lock()
		j.started = true
		j.logMu.Unlock()
		j.reportMu.Unlock()
		j.save()
	}
	log.Info("took up the agent", "shim", d.PID(), "stdout_offset", j.saved.Stdout, "log_sent", j.logSent)
	if j.supervise(ctx, stopCtx, d, parser, *j.ws) {
		j.forget()
	}
}

// resync sends the earlier life's last report again, under its number: a
// report the daemon had is answered as it was and not applied again, and
// one it never had is applied. Only a started report is sent as itself:
// any other goes as an empty events report, which changes nothing (an
// events report's lines are read again from the journal's checkpoint, a
// relayed call's caller lost its connection with the runner; an ask the
// daemon holds is not waited for).
func (j *job) resync(ctx context.Context) error {
	j.reportMu.Lock()
	defer j.reportMu.Unlock()
	if j.seq == 0 {
		return nil
	}
	rep := models.RunnerReport{Seq: j.seq, Kind: models.ReportEvents, Events: json.RawMessage("[]")}
	if j.kind == models.ReportStarted {
		rep = models.RunnerReport{Seq: j.seq, Kind: models.ReportStarted}
	}
	// An ask of the earlier life that waits for its answer is the
	// daemon's: its caller is gone, and the run goes on.
	_, err := j.deliver(ctx, rep, false)
	if err == nil && j.kind == models.ReportStarted {
		j.logMu.Lock()
		j.started = true
		j.logMu.Unlock()
	}
	return err
}
