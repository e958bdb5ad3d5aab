package api_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/fleet"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// TestStatusShowsRunners: GET /api/v1/status answers the runners by name,
// each with whether it is connected and its runs in progress, and their
// agents among the agents; GET /api/v1/runners/NAME says the same of one.
// A runner silent for longer than the hub's SeenTimeout is no longer
// connected.
func TestStatusShowsRunners(t *testing.T) {
	t.Parallel()
	e := newRunnerEnv(t)
	ctx := t.Context()
	var added api.RunnerAdded
	e.do("POST", "/api/v1/runners", `{"name":"build-1"}`).decode(t, http.StatusCreated, &added)
	e.do("POST", "/api/v1/runners", `{"name":"laptop"}`).decode(t, http.StatusCreated, &api.RunnerAdded{})
	var welcome models.RunnerWelcome
	e.do("POST", "/runner/v1/hello", `{"version":"1.2.3","agents":[{"name":"sh","agent_type":"command"},`+
		`{"name":"sh-2","agent_type":"command"}]}`, "Authorization", "Bearer "+added.Token).
		decode(t, http.StatusOK, &welcome)
	storetest.Project(t, e.store, "web")
	for _, agent := range []string{"build-1/sh", "build-1/sh-2"} {
		if _, _, err := e.store.ClaimTask(ctx, storetest.Task(t, e.store, "web", "work of "+agent), agent); err != nil {
			t.Fatal(err)
		}
	}

	o, err := e.client.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Runners) != 2 {
		t.Fatalf("runners %+v, want build-1 and laptop", o.Runners)
	}
	b, l := o.Runners[0], o.Runners[1]
	if b.Name != "build-1" || !b.Connected || b.RunsInProgress != 2 || b.Version != "1.2.3" || b.LastSeenAt == nil ||
		!slices.Equal(b.Agents, []string{"build-1/sh", "build-1/sh-2"}) || b.State != models.RunnerActive {
		t.Errorf("build-1 in the status: %+v", b)
	}
	if l.Name != "laptop" || l.Connected || l.RunsInProgress != 0 || l.LastSeenAt != nil || len(l.Agents) != 0 {
		t.Errorf("laptop in the status: %+v", l)
	}
	var ids []string
	for _, a := range o.Agents {
		ids = append(ids, a.ID)
	}
	if !slices.Equal(ids, []string{"build-1/sh", "build-1/sh-2"}) {
		t.Errorf("the status's agents %v, want the runner's", ids)
	}
	var shown models.Runner
	e.do("GET", "/api/v1/runners/build-1", "").decode(t, http.StatusOK, &shown)
	if shown.RunsInProgress != 2 || !shown.Connected {
		t.Errorf("build-1 shown: %+v", shown)
	}

	e.clk.Advance(fleet.DefaultSeenTimeout + 1)
	if o, err = e.client.Status(ctx); err != nil {
		t.Fatal(err)
	}
	if len(o.Runners) != 2 || o.Runners[0].Connected || o.Runners[0].RunsInProgress != 2 {
		t.Errorf("runners after %v of silence: %+v", fleet.DefaultSeenTimeout, o.Runners)
	}
}
