package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/agentqueued/agentqueued/internal/models"
)

// changeFeed tells the API's followers (a task's log, a watching view)
// that something changed: a commit of the store, a run's log that grew.
type changeFeed struct {
	mu   sync.Mutex
	seq  uint64
	next chan struct{}
}

func newChangeFeed() *changeFeed { return &changeFeed{next: make(chan struct{})} }

// notify records a change and wakes everyone waiting for one. It does
// not block.
func (f *changeFeed) notify() {
	f.mu.Lock()
	f.seq++
	close(f.next)
	f.next = make(chan struct{})
	f.mu.Unlock()
}

// Changed returns the number of changes so far and a channel closed at
// the next one.
func (f *changeFeed) Changed() (uint64, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seq, f.next
}

// Changed is the daemon's change feed (api.LogService).
func (c commands) Changed() (uint64, <-chan struct{}) { return c.feed.Changed() }

// ReadTaskLog reads the log of a task's attempt (0: its latest) from
// offset on. Ended is decided before the read, so that a chunk that says
// so holds everything the run wrote: the attempt's run has ended, or the
// task has finished (COMPLETED or BLOCKED) without a log.
func (c commands) ReadTaskLog(ctx context.Context, taskID string, attempt int, offset int64, limit int) (models.LogChunk, error) {
	t, err := c.Store.GetTask(ctx, taskID)
	if err != nil {
		return models.LogChunk{}, err
	}
	runs, err := c.Store.TaskRuns(ctx, taskID, models.TaskDetailRuns)
	if err != nil {
		return models.LogChunk{}, fmt.Errorf("log of task %s: %w", taskID, err)
	}
	finished := t.Status == models.StatusCompleted || t.Status == models.StatusBlocked
	ended := map[int]bool{} // attempt → its work run has ended
	latest := 0
	for _, r := range runs {
		if r.Kind == models.RunWork {
			ended[r.Attempt] = r.EndedAt != nil
			latest = max(latest, r.Attempt)
		}
	}
	chunk, err := c.orch.ReadTaskLog(ctx, taskID, attempt, offset, limit)
	if err != nil {
		return models.LogChunk{}, err
	}
	switch done, known := ended[chunk.Attempt]; {
	case chunk.Attempt == 0:
		chunk.Ended = finished && (latest == 0 || ended[latest])
	case known:
		chunk.Ended = done
	default: // an attempt older than the runs read, or one whose run is not recorded yet
		chunk.Ended = chunk.Attempt < latest || finished
	}
	return chunk, nil
}
