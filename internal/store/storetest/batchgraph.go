package storetest

import (
	"fmt"
	"math/rand/v2"

	"github.com/agentqueued/agentqueued/internal/models"
)

// RandomBatch returns a batch for project "p" of tasks tasks with edges
// distinct edges, each from a task to an earlier one, drawn with a fixed
// seed: the graph the batch benchmarks create (10,000 and 30,000).
func RandomBatch(tasks, edges int) models.TaskBatch {
	r := rand.New(rand.NewPCG(1, 1))
	batch := models.TaskBatch{ProjectID: "p"}
	for i := range tasks {
		batch.Tasks = append(batch.Tasks, models.BatchTask{LocalID: fmt.Sprintf("t%d", i), Title: fmt.Sprintf("task %d", i)})
	}
	seen := map[[2]int]bool{}
	for n := 0; n < edges; {
		down := 1 + r.IntN(tasks-1)
		up := r.IntN(down)
		if seen[[2]int{down, up}] {
			continue
		}
		seen[[2]int{down, up}] = true
		batch.Tasks[down].Dependencies = append(batch.Tasks[down].Dependencies, models.BatchDependency{ID: fmt.Sprintf("t%d", up)})
		n++
	}
	return batch
}
