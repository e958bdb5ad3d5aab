package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/config"
	"github.com/agentqueued/agentqueued/internal/desk"
	"github.com/agentqueued/agentqueued/internal/discord"
	"github.com/agentqueued/agentqueued/internal/fleet"
	"github.com/agentqueued/agentqueued/internal/hooks"
	"github.com/agentqueued/agentqueued/internal/metrics"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/orchestrator"
	"github.com/agentqueued/agentqueued/internal/repo"
	"github.com/agentqueued/agentqueued/internal/retention"
	"github.com/agentqueued/agentqueued/internal/service"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/throttle"
	"github.com/agentqueued/agentqueued/internal/web"
	"github.com/agentqueued/agentqueued/internal/workflow"
)

// leaseReleaseTimeout bounds releasing the lease on shutdown.
const leaseReleaseTimeout = 5 * time.Second

// runFlags are the run command's flags that are not configuration.
type runFlags struct {
	// newDatabase allows a fresh database in a data directory used before.
	newDatabase bool
	// logFile, when set, receives the daemon's log instead of standard error.
	logFile string
}

// loadDaemonConfig reads --config and applies --data-dir and --listen.
func (m *Main) loadDaemonConfig(args []string) (config.Config, runFlags, error) {
	fs := newFlagSet("agentqueued run")
	configPath := fs.String("config", "", "configuration `file` (YAML); embedded defaults when empty")
	dataDir := fs.String("data-dir", "", "data `directory` (overrides data_dir)")
	listen := fs.String("listen", "", "API `address` host:port (overrides listen)")
	newDB := fs.Bool("new-database", false, "start with an empty database in a data directory used before (its database is missing)")
	logFile := fs.String("log-file", "", "append the daemon's log to `file` (created mode 0600) instead of standard error")
	pos, err := parseFlags(fs, args, m.Stdout)
	if err != nil {
		return config.Config{}, runFlags{}, err
	}
	if len(pos) > 0 {
		return config.Config{}, runFlags{}, usagef("run: unexpected argument %q", pos[0])
	}
	cfg, err := config.Load(*configPath, m.Getenv)
	if err != nil {
		return config.Config{}, runFlags{}, &configError{err: err}
	}
	if *dataDir != "" {
		cfg.DataDir = *dataDir
		if err := cfg.AbsPaths(); err != nil {
			return config.Config{}, runFlags{}, &configError{err: err}
		}
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	if err := cfg.Validate(); err != nil {
		return config.Config{}, runFlags{}, &configError{err: err}
	}
	if err := cfg.CheckServing(); err != nil {
		return config.Config{}, runFlags{}, &configError{err: err}
	}
	euid := os.Geteuid
	if m.Geteuid != nil {
		euid = m.Geteuid
	}
	if err := cfg.CheckPrivileges(euid()); err != nil {
		return config.Config{}, runFlags{}, &configError{err: err}
	}
	logPath := *logFile
	if logPath != "" {
		// Absolute like the configuration's paths (config.AbsPaths).
		if logPath, err = filepath.Abs(logPath); err != nil {
			return config.Config{}, runFlags{}, usagef("run: --log-file: make %q absolute: %v", *logFile, err)
		}
	}
	return cfg, runFlags{newDatabase: *newDB, logFile: logPath}, nil
}

// newLogger returns the slog logger the configuration asks for.
func newLogger(lc config.LogConfig, w io.Writer) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(lc.Level)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if lc.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// logFileMode is the mode of the daemon's log file: the log names
// projects, tasks and paths, which are its user's business alone.
const logFileMode = 0o600

// openLogFile opens path for the daemon's log, appending: a missing file
// is created mode 0600 with its missing directories (0700), and an
// existing regular file readable by others is narrowed to 0600 first.
func openLogFile(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, logFileMode)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm() != logFileMode {
		err = f.Chmod(logFileMode)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// runDaemon is the "run" subcommand. It wires the daemon's parts in
// steps, each step taking what the ones before it made, then serves
// until ctx ends or a part fails. The deferred steps run in reverse: the
// lease is released, then the store closed, then the log file closed.
func (m *Main) runDaemon(ctx context.Context, args []string) (err error) {
	cfg, flags, err := m.loadDaemonConfig(args)
	if err != nil {
		return err
	}
	apiTLS, err := loadAPITLS(cfg)
	if err != nil {
		return err
	}
	logw, closeLog, err := m.daemonLogWriter(flags.logFile)
	if err != nil {
		return err
	}
	// Closed last: every deferred step below still logs.
	defer closeLog()
	log := newLogger(cfg.Log, logw)
	tuneGC(m.Getenv)
	if err := prepareDataDir(cfg, flags.newDatabase, log); err != nil {
		return err
	}
	w := m.newWiring(cfg, log)
	w.tls = apiTLS

	st, err := w.openStore(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := st.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close store: %w", cerr))
		}
	}()
	watch, err := w.watchDatabase(st)
	if err != nil {
		return err
	}
	holder, err := w.acquireLease(ctx, st)
	if err != nil {
		return err
	}
	defer func() { err = w.releaseLease(ctx, st, holder.Owner, err) }()

	ws, err := w.buildWorkspaces(ctx, st)
	if err != nil {
		return err
	}
	// The runners' connections: removing a runner ends them at once.
	hub := fleet.New(fleet.Config{})
	w.hub = hub
	w.met.RunnersFrom(hub)
	o, pulls, err := w.buildOrchestrator(ctx, st, ws)
	if err != nil {
		return err
	}
	rpc, rpcLn, err := w.buildRPC(o)
	if err != nil {
		return err
	}
	// The service goes through the orchestrator, the hook engine and the
	// workflow engine; the hook engine's own actions go through a service
	// without those engines (a hook creates tasks, gives feedback and
	// notifies, as a person's commands would).
	sc := w.serviceConfig(st, o, ws)
	actions := service.New(sc)
	eng, err := w.buildHooks(ctx, st, actions, ws)
	if err != nil {
		return err
	}
	wf, err := w.buildWorkflows(ctx, st, o, actions.HasProfile)
	if err != nil {
		return err
	}
	sc.Hooks, sc.Workflows, sc.Runners = eng, wf, hub
	svc := service.New(sc)
	b, err := w.buildDiscord(svc, st)
	if err != nil {
		return err
	}
	srv, err := w.buildAPI(ctx, svc, st, o, pulls, watch, hub)
	if err != nil {
		rpcLn.Close()
		return err
	}
	ln, err := srv.Listen()
	if err != nil {
		return err
	}
	metricsLn, err := w.listenMetrics()
	if err != nil {
		ln.Close()
		rpcLn.Close()
		return err
	}
	w.announce(ln.Addr().String())

	return w.serve(ctx, daemonParts{store: st, owner: holder.Owner, watch: watch, orch: o, rpc: rpc, rpcLn: rpcLn,
		hooks: eng, workflows: wf, bot: b, api: srv, apiLn: ln, metricsLn: metricsLn})
}

// wiring is what the run command's wiring steps share: the
// configuration, the log, the output feed and the metrics, and the parts
// the store wakes after a commit.
type wiring struct {
	m      *Main
	cfg    config.Config
	log    *slog.Logger
	dbPath string
	feed   *service.Feed
	met    *metrics.Metrics
	// The store wakes these after every commit that may have made work
	// ready; each is nil until its step has made it (the orchestrator
	// exists only after the lease is held).
	orch  atomic.Pointer[orchestrator.Orchestrator]
	bot   atomic.Pointer[discord.Bot]
	hookd atomic.Pointer[hooks.Engine]
	// hub holds the runners' connections.
	hub *fleet.Hub
	// tls serves the API over TLS; nil serves plain HTTP.
	tls *tls.Config
}

// daemonParts are the daemon's wired parts that serve runs.
type daemonParts struct {
	store     *store.Store
	owner     string // the lease's
	watch     *dbWatch
	orch      *orchestrator.Orchestrator
	rpc       *api.RPCServer
	rpcLn     net.Listener
	hooks     *hooks.Engine
	workflows *workflow.Engine
	bot       *discord.Bot // nil without Discord
	api       *api.Server
	apiLn     net.Listener
	metricsLn net.Listener // nil unless metrics.listen is set
}

// daemonLogWriter returns where the daemon logs, standard error or the
// --log-file when set, and what closes it.
func (m *Main) daemonLogWriter(logFile string) (io.Writer, func(), error) {
	if logFile == "" {
		return m.Stderr, func() {}, nil
	}
	f, err := openLogFile(logFile)
	if err != nil {
		return nil, nil, &configError{err: fmt.Errorf("run: --log-file %s: %w", logFile, err)}
	}
	return f, func() { f.Close() }, nil
}

// newWiring returns the wiring steps' shared parts: the output feed and
// the metrics.
func (m *Main) newWiring(cfg config.Config, log *slog.Logger) *wiring {
	oc := cfg.Orchestrator
	return &wiring{m: m, cfg: cfg, log: log, dbPath: cfg.DatabasePath(), feed: service.NewFeed(),
		met: metrics.New(metrics.Config{Window: oc.Window, GlobalBudget: oc.GlobalTokenBudget, Outbox: cfg.Discord.Enabled(),
			Logger: log.With("component", "metrics")})}
}

// openStore opens the database. After every commit that may have made
// work ready the store wakes the orchestrator, the bot and the hook
// engine (those wired by then) and notifies the feed.
func (w *wiring) openStore(ctx context.Context) (*store.Store, error) {
	st, err := store.Open(ctx, store.Config{Path: w.dbPath, Logger: w.log.With("component", "store"), OnChange: func() {
		if o := w.orch.Load(); o != nil {
			o.Wake()
		}
		if b := w.bot.Load(); b != nil {
			b.Wake()
		}
		if h := w.hookd.Load(); h != nil {
			h.Wake()
		}
		w.feed.Notify()
		if w.m.OnChange != nil {
			w.m.OnChange()
		}
	}, OnStateChange: w.feed.Notify, Observer: w.met})
	if err != nil {
		return nil, err
	}
	w.met.ReadFrom(st)
	return st, nil
}

// watchDatabase marks the data directory as used and returns the watch
// on the database file, which saves a copy through st should the file go.
func (w *wiring) watchDatabase(st *store.Store) (*dbWatch, error) {
	if err := markDataDir(w.cfg); err != nil {
		return nil, err
	}
	watch, err := newDBWatch(w.dbPath, w.m.dbWatchEvery)
	if err != nil {
		return nil, err
	}
	watch.save = st.SaveCopy
	return watch, nil
}

// acquireLease takes the database lease for this process.
func (w *wiring) acquireLease(ctx context.Context, st *store.Store) (models.LeaseHolder, error) {
	holder, err := w.m.leaseHolder()
	if err != nil {
		return models.LeaseHolder{}, err
	}
	if err := st.AcquireLease(ctx, holder, w.cfg.Lease.TTL); err != nil {
		return models.LeaseHolder{}, fmt.Errorf("start daemon on %s: %w", w.dbPath, err)
	}
	w.m.mu.Lock()
	w.m.owner = holder.Owner
	w.m.mu.Unlock()
	w.log.Info("lease acquired", "owner", holder.Owner, "hostname", holder.Hostname, "pid", holder.PID, "ttl", w.cfg.Lease.TTL)
	return holder, nil
}

// releaseLease releases owner's lease on shutdown and returns err with
// the release's failure joined; a lease another daemon holds is left.
func (w *wiring) releaseLease(ctx context.Context, st *store.Store, owner string, err error) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaseReleaseTimeout)
	defer cancel()
	rerr := st.ReleaseLease(rctx, owner)
	if errors.Is(rerr, store.ErrLeaseLost) {
		w.log.Info("lease not released: another daemon holds it", "owner", owner)
		return err
	}
	if rerr != nil {
		w.log.Error("release lease failed", "owner", owner, "err", rerr)
		return errors.Join(err, rerr)
	}
	w.log.Info("lease released", "owner", owner)
	return err
}

