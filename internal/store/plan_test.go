package store_test

import (
	"regexp"
	"testing"

	"github.com/agentqueued/agentqueued/internal/store"
)

// TestFrequentQueriesUseIndexes guards the indexes of the queries the daemon
// runs often: none may scan a whole table.
func TestFrequentQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	fullScan := regexp.MustCompile(`(?m)^SCAN (\w+)$`)
	queries := []struct {
		name, q string
		args    []any
	}{
		{"tasks by status", "SELECT id FROM tasks WHERE status = ?", []any{"READY"}},
		{"tasks by project and status", "SELECT id FROM tasks WHERE project_id = ? AND status IN (?, ?) ORDER BY priority", []any{"p", "READY", "DEFINED"}},
		{"dedupe candidates", "SELECT id FROM tasks WHERE project_id = ? AND kind = ? AND status IN (?)", []any{"p", "k", "READY"}},
		{"edges of a downstream task", "SELECT upstream, resolution FROM task_dependencies WHERE downstream = ?", []any{"t"}},
		{"edges of an upstream task", "SELECT downstream FROM task_dependencies WHERE upstream = ? AND resolution = 'PENDING'", []any{"t"}},
		{"dependents to evaluate", `SELECT t.id, t.status FROM task_dependencies d JOIN tasks t ON t.id = d.downstream
			WHERE d.upstream = ? AND (t.status = 'DEFINED' OR (t.status = 'BLOCKED' AND t.cascade_root_id != ''))`, []any{"t"}},
		{"events of a task", "SELECT id FROM task_events WHERE task_id = ? ORDER BY id", []any{"t"}},
		{"pending outbox", "SELECT id FROM outbox WHERE delivered_at IS NULL AND next_attempt_at <= ? ORDER BY id LIMIT 10", []any{0}},
		{"usage in a window", "SELECT sum(input_tokens) FROM token_ledger WHERE project_id = ? AND created_at >= ?", []any{"p", 0}},
		{"idle agents", "SELECT id FROM agents WHERE state = ?", []any{"IDLE"}},
		{"children of a task", "SELECT id FROM tasks WHERE parent_task_id = ?", []any{"t"}},
		{"running hook runs", "SELECT id FROM hook_runs WHERE status = 'running'", nil},
	}
	for _, tc := range queries {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := store.QueryPlanForTest(s, tc.q, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if m := fullScan.FindString(plan); m != "" {
				t.Fatalf("full table scan (%s):\n%s", m, plan)
			}
		})
	}
}
