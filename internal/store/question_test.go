package store_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
)

// TestAskingSignalsAChange: a question moves its task to WAITING_INPUT,
// and whoever follows commits through OnChange hears of it.
func TestAskingSignalsAChange(t *testing.T) {
	t.Parallel()
	var wakes atomic.Int64
	s, err := store.Open(context.Background(), store.Config{Path: filepath.Join(t.TempDir(), "db"), OnChange: func() { wakes.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	mustProject(t, s, "web")
	mustAgent(t, s, "a")
	ids := create(t, s, "web", models.BatchTask{LocalID: "q", Title: "Ask"})
	run, _, err := s.ClaimTask(ctx, ids["q"], "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartRun(ctx, run.ID, 1, ""); err != nil {
		t.Fatal(err)
	}
	before := wakes.Load()
	if _, err := s.AskQuestion(ctx, run.ID, "Which database?"); err != nil {
		t.Fatal(err)
	}
	if got := wakes.Load(); got != before+1 {
		t.Fatalf("asking signalled %d changes, want 1", got-before)
	}
}
