// Package storetest opens real stores for tests and seeds them: a store in
// the test's temporary directory, closed when the test ends, and the
// projects, tasks, agents and status changes many tests start from. It is
// imported by tests only.
package storetest

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
)

// FileName is the database file's name in the test's temporary directory
// when no path is given.
const FileName = "aq.db"

// Option changes the configuration a store is opened with.
type Option func(*store.Config)

// WithPath opens the database at path instead of a new file in the test's
// temporary directory: a second store over the same file, or one a daemon
// left behind.
func WithPath(path string) Option { return func(c *store.Config) { c.Path = path } }

// WithClock makes the store tell the time by c.
func WithClock(c clock.Clock) Option { return func(cfg *store.Config) { cfg.Clock = c } }

// WithSeed makes the store's random choices (task names) repeatable.
func WithSeed(seed1, seed2 uint64) Option {
	return func(c *store.Config) { c.Rand = rand.New(rand.NewPCG(seed1, seed2)) }
}

// WithOnChange sets the store's wake-up signal (store.Config.OnChange).
func WithOnChange(f func()) Option { return func(c *store.Config) { c.OnChange = f } }

// WithOnStateChange sets the store's state signal
// (store.Config.OnStateChange).
func WithOnStateChange(f func()) Option { return func(c *store.Config) { c.OnStateChange = f } }

// WithObserver makes the store report committed changes to o.
func WithObserver(o store.Observer) Option { return func(c *store.Config) { c.Observer = o } }

// WithLogger makes the store log to l.
func WithLogger(l *slog.Logger) Option { return func(c *store.Config) { c.Logger = l } }

// Open opens a store (by default a new database in t.TempDir()) and closes
// it when the test ends; closing it earlier is harmless.
func Open(t testing.TB, opts ...Option) *store.Store {
	t.Helper()
	cfg := store.Config{}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.Path == "" {
		cfg.Path = filepath.Join(t.TempDir(), FileName)
	}
	s, err := store.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open store %s: %v", cfg.Path, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Project creates a project of that id with the defaults.
func Project(t testing.TB, s *store.Store, id string) models.Project {
	t.Helper()
	return ProjectWith(t, s, models.Project{ID: id})
}

// ProjectWith creates the project p.
func ProjectWith(t testing.TB, s *store.Store, p models.Project) models.Project {
	t.Helper()
	got, err := s.CreateProject(context.Background(), p)
	if err != nil {
		t.Fatalf("create project %s: %v", p.ID, err)
	}
	return got
}

// Tasks creates a batch of tasks in project and returns local id → task id.
func Tasks(t testing.TB, s *store.Store, project string, tasks ...models.BatchTask) map[string]string {
	t.Helper()
	res, err := s.CreateTasks(context.Background(), models.TaskBatch{ProjectID: project, Tasks: tasks})
	if err != nil {
		t.Fatalf("create tasks in %s: %v", project, err)
	}
	ids := make(map[string]string, len(res))
	for _, r := range res {
		ids[r.LocalID] = r.TaskID
	}
	return ids
}

// Task creates one task of that title in project and returns its id.
func Task(t testing.TB, s *store.Store, project, title string) string {
	t.Helper()
	return Tasks(t, s, project, models.BatchTask{LocalID: "t", Title: title})["t"]
}

// Deps are dependencies on ids (local ids of the batch, or task ids).
func Deps(ids ...string) []models.BatchDependency {
	out := make([]models.BatchDependency, 0, len(ids))
	for _, id := range ids {
		out = append(out, models.BatchDependency{ID: id})
	}
	return out
}

// Agent registers a command agent of that id, limited to projects when
// any are given.
func Agent(t testing.TB, s *store.Store, id string, projects ...string) models.Agent {
	t.Helper()
	a, err := s.RegisterAgent(context.Background(), models.Agent{ID: id, AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "/bin/true", Projects: projects}})
	if err != nil {
		t.Fatalf("register agent %s: %v", id, err)
	}
	return a
}

// Actor and AgentID are the actor and the agent of the status changes
// Apply makes.
const (
	Actor   = "test"
	AgentID = "a1"
)

// Apply applies events to the task id in order, as Actor with AgentID,
// and returns the last result. TOKENS_EXHAUSTED and INPUT_TIMEOUT resume
// an hour from now by the real clock.
func Apply(t testing.TB, s *store.Store, id string, events ...models.TaskEvent) models.TransitionResult {
	t.Helper()
	var res models.TransitionResult
	for _, ev := range events {
		req := models.TransitionRequest{TaskID: id, Event: ev, Actor: Actor, AgentID: AgentID}
		if ev == models.EventTokensExhausted || ev == models.EventInputTimeout {
			at := time.Now().Add(time.Hour)
			req.ResumeAfter = &at
		}
		var err error
		if res, err = s.ApplyEvent(context.Background(), req); err != nil {
			t.Fatalf("apply %s to %s: %v", ev, id, err)
		}
	}
	return res
}

// Event sequences that take a READY task to a status.
var (
	// ToVerifying takes a READY task to VERIFYING.
	ToVerifying = []models.TaskEvent{models.EventAssigned, models.EventAgentStarted, models.EventAgentCompleted}
	// ToCompleted takes a READY task to COMPLETED.
	ToCompleted = []models.TaskEvent{models.EventAssigned, models.EventAgentStarted, models.EventAgentCompleted, models.EventVerifyPassed}
	// ToBlocked takes a READY task to BLOCKED.
	ToBlocked = []models.TaskEvent{models.EventAssigned, models.EventAgentStarted, models.EventAdminStop}
)

// Status returns the task's status.
func Status(t testing.TB, s *store.Store, id string) models.TaskStatus {
	t.Helper()
	task, err := s.GetTask(context.Background(), id)
	if err != nil {
		t.Fatalf("get task %s: %v", id, err)
	}
	return task.Status
}

// WantStatuses checks the statuses of tasks (task id → status).
func WantStatuses(t testing.TB, s *store.Store, want map[string]models.TaskStatus) {
	t.Helper()
	for id, st := range want {
		if got := Status(t, s, id); got != st {
			t.Errorf("task %s: status %s, want %s", id, got, st)
		}
	}
}

// OpenAt opens the database at path (see Open and WithPath).
func OpenAt(t testing.TB, path string, opts ...Option) *store.Store {
	t.Helper()
	return Open(t, append([]Option{WithPath(path)}, opts...)...)
}
