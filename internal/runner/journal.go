package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/models"
)

// leftoverWait bounds the wait for a killed leftover agent to be gone.
const leftoverWait = 10 * time.Second

// journalEntry is what the runner keeps on disk of a run it holds, so that
// after a restart it ends the run's agent and tells the daemon: the
// agent's output pipes died with the runner, so it cannot be taken up.
type journalEntry struct {
	Assignment models.RunnerAssignment `json:"assignment"`
	// Seq is the number of the last report sent, or being sent.
	Seq int64 `json:"seq"`
	// PID is the agent's process (and process group), once started.
	PID     int    `json:"pid,omitempty"`
	LogPath string `json:"log_path,omitempty"`
	LogSent int64  `json:"log_sent,omitempty"`
}

func (r *Runner) journalDir() string { return filepath.Join(r.cfg.DataDir, "journal") }

func (r *Runner) journalPath(runID int64) string {
	return filepath.Join(r.journalDir(), strconv.FormatInt(runID, 10)+".json")
}

// save writes the job's journal entry (a new file renamed into place).
// Call it with reportMu held.
func (j *job) save() {
	if j.r.cfg.DataDir == "" {
		return
	}
	j.logMu.Lock()
	e := journalEntry{Assignment: j.asg, Seq: j.seq, PID: j.pid, LogPath: j.logPath, LogSent: j.logSent}
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

// recoverJournal ends what an earlier life of the runner left running: for
// each run in the journal, the agent's process group is killed (only when
// it is still that run's: its environment carries the run's task id), and
// the rest of its output and its end are reported to the daemon as lost
// by the runner (the daemon returns the task to READY without using a
// retry). It returns at once; the reports go out in the background.
func (r *Runner) recoverJournal(ctx context.Context) error {
	entries, err := os.ReadDir(r.journalDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("runner: journal: %w", err)
	}
	for _, de := range entries {
		if !strings.HasSuffix(de.Name(), ".json") {
			continue
		}
		path := filepath.Join(r.journalDir(), de.Name())
		data, err := os.ReadFile(path)
		var e journalEntry
		if err == nil {
			err = json.Unmarshal(data, &e)
		}
		if err != nil || e.Assignment.RunID <= 0 {
			r.log.Warn("a journal entry that cannot be read is set aside", "file", path, "err", err)
			_ = os.Rename(path, path+".bad")
			continue
		}
		if found, err := agent.EndLeftover(e.PID, e.Assignment.Task.ID, leftoverWait, nil); err != nil {
			return fmt.Errorf("runner: end the agent of run %d left by the runner's earlier life: %w", e.Assignment.RunID, err)
		} else if found {
			r.log.Warn("ended an agent the runner's earlier life left running", "run_id", e.Assignment.RunID,
				"task_id", e.Assignment.Task.ID, "pid", e.PID)
		}
		j := &job{r: r, asg: e.Assignment, seq: e.Seq, stop: make(chan struct{}), gone: make(chan struct{}),
			evWake: make(chan struct{}, 1), done: make(chan struct{}), logPath: e.LogPath, logSent: e.LogSent}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer close(j.done)
			if j.ended(context.WithoutCancel(ctx), models.RunnerEnded{ExitCode: -1, Signal: "KILL", Lost: true,
				StderrTail: "the runner restarted and ended the agent"}) {
				j.forget()
			}
		}()
	}
	return nil
}
