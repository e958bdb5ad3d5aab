package discord

import (
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

func TestAgentListingShowsARest(t *testing.T) {
	t.Parallel()
	until := time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		agent models.Agent
		want  string
	}{
		{"idle", models.Agent{ID: "a1", AgentType: "claude", State: models.AgentIdle}, "🤖 `a1` (claude) — IDLE"},
		{"resting", models.Agent{ID: "a1", AgentType: "claude", State: models.AgentPaused, RestUntil: &until,
			RestReason: "rate limited during task bold-orbit"},
			"🤖 `a1` (claude) — PAUSED, resting until <t:1772370000:f> (<t:1772370000:R>): rate limited during task bold-orbit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := renderAgents([]models.Agent{tc.agent}); got != tc.want {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
	long := models.Agent{ID: "a1", AgentType: "claude", State: models.AgentPaused, RestUntil: &until, RestReason: strings.Repeat("x", 500)}
	if got := renderAgents([]models.Agent{long}); len(got) > 300 {
		t.Fatalf("a long reason is not cut: %d bytes", len(got))
	}
}
