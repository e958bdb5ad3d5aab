// Package servicetest builds the daemon's command layer for tests: a real
// *service.Service over a storetest store, going through the real
// orchestrator (constructed, never run: no agent starts), a real hook
// engine and a real workflow engine, wired as the daemon wires them. It is
// imported by tests only.
package servicetest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/hooks"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/orchestrator"
	"github.com/agentqueued/agentqueued/internal/repo"
	"github.com/agentqueued/agentqueued/internal/service"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
	"github.com/agentqueued/agentqueued/internal/workflow"
	"go.uber.org/goleak"
)

// Kit is a service and the real parts it goes through.
type Kit struct {
	t testing.TB
	// Store is the kit's store.
	Store *store.Store
	// Service is the command layer people's requests go through.
	Service *service.Service
	// Actions is the service the hook engine's actions go through: the
	// same store, without the engines (as in the daemon).
	Actions *service.Service
	// Orchestrator decides, lands and diffs tasks, and reads their logs
	// from RunDir; its loop is not run.
	Orchestrator *orchestrator.Orchestrator
	// Workspaces holds the projects' checkouts, under a temporary
	// directory.
	Workspaces *repo.Workspaces
	// Feed is the service's change feed.
	Feed *service.Feed
	// RunDir is the orchestrator's directory of run logs.
	RunDir string

	hooks     hookSlot
	workflows workflowSlot
	logger    *slog.Logger
}

// config is what the options set.
type config struct {
	store     *store.Store
	storeOpts []storetest.Option
	service   []func(*service.Config)
	orch      []func(*orchestrator.Config)
	hooks     hooks.Config
	workflows workflow.Config
	logger    *slog.Logger
}

// Option changes how a Kit is built.
type Option func(*config)

// WithStore builds the kit over st instead of a new storetest store.
func WithStore(st *store.Store) Option { return func(c *config) { c.store = st } }

// WithStoreOptions opens the kit's store with opts.
func WithStoreOptions(opts ...storetest.Option) Option {
	return func(c *config) { c.storeOpts = append(c.storeOpts, opts...) }
}

// WithService changes the service's configuration (window, budget,
// profiles, clock, backoffs, desk webhooks, a source checker); the
// components it goes through are the kit's.
func WithService(f func(*service.Config)) Option {
	return func(c *config) { c.service = append(c.service, f) }
}

// WithOrchestrator changes the orchestrator's configuration.
func WithOrchestrator(f func(*orchestrator.Config)) Option {
	return func(c *config) { c.orch = append(c.orch, f) }
}

// WithHooks is the configuration of the hook engine (its Logger defaults
// to the kit's).
func WithHooks(cfg hooks.Config) Option { return func(c *config) { c.hooks = cfg } }

// WithWorkflows is the configuration of the workflow engine (its Logger
// defaults to the kit's).
func WithWorkflows(cfg workflow.Config) Option { return func(c *config) { c.workflows = cfg } }

// WithLogger makes the orchestrator and the engines log to l.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// New builds a Kit; what it starts ends with the test (the hook engine's
// runs are waited for before the store closes).
func New(t testing.TB, opts ...Option) *Kit {
	t.Helper()
	var c config
	for _, o := range opts {
		o(&c)
	}
	st := c.store
	if st == nil {
		st = storetest.Open(t, c.storeOpts...)
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	ws, err := repo.New(repo.Config{BaseDir: t.TempDir(), Logger: c.logger.With("component", "repo")})
	if err != nil {
		t.Fatalf("servicetest: workspaces: %v", err)
	}
	k := &Kit{t: t, Store: st, Workspaces: ws, Feed: service.NewFeed(), RunDir: t.TempDir(), logger: c.logger}
	oc := orchestrator.Config{RunDir: k.RunDir, OnOutput: k.Feed.Output, Logger: c.logger.With("component", "orchestrator")}
	for _, f := range c.orch {
		f(&oc)
	}
	k.RunDir = oc.RunDir
	if k.Orchestrator, err = orchestrator.New(oc, st, ws, agent.DefaultRegistry()); err != nil {
		t.Fatalf("servicetest: orchestrator: %v", err)
	}
	sc := service.Config{Store: st, Orchestrator: k.Orchestrator, Feed: k.Feed}
	for _, f := range c.service {
		f(&sc)
	}
	sc.Store, sc.Orchestrator = st, k.Orchestrator
	k.Actions = service.New(sc)
	sc.Hooks, sc.Workflows = &k.hooks, &k.workflows
	k.Service = service.New(sc)
	k.UseHooks(c.hooks)
	k.UseWorkflows(c.workflows)
	return k
}

// Hooks is the hook engine the service goes through.
func (k *Kit) Hooks() *hooks.Engine { return k.hooks.get() }

// Workflows is the workflow engine the service goes through.
func (k *Kit) Workflows() *workflow.Engine { return k.workflows.get() }

// UseHooks makes the service go through a new real hook engine of cfg
// over the kit's store, actions and workspaces, and returns it. Its runs
// left over from an earlier life are closed (Start); its schedules are
// not run; its runs are waited for when the test ends.
func (k *Kit) UseHooks(cfg hooks.Config) *hooks.Engine {
	k.t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = k.logger.With("component", "hooks")
	}
	e, err := hooks.New(cfg, k.Store, k.Actions, k.Workspaces)
	if err != nil {
		k.t.Fatalf("servicetest: hook engine: %v", err)
	}
	if err := e.Start(context.Background()); err != nil {
		k.t.Fatalf("servicetest: start hook engine: %v", err)
	}
	k.t.Cleanup(e.Wait) // before the store closes
	k.hooks.set(e)
	return e
}

