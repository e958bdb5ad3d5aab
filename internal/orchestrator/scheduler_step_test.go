package orchestrator_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/orchestrator"
)

// step places a task in a step of a workflow run with the given cap.
func step(runID, name string, concurrency int) func(*orchestrator.TaskInfo) {
	return func(t *orchestrator.TaskInfo) {
		t.RunID, t.StepName, t.StepConcurrency = runID, name, concurrency
	}
}

// stepTasks returns n READY tasks of project a in runID's step name, named
// <runID>-<name>-0, -1, …, created one minute apart from age on.
func stepTasks(runID, name string, concurrency, n, age int, mut ...func(*orchestrator.TaskInfo)) []orchestrator.TaskInfo {
	out := make([]orchestrator.TaskInfo, n)
	for i := range out {
		out[i] = task(fmt.Sprintf("%s-%s-%d", runID, name, i), "a", age+i,
			append([]func(*orchestrator.TaskInfo){step(runID, name, concurrency)}, mut...)...)
	}
	return out
}

func withStatus(st models.TaskStatus) func(*orchestrator.TaskInfo) {
	return func(t *orchestrator.TaskInfo) { t.Status = st }
}

func withPriority(p int) func(*orchestrator.TaskInfo) {
	return func(t *orchestrator.TaskInfo) { t.Priority = p }
}

