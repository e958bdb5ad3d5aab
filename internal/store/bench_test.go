package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// BenchmarkTransitionCommit measures one committed status change (with its
// event row and outbox write) on a durable (WAL, synchronous=FULL) database.
func BenchmarkTransitionCommit(b *testing.B) {
	s := storetest.Open(b)
	storetest.Project(b, s, "p")
	ctx := context.Background()
	ids := make([]string, b.N)
	batch := models.TaskBatch{ProjectID: "p"}
	for i := range b.N {
		batch.Tasks = append(batch.Tasks, models.BatchTask{Title: fmt.Sprintf("t%d", i)})
	}
	res, err := s.CreateTasks(ctx, batch)
	if err != nil {
		b.Fatal(err)
	}
	for i, r := range res {
		ids[i] = r.TaskID
	}
	b.ResetTimer()
	for i := range b.N {
		if _, err := s.ApplyEvent(ctx, models.TransitionRequest{TaskID: ids[i], Event: models.EventAssigned, AgentID: "a1"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConfirmLease measures the lease's fence that every act outside
// the database asks first: one read of the lease row on the read pool.
func BenchmarkConfirmLease(b *testing.B) {
	s := storetest.Open(b)
	ctx := context.Background()
	if err := s.AcquireLease(ctx, models.LeaseHolder{Owner: "a", Hostname: "h", PID: 1}, time.Minute); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if err := s.ConfirmLease(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompleteWith1000Dependents measures the completion of a task whose
// 1,000 dependents are all promoted to READY in the same transaction.
func BenchmarkCompleteWith1000Dependents(b *testing.B) {
	s := storetest.Open(b)
	storetest.Project(b, s, "p")
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		batch := models.TaskBatch{ProjectID: "p", Tasks: []models.BatchTask{{LocalID: "root", Title: "root"}}}
		for i := range 1000 {
			batch.Tasks = append(batch.Tasks, models.BatchTask{Title: fmt.Sprintf("d%d", i), Dependencies: storetest.Deps("root")})
		}
		res, err := s.CreateTasks(ctx, batch)
		if err != nil {
			b.Fatal(err)
		}
		root := res[0].TaskID
		storetest.Apply(b, s, root, storetest.ToCompleted[:3]...)
		b.StartTimer()
		out := storetest.Apply(b, s, root, models.EventVerifyPassed)
		if len(out.Promoted) != 1000 {
			b.Fatalf("promoted %d", len(out.Promoted))
		}
	}
}

// BenchmarkCreateBatch10kTasks30kEdges measures one all-or-nothing batch of
// 10,000 tasks with 30,000 dependency edges, including validation, the cycle
// check, naming and initial promotion.
func BenchmarkCreateBatch10kTasks30kEdges(b *testing.B) {
	const tasks, edges = 10_000, 30_000
	batch := storetest.RandomBatch(tasks, edges)
	for range b.N {
		b.StopTimer()
		s := storetest.Open(b)
		storetest.Project(b, s, "p")
		b.StartTimer()
		res, err := s.CreateTasks(context.Background(), batch)
		if err != nil || len(res) != tasks {
			b.Fatalf("%d results, %v", len(res), err)
		}
	}
}