// buildWorkspaces records the configuration's agents, and returns the
// workspaces with the configuration's projects registered.
func (w *wiring) buildWorkspaces(ctx context.Context, st *store.Store) (*repo.Workspaces, error) {
	cfg := w.cfg
	for _, a := range cfg.Agents {
		if _, err := st.UpsertAgent(ctx, a); err != nil {
			return nil, fmt.Errorf("agent %s from the configuration: %w", a.ID, err)
		}
	}
	// Every act on a checkout or a repository passes the lease's fence: a
	// daemon another has taken the database over from touches nothing the
	// new owner's runs use.
	rc := repo.Config{BaseDir: filepath.Join(cfg.DataDir, "workspaces"), Logger: w.log.With("component", "repo"),
		Fence: st.ConfirmLease}
	if cfg.GitHub.Enabled() {
		hosts, err := repo.GitHubHosts(cfg.GitHub.APIBaseURL)
		if err != nil {
			return nil, err
		}
		rc.Credentials = repo.TokenCredentials(cfg.GitHub.Token, strings.HasPrefix(cfg.GitHub.APIBaseURL, "http://"), hosts...)
	}
	ws, err := repo.New(rc)
	if err != nil {
		return nil, err
	}
	if err := registerProjects(ctx, cfg.Projects, st, ws, w.log); err != nil {
		return nil, err
	}
	return ws, nil
}

