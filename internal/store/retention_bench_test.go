package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// seedBlockedHistory creates n finished (BLOCKED) tasks, each with a
// dependency on a blocked root, the way a failed root leaves its dependents.
func seedBlockedHistory(tb testing.TB, s *store.Store, n int) {
	tb.Helper()
	ctx := context.Background()
	const chunk = 5_000
	for made := 0; made < n; {
		roots, err := s.CreateTasks(ctx, models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{{Title: "root"}}})
		if err != nil {
			tb.Fatal(err)
		}
		root := roots[0].TaskID
		for _, ev := range []models.TransitionRequest{
			{TaskID: root, Event: models.EventAssigned, AgentID: "seeder", ExpectFrom: models.StatusReady},
			{TaskID: root, Event: models.EventTimeout, ExpectFrom: models.StatusAssigned, Reason: "seeded"},
		} {
			if _, err := s.ApplyEvent(ctx, ev); err != nil {
				tb.Fatal(err)
			}
		}
		batch := models.TaskBatch{ProjectID: "p", Tasks: make([]models.BatchTask, min(chunk, n-made))}
		for i := range batch.Tasks {
			batch.Tasks[i] = models.BatchTask{Title: fmt.Sprintf("history %d", made+i),
				Description:  "a finished task of the seeded history, with a description of a realistic length",
				Dependencies: []models.BatchDependency{{ID: root}}}
		}
		if _, err := s.CreateTasks(ctx, batch); err != nil {
			tb.Fatal(err)
		}
		made += len(batch.Tasks)
	}
}

// BenchmarkArchiveBatch measures archiving one batch (its read on a
// snapshot and its write transaction) of
// finished tasks (each with its edge and event) on a durable database
// holding a history of 20,000 of them besides those archived, for batches
// about the pruner's default.
func BenchmarkArchiveBatch(b *testing.B) {
	for _, batch := range []int{5, 10, 20} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s, clock := openClocked(b)
			storetest.Project(b, s, "p")
			ctx := context.Background()
			seedBlockedHistory(b, s, 20_000+b.N*batch)
			clock.Advance(40 * day)
			before := clock.Now().Add(-30 * day)
			b.ResetTimer()
			for range b.N {
				ids, err := s.ArchiveTasks(ctx, before, batch)
				if err != nil {
					b.Fatal(err)
				}
				if len(ids) != batch {
					b.Fatalf("archived %d tasks, want %d", len(ids), batch)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/tx")
		})
	}
}
