package store_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// TestFrequentQueriesUseIndexes guards the indexes of the queries the daemon
// runs often: none may scan a whole table.
func TestFrequentQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	fullScan := regexp.MustCompile(`(?m)^SCAN (\w+)$`)
	// Queries built at run time (listing and dedupe) and those of parts
	// still to come, in the shape the code builds them.
	queries := []struct {
		name, q string
	}{
		{"tasks by status", "SELECT id FROM tasks WHERE status IN (?)"},
		{"tasks by project and status", "SELECT id FROM tasks WHERE project_id = ? AND status IN (?, ?) ORDER BY submission_seq LIMIT ?"},
		{"tasks after a task", "SELECT id FROM tasks WHERE submission_seq > (SELECT submission_seq FROM tasks WHERE id = ?) ORDER BY submission_seq LIMIT ?"},
		{"dedupe candidates", "SELECT id FROM tasks WHERE project_id = ? AND kind = ? AND status IN (?) ORDER BY submission_seq"},
		{"edges of a downstream task", "SELECT upstream, resolution FROM task_dependencies WHERE downstream = ? ORDER BY downstream, upstream"},
		{"edges of an upstream task", "SELECT downstream FROM task_dependencies WHERE upstream = ? ORDER BY downstream, upstream"},
		{"idle agents", "SELECT id FROM agents WHERE state = ?"},
		{"children of a task", "SELECT id FROM tasks WHERE parent_task_id = ?"},
		{"running hook runs", "SELECT id FROM hook_runs WHERE status = 'running'"},
		// Deleting an event (archiving) checks the edges it resolved: the
		// foreign key's lookup, answered by the partial index on the
		// column (migration 0038).
		{"edges an event resolved", "SELECT 1 FROM task_dependencies WHERE resolving_event_id = ?"},
	}
	for name, q := range store.HotQueriesForTest() {
		queries = append(queries, struct{ name, q string }{name, q})
	}
	for _, tc := range queries {
		t.Run(tc.name, func(t *testing.T) {
			args := make([]any, strings.Count(tc.q, "?"))
			for i := range args {
				args[i] = "x"
			}
			plan, err := store.QueryPlanForTest(s, tc.q, args...)
			if err != nil {
				t.Fatal(err)
			}
			if m := fullScan.FindString(plan); m != "" {
				t.Fatalf("full table scan (%s):\n%s", m, plan)
			}
		})
	}
}