func TestScheduleStepConcurrency(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		completed int // the project's CompletedInWindow; 0 brings in the guarantee
		ready     []orchestrator.TaskInfo
		running   []orchestrator.TaskInfo
		agents    int
		want      []string // task IDs, in the order assigned
	}{
		{
			name:      "cap 2, five ready, five agents",
			completed: 1,
			ready:     stepTasks("r1", "build", 2, 5, 0),
			agents:    5,
			want:      []string{"r1-build-0", "r1-build-1"},
		},
		{
			name:      "cap 2 with the guarantee round",
			completed: 0,
			ready:     stepTasks("r1", "build", 2, 5, 0),
			agents:    5,
			want:      []string{"r1-build-0", "r1-build-1"},
		},
		{
			name:      "cap 2, one already running",
			completed: 1,
			ready:     stepTasks("r1", "build", 2, 5, 0),
			running:   []orchestrator.TaskInfo{running("run-1", "a", step("r1", "build", 2))},
			agents:    5,
			want:      []string{"r1-build-0"},
		},
		{
			name:      "every running status counts",
			completed: 1,
			ready:     stepTasks("r1", "build", 6, 6, 0),
			running: []orchestrator.TaskInfo{
				running("run-1", "a", step("r1", "build", 6), withStatus(models.StatusAssigned)),
				running("run-2", "a", step("r1", "build", 6), withStatus(models.StatusInProgress)),
				running("run-3", "a", step("r1", "build", 6), withStatus(models.StatusWaitingInput)),
				running("run-4", "a", step("r1", "build", 6), withStatus(models.StatusVerifying)),
				running("run-5", "a", step("r1", "build", 6), withStatus(models.StatusAwaitingApproval)),
			},
			agents: 6,
			want:   []string{"r1-build-0"},
		},
		{
			name:      "running tasks of the step reach the cap",
			completed: 1,
			ready:     stepTasks("r1", "build", 2, 3, 0),
			running: []orchestrator.TaskInfo{
				running("run-1", "a", step("r1", "build", 2)),
				running("run-2", "a", step("r1", "build", 2)),
			},
			agents: 3,
			want:   nil,
		},
		{
			name:      "running tasks above the cap start nothing",
			completed: 1,
			ready:     stepTasks("r1", "build", 2, 3, 0),
			running: []orchestrator.TaskInfo{
				running("run-1", "a", step("r1", "build", 2)),
				running("run-2", "a", step("r1", "build", 2)),
				running("run-3", "a", step("r1", "build", 2)),
			},
			agents: 3,
			want:   nil,
		},
		{
			name:      "running tasks of another run of the step are not counted",
			completed: 1,
			ready:     stepTasks("r1", "build", 2, 5, 0),
			running: []orchestrator.TaskInfo{
				running("run-1", "a", step("r2", "build", 2)),
				running("run-2", "a", step("r2", "build", 2)),
			},
			agents: 5,
			want:   []string{"r1-build-0", "r1-build-1"},
		},
		{
			name:      "running tasks of another step of the run are not counted",
			completed: 1,
			ready:     stepTasks("r1", "build", 2, 5, 0),
			running: []orchestrator.TaskInfo{
				running("run-1", "a", step("r1", "test", 2)),
				running("run-2", "a", step("r1", "test", 2)),
			},
			agents: 5,
			want:   []string{"r1-build-0", "r1-build-1"},
		},
		{
			name:      "each run of the step has its own cap",
			completed: 1,
			ready:     append(stepTasks("r1", "build", 2, 4, 0), stepTasks("r2", "build", 2, 4, 10)...),
			agents:    8,
			want:      []string{"r1-build-0", "r1-build-1", "r2-build-0", "r2-build-1"},
		},
		{
			name:      "cap 0 means no cap",
			completed: 1,
			ready:     stepTasks("r1", "build", 0, 5, 0),
			running:   []orchestrator.TaskInfo{running("run-1", "a", step("r1", "build", 0))},
			agents:    5,
			want:      []string{"r1-build-0", "r1-build-1", "r1-build-2", "r1-build-3", "r1-build-4"},
		},
		{
			name:      "negative cap means no cap",
			completed: 1,
			ready:     stepTasks("r1", "build", -1, 3, 0),
			agents:    3,
			want:      []string{"r1-build-0", "r1-build-1", "r1-build-2"},
		},
		{
			name:      "uncapped tasks of the step assigned this round count against a capped one",
			completed: 1,
			ready: []orchestrator.TaskInfo{
				task("x0", "a", 0, step("r1", "build", 0)),
				task("x1", "a", 1, step("r1", "build", 0)),
				task("x2", "a", 2, step("r1", "build", 2)),
			},
			agents: 3,
			want:   []string{"x0", "x1"},
		},
		{
			name:      "a refused step task does not hold back the rest of the project",
			completed: 1,
			ready: append(stepTasks("r1", "build", 1, 3, 0, withPriority(0)),
				task("plain", "a", 20), task("other-step", "a", 30, step("r1", "test", 1))),
			running: []orchestrator.TaskInfo{running("run-1", "a", step("r1", "build", 1))},
			agents:  5,
			want:    []string{"plain", "other-step"},
		},
		{
			name:      "a refused step task does not hold back the guarantee",
			completed: 0,
			ready: append(stepTasks("r1", "build", 1, 3, 0, withPriority(0)),
				task("plain", "a", 20)),
			running: []orchestrator.TaskInfo{running("run-1", "a", step("r1", "build", 1))},
			agents:  5,
			want:    []string{"plain"},
		},
		{
			name:      "the cap is kept across priorities and creators",
			completed: 1,
			ready: []orchestrator.TaskInfo{
				task("p0", "a", 5, step("r1", "build", 2), withPriority(0)),
				task("bob", "a", 0, step("r1", "build", 2), func(t *orchestrator.TaskInfo) { t.CreatedBy = "bob" }),
				task("alice", "a", 1, step("r1", "build", 2)),
				task("carol", "a", 2, step("r1", "build", 2), func(t *orchestrator.TaskInfo) { t.CreatedBy = "carol" }),
			},
			agents: 4,
			want:   []string{"p0", "bob"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := orchestrator.Snapshot{
				Projects: []orchestrator.ProjectState{proj("a", func(p *orchestrator.ProjectState) {
					p.CompletedInWindow = tc.completed
					p.MaxConcurrentAgents = 20
					p.Running = len(tc.running)
				})},
				Ready:      tc.ready,
				Running:    tc.running,
				IdleAgents: agents(tc.agents),
			}
			got := schedule(t, s)
			if ids := taskIDs(got); !slices.Equal(ids, tc.want) {
				t.Fatalf("assigned %v, want %v", ids, tc.want)
			}
			// Neither order of the snapshot's slices changes the result.
			r := s
			r.Ready, r.Running, r.IdleAgents = slices.Clone(s.Ready), slices.Clone(s.Running), slices.Clone(s.IdleAgents)
			slices.Reverse(r.Ready)
			slices.Reverse(r.Running)
			slices.Reverse(r.IdleAgents)
			if again := schedule(t, r); !slices.Equal(got, again) {
				t.Fatalf("reversed snapshot gave %v, want %v", again, got)
			}
		})
	}
}

// TestScheduleStepConcurrencyAcrossProjects: a cap counts the step's tasks of the
// run whatever their project, and a full step leaves the agents to other
// projects.
func TestScheduleStepConcurrencyAcrossProjects(t *testing.T) {
	t.Parallel()
	ready := stepTasks("r1", "build", 2, 4, 0)
	ready = append(ready, task("b-0", "b", 50), task("b-1", "b", 51))
	got := schedule(t, orchestrator.Snapshot{
		Projects:   []orchestrator.ProjectState{proj("a"), proj("b", func(p *orchestrator.ProjectState) { p.Running = 1 })},
		Ready:      ready,
		Running:    []orchestrator.TaskInfo{running("run-1", "b", step("r1", "build", 2))},
		IdleAgents: agents(4),
	})
	ids := taskIDs(got)
	slices.Sort(ids)
	if want := []string{"b-0", "b-1", "r1-build-0"}; !slices.Equal(ids, want) {
		t.Fatalf("assigned %v, want %v", ids, want)
	}
}
