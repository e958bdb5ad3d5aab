package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/fleet"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// TestOverviewShowsRunners: the overview has a Runners table once a
// runner exists — each runner's state, whether it is connected, when it
// was last seen, its agents, its runs in progress and its version, text
// from the runner escaped — and the runners' agents among the agents;
// without runners there is no table, only the live part a runner's
// arrival fills.
func TestOverviewShowsRunners(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktest.New(at)
	hub := fleet.New(fleet.Config{Clock: clk})
	e, _ := newEnvWith(t, envConfig{Now: clk.Now, Runners: hub})
	ctx := context.Background()

	p := e.get("/ui/overview")
	if !strings.Contains(p.body, `<div id="ov-runners" data-live></div>`) || strings.Contains(p.body, "h-runners") {
		t.Fatalf("the overview without runners:\n%s", p.body)
	}

	for _, name := range []string{"build-1", "gpu", "laptop"} {
		if _, err := e.store.CreateRunner(ctx, models.Runner{Name: name}, models.RunnerTokenHash("aqr_"+name)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.store.HelloRunner(ctx, "build-1", models.RunnerHello{Version: "1.2.3 <b>", Agents: []models.RunnerAgent{
		{Name: "sh", AgentType: "command"}, {Name: "sh-2", AgentType: "command"}}}, at, "127.0.0.2:4000"); err != nil {
		t.Fatal(err)
	}
	// build-1 made its last request 30 s ago, later than the database
	// has it; gpu was last seen by an earlier life of the daemon.
	hub.Seen("build-1", "1.2.3 <b>", "127.0.0.2:4000")
	clk.Advance(30 * time.Second)
	if err := e.store.TouchRunner(ctx, "gpu", at.Add(-3*time.Hour), "0.9", "127.0.0.3:4000"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.SetRunnerState(ctx, "laptop", models.RunnerDraining); err != nil {
		t.Fatal(err)
	}
	id := e.task("web", "Remote work")
	if _, _, err := e.store.ClaimTask(ctx, id, "build-1/sh"); err != nil {
		t.Fatal(err)
	}
	storetest.Agent(t, e.store, "local")

	p = e.get("/ui/overview")
	start, end := strings.Index(p.body, `id="ov-runners"`), strings.Index(p.body, `id="ov-projects"`)
	if start < 0 || end < start {
		t.Fatalf("no Runners part before the projects:\n%s", p.body)
	}
	runners := p.body[start:end]
	for _, want := range []string{
		`<h2 id="h-runners">Runners</h2>`,
		"<tr>\n<td>build-1</td>\n<td>ACTIVE</td>\n<td>yes</td>\n<td>30s ago</td>\n" +
			`<td class="num" title="build-1/sh, build-1/sh-2">2</td>` + "\n" + `<td class="num">1</td>` + "\n" +
			`<td class="hide-narrow">1.2.3 &lt;b&gt;</td>`,
		"<tr>\n<td>gpu</td>\n<td>ACTIVE</td>\n<td><strong>no</strong></td>\n<td>3h00m ago</td>\n",
		"<tr>\n<td>laptop</td>\n<td>DRAINING</td>\n<td><strong>no</strong></td>\n<td><span class=\"muted\">never</span></td>\n" +
			`<td class="num">0</td>` + "\n" + `<td class="num">0</td>`,
	} {
		if !strings.Contains(runners, want) {
			t.Errorf("the Runners table lacks %q:\n%s", want, runners)
		}
	}
	agents := p.body[strings.Index(p.body, `id="ov-agents"`):start]
	for _, want := range []string{"<td>build-1/sh <span", "<td>build-1/sh-2 <span", "<td>local <span",
		`<a href="/ui/tasks/` + id + `">Remote work</a>`} {
		if !strings.Contains(agents, want) {
			t.Errorf("the agents lack %q:\n%s", want, agents)
		}
	}
}
