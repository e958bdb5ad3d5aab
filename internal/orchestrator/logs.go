package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
)

// ProgressLinePrefix starts the line a progress report adds to its run's
// log, among the agent's output.
const ProgressLinePrefix = "[progress] "

// logProgress adds a progress report to its work run's log, one line in
// one append (the agent's output lines are appended whole too), and tells
// the log's followers.
func (o *Orchestrator) logProgress(run models.Run, msg string) {
	path := filepath.Join(o.cfg.RunDir, run.TaskID, strconv.Itoa(run.Attempt)+".log")
	// Created when missing: a run on a runner may report progress before
	// its first output reached the daemon.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		if err = mkdirPrivate(filepath.Dir(path)); err == nil {
			f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		}
	}
	if err != nil {
		o.log.Warn("progress not logged", "task_id", run.TaskID, "run_id", run.ID, "err", err)
		return
	}
	defer f.Close()
	if _, err := f.WriteString(ProgressLinePrefix + models.CleanLine(msg, 0) + "\n"); err != nil {
		o.log.Warn("progress not logged", "task_id", run.TaskID, "run_id", run.ID, "err", err)
		return
	}
	o.outputGrew(run.TaskID)
}

// outputGrew tells Config.OnOutput that the log of a run of the task grew.
func (o *Orchestrator) outputGrew(taskID string) {
	if o.cfg.OnOutput != nil {
		o.cfg.OnOutput(taskID)
	}
}

// ReadTaskLog reads the log of a task's attempt (0: its latest) from byte
// offset on, at most max bytes: the chunk's Attempt is 0 while the task
// has no log yet, and Next is the offset to read from next time. A
// negative offset reads the log's last -offset bytes. A log replaced by a
// shorter one is read again from its start.
func (o *Orchestrator) ReadTaskLog(ctx context.Context, taskID string, attempt int, offset int64, limit int) (models.LogChunk, error) {
	if _, err := o.store.GetTask(ctx, taskID); err != nil {
		return models.LogChunk{}, err
	}
	if attempt == 0 {
		entries, err := os.ReadDir(filepath.Join(o.cfg.RunDir, taskID))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return models.LogChunk{}, fmt.Errorf("log of task %s: %w", taskID, err)
		}
		for _, e := range entries {
			if n, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".log")); err == nil && strings.HasSuffix(e.Name(), ".log") {
				attempt = max(attempt, n)
			}
		}
		if attempt == 0 {
			return models.LogChunk{TaskID: taskID}, nil
		}
	}
	out := models.LogChunk{TaskID: taskID, Attempt: attempt, Next: offset}
	f, err := os.Open(filepath.Join(o.cfg.RunDir, taskID, strconv.Itoa(attempt)+".log"))
	if errors.Is(err, fs.ErrNotExist) {
		out.Attempt = 0
		return out, nil
	}
	if err != nil {
		return models.LogChunk{}, fmt.Errorf("log of task %s: %w", taskID, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return models.LogChunk{}, fmt.Errorf("log of task %s: %w", taskID, err)
	}
	if offset < 0 { // from the end: the log's last -offset bytes
		offset = max(0, st.Size()+offset)
	}
	if st.Size() < offset {
		offset = 0
	}
	b := make([]byte, limit)
	n, err := f.ReadAt(b, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return models.LogChunk{}, fmt.Errorf("log of task %s: %w", taskID, err)
	}
	out.Data, out.Next = string(b[:n]), offset+int64(n)
	return out, nil
}

// MaxLogBytes is how much of one attempt's log TaskLogs gives: its end.
const MaxLogBytes = 1 << 20

// TaskLogs returns what the agent printed in each attempt at a task, or in
// one attempt when attempt > 0: RunDir/<task>/<attempt>.log, the end of a
// long one.
func (o *Orchestrator) TaskLogs(ctx context.Context, taskID string, attempt int) (models.TaskLogs, error) {
	if _, err := o.store.GetTask(ctx, taskID); err != nil {
		return models.TaskLogs{}, err
	}
	dir := filepath.Join(o.cfg.RunDir, taskID)
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return models.TaskLogs{}, fmt.Errorf("logs of task %s: %w", taskID, err)
	}
	var attempts []int
	for _, e := range entries {
		n, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".log"))
		if err == nil && strings.HasSuffix(e.Name(), ".log") && (attempt == 0 || n == attempt) {
			attempts = append(attempts, n)
		}
	}
	sort.Ints(attempts)
	if attempt > 0 && len(attempts) == 0 {
		return models.TaskLogs{}, models.Errorf(models.CodeNotFound, "task %s has no log of attempt %d", taskID, attempt)
	}
	out := models.TaskLogs{TaskID: taskID, Attempts: []models.AttemptLog{}}
	for _, n := range attempts {
		l, err := tailOf(filepath.Join(dir, strconv.Itoa(n)+".log"), MaxLogBytes)
		if err != nil {
			return models.TaskLogs{}, fmt.Errorf("logs of task %s: %w", taskID, err)
		}
		l.Attempt = n
		out.Attempts = append(out.Attempts, l)
	}
	return out, nil
}

// tailOf reads the last max bytes of a file.
func tailOf(path string, max int64) (models.AttemptLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return models.AttemptLog{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return models.AttemptLog{}, err
	}
	var l models.AttemptLog
	if st.Size() > max {
		if _, err := f.Seek(st.Size()-max, io.SeekStart); err != nil {
			return models.AttemptLog{}, err
		}
		l.Truncated = true
	}
	b, err := io.ReadAll(io.LimitReader(f, max))
	if err != nil {
		return models.AttemptLog{}, err
	}
	l.Log = strings.ToValidUTF8(string(b), "\uFFFD")
	return l, nil
}
