package orchestrator

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/repo"
)

// logTo makes the harness's orchestrator log into buf.
func logTo(buf *syncBuf) func(*Config) {
	return func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
}

// dumpedEnv runs one task on an agent running dump-env and returns the
// environment its process had.
func dumpedEnv(t *testing.T, h *harness, tweak func(*models.Agent)) string {
	t.Helper()
	dump := filepath.Join(t.TempDir(), "env")
	h.agent("a1", "command", "dump-env", func(a *models.Agent) {
		a.Env = map[string]string{"DUMP": dump}
		tweak(a)
	})
	h.tasks(models.BatchTask{LocalID: "t", Title: "t"})
	h.start()
	h.waitEnd()
	b, err := os.ReadFile(dump)
	if err != nil {
		t.Fatalf("the agent did not run: %v", err)
	}
	return string(b)
}

// TestRunGetsTheRealEnvValues: answers mask an agent's env values, but its
// runs get them; the log never shows them.
func TestRunGetsTheRealEnvValues(t *testing.T) {
	t.Parallel()
	logs := &syncBuf{}
	h := newHarness(t, logTo(logs))
	env := dumpedEnv(t, h, func(a *models.Agent) { a.Env["ANTHROPIC_API_KEY"] = "sk-secret" })
	if !strings.Contains(env, "\nANTHROPIC_API_KEY=sk-secret\n") {
		t.Errorf("the run lacks the agent's env value:\n%s", env)
	}
	if strings.Contains(logs.String(), "sk-secret") {
		t.Errorf("the log shows the value:\n%s", logs.String())
	}
}

// TestRunGetsPassEnv: a variable of the daemon's environment that the
// agent's pass_env names reaches its run; one it does not name does not;
// a named one the daemon lacks is skipped with a warning naming it.
func TestRunGetsPassEnv(t *testing.T) {
	t.Parallel()
	logs := &syncBuf{}
	h := newHarness(t, func(c *Config) {
		logTo(logs)(c)
		c.Environ = append(os.Environ(), "PASSED_KEY=sk-passed", "UNNAMED_KEY=sk-unnamed")
	})
	env := dumpedEnv(t, h, func(a *models.Agent) { a.PassEnv = []string{"PASSED_KEY", "MISSING_KEY"} })
	if !strings.Contains(env, "\nPASSED_KEY=sk-passed\n") {
		t.Errorf("the run lacks the passed variable:\n%s", env)
	}
	if strings.Contains(env, "UNNAMED_KEY") || strings.Contains(env, "MISSING_KEY") {
		t.Errorf("the run has a variable pass_env does not pass:\n%s", env)
	}
	log := logs.String()
	if !strings.Contains(log, "pass_env names variables the daemon's environment lacks") || !strings.Contains(log, "MISSING_KEY") {
		t.Errorf("no warning names the missing variable:\n%s", log)
	}
	// The values themselves: "sk-" alone also occurs in task names
	// ("brisk-meadow").
	if strings.Contains(log, "sk-passed") || strings.Contains(log, "sk-unnamed") {
		t.Errorf("the log shows a value:\n%s", log)
	}
}

// TestAgentEnvBuildsPassEnvFromTheDaemon: the environment a run adds
// holds the passed variables under the agent's env and the adapter's.
func TestAgentEnvBuildsPassEnvFromTheDaemon(t *testing.T) {
	t.Parallel()
	logs := &syncBuf{}
	h := newHarness(t, func(c *Config) {
		logTo(logs)(c)
		c.Environ = []string{"PATH=/usr/bin", "PASSED_KEY=sk-passed", "BOTH=daemon", "UNNAMED_KEY=sk-unnamed"}
	})
	ar := newActiveRun(models.Run{ID: 7, TaskID: "bold-orbit"}, "tok", models.Agent{ID: "a1", AgentSettings: models.AgentSettings{
		PassEnv: []string{"PASSED_KEY", "MISSING_KEY", "BOTH"}, Env: map[string]string{"OWN": "1"}}}, h.clock.Now())
	got := h.o.agentEnv(ar, agent.Invocation{Env: map[string]string{"BOTH": "adapter"}})
	want := map[string]string{"PASSED_KEY": "sk-passed", "BOTH": "adapter", "OWN": "1"}
	if len(got) != len(want) {
		t.Errorf("env %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q (env %v)", k, got[k], v, got)
		}
	}
	if log := logs.String(); !strings.Contains(log, "MISSING_KEY") || strings.Contains(log, "sk-passed") || strings.Contains(log, "sk-unnamed") {
		t.Errorf("log:\n%s", log)
	}
}

// TestLegacyCredentialURLFailsTheRunWithoutGit: a project an older daemon
// stored with credentials in its repo.url does not start its tasks: the
// run fails before any git runs, with a reason naming the project and what
// to do, and no reason, run error or log line shows the credentials.
func TestLegacyCredentialURLFailsTheRunWithoutGit(t *testing.T) {
	t.Parallel()
	logs := &syncBuf{}
	h := newHarness(t, logTo(logs))
	bin := t.TempDir()
	if err := os.Symlink(filepath.Join(scriptDir, "recording-git"), filepath.Join(bin, "git")); err != nil {
		t.Fatal(err)
	}
	ws, err := repo.New(repo.Config{BaseDir: t.TempDir(), Git: filepath.Join(bin, "git")})
	if err != nil {
		t.Fatal(err)
	}
	h.o.ws = ws
	ctx := context.Background()
	if _, err := h.st.CreateProject(ctx, models.Project{ID: "legacy", Repo: &models.RepoConfig{SourceType: models.RepoClone,
		URL: "https://example.com/owner/x.git"}}); err != nil {
		t.Fatal(err)
	}
	const secretURL = "https://user:tok3n-s3cret@127.0.0.1:1/owner/x.git"
	db, err := sql.Open("sqlite3", "file:"+h.dbPath+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE repos SET url = ? WHERE project_id = 'legacy'", secretURL); err != nil {
		t.Fatal(err)
	}
	db.Close()
	h.agent("a1", "command", "ok", nil)
	res, err := h.st.CreateTasks(ctx, models.TaskBatch{ProjectID: "legacy", Tasks: []models.BatchTask{{Title: "t"}}})
	if err != nil {
		t.Fatal(err)
	}
	h.start()
	run := h.waitEnd()
	h.settle()
	d, err := h.st.GetTaskDetail(ctx, res[0].TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Task.Status != models.StatusReady {
		t.Errorf("task %s, want READY after EXECUTION_ERROR", d.Task.Status)
	}
	reason := d.Task.StatusReason
	if !strings.Contains(reason, "project legacy") || !strings.Contains(reason, "https://***@127.0.0.1:1/owner/x.git") ||
		!strings.Contains(reason, "github.token") {
		t.Errorf("reason %q does not name the project, the redacted URL and what to do", reason)
	}
	r, err := h.st.GetRun(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{reason, r.Error, logs.String()}
	for _, e := range d.Events {
		texts = append(texts, e.Reason)
	}
	for _, s := range texts {
		if strings.Contains(s, "tok3n") {
			t.Errorf("the credentials show: %s", s)
		}
	}
	if b, err := os.ReadFile(filepath.Join(bin, "calls")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("git ran: %s", b)
	}
}
