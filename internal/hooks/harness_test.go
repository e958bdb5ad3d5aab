package hooks_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/hooks"
	"github.com/agentqueued/agentqueued/internal/llm/llmtest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/repo"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// start is the harness clock's first reading.
var start = time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)

// harness is an engine over a real store, a real git checkout and a fake
// OpenAI-compatible endpoint, on a fake clock.
type harness struct {
	t     testing.TB
	dir   string
	path  string
	clock *clocktest.Fake
	st    *store.Store
	ws    *repo.Workspaces
	llm   *llmtest.Server
	user  string // the project's repository (LINK)
	ended chan models.HookRun
	cfg   hooks.Config
	eng   *hooks.Engine
}

func newHarness(t testing.TB, configure ...func(*hooks.Config)) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), clock: clocktest.New(start), ended: make(chan models.HookRun, 100)}
	h.path = filepath.Join(h.dir, "db.sqlite")
	h.open()
	ws, err := repo.New(repo.Config{BaseDir: filepath.Join(h.dir, "data")})
	if err != nil {
		t.Fatal(err)
	}
	h.ws = ws
	h.llm = llmtest.New(llmtest.Options{APIKey: "llm-key", Model: "test-model"})
	t.Cleanup(h.llm.Close)
	h.user = filepath.Join(h.dir, "user")
	git(t, "", "init", "-q", "-b", "main", h.user)
	h.commit(map[string]string{"README.md": "# demo\n", "src/a.go": "package a\n", "src/b.go": "package b\n",
		"docs/notes.txt": "notes\n"}, "first")
	h.cfg = hooks.Config{LLM: hooks.LLMConfig{BaseURL: h.llm.URL(), APIKey: "llm-key", Model: "test-model"},
		Clock: h.clock, PollInterval: time.Minute,
		OnRunEnd: func(r models.HookRun) { h.ended <- r }}
	for _, c := range configure {
		c(&h.cfg)
	}
	h.eng = h.engine()
	t.Cleanup(h.eng.Wait)
	return h
}

// open opens the store at the harness's path.
func (h *harness) open() {
	h.t.Helper()
	st := storetest.OpenAt(h.t, h.path, storetest.WithClock(h.clock))
	h.st = st
	h.t.Cleanup(func() { _ = st.Close() })
}

// engine returns a new engine with the harness's configuration.
func (h *harness) engine() *hooks.Engine {
	h.t.Helper()
	e, err := hooks.New(h.cfg, h.st, h.st, h.ws)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	return e
}

// engineWith returns a new engine over the same store with a changed
// configuration.
func (h *harness) engineWith(change func(*hooks.Config)) *hooks.Engine {
	h.t.Helper()
	cfg := h.cfg
	change(&cfg)
	e, err := hooks.New(cfg, h.st, h.st, h.ws)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	return e
}

// restart closes the store and the engine and opens them again over the
// same database, as a daemon restart does.
func (h *harness) restart() {
	h.t.Helper()
	h.eng.Wait()
	if err := h.st.Close(); err != nil {
		h.t.Fatal(err)
	}
	h.open()
	h.eng = h.engine()
}

func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	if dir != "" {
		args = append([]string{"-C", dir}, args...)
	}
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit writes files into the project's repository and commits them.
func (h *harness) commit(files map[string]string, msg string) {
	h.t.Helper()
	for name, body := range files {
		p := filepath.Join(h.user, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			h.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			h.t.Fatal(err)
		}
	}
	git(h.t, h.user, "add", "-A")
	git(h.t, h.user, "commit", "-q", "-m", msg)
}

// project creates a project on the harness's repository.
func (h *harness) project(id string, mutate ...func(*models.Project)) models.Project {
	h.t.Helper()
	p := models.Project{ID: id, MaxConcurrentAgents: 1,
		Repo: &models.RepoConfig{ID: id + "-repo", SourceType: models.RepoLink, SourcePath: h.user, DefaultBranch: "main"}}
	for _, m := range mutate {
		m(&p)
	}
	p, err := h.st.CreateProject(context.Background(), p)
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// hook creates a hook from its JSON spec.
func (h *harness) hook(spec string) models.Hook {
	h.t.Helper()
	var s models.HookSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		h.t.Fatalf("hook spec: %v\n%s", err, spec)
	}
	hk := s.Hook()
	if err := h.eng.Check(context.Background(), hk); err != nil {
		h.t.Fatalf("check hook: %v", err)
	}
	hk, err := h.st.CreateHook(context.Background(), hk)
	if err != nil {
		h.t.Fatalf("create hook: %v", err)
	}
	return hk
}

// tick makes one pass of the engine.
func (h *harness) tick() time.Time {
	h.t.Helper()
	next, err := h.eng.Tick(context.Background())
	if err != nil {
		h.t.Fatalf("tick: %v", err)
	}
	return next
}

// waitRun returns the next run to end; the bound only turns a hang into a
// failure.
func (h *harness) waitRun() models.HookRun {
	h.t.Helper()
	select {
	case r := <-h.ended:
		return r
	case <-time.After(progresstest.Stall()):
		h.t.Fatal("no hook run ended")
	}
	return models.HookRun{}
}

// noRun checks that no run has ended so far (every run started has been
// waited for).
func (h *harness) noRun() {
	h.t.Helper()
	h.eng.Wait()
	select {
	case r := <-h.ended:
		h.t.Fatalf("unexpected run %s (%s): %s", r.ID, r.Status, r.TriggerReason)
	default:
	}
}

// drain forgets the runs that ended so far.
func (h *harness) drain() {
	h.eng.Wait()
	for {
		select {
		case <-h.ended:
		default:
			return
		}
	}
}

// runs lists the runs of a hook, newest first.
func (h *harness) runs(hookID string) []models.HookRun {
	h.t.Helper()
	rs, err := h.st.ListHookRuns(context.Background(), models.HookRunFilter{HookID: hookID})
	if err != nil {
		h.t.Fatal(err)
	}
	return rs
}

// stored reads a run back from the store.
func (h *harness) stored(id string) models.HookRun {
	h.t.Helper()
	r, err := h.st.GetHookRun(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// fire fires a hook by hand and waits for its run to end.
func (h *harness) fire(hookID string, f models.HookFire) models.HookRun {
	h.t.Helper()
	r, err := h.eng.Fire(context.Background(), hookID, "tester", f)
	if err != nil {
		h.t.Fatalf("fire %s: %v", hookID, err)
	}
	if r.Status == models.HookRunSkipped {
		return h.waitRun()
	}
	end := h.waitRun()
	if end.ID != r.ID {
		h.t.Fatalf("ended run %s, fired %s", end.ID, r.ID)
	}
	return h.stored(r.ID)
}

// results decodes a run's context results.
func results(t *testing.T, r models.HookRun) []models.StepResult {
	t.Helper()
	if r.ContextResults == nil {
		t.Fatalf("run %s has no context results", r.ID)
	}
	var out []models.StepResult
	if err := json.Unmarshal([]byte(*r.ContextResults), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// actions decodes a run's actions.
func actions(t *testing.T, r models.HookRun) []models.HookAction {
	t.Helper()
	if r.ActionsTaken == nil {
		return nil
	}
	var out []models.HookAction
	if err := json.Unmarshal([]byte(*r.ActionsTaken), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}
