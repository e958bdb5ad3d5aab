package service

import (
	"context"
	"fmt"
	"sync"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Feed tells the API's followers about changes, two kinds kept
// apart: a commit of the daemon's state wakes every waiter for a change
// (a watching view, every log follow), while a run's log that grew wakes
// only the followers of that task's log.
type Feed struct {
	mu   sync.Mutex
	seq  uint64
	next chan struct{}
	// logs holds, per task id, the channel closed at the task's next
	// output, while someone waits for it.
	logs map[string]*logWaiters
	// onWake, when set (tests), is called once per log follower woken by
	// output, with the task id it follows.
	onWake func(taskID string)
}

// logWaiters is the followers of one task's log waiting for its output.
type logWaiters struct {
	next chan struct{}
	n    int
}

// NewFeed returns a feed with nobody waiting.
func NewFeed() *Feed {
	return &Feed{next: make(chan struct{}), logs: map[string]*logWaiters{}}
}

// Notify records a change of the daemon's state and wakes everyone
// waiting for one. It does not block.
func (f *Feed) Notify() {
	f.mu.Lock()
	f.seq++
	close(f.next)
	f.next = make(chan struct{})
	f.mu.Unlock()
}

// Output wakes the followers of a task's log, which grew. It does not
// block.
func (f *Feed) Output(taskID string) {
	f.mu.Lock()
	w := f.logs[taskID]
	if w != nil {
		delete(f.logs, taskID)
		close(w.next)
	}
	wake := f.onWake
	f.mu.Unlock()
	if w != nil && wake != nil {
		for range w.n {
			wake(taskID)
		}
	}
}

// Changed returns the number of state changes so far and a channel
// closed at the next one.
func (f *Feed) Changed() (uint64, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seq, f.next
}

// LogChanged returns a channel closed at the task's next output, and the
// function to call once done waiting on it.
func (f *Feed) LogChanged(taskID string) (<-chan struct{}, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.logs[taskID]
	if w == nil {
		w = &logWaiters{next: make(chan struct{})}
		f.logs[taskID] = w
	}
	w.n++
	var once sync.Once
	return w.next, func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			if w.n--; w.n == 0 && f.logs[taskID] == w {
				delete(f.logs, taskID)
			}
		})
	}
}

// Changed is the daemon's feed of state changes (the feed's).
func (s *Service) Changed() (uint64, <-chan struct{}) { return s.feed.Changed() }

// LogChanged is the daemon's feed of a task's output (the feed's).
func (s *Service) LogChanged(taskID string) (<-chan struct{}, func()) {
	return s.feed.LogChanged(taskID)
}

// ReadTaskLog reads the log of a task's attempt (0: its latest) from
// offset on, through the orchestrator, which knows where runs write. Ended is decided before the read, so that a chunk that says
// so holds everything the run wrote: the attempt's run has ended, or the
// task has finished (COMPLETED or BLOCKED) without a log.
func (s *Service) ReadTaskLog(ctx context.Context, taskID string, attempt int, offset int64, limit int) (models.LogChunk, error) {
	t, err := s.store.GetTask(ctx, taskID)
	if err != nil {
		return models.LogChunk{}, err
	}
	runs, err := s.store.TaskRuns(ctx, taskID, models.TaskDetailRuns)
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
	chunk, err := s.orch.ReadTaskLog(ctx, taskID, attempt, offset, limit)
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
