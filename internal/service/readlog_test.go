package service

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/orchestrator"
	"github.com/agentqueued/agentqueued/internal/repo"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// TestReadTaskLogSaysWhenTheLogEnds: a chunk is the last once the
// attempt's run has ended, or, for a task with no log, once the task has
// finished; an attempt whose run is not recorded yet goes on.
func TestReadTaskLogSaysWhenTheLogEnds(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	if _, err := st.CreateProject(ctx, models.Project{ID: "web"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpsertAgent(ctx, models.Agent{ID: "a1", AgentType: "claude"}); err != nil {
		t.Fatal(err)
	}
	ws, err := repo.New(repo.Config{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	runDir := t.TempDir()
	o, err := orchestrator.New(orchestrator.Config{RunDir: runDir}, st, ws, agent.DefaultRegistry())
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Store: st, Orchestrator: o})
	writeLog := func(t *testing.T, taskID string, attempt int) {
		t.Helper()
		dir := filepath.Join(runDir, taskID)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(attempt)+".log"), []byte("working\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name        string
		cancel      bool // the task is cancelled (BLOCKED) before any run
		run         int  // 0: no run; 1: a run still going (last: its agent stays busy); 2: a run that ended
		logs        []int
		attempt     int // asked for; 0: the latest
		wantAttempt int
		wantEnded   bool
	}{
		{name: "not started", wantEnded: false},
		{name: "cancelled without a run", cancel: true, wantEnded: true},
		{name: "its run ended", run: 2, logs: []int{1}, wantAttempt: 1, wantEnded: true},
		{name: "an attempt not recorded yet", run: 2, logs: []int{1, 2}, wantAttempt: 2, wantEnded: false},
		{name: "an older attempt", run: 2, logs: []int{1, 2}, attempt: 1, wantAttempt: 1, wantEnded: true},
		{name: "running", run: 1, logs: []int{1}, wantAttempt: 1, wantEnded: false},
	}
	for _, tc := range tests {
		// Sequential: the one agent claims each task in turn, once the
		// run before has ended.
		res, err := st.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{{Title: tc.name}}})
		if err != nil {
			t.Fatal(err)
		}
		id := res[0].TaskID
		if tc.cancel {
			if _, err := st.ApplyEvent(ctx, models.TransitionRequest{TaskID: id, Event: models.EventAdminCancel, Actor: "t"}); err != nil {
				t.Fatalf("%s: cancel: %v", tc.name, err)
			}
		}
		if tc.run > 0 {
			run, _, err := st.ClaimTask(ctx, id, "a1")
			if err != nil {
				t.Fatalf("%s: claim: %v", tc.name, err)
			}
			if _, err := st.StartRun(ctx, run.ID, 1, "/w"); err != nil {
				t.Fatalf("%s: start: %v", tc.name, err)
			}
			if tc.run == 2 {
				if _, err := st.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentFailed,
					ExpectFrom: models.StatusInProgress, Outcome: "failed"}); err != nil {
					t.Fatalf("%s: finish: %v", tc.name, err)
				}
			}
		}
		for _, a := range tc.logs {
			writeLog(t, id, a)
		}
		c, err := s.ReadTaskLog(ctx, id, tc.attempt, 0, 1<<10)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c.Attempt != tc.wantAttempt || c.Ended != tc.wantEnded {
			t.Errorf("%s: attempt %d, ended %v; want attempt %d, ended %v", tc.name, c.Attempt, c.Ended, tc.wantAttempt, tc.wantEnded)
		}
	}
}

// TestReadTaskLogFromTheEnd: a negative offset reads the log's last bytes
// (the whole log when it is shorter), and Next is its end, where a
// follower continues.
func TestReadTaskLogFromTheEnd(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	if _, err := st.CreateProject(ctx, models.Project{ID: "web"}); err != nil {
		t.Fatal(err)
	}
	res, err := st.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{{Title: "logged"}}})
	if err != nil {
		t.Fatal(err)
	}
	id := res[0].TaskID
	ws, err := repo.New(repo.Config{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	runDir := t.TempDir()
	o, err := orchestrator.New(orchestrator.Config{RunDir: runDir}, st, ws, agent.DefaultRegistry())
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Store: st, Orchestrator: o})
	if err := os.MkdirAll(filepath.Join(runDir, id), 0o700); err != nil {
		t.Fatal(err)
	}
	const log = "first line\nsecond line\nlast line\n"
	if err := os.WriteFile(filepath.Join(runDir, id, "1.log"), []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		offset   int64
		limit    int
		wantData string
	}{
		{"the last bytes", -10, 10, "last line\n"},
		{"more than the log", -1000, 1000, log},
		{"from the start", 0, 10, "first line"},
	}
	for _, tc := range tests {
		c, err := s.ReadTaskLog(ctx, id, 0, tc.offset, tc.limit)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		wantNext := int64(len(log))
		if tc.offset >= 0 {
			wantNext = tc.offset + int64(len(tc.wantData))
		}
		if c.Data != tc.wantData || c.Next != wantNext || c.Attempt != 1 {
			t.Errorf("%s: %q, next %d, attempt %d; want %q, next %d, attempt 1", tc.name, c.Data, c.Next, c.Attempt, tc.wantData, wantNext)
		}
	}
}
