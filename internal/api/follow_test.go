package api_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// fixedLogs is a LogService over one task's log held in memory: the log
// grows by Append, each growth a change.
type fixedLogs struct {
	mu    sync.Mutex
	log   string
	ended bool
	seq   uint64
	next  chan struct{}
}

func newFixedLogs() *fixedLogs { return &fixedLogs{next: make(chan struct{})} }

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
	f.mu.Unlock()
}

func (f *fixedLogs) ReadTaskLog(_ context.Context, taskID string, _ int, offset int64, max int) (models.LogChunk, error) {
	if taskID != "t1" {
		return models.LogChunk{}, models.Errorf(models.CodeNotFound, "task %q not found", taskID)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	data := f.log[offset:]
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
	var all string
	wait := func(want string) {
		t.Helper()
		for all != want {
			select {
			case s := <-got:
				all += s
			case err := <-done:
				t.Fatalf("the follow ended with %q, want %q: %v", all, want, err)
			}
		}
	}
	wait("one\n")
	logs.Append("two\n", false)
	wait("one\ntwo\n")
	logs.Append("three\n", true)
	wait("one\ntwo\nthree\n")
	if err := <-done; err != nil {
		t.Fatalf("FollowTaskLog: %v", err)
	}
}

// chanWriter sends each write on a channel.
type chanWriter chan string

func (c chanWriter) Write(p []byte) (int, error) {
	c <- string(p)
	return len(p), nil
}