// socketPath is the agents' RPC socket.
func (w *wiring) socketPath() string {
	return filepath.Join(w.cfg.DataDir, "agent.sock")
}

// buildOrchestrator loads the rules and returns the orchestrator, with
// the pull requests it lands through (nil without GitHub).
func (w *wiring) buildOrchestrator(ctx context.Context, st *store.Store, ws *repo.Workspaces) (*orchestrator.Orchestrator, orchestrator.PullRequests, error) {
	cfg, oc, log := w.cfg, w.cfg.Orchestrator, w.log
	self := w.m.Executable
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			log.Warn("own executable unknown: agents get no agentqueued MCP server", "err", err)
			self = ""
		}
	}
	var pulls orchestrator.PullRequests
	if cfg.GitHub.Enabled() {
		gh, err := repo.NewGitHub(repo.GitHubConfig{Token: cfg.GitHub.Token, APIBaseURL: cfg.GitHub.APIBaseURL,
			Logger: log.With("component", "github"), Observer: w.met}, ws)
		if err != nil {
			return nil, nil, err
		}
		pulls = gh
	} else {
		log.Info("github disabled: set github.token to land tasks through pull requests")
	}
	rules, err := st.InitRules(ctx, cfg.Rules)
	if err != nil {
		return nil, nil, fmt.Errorf("rules: %w", err)
	}
	log.Info("rules loaded", "rules", len(rules.Rules), "source", rules.Source)
	o, err := orchestrator.New(orchestrator.Config{SafetyTick: oc.SafetyTick, Window: oc.Window, IdleTimeout: oc.IdleTimeout,
		MaxRuntime: oc.MaxRuntime, StartTimeout: oc.StartTimeout, PrepareTimeout: oc.PrepareTimeout, RetryBackoff: oc.RetryBackoff, MaxBackoff: oc.MaxBackoff,
		StopGrace: oc.StopGrace, PauseDelay: oc.PauseDelay, GlobalBudget: oc.GlobalTokenBudget, CurrentRules: st.CurrentRules,
		InputTimeout: oc.InputTimeout, RunDir: filepath.Join(cfg.DataDir, "runs"), SocketPath: w.socketPath(),
		CheckTimeout: cfg.Verification.CheckTimeout, Profiles: cfg.Profiles, PlanPaths: cfg.Plans.Paths,
		QAAgent: cfg.Verification.QAAgent, QAProfile: cfg.Verification.QAProfile, Executable: self, Environ: w.m.Environ,
		PullRequests: pulls, PRPollInterval: cfg.GitHub.PollInterval, LandPollInterval: cfg.Verification.LandPollInterval,
		OnOutput: w.feed.Output, Observer: w.met, Runners: w.hub, LeaseTTL: oc.RunnerLease, RunnerHeartbeat: oc.RunnerHeartbeat,
		Logger: log.With("component", "orchestrator")}, st, ws, agent.DefaultRegistry())
	if err != nil {
		return nil, nil, err
	}
	w.orch.Store(o)
	return o, pulls, nil
}

