package repo

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// TestRebuiltIntegrationRepositoryKeepsWhatIsWhole rebuilds an integration
// repository holding a staged merge: the staged merge, the task branch and
// the verification worktree survive, and Deliver delivers the very merge
// that was staged (and verified).
func TestRebuiltIntegrationRepositoryKeepsWhatIsWhole(t *testing.T) {
	t.Parallel()
	bare, _ := origin(t)
	var logs bytes.Buffer
	w, err := New(Config{BaseDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	p := models.Project{ID: "web", Repo: &models.RepoConfig{SourceType: models.RepoClone, URL: bare}}
	p.ApplyDefaults()
	ctx := context.Background()
	tk := models.Task{ID: "kept-task", Title: "kept"}
	ws, err := w.Prepare(ctx, models.Agent{ID: "a1"}, p, tk)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws.Dir, "kept.txt"), []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Seal(ctx, p, tk, ws); err != nil {
		t.Fatal(err)
	}
	st, err := w.Stage(ctx, p, tk, ws.Dir)
	if err != nil {
		t.Fatal(err)
	}
	integ := w.integrationPath(p.Repo)
	staged := run(t, integ, "rev-parse", "refs/aq/staged/"+tk.ID)

	if err := w.rebuildIntegration(ctx, w.cfg.Logger, p.Repo, integ, integ, nil); err != nil {
		t.Fatal(err)
	}
	if got := run(t, integ, "rev-parse", "refs/aq/staged/"+tk.ID); got != staged {
		t.Fatalf("the staged merge is %s after the rebuild, want %s", got, staged)
	}
	run(t, integ, "rev-parse", "--verify", "refs/heads/"+ws.Branch)
	if got := run(t, st.Dir, "rev-parse", "HEAD"); got != staged {
		t.Fatalf("the verification worktree is at %s, want %s", got, staged)
	}
	run(t, st.Dir, "status", "--porcelain")
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(integ), "*")); len(left) != 1 {
		t.Fatalf("left beside the integration repository: %v", left)
	}
	d, err := w.Deliver(ctx, p, tk, ws.Dir)
	if err != nil || !d.Merged || d.Commit != staged {
		t.Fatalf("delivery %+v, %v; want the staged merge %s", d, err, staged)
	}
	if !strings.Contains(logs.String(), "refs_kept=") {
		t.Fatalf("the rebuild was not logged:\n%s", logs.String())
	}
}
