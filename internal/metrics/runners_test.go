package metrics_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/fleet"
	"github.com/agentqueued/agentqueued/internal/metrics"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// TestScrapeReadsTheRunners: a scrape counts the runners by state and
// whether the hub has them connected (every pair, 0 included), and gives
// each runner's runs in progress and the seconds since its last request,
// the later of the database's and the hub's; a runner never seen has no
// last-seen series.
func TestScrapeReadsTheRunners(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktest.New(at)
	m := metrics.New(metrics.Config{Clock: clk})
	st := storetest.Open(t, storetest.WithClock(clk))
	m.ReadFrom(st)
	hub := fleet.New(fleet.Config{Clock: clk})
	m.RunnersFrom(hub)

	for _, name := range []string{"build-1", "gpu", "laptop"} {
		if _, err := st.CreateRunner(ctx, models.Runner{Name: name}, models.RunnerTokenHash("aqr_"+name)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.HelloRunner(ctx, "build-1", models.RunnerHello{Version: "1", Agents: []models.RunnerAgent{
		{Name: "a", AgentType: "command"}, {Name: "b", AgentType: "command"}}}, at, "127.0.0.2:1"); err != nil {
		t.Fatal(err)
	}
	if err := st.TouchRunner(ctx, "gpu", at.Add(-time.Hour), "1", "127.0.0.3:1"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetRunnerState(ctx, "gpu", models.RunnerDraining); err != nil {
		t.Fatal(err)
	}
	storetest.Project(t, st, "web")
	for _, agent := range []string{"build-1/a", "build-1/b"} {
		if _, _, err := st.ClaimTask(ctx, storetest.Task(t, st, "web", "work"), agent); err != nil {
			t.Fatal(err)
		}
	}
	// build-1's last request, 20 s after its hello, is the hub's alone:
	// the database is told once a minute.
	clk.Advance(20 * time.Second)
	hub.Seen("build-1", "", "127.0.0.2:1")
	clk.Advance(10 * time.Second)

	mfs := scrape(t, m.Handler())
	for _, w := range []struct {
		name   string
		labels map[string]string
		v      float64
	}{
		{"agentqueued_runners", map[string]string{"state": "ACTIVE", "connected": "true"}, 1},
		{"agentqueued_runners", map[string]string{"state": "ACTIVE", "connected": "false"}, 1},
		{"agentqueued_runners", map[string]string{"state": "DRAINING", "connected": "false"}, 1},
		{"agentqueued_runners", map[string]string{"state": "DRAINING", "connected": "true"}, 0},
		{"agentqueued_runner_runs", map[string]string{"runner": "build-1"}, 2},
		{"agentqueued_runner_runs", map[string]string{"runner": "gpu"}, 0},
		{"agentqueued_runner_runs", map[string]string{"runner": "laptop"}, 0},
		{"agentqueued_runner_last_seen_seconds", map[string]string{"runner": "build-1"}, 10},
		{"agentqueued_runner_last_seen_seconds", map[string]string{"runner": "gpu"}, 3630},
	} {
		if got, ok := value(mfs, w.name, w.labels); !ok || got != w.v {
			t.Errorf("%s%v = %v (present %v), want %v", w.name, w.labels, got, ok, w.v)
		}
	}
	if _, ok := value(mfs, "agentqueued_runner_last_seen_seconds", map[string]string{"runner": "laptop"}); ok {
		t.Error("laptop, never seen, has a last-seen series")
	}

	// Silent past the hub's SeenTimeout: away.
	clk.Advance(fleet.DefaultSeenTimeout)
	mfs = scrape(t, m.Handler())
	if got, _ := value(mfs, "agentqueued_runners", map[string]string{"state": "ACTIVE", "connected": "false"}); got != 2 {
		t.Errorf("ACTIVE runners away after %v of silence: %v, want 2", fleet.DefaultSeenTimeout, got)
	}
}

// TestScrapeLabelsAtMostAThousandRunners: of more runners than the cap,
// the first 1000 by name have series of their own; the count by state
// counts them all.
func TestScrapeLabelsAtMostAThousandRunners(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := metrics.New(metrics.Config{})
	st := storetest.Open(t)
	m.ReadFrom(st)
	const n = 1003
	for i := range n {
		name := fmt.Sprintf("r%04d", i)
		if _, err := st.CreateRunner(ctx, models.Runner{Name: name}, models.RunnerTokenHash("aqr_"+name)); err != nil {
			t.Fatal(err)
		}
	}
	mfs := scrape(t, m.Handler())
	if got, _ := value(mfs, "agentqueued_runners", map[string]string{"state": "ACTIVE", "connected": "false"}); got != n {
		t.Errorf("ACTIVE runners away: %v, want %d", got, n)
	}
	series := len(mfs["agentqueued_runner_runs"].GetMetric())
	_, last := value(mfs, "agentqueued_runner_runs", map[string]string{"runner": "r0999"})
	_, past := value(mfs, "agentqueued_runner_runs", map[string]string{"runner": "r1000"})
	if series != 1000 || !last || past {
		t.Errorf("%d runner_runs series (r0999 %v, r1000 %v), want the first 1000 by name", series, last, past)
	}
}