// buildRPC returns the agents' RPC server, served by o, and its listener.
func (w *wiring) buildRPC(o *orchestrator.Orchestrator) (*api.RPCServer, net.Listener, error) {
	rpc, err := api.NewRPCServer(api.RPCConfig{SocketPath: w.socketPath(), Logger: w.log.With("component", "rpc")}, o)
	if err != nil {
		return nil, nil, err
	}
	rpcLn, err := rpc.Listen()
	if err != nil {
		return nil, nil, fmt.Errorf("agent socket: %w", err)
	}
	return rpc, rpcLn, nil
}

// serviceConfig returns the service's configuration without its hook and
// workflow engines.
func (w *wiring) serviceConfig(st *store.Store, o *orchestrator.Orchestrator, ws *repo.Workspaces) service.Config {
	cfg, oc := w.cfg, w.cfg.Orchestrator
	return service.Config{Store: st, Orchestrator: o, Repos: ws, Traces: ws, Logger: w.log.With("component", "service"),
		Feed: w.feed, Profiles: cfg.Profiles,
		Window: oc.Window, GlobalBudget: oc.GlobalTokenBudget, RetryBackoff: oc.RetryBackoff, MaxBackoff: oc.MaxBackoff,
		DeskWebhooks: slices.Sorted(maps.Keys(cfg.Desk.Webhooks))}
}

