package api_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
)

// fixedLogs is a LogService over tasks' logs held in memory: task t1's
// log grows by Append, each growth a change of state and an output of t1;
// Output adds to any task's log as output alone. It counts each task's
// reads.
type fixedLogs struct {
	mu    sync.Mutex
	log   string
	other map[string]string
	ended bool
	seq   uint64
	next  chan struct{}
	grew  map[string]chan struct{}
	reads map[string]int
}

func newFixedLogs() *fixedLogs {
	return &fixedLogs{next: make(chan struct{}), other: map[string]string{"t2": ""},
		grew: map[string]chan struct{}{}, reads: map[string]int{}}
}

func (f *fixedLogs) LogChanged(taskID string) (<-chan struct{}, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch, ok := f.grew[taskID]
	if !ok {
		ch = make(chan struct{})
		f.grew[taskID] = ch
	}
	return ch, func() {}
}

// Output adds text to a task's log as its run's output, no change of state.
func (f *fixedLogs) Output(taskID, text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if taskID == "t1" {
		f.log += text
	} else {
		f.other[taskID] += text
	}
	if ch, ok := f.grew[taskID]; ok {
		close(ch)
		delete(f.grew, taskID)
	}
}

// Reads answers how often a task's log was read.
func (f *fixedLogs) Reads(taskID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads[taskID]
}

func (f *fixedLogs) Changed() (uint64, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seq, f.next
}

// Append adds text to the log (ending the run when end) and reports a change.
func (f *fixedLogs) Append(text string, end bool) {
	f.mu.Lock()
	f.log += text
	f.ended = end
	f.seq++
	close(f.next)
	f.next = make(chan struct{})
	if ch, ok := f.grew["t1"]; ok {
		close(ch)
		delete(f.grew, "t1")
	}
	f.mu.Unlock()
}

func (f *fixedLogs) ReadTaskLog(_ context.Context, taskID string, _ int, offset int64, max int) (models.LogChunk, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	log, ok := f.other[taskID]
	if taskID == "t1" {
		log, ok = f.log, true
	}
	if !ok {
		return models.LogChunk{}, models.Errorf(models.CodeNotFound, "task %q not found", taskID)
	}
	f.reads[taskID]++
	data := log[offset:]
	if len(data) > max {
		data = data[:max]
	}
	return models.LogChunk{TaskID: taskID, Attempt: 1, Data: data, Next: offset + int64(len(data)), Ended: f.ended}, nil
}

func TestTaskLogEndpoints(t *testing.T) {
	t.Parallel()
	logs := newFixedLogs()
	e := newEnv(t, api.Config{Logs: logs})
	logs.Append("one\n", false)
	tests := []struct {
		path   string
		status int
		body   string
	}{
		{"/api/v1/tasks/t1/logs", 200, "one\n"},
		{"/api/v1/tasks/t1/logs?attempt=0", 400, "attempt: must be a positive integer"},
		{"/api/v1/tasks/t1/logs?follow=maybe", 400, "follow: must be true or false"},
		{"/api/v1/tasks/t1/logs?tail=1", 400, "tail"},
		{"/api/v1/tasks/nope/logs", 404, `task \"nope\" not found`},
		{"/api/v1/changes", 200, `{"changed":false,"seq":1}`},
		{"/api/v1/changes?after=0", 200, `{"changed":true,"seq":1}`},
		{"/api/v1/changes?after=x", 400, "after: must be a change number"},
		{"/api/v1/changes?after=1&wait=1ms", 400, "wait: must be a duration from 1s"},
	}
	for _, tt := range tests {
		r := e.do("GET", tt.path, "")
		if r.status != tt.status || !strings.Contains(string(r.body), tt.body) {
			t.Errorf("GET %s = %d %s; want %d with %s", tt.path, r.status, r.body, tt.status, tt.body)
		}
	}
}

// TestFollowTaskLogEndsWithTheRun: a follow writes what the log gains at
// each change and returns once the run has ended.
func TestFollowTaskLogEndsWithTheRun(t *testing.T) {
	t.Parallel()
	logs := newFixedLogs()
	e := newEnv(t, api.Config{Logs: logs})
	logs.Append("one\n", false)
	got := make(chan string, 8)
	done := make(chan error, 1)
	go func() { done <- e.client.FollowTaskLog(context.Background(), "t1", 0, true, chanWriter(got)) }()
	var (
		all    string
		ended  bool
		endErr error
	)
	wait := func(want string) {
		t.Helper()
		for all != want {
			select {
			case s := <-got:
				all += s
			case err := <-done:
				// The follow writes before it returns, but the select may
				// see its end first: take what it wrote before judging.
				for drained := false; !drained; {
					select {
					case s := <-got:
						all += s
					default:
						drained = true
					}
				}
				ended, endErr = true, err
				if all != want {
					t.Fatalf("the follow ended with %q, want %q: %v", all, want, err)
				}
			}
		}
	}
	wait("one\n")
	if ended {
		t.Fatalf("the follow ended before the run did: %v", endErr)
	}
	logs.Append("two\n", false)
	wait("one\ntwo\n")
	if ended {
		t.Fatalf("the follow ended before the run did: %v", endErr)
	}
	logs.Append("three\n", true)
	wait("one\ntwo\nthree\n")
	if !ended {
		endErr = <-done
	}
	if endErr != nil {
		t.Fatalf("FollowTaskLog: %v", endErr)
	}
}

// chanWriter sends each write on a channel.
type chanWriter chan string

func (c chanWriter) Write(p []byte) (int, error) {
	c <- string(p)
	return len(p), nil
}

// TestFollowWakesOnlyOnItsTasksOutput: a follow of t1's log reads the log
// again when t1's run writes, not when another task's run does.
func TestFollowWakesOnlyOnItsTasksOutput(t *testing.T) {
	t.Parallel()
	logs := newFixedLogs()
	e := newEnv(t, api.Config{Logs: logs})
	logs.Append("one\n", false)
	dog := progresstest.New(t, "the follow's start")
	got := make(chan string, 8)
	done := make(chan error, 1)
	go func() { done <- e.client.FollowTaskLog(dog.Context(), "t1", 0, true, chanWriter(got)) }()
	var all string
	wait := func(want string) {
		t.Helper()
		for all != want {
			select {
			case s := <-got:
				all += s
				dog.Progress("the follow wrote " + strconv.Quote(s))
			case err := <-done:
				t.Fatalf("the follow ended with %q, want %q: %v", all, want, err)
			case <-dog.Done():
				t.Fatalf("the follow wrote %q, want %q: %v", all, want, dog.Err())
			}
		}
	}
	wait("one\n")
	before := logs.Reads("t1")
	for range 50 {
		logs.Output("t2", "other\n")
	}
	logs.Output("t1", "two\n")
	wait("one\ntwo\n")
	if n := logs.Reads("t1") - before; n != 1 {
		t.Errorf("the follow of t1 read its log %d times over 50 outputs of t2 and one of t1, want 1", n)
	}
	logs.Append("three\n", true)
	wait("one\ntwo\nthree\n")
	if err := <-done; err != nil {
		t.Fatalf("FollowTaskLog: %v", err)
	}
}
