package store_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// usageHistory drives a store through random work on three projects and
// three agents: runs start, end as completed (then verified) or failed,
// finished tasks are deleted now and then, and the clock moves between
// steps by a second to a few hours. check is called after every step.
func usageHistory(t *testing.T, s *store.Store, clock *clocktest.Fake, seed uint64, steps int, check func(step int)) {
	t.Helper()
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(seed, 1))
	projects := []string{"p0", "p1", "p2"}
	for _, p := range projects {
		storetest.Project(t, s, p)
	}
	agents := []string{"a0", "a1", "a2"}
	for _, a := range agents {
		storetest.Agent(t, s, a)
	}
	running := map[string]int64{} // agent → open run
	var finished []string
	for step := range steps {
		switch d := rnd.IntN(10); {
		case d < 6:
			clock.Advance(time.Duration(rnd.Int64N(int64(90 * time.Second))))
		case d < 9:
			clock.Advance(time.Duration(rnd.Int64N(int64(40 * time.Minute))))
		default:
			clock.Advance(time.Duration(rnd.Int64N(int64(5 * time.Hour))))
		}
		// Token use, now or up to two hours back (a report can be late).
		at := clock.Now()
		if rnd.IntN(3) == 0 {
			at = at.Add(-time.Duration(rnd.Int64N(int64(2 * time.Hour))))
		}
		if err := s.RecordTokenUsage(ctx, models.TokenUsage{ProjectID: projects[rnd.IntN(len(projects))],
			Input: rnd.Int64N(1000), Output: rnd.Int64N(1000), CacheRead: rnd.Int64N(10), CreatedAt: at}); err != nil {
			t.Fatalf("step %d: record tokens: %v", step, err)
		}
		a := agents[rnd.IntN(len(agents))]
		if len(finished) > 0 && rnd.IntN(8) == 0 {
			i := rnd.IntN(len(finished))
			if err := s.DeleteTask(ctx, finished[i]); err != nil {
				t.Fatalf("step %d: delete: %v", step, err)
			}
			finished = slices.Delete(finished, i, i+1)
		} else if run, ok := running[a]; ok {
			ev, want := models.EventAgentCompleted, models.StatusVerifying
			if rnd.IntN(4) == 0 {
				ev, want = models.EventAgentFailed, models.StatusFailed
			}
			res, err := s.FinishRun(ctx, models.RunEnd{RunID: run, Event: ev, ExpectFrom: models.StatusInProgress, Outcome: "done"})
			if err != nil || res.To != want {
				t.Fatalf("step %d: finish run %d: %+v %v", step, run, res, err)
			}
			if want == models.StatusVerifying {
				storetest.Apply(t, s, res.Task.ID, models.EventVerifyPassed)
			}
			finished = append(finished, res.Task.ID)
			delete(running, a)
		} else {
			p := projects[rnd.IntN(len(projects))]
			ids := storetest.Tasks(t, s, p, models.BatchTask{LocalID: "x", Title: fmt.Sprintf("step %d", step)})
			run, _, err := s.ClaimTask(ctx, ids["x"], a)
			if err != nil {
				t.Fatalf("step %d: claim: %v", step, err)
			}
			if _, err := s.StartRun(ctx, run.ID, 1000+step, "/w"); err != nil {
				t.Fatalf("step %d: start: %v", step, err)
			}
			running[a] = run.ID
		}
		check(step)
	}
}