// buildHooks returns the hook engine, its actions going through actions,
// started: the runs an earlier life left running are closed before
// anyone can fire a hook.
func (w *wiring) buildHooks(ctx context.Context, st *store.Store, actions hooks.Actions, ws *repo.Workspaces) (*hooks.Engine, error) {
	met := w.met
	onHookRunEnd := met.HookRunEnded
	if w.m.OnHookRunEnd != nil {
		onHookRunEnd = func(r models.HookRun) {
			met.HookRunEnded(r)
			w.m.OnHookRunEnd(r)
		}
	}
	eng, err := newHooks(w.cfg, st, actions, ws, w.log, onHookRunEnd)
	if err != nil {
		return nil, err
	}
	w.hookd.Store(eng)
	if err := eng.Start(ctx); err != nil {
		return nil, err
	}
	return eng, nil
}

// buildWorkflows returns the workflow engine with the workflows of the
// configured directory loaded.
func (w *wiring) buildWorkflows(ctx context.Context, st *store.Store, o *orchestrator.Orchestrator, knownProfile func(string) bool) (*workflow.Engine, error) {
	wf, err := workflow.New(workflow.Config{Dir: w.cfg.Workflows.Dir, PollInterval: w.cfg.Workflows.PollInterval,
		KnownProfile: knownProfile, Logger: w.log.With("component", "workflows")}, st, o)
	if err != nil {
		return nil, err
	}
	if err := wf.LoadDir(ctx); err != nil {
		return nil, &configError{err: err}
	}
	return wf, nil
}

// buildDiscord returns the Discord bot, or nil when it is not configured.
func (w *wiring) buildDiscord(svc *service.Service, st *store.Store) (*discord.Bot, error) {
	b, err := newBot(w.cfg, svc, st, w.log)
	if err != nil {
		return nil, err
	}
	w.bot.Store(b)
	return b, nil
}

