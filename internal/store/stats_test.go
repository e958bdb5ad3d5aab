package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// TestStats: completions fall in the hour they happened, queue wait runs
// from a task's READY to its run's start, run time from start to end, and
// what is older than the window (or archived) leaves the figures.
func TestStats(t *testing.T) {
	t.Parallel()
	s, clock := openClocked(t) // 12:00
	ctx := context.Background()
	storetest.Project(t, s, "p")
	storetest.Project(t, s, "q")
	storetest.Agent(t, s, "a1")
	work := func(wait, run time.Duration) {
		t.Helper()
		id := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "x", Title: "x"})["x"]
		clock.Advance(wait)
		r, _, err := s.ClaimTask(ctx, id, "a1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.StartRun(ctx, r.ID, 1, ""); err != nil {
			t.Fatal(err)
		}
		clock.Advance(run)
		if _, err := s.FinishRun(ctx, models.RunEnd{RunID: r.ID, Event: models.EventAgentCompleted, Outcome: "completed"}); err != nil {
			t.Fatal(err)
		}
		storetest.Apply(t, s, id, models.EventVerifyPassed)
	}
	work(10*time.Minute, 20*time.Minute) // completed at 12:30
	clock.Advance(time.Hour)
	work(0, 10*time.Minute) // completed at 13:40
	storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "r", Title: "ready"})

	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Projects) != 2 || st.Projects[0].ProjectID != "p" || st.Projects[1].ProjectID != "q" {
		t.Fatalf("projects %+v", st.Projects)
	}
	p, q := st.Projects[0], st.Projects[1]
	if p.ByStatus[models.StatusCompleted] != 2 || p.ByStatus[models.StatusReady] != 1 || len(p.ByStatus) != 2 {
		t.Errorf("by status %v", p.ByStatus)
	}
	if len(p.CompletionsPerHour) != 24 || p.Completed != 2 {
		t.Fatalf("%d hours, %d completed", len(p.CompletionsPerHour), p.Completed)
	}
	for i, want := range map[int]struct {
		hour  time.Time
		count int
	}{
		22: {time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), 1},
		23: {time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC), 1},
		0:  {time.Date(2026, 2, 28, 14, 0, 0, 0, time.UTC), 0},
	} {
		if got := p.CompletionsPerHour[i]; !got.Hour.Equal(want.hour) || got.Count != want.count {
			t.Errorf("hour %d = %+v, want %v %d", i, got, want.hour, want.count)
		}
	}
	if p.MeanQueueWaitSeconds != 300 || p.MeanRunSeconds != 900 || p.RunsStarted != 2 || p.RunsEnded != 2 {
		t.Errorf("means: wait %vs of %d runs, run %vs of %d", p.MeanQueueWaitSeconds, p.RunsStarted, p.MeanRunSeconds, p.RunsEnded)
	}
	if len(q.ByStatus) != 0 || q.Completed != 0 || q.RunsEnded != 0 || len(q.CompletionsPerHour) != 24 {
		t.Errorf("empty project %+v", q)
	}

	clock.Advance(25 * time.Hour)
	if _, err := s.ArchiveTasks(ctx, clock.Now(), 10); err != nil {
		t.Fatal(err)
	}
	st, err = s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p = st.Projects[0]
	if p.Completed != 0 || p.RunsStarted != 0 || p.RunsEnded != 0 || p.MeanRunSeconds != 0 || p.Archived != 2 ||
		p.ByStatus[models.StatusCompleted] != 0 || p.ByStatus[models.StatusReady] != 1 {
		t.Errorf("a day later, archived: %+v", p)
	}
}
