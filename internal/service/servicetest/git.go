package servicetest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// git runs git in dir without the person's configuration.
func git(t testing.TB, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"},
		args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("servicetest: git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
}

// Origin makes a bare git repository whose main branch has one commit
// holding README, and returns a project's repository configuration that
// clones it.
func Origin(t testing.TB) *models.RepoConfig {
	t.Helper()
	seed, origin := t.TempDir(), filepath.Join(t.TempDir(), "origin.git")
	git(t, seed, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(seed, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, seed, "add", "README")
	git(t, seed, "commit", "-q", "-m", "first")
	git(t, "", "clone", "-q", "--bare", seed, origin)
	return &models.RepoConfig{SourceType: models.RepoClone, URL: origin}
}

// Work runs the READY task taskID on the registered agent agentID as the
// orchestrator would, without an agent process: it claims the task,
// prepares the agent's checkout of the project's repository (see
// Origin), writes files there as the agent would, seals the run's change
// onto the task's branch and ends the run completed. The task is then
// VERIFYING, and TaskDiff shows the change.
func (k *Kit) Work(taskID, agentID string, files map[string]string) models.Run {
	k.t.Helper()
	ctx := context.Background()
	run, _, err := k.Store.ClaimTask(ctx, taskID, agentID)
	if err != nil {
		k.t.Fatalf("servicetest: claim %s for %s: %v", taskID, agentID, err)
	}
	t, err := k.Store.GetTask(ctx, taskID)
	if err != nil {
		k.t.Fatal(err)
	}
	p, err := k.Store.GetProject(ctx, t.ProjectID)
	if err != nil {
		k.t.Fatal(err)
	}
	ws, err := k.Workspaces.Prepare(ctx, models.Agent{ID: agentID}, p, t)
	if err != nil {
		k.t.Fatalf("servicetest: prepare %s: %v", taskID, err)
	}
	defer k.Workspaces.Release(ws)
	for name, content := range files {
		path := filepath.Join(ws.Dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			k.t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			k.t.Fatal(err)
		}
	}
	if _, err := k.Store.StartRun(ctx, run.ID, os.Getpid(), ws.Dir); err != nil {
		k.t.Fatalf("servicetest: start run of %s: %v", taskID, err)
	}
	if _, err := k.Workspaces.Seal(ctx, p, t, ws); err != nil {
		k.t.Fatalf("servicetest: seal %s: %v", taskID, err)
	}
	if _, err := k.Store.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentCompleted,
		ExpectFrom: models.StatusInProgress, Outcome: models.RunOutcomeCompleted}); err != nil {
		k.t.Fatalf("servicetest: finish run of %s: %v", taskID, err)
	}
	run.CheckoutPath = ws.Dir
	return run
}