// buildAPI returns the API server with the web UI, the GitHub webhook and
// the metrics it serves.
func (w *wiring) buildAPI(ctx context.Context, svc *service.Service, st *store.Store, o *orchestrator.Orchestrator,
	pulls orchestrator.PullRequests, watch *dbWatch, hub *fleet.Hub) (*api.Server, error) {
	cfg, log := w.cfg, w.log
	var webhook http.Handler
	if pulls != nil && cfg.GitHub.WebhookSecret != "" {
		webhook = repo.WebhookHandler(cfg.GitHub.WebhookSecret, log.With("component", "github"), func(owner, name string, n int) {
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			o.PokePullRequest(pctx, owner, name, n)
		})
	}
	health := &daemonHealth{db: watch, scheduler: o, store: st}
	// The metrics are served on the API's listener, behind its checks,
	// unless metrics.listen gives them one of their own.
	var apiMetrics http.Handler
	if cfg.Metrics.Listen == "" {
		apiMetrics = w.met.Handler()
	}
	// One throttle for the API's bearer check and the dashboard's login:
	// a guesser gains nothing by alternating between them.
	limiter := throttle.New(throttle.Config{Logger: log.With("component", "auth")})
	ui, err := web.New(web.Config{Token: cfg.API.Token, Throttle: limiter, Logger: log.With("component", "web"),
		Stopping: api.Stopping}, svc)
	if err != nil {
		return nil, err
	}
	runners, err := api.NewRunnerServer(api.RunnerConfig{Throttle: limiter, Logger: log.With("component", "runners"), Runs: o},
		svc, hub)
	if err != nil {
		return nil, err
	}
	return api.New(api.Config{Addr: cfg.Listen, Token: cfg.API.Token, TLS: w.tls, Throttle: limiter, AllowedHosts: cfg.API.AllowedHosts,
		Logger: log.With("component", "api"), Health: health.Check, DatabaseID: databaseID(w.dbPath), Metrics: apiMetrics,
		GitHubWebhook: webhook, Hooks: svc, Workflows: svc, Logs: svc, UI: ui.Handler(), Runners: runners.Handler()}, svc)
}

// listenMetrics returns the metrics' own listener, or nil when
// metrics.listen is empty (the API serves them).
func (w *wiring) listenMetrics() (net.Listener, error) {
	if w.cfg.Metrics.Listen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", w.cfg.Metrics.Listen)
	if err != nil {
		return nil, fmt.Errorf("metrics.listen: %w", err)
	}
	w.log.Info("metrics listening", "addr", ln.Addr().String(), "remote", w.cfg.Metrics.AllowRemote)
	w.m.mu.Lock()
	w.m.metricsAddr = ln.Addr().String()
	w.m.mu.Unlock()
	return ln, nil
}

// announce logs where the API listens and makes the daemon ready.
func (w *wiring) announce(addr string) {
	w.log.Info("agentqueued listening", "addr", addr, "data_dir", w.cfg.DataDir, "database", w.dbPath,
		"auth", w.cfg.API.Token != "", "tls", w.tls != nil)
	w.m.mu.Lock()
	w.m.addr = addr
	close(w.m.readyLocked())
	w.m.mu.Unlock()
}

