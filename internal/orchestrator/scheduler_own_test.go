package orchestrator_test

import (
	"slices"
	"testing"

	"github.com/agentqueued/agentqueued/internal/orchestrator"
)

// TestTasksOwnRules: a batch entry's rules (the seed's start conditions)
// govern the task that carries them, counting every task they match,
// whether it carries the rule or not.
func TestTasksOwnRules(t *testing.T) {
	t.Parallel()
	own := func(js ...string) func(*orchestrator.TaskInfo) {
		return func(ti *orchestrator.TaskInfo) {
			for _, r := range js {
				rl := decodeRule(t, r)
				rl.ProjectID = ti.ProjectID // as the store keeps them
				ti.Rules = append(ti.Rules, rl)
			}
		}
	}
	work := func(expected, success int) func(*orchestrator.TaskInfo) {
		return func(ti *orchestrator.TaskInfo) { ti.ExpectedCount, ti.SuccessCount = expected, success }
	}
	oneCluster := `{"type": "Concurency", "max_concurency": 1, "matcher": {"status": "Running", "kind": "clustering", "fields": ["projectId"]}}`
	tests := []struct {
		name    string
		running []orchestrator.TaskInfo
		ready   []orchestrator.TaskInfo
		want    []string
	}{
		{
			name:    "one per field value, counting running tasks without the rule",
			running: []orchestrator.TaskInfo{running("r1", "a", kindMeta("clustering", "projectId", "7"))},
			ready: []orchestrator.TaskInfo{
				task("c7", "a", 1, kindMeta("clustering", "projectId", "7"), own(oneCluster)),
				task("c8a", "a", 2, kindMeta("clustering", "projectId", "8"), own(oneCluster)),
				task("c8b", "a", 3, kindMeta("clustering", "projectId", "8"), own(oneCluster)),
			},
			want: []string{"c8a"},
		},
		{
			name: "the rule governs only the tasks that carry it",
			ready: []orchestrator.TaskInfo{
				task("with", "a", 1, kindMeta("clustering", "projectId", "7"), own(oneCluster)),
				task("without", "a", 2, kindMeta("clustering", "projectId", "7")),
				task("with-2", "a", 3, kindMeta("clustering", "projectId", "7"), own(oneCluster)),
			},
			want: []string{"with", "without"},
		},
		{
			name:    "a rule may count another kind",
			running: []orchestrator.TaskInfo{running("r1", "a", kindMeta("import", "tenant", "acme"))},
			ready: []orchestrator.TaskInfo{
				task("report", "a", 1, kindMeta("report", "tenant", "acme"),
					own(`{"type": "Concurrency", "max_concurrency": 1, "matcher": {"kind": "import", "fields": ["tenant"]}}`)),
				task("report-2", "a", 2, kindMeta("report", "tenant", "other"),
					own(`{"type": "Concurrency", "max_concurrency": 1, "matcher": {"kind": "import", "fields": ["tenant"]}}`)),
			},
			want: []string{"report-2"},
		},
		{
			name:    "capacity over the remaining work",
			running: []orchestrator.TaskInfo{running("r1", "a", kindMeta("ingest"), work(100, 40))},
			ready: []orchestrator.TaskInfo{
				task("i50", "a", 1, kindMeta("ingest"), work(50, 0), own(`{"type": "Capacity", "max_capacity": 100, "matcher": {"kind": "ingest"}}`)),
				task("i10", "a", 2, kindMeta("ingest"), work(10, 0), own(`{"type": "Capacity", "max_capacity": 100, "matcher": {"kind": "ingest"}}`)),
			},
			want: []string{"i10"},
		},
		{
			name: "another project's tasks do not count",
			running: []orchestrator.TaskInfo{running("r1", "b", kindMeta("clustering", "projectId", "7")),
				running("r2", "b", kindMeta("clustering", "projectId", "7"))},
			ready: []orchestrator.TaskInfo{task("c7", "a", 1, kindMeta("clustering", "projectId", "7"), own(oneCluster))},
			want:  []string{"c7"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := taskIDs(schedule(t, orchestrator.Snapshot{
				Projects:   []orchestrator.ProjectState{proj("a"), proj("b")},
				Ready:      tc.ready,
				Running:    tc.running,
				IdleAgents: agents(10),
			}))
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("assigned %v, want %v", got, tc.want)
			}
		})
	}
}
