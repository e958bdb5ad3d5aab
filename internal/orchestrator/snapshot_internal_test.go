package orchestrator

import (
	"slices"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
)

// connected is the runners' connections a snapshot sees: the names
// listed are connected.
type connected []string

func (c connected) Connected(name string) bool { return slices.Contains(c, name) }
func (connected) Wake(string)                  {}
func (connected) Unresponsive(string)          {}

// A snapshot offers a runner's idle agents only while the runner is
// connected, and no more of them than its capacity leaves room for; its
// agents carry its labels and their checkouts' repositories.
func TestSnapshotOffersRunnersAgentsWithinCapacity(t *testing.T) {
	t.Parallel()
	repo := "r-web"
	agent := func(id, runner string, state models.AgentState) models.Agent {
		return models.Agent{ID: id, AgentType: "command", State: state, RunnerID: runner, RepoID: &repo}
	}
	all := []models.Agent{agent("local", "", models.AgentIdle),
		agent("big/a0", "big", models.AgentIdle), agent("big/a1", "big", models.AgentIdle),
		agent("one/a0", "one", models.AgentBusy), agent("one/a1", "one", models.AgentIdle),
		agent("two/a0", "two", models.AgentBusy), agent("two/a1", "two", models.AgentIdle), agent("two/a2", "two", models.AgentIdle),
		agent("away/a0", "away", models.AgentIdle)}
	var idle []models.Agent
	for _, a := range all {
		if a.State == models.AgentIdle {
			idle = append(idle, a)
		}
	}
	st := models.SchedulingState{Now: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC), Agents: all, IdleAgents: idle,
		Runners: []models.Runner{{Name: "big", Labels: []string{"gpu"}}, {Name: "one", Capacity: 1},
			{Name: "two", Capacity: 2}, {Name: "away"}}}
	o := &Orchestrator{cfg: Config{Runners: connected{"big", "one", "two"}, Clock: clocktest.New(st.Now)},
		cooldown: map[string]time.Time{}}
	s := o.snapshot(st)
	var got []string
	for _, a := range s.IdleAgents {
		got = append(got, a.ID)
		if a.RepoID != repo {
			t.Errorf("%s: repo %q", a.ID, a.RepoID)
		}
		if want := a.ID == "big/a0" || a.ID == "big/a1"; want != slices.Equal(a.Labels, []string{"gpu"}) {
			t.Errorf("%s: labels %v", a.ID, a.Labels)
		}
	}
	// big: no cap; one: at capacity; two: room for one more; away: not
	// connected.
	if want := []string{"local", "big/a0", "big/a1", "two/a1"}; !slices.Equal(got, want) {
		t.Fatalf("idle agents offered %v, want %v", got, want)
	}
	if len(s.Agents) != len(all) {
		t.Fatalf("%d agents known, want %d", len(s.Agents), len(all))
	}
}
