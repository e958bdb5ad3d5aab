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