// serve runs every part until ctx ends or one of them fails; then they
// stop in stages, each awaited before the next: first what takes work in
// (the API, Discord, hook and workflow schedules, the retention pruner,
// the desk notifier, the metrics listener), then the orchestrator and its
// pull-request and landing watchers (runs end and their reports still
// reach the RPC), then the RPC, the database watch and the lease renewal.
// Only after serve returns is the lease released and the store closed.
func (w *wiring) serve(ctx context.Context, p daemonParts) error {
	cfg, log, st := w.cfg, w.log, p.store
	// Every part is built before the first starts: a part that cannot be
	// built must not leave the others running.
	ret := cfg.Retention
	pruner := retention.New(retention.Config{Store: st, RunDir: filepath.Join(cfg.DataDir, "runs"), Notices: ret.Notices,
		RunLogs: ret.RunLogs, HookRuns: ret.HookRuns, WorkflowRuns: ret.WorkflowRuns, ArchiveTasks: ret.ArchiveTasks, Archived: ret.Archived,
		Interval: ret.Interval, Batch: ret.Batch, Clock: w.m.retentionClock, Logger: log.With("component", "retention")})
	notifier, err := desk.New(desk.Config{Clock: w.m.deskClock, PollInterval: cfg.Desk.PollInterval, Webhooks: cfg.Desk.Webhooks,
		Logger: log.With("component", "desk")}, st)
	if err != nil {
		return err
	}
	s := newStages(ctx)
	intake, work, support := s.next(), s.next(), s.next()
	intake.run(s, func(ctx context.Context) error { return p.api.Serve(ctx, p.apiLn) })
	intake.run(s, p.hooks.Run)
	intake.run(s, p.workflows.Run)
	intake.run(s, pruner.Run)
	intake.run(s, notifier.Run)
	if p.metricsLn != nil {
		intake.run(s, func(ctx context.Context) error {
			return serveMetrics(ctx, p.metricsLn, w.met.ListenerHandler(!cfg.Metrics.AllowRemote), log.With("component", "metrics"))
		})
	}
	if p.bot != nil {
		intake.run(s, p.bot.Run)
	}
	work.run(s, p.orch.Run)
	work.run(s, p.orch.WatchPullRequests)
	work.run(s, p.orch.WatchLandings)
	support.run(s, func(ctx context.Context) error { return p.rpc.Serve(ctx, p.rpcLn) })
	support.run(s, p.watch.Run)
	support.run(s, func(ctx context.Context) error { return renewLease(ctx, st, p.owner, cfg.Lease.TTL, log) })
	support.run(s, func(ctx context.Context) error { return checkDatabase(ctx, st, log) })
	err = s.wait()
	if gone := p.watch.Check(); gone != nil {
		// New connections to a deleted file fail: whatever failed first, the
		// cause is the file, and the open connection still holds its state.
		err = saveLostDatabase(context.WithoutCancel(ctx), st, gone, w.dbPath, time.Now(), p.watch.earlyCopy(), log)
	}
	if errors.Is(err, store.ErrLeaseLost) && !strings.Contains(err.Error(), "lost the database lease") {
		err = fmt.Errorf("lost the database lease: %w", err)
	}
	if err != nil {
		log.Error("agentqueued stopping after a failure", "err", err)
		return err
	}
	log.Info("agentqueued stopped")
	return nil
}

// checkDatabase reads the whole database once, while the daemon serves,
// and stops the daemon if it is damaged: a check before serving made every
// start wait for it on a large database.
func checkDatabase(ctx context.Context, st *store.Store, log *slog.Logger) error {
	start := time.Now()
	if err := st.CheckIntegrity(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopping: the next start checks again
		}
		return fmt.Errorf("check the database: %w", err)
	}
	log.Info("database checked", "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// metricsShutdownTimeout bounds the metrics listener's graceful shutdown.
const metricsShutdownTimeout = 5 * time.Second

// serveMetrics serves h on ln (metrics.listen) until ctx ends.
func serveMetrics(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve metrics on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), metricsShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("stop serving metrics: %w", err)
	}
	return nil
}

// newHooks returns the hook engine the configuration asks for. Its
// actions go through the service, as a person's would.
func newHooks(cfg config.Config, st *store.Store, act hooks.Actions, ws *repo.Workspaces, log *slog.Logger,
	onRunEnd func(models.HookRun)) (*hooks.Engine, error) {
	hc := cfg.Hooks
	if cfg.LLM.Model == "" {
		log.Info("hooks run without an LLM: set llm.model (or a hook's llm_config) for hooks with a prompt")
	}
	return hooks.New(hooks.Config{MaxRunning: hc.MaxRunning, PollInterval: hc.PollInterval,
		LLM:          hooks.LLMConfig{BaseURL: cfg.LLM.BaseURL, APIKey: cfg.LLM.APIKey, Model: cfg.LLM.Model},
		GlobalBudget: cfg.Orchestrator.GlobalTokenBudget, Window: cfg.Orchestrator.Window,
		HTTPAllowHosts: hc.HTTPAllowHosts, CommandTimeout: hc.CommandTimeout, HTTPTimeout: hc.HTTPTimeout,
		StepOutputCap: hc.StepOutputCap, MaxToolRounds: hc.MaxToolRounds, LLMAttempts: hc.LLMAttempts,
		OnRunEnd: onRunEnd, Logger: log.With("component", "hooks")}, st, act, ws)
}