// compareUsage fails unless the scheduling state's usage of every project
// equals the count from history over the same window.
func compareUsage(t *testing.T, s *store.Store, now time.Time, window time.Duration, what string) {
	t.Helper()
	st, err := s.SchedulingState(context.Background(), now, window)
	if err != nil {
		t.Fatal(err)
	}
	completed, seconds, err := store.RecountUsageForTest(s, now, window)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := store.CountForTest(s, fmt.Sprintf(`SELECT coalesce(sum(input_tokens + output_tokens + cache_read_tokens
		+ cache_write_tokens), 0) FROM token_ledger WHERE created_at >= %d`, now.Add(-window).UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	if st.TokensInWindow != int64(tokens) {
		t.Fatalf("%s, window %s: %d tokens in the window, the ledger says %d", what, window, st.TokensInWindow, tokens)
	}
	for _, p := range st.Projects {
		id := p.Project.ID
		if p.CompletedInWindow != completed[id] || math.Abs(p.AgentSeconds-seconds[id]) > 1e-6 {
			t.Fatalf("%s, window %s, project %s: %d completed and %.9f agent-seconds, history says %d and %.9f",
				what, window, id, p.CompletedInWindow, p.AgentSeconds, completed[id], seconds[id])
		}
	}
}

// TestUsageBucketsMatchRecount checks the usage a scheduling round reads
// (running buckets), and the window's token total, against a count over
// the whole history, after every
// step of random histories and for windows shorter than a step, around an
// hour, a day, and longer than the buckets are kept.
func TestUsageBucketsMatchRecount(t *testing.T) {
	t.Parallel()
	windows := []time.Duration{time.Minute, 7 * time.Minute, 61 * time.Minute, 5 * time.Hour, 24 * time.Hour,
		store.UsageRetention, store.UsageRetention + time.Hour}
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Parallel()
			s, clock := openClocked(t)
			usageHistory(t, s, clock, seed, 200, func(step int) {
				for _, w := range windows {
					compareUsage(t, s, clock.Now(), w, fmt.Sprint("step ", step))
				}
			})
		})
	}
}

// TestUsageBucketsAreBackfilled opens a database written before the usage
// buckets existed: the migration fills them from history, and the store
// their tokens from the ledger.
func TestUsageBucketsAreBackfilled(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "aq.db")
	clock := clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	open := func() *store.Store {
		s := storetest.OpenAt(t, path, storetest.WithClock(clock))
		return s
	}
	s := open()
	usageHistory(t, s, clock, 7, 200, func(int) {})
	s.Close()
	// As an older agentqueued left it: no buckets, the migration not applied.
	if err := store.ExecAtForTest(path, `DROP TABLE usage_buckets; DROP TABLE usage_state; DROP TABLE ready_generation;
		DROP TRIGGER tasks_ready_insert; DROP TRIGGER tasks_ready_update;
		DELETE FROM schema_migrations WHERE version IN (15, 19)`); err != nil {
		t.Fatal(err)
	}
	s = open()
	defer s.Close()
	for _, w := range []time.Duration{time.Minute, 61 * time.Minute, 24 * time.Hour, 3 * 24 * time.Hour} {
		compareUsage(t, s, clock.Now(), w, "after the migration")
	}
}

// TestSchedulingStateDoesNotRecountHistory: a round reads the window's
// usage from what was recorded as it happened, not by counting the history
// again (which made a round's cost grow with the window's completions).
// With the history's events, runs and token ledger removed behind the
// store's back, the round still sees them.
func TestSchedulingStateDoesNotRecountHistory(t *testing.T) {
	t.Parallel()
	s, clock := openClocked(t)
	ctx := context.Background()
	storetest.Project(t, s, "p")
	storetest.Agent(t, s, "a1")
	ids := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "a", Title: "A"})
	run, _, err := s.ClaimTask(ctx, ids["a"], "a1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartRun(ctx, run.ID, 4242, "/w"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(90 * time.Second)
	if _, err := s.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentCompleted,
		ExpectFrom: models.StatusInProgress, Outcome: "completed"}); err != nil {
		t.Fatal(err)
	}
	storetest.Apply(t, s, ids["a"], models.EventVerifyPassed)
	if err := s.RecordTokenUsage(ctx, models.TokenUsage{ProjectID: "p", TaskID: ids["a"], Input: 300, Output: 20}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if err := store.ExecForTest(s, `DELETE FROM task_events; DELETE FROM task_runs;
		DROP TRIGGER token_ledger_no_delete; DELETE FROM token_ledger`); err != nil {
		t.Fatal(err)
	}
	st, err := s.SchedulingState(ctx, clock.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if p := st.Projects[0]; p.CompletedInWindow != 1 || p.AgentSeconds != 90 || st.TokensInWindow != 320 {
		t.Fatalf("project p: %d completed, %v agent-seconds, %d tokens in the window; want 1, 90 and 320",
			p.CompletedInWindow, p.AgentSeconds, st.TokensInWindow)
	}
}
