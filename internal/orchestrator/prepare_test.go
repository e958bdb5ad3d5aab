package orchestrator

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
)

// gate holds a step of a run until the test releases it (or the step's
// context ends), telling the test when a run has reached it.
type gate struct {
	entered chan struct{}
	release chan struct{}
}

func newGate() *gate { return &gate{entered: make(chan struct{}, 10), release: make(chan struct{})} }

// pass waits at the gate; it reports whether the test released it.
func (g *gate) pass(ctx context.Context) bool {
	g.entered <- struct{}{}
	select {
	case <-g.release:
		return true
	case <-ctx.Done():
		return false
	}
}

// reached waits for a run to reach the gate.
func (g *gate) reached(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(progresstest.Stall()):
		t.Fatal("no run reached the gate")
	}
}

// gatedWorkspaces holds each preparation at its gate: a first clone that
// takes its time.
type gatedWorkspaces struct {
	Workspaces
	g *gate
}

func (w gatedWorkspaces) Prepare(ctx context.Context, a models.Agent, p models.Project, t models.Task) (models.Workspace, error) {
	if !w.g.pass(ctx) {
		return models.Workspace{}, ctx.Err()
	}
	return w.Workspaces.Prepare(ctx, a, p, t)
}

// gatedStore holds a run after its preparation, before its process
// exists: the reading of its last session waits at the gate.
type gatedStore struct {
	Store
	g *gate
}

func (s gatedStore) LastSession(ctx context.Context, taskID, agentID string) (string, models.TokenUsage, error) {
	s.g.pass(context.WithoutCancel(ctx))
	return s.Store.LastSession(ctx, taskID, agentID)
}

func TestPreparationHasItsOwnLimit(t *testing.T) {
	t.Parallel()
	const prepare, start = 10 * time.Minute, 5 * time.Minute
	tests := []struct {
		name string
		// gateStore holds the run after its preparation instead of during it.
		gateStore bool
		// advance moves the clock while the run waits at the gate, in steps:
		// the run must not have ended after any but the last.
		advance []time.Duration
		// release opens the gate after the last step.
		release    bool
		wantStatus models.TaskStatus
		wantReason string
		wantEvent  string
	}{
		{name: "a slow preparation is not a start that hangs", advance: []time.Duration{start + time.Minute},
			release: true, wantStatus: models.StatusCompleted, wantEvent: "AGENT_STARTED"},
		{name: "a preparation past its limit returns the task", advance: []time.Duration{prepare - time.Second, time.Second},
			wantStatus: models.StatusReady, wantReason: "prepare workspace: did not finish within 10m0s", wantEvent: "EXECUTION_ERROR"},
		{name: "the start times out after the spawn", gateStore: true, advance: []time.Duration{start - time.Second, time.Second},
			release: true, wantStatus: models.StatusFailed, wantReason: "did not start within 5m0s", wantEvent: "TIMEOUT_FAILED"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(c *Config) { c.PrepareTimeout, c.StartTimeout = prepare, start })
			g := newGate()
			if tc.gateStore {
				h.o.store = gatedStore{h.o.store, g}
			} else {
				h.o.ws = gatedWorkspaces{h.o.ws, g}
			}
			h.agent("a1", "command", "exit0", nil)
			id := h.tasks(models.BatchTask{LocalID: "t", Title: "t"})["t"]
			h.start()
			g.reached(t)
			h.settle() // the run's deadline is armed
			for i, d := range tc.advance {
				h.clock.Advance(d)
				// A round at the new time has supervised the run: a deadline
				// passed has ended it before the gate opens, not at the
				// same moment as the run goes on.
				h.settle()
				if i == len(tc.advance)-1 {
					break
				}
				if st := h.task(id).Status; st != models.StatusAssigned {
					t.Fatalf("after %s: the task is %s", d, st)
				}
			}
			if tc.release {
				close(g.release)
			}
			if r := h.waitEnd(); r.TaskID != id {
				t.Fatalf("ended %+v", r)
			}
			h.settle()
			tk := h.task(id)
			if tk.Status != tc.wantStatus || (tc.wantReason != "" && tk.StatusReason != tc.wantReason) {
				t.Fatalf("the task is %s %q, want %s %q", tk.Status, tk.StatusReason, tc.wantStatus, tc.wantReason)
			}
			if ev := h.events(id); !slices.Contains(ev, tc.wantEvent) {
				t.Fatalf("events %v lack %s", ev, tc.wantEvent)
			}
			if a, _ := h.st.GetAgent(context.Background(), "a1"); a.State != models.AgentIdle {
				t.Fatalf("the agent is %s", a.State)
			}
			if tc.wantStatus != models.StatusReady {
				return
			}
			// A failed preparation cools the project down, not the agent:
			// the task is tried again after the cooldown, not at once.
			select {
			case <-g.entered:
				t.Fatal("prepared again at once")
			default:
			}
			h.clock.Advance(30 * time.Second)
			g.reached(t)
		})
	}
}
