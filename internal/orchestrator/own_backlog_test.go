package orchestrator

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// countingStore counts the READY rows the orchestrator reads.
type countingStore struct {
	Store
	rows *atomic.Int64
}

func (c countingStore) ReadyTasks(ctx context.Context, q models.ReadyQuery) ([]models.Task, error) {
	ts, err := c.Store.ReadyTasks(ctx, q)
	c.rows.Add(int64(len(ts)))
	return ts, err
}

// Tasks held back by a rule are left out of the READY pages, whether the
// rule is one of the set or the tasks' own (the seed's batch format): no
// round reads their rows. (Own rules used to be read, row by row, in every
// round: 50,000 rows in five rounds at 10,000 tasks.)
func TestARuleCappedBacklogIsNotReadEveryRound(t *testing.T) {
	const n = 10000
	for _, own := range []bool{false, true} {
		t.Run(fmt.Sprint("own=", own), func(t *testing.T) {
			rule := models.Rule{ID: "one-capped", Type: models.RuleConcurrency, MaxConcurrency: 1,
				Matcher: models.RuleMatcher{Kind: "capped", Status: "AWAITING_APPROVAL|Running"}}
			h := newHarness(t, func(c *Config) {
				if !own {
					c.Rules = []models.Rule{rule}
				}
			})
			var rows atomic.Int64
			h.o.store = countingStore{Store: h.o.store, rows: &rows}
			ctx := context.Background()
			h.agent("a1", "command", "exit0", nil)
			bt := models.BatchTask{LocalID: "held", Title: "held", Kind: "capped"}
			if own {
				bt.Rules = []models.Rule{rule}
			}
			held := h.tasks(bt)["held"]
			run, _, err := h.st.ClaimTask(ctx, held, "a1")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.st.StartRun(ctx, run.ID, 1, ""); err != nil {
				t.Fatal(err)
			}
			if _, err := h.st.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentCompleted, Outcome: "completed"}); err != nil {
				t.Fatal(err)
			}
			if _, err := h.st.ApplyEvent(ctx, models.TransitionRequest{TaskID: held, Event: models.EventPRCreated,
				ExpectFrom: models.StatusVerifying, Actor: "test", Reason: "pull request"}); err != nil {
				t.Fatal(err)
			}
			first := 1
			var capped []models.BatchTask
			for i := range n {
				c := models.BatchTask{Title: fmt.Sprintf("capped %d", i), Priority: &first, Kind: "capped"}
				if own {
					c.Rules = []models.Rule{rule}
				}
				capped = append(capped, c)
			}
			h.tasks(capped...)
			h.start()
			h.settle()
			before := rows.Load()
			start := time.Now()
			for range 5 {
				h.settle()
			}
			t.Logf("own=%v: READY rows read in 5 rounds after the first: %d in %v", own, rows.Load()-before, time.Since(start))
			if got := rows.Load() - before; got > 0 {
				t.Errorf("5 rounds read %d READY rows of tasks that cannot start", got)
			}
		})
	}
}