// newBot returns the Discord bot the configuration asks for, or nil (and
// a log line saying how to enable it) when there is no token.
func newBot(cfg config.Config, svc discord.Service, st *store.Store, log *slog.Logger) (*discord.Bot, error) {
	dc := cfg.Discord
	if !dc.Enabled() {
		log.Info("discord disabled: set discord.token, discord.guild_id and discord.control_channel_id to enable it")
		return nil, nil
	}
	if len(dc.AuthorizedUsers) == 0 && len(dc.AdminUsers) == 0 {
		log.Warn("discord: nobody may act: list user ids in discord.authorized_users or discord.admin_users")
	}
	var proposer discord.Proposer
	if cfg.LLM.Model != "" {
		p, err := discord.NewOpenAIProposer(discord.OpenAIConfig{BaseURL: cfg.LLM.BaseURL, APIKey: cfg.LLM.APIKey, Model: cfg.LLM.Model})
		if err != nil {
			return nil, err
		}
		proposer = p
	}
	return discord.New(discord.Config{Token: dc.Token, GuildID: dc.GuildID, ControlChannelID: dc.ControlChannelID,
		AuthorizedUsers: dc.AuthorizedUsers, AdminUsers: dc.AdminUsers, APIBaseURL: dc.APIBaseURL, Proposer: proposer,
		Logger: log.With("component", "discord")}, svc, st)
}

// leaseHolder describes this process for the lease, with a fresh owner id.
func (m *Main) leaseHolder() (models.LeaseHolder, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return models.LeaseHolder{}, fmt.Errorf("lease owner id: %w", err)
	}
	host := "unknown"
	if m.Hostname != nil {
		h, err := m.Hostname()
		if err != nil {
			return models.LeaseHolder{}, fmt.Errorf("hostname: %w", err)
		}
		host = h
	}
	pid := m.PID
	if pid == 0 {
		pid = os.Getpid()
	}
	return models.LeaseHolder{Owner: hex.EncodeToString(b[:]), Hostname: host, PID: pid}, nil
}

// leaseRenewer is what the renewal loop needs from the store.
type leaseRenewer interface {
	RenewLease(ctx context.Context, owner string, ttl time.Duration) error
}

// renewLease renews owner's lease every ttl/3 until ctx is cancelled. It
// fails when the lease is lost to another owner, or when renewals have
// failed for a whole ttl (the lease may have expired) for any reason but a
// full disk: then the daemon goes on serving what it has, its writes
// failing with "disk full" (the store's fencing refuses them should
// another daemon take the lease meanwhile), and renews again once space
// returns.
func renewLease(ctx context.Context, st leaseRenewer, owner string, ttl time.Duration, log *slog.Logger) error {
	tick := time.NewTicker(ttl / 3)
	defer tick.Stop()
	lastOK := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		err := st.RenewLease(ctx, owner, ttl)
		switch {
		case err == nil:
			lastOK = time.Now()
			log.Debug("lease renewed", "owner", owner)
		case ctx.Err() != nil:
			return nil
		case models.ErrorCodeOf(err) == models.CodeConflict:
			return fmt.Errorf("lost the database lease: %w", err)
		case models.ErrorCodeOf(err) == models.CodeUnavailable:
			log.Warn("lease not renewed: the disk is full; the daemon goes on read-only", "owner", owner, "err", err)
		case time.Since(lastOK) >= ttl:
			return fmt.Errorf("lease not renewed for %s: %w", ttl, err)
		default:
			log.Warn("lease renewal failed; retrying", "owner", owner, "err", err)
		}
	}
}

// The service is every client's: the API's, the bot's and the hook
// engine's; the orchestrator serves the agents' RPC.
var (
	_ api.Service         = (*service.Service)(nil)
	_ api.HookService     = (*service.Service)(nil)
	_ api.WorkflowService = (*service.Service)(nil)
	_ api.LogService      = (*service.Service)(nil)
	_ discord.Service     = (*service.Service)(nil)
	_ hooks.Actions       = (*service.Service)(nil)
	_ api.RunService      = (*orchestrator.Orchestrator)(nil)
)
