package service

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/repo"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// lockedLog is a log destination safe for concurrent writes.
type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// runGit runs git in dir as a person would, without their configuration.
func runGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestLinkTracesAreCleaned: deleting a task of a LINK project deletes its
// branch from the user's repository once main has its work, and keeps
// (and logs) one with work main lacks; removing an agent removes its
// worktree there.
func TestLinkTracesAreCleaned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.Open(t)
	user := t.TempDir()
	runGit(t, user, "init", "-q", "-b", "main")
	runGit(t, user, "commit", "-q", "--allow-empty", "-m", "first")
	ws, err := repo.New(repo.Config{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := st.CreateProject(ctx, models.Project{ID: "mine", Repo: &models.RepoConfig{SourceType: models.RepoLink, SourcePath: user}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.RegisterAgent(ctx, models.Agent{ID: "a1", AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "/bin/true"}}); err != nil {
		t.Fatal(err)
	}
	res, err := st.CreateTasks(ctx, models.TaskBatch{ProjectID: "mine", Tasks: []models.BatchTask{{Title: "landed"}, {Title: "unlanded"}}})
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedLog{}
	svc := New(Config{Store: st, Traces: ws, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	var checkout string
	branches := map[string]string{}
	for i, r := range res {
		tk, err := st.GetTask(ctx, r.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		w, err := ws.Prepare(ctx, models.Agent{ID: "a1"}, p, tk)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(w.Dir, tk.Title), []byte("work\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ws.Seal(ctx, p, tk, w); err != nil {
			t.Fatal(err)
		}
		ws.Release(w)
		checkout, branches[tk.Title] = w.Dir, repo.BranchName(tk)
		if i == 0 {
			runGit(t, user, "merge", "-q", "--no-ff", "-m", "land", w.Branch)
		}
	}
	branchExists := func(b string) bool {
		return exec.Command("git", "-C", user, "rev-parse", "-q", "--verify", "refs/heads/"+b).Run() == nil
	}
	for _, r := range res {
		if err := svc.DeleteTask(ctx, r.TaskID); err != nil {
			t.Fatal(err)
		}
	}
	if branchExists(branches["landed"]) {
		t.Errorf("the landed task's branch %s is left in the user's repository", branches["landed"])
	}
	if !branchExists(branches["unlanded"]) {
		t.Errorf("the branch %s with unlanded work was deleted", branches["unlanded"])
	}
	if l := logs.String(); !strings.Contains(l, `msg="the deleted task's branch was kept"`) ||
		!strings.Contains(l, "it has 1 commit(s) that main does not contain") {
		t.Errorf("the kept branch is not logged:\n%s", l)
	}

	// The agent's worktree is on the unlanded branch, clean: it goes.
	if err := svc.RemoveAgent(ctx, "a1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(checkout); !os.IsNotExist(err) {
		t.Errorf("the removed agent's checkout %s: %v", checkout, err)
	}
	if list := runGit(t, user, "worktree", "list", "--porcelain"); strings.Contains(list, checkout) {
		t.Errorf("git worktree list still shows the removed agent's checkout:\n%s", list)
	}
	if !branchExists(branches["unlanded"]) {
		t.Errorf("the unlanded branch went with the worktree")
	}
}