// UseWorkflows makes the service go through a new real workflow engine of
// cfg over the kit's store and orchestrator, and returns it. Its
// schedules are not run.
func (k *Kit) UseWorkflows(cfg workflow.Config) *workflow.Engine {
	k.t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = k.logger.With("component", "workflows")
	}
	if cfg.KnownProfile == nil {
		cfg.KnownProfile = k.Service.HasProfile
	}
	e, err := workflow.New(cfg, k.Store, k.Orchestrator)
	if err != nil {
		k.t.Fatalf("servicetest: workflow engine: %v", err)
	}
	k.workflows.set(e)
	return e
}

// slot holds an engine the service goes through: the one a test last put
// in, so that a test may give it a configuration of its own after the
// service is built.
type slot[E any] struct {
	mu sync.Mutex
	e  E
}

func (s *slot[E]) get() E {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.e
}

func (s *slot[E]) set(e E) {
	s.mu.Lock()
	s.e = e
	s.mu.Unlock()
}

// hookSlot is the service's hook engine (UseHooks).
type hookSlot struct{ slot[*hooks.Engine] }

// Check is the engine's check of a hook before it is saved.
func (s *hookSlot) Check(ctx context.Context, h models.Hook) error { return s.get().Check(ctx, h) }

// Fire fires a hook by hand.
func (s *hookSlot) Fire(ctx context.Context, hookID, by string, f models.HookFire) (models.HookRun, error) {
	return s.get().Fire(ctx, hookID, by, f)
}

// workflowSlot is the service's workflow engine (UseWorkflows).
type workflowSlot struct{ slot[*workflow.Engine] }

// Wake tells the engine that a schedule may have changed.
func (s *workflowSlot) Wake() { s.get().Wake() }

// Trigger starts a run.
func (s *workflowSlot) Trigger(ctx context.Context, name, by string) (models.WorkflowRun, error) {
	return s.get().Trigger(ctx, name, by)
}

// TriggerWith starts a run with inputs.
func (s *workflowSlot) TriggerWith(ctx context.Context, name, by string, inputs map[string]string) (models.WorkflowRun, error) {
	return s.get().TriggerWith(ctx, name, by, inputs)
}

// Cancel cancels a run.
func (s *workflowSlot) Cancel(ctx context.Context, id, by string) (models.WorkflowRun, error) {
	return s.get().Cancel(ctx, id, by)
}

// Retry retries a run.
func (s *workflowSlot) Retry(ctx context.Context, id, by string) (models.WorkflowRun, error) {
	return s.get().Retry(ctx, id, by)
}

// The slots are the service's engines.
var (
	_ service.HookEngine     = (*hookSlot)(nil)
	_ service.WorkflowEngine = (*workflowSlot)(nil)
)

// agentTypes are the agent types whose programs AgentCLIs stands in for.
var agentTypes = []string{"claude", "codex", "cursor", "aider"}

// AgentCLIs puts stand-ins for the agent types' programs (claude, codex,
// cursor-agent, aider; each exits 0) first on the process's PATH, so
// that the service registers agents of every type as a daemon where they
// are installed does. PATH is the process's: call it from TestMain. The
// returned function removes the stand-ins and restores PATH.
func AgentCLIs() (restore func(), err error) {
	dir, err := os.MkdirTemp("", "agentqueued-clis-")
	if err != nil {
		return nil, fmt.Errorf("servicetest: agent programs: %w", err)
	}
	for _, typ := range agentTypes {
		name := service.TypeExecutable(typ)
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("servicetest: agent program %s: %w", name, err)
		}
	}
	old := os.Getenv("PATH")
	if err := os.Setenv("PATH", dir+string(os.PathListSeparator)+old); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("servicetest: PATH: %w", err)
	}
	return func() {
		os.Setenv("PATH", old)
		os.RemoveAll(dir)
	}, nil
}

// Main is a TestMain for packages whose tests register agents through the
// service: it runs the tests with AgentCLIs on PATH, then fails them if
// any goroutine outlives them (goleak), and exits.
func Main(m *testing.M) {
	restore, err := AgentCLIs()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := m.Run()
	restore()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
