package main

import (
	"context"
	"crypto/rand"
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
	"github.com/agentqueued/agentqueued/internal/hooks"
	"github.com/agentqueued/agentqueued/internal/metrics"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/orchestrator"
	"github.com/agentqueued/agentqueued/internal/repo"
	"github.com/agentqueued/agentqueued/internal/retention"
	"github.com/agentqueued/agentqueued/internal/service"
	"github.com/agentqueued/agentqueued/internal/store"
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
	return cfg, runFlags{newDatabase: *newDB, logFile: *logFile}, nil
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

// runDaemon is the "run" subcommand.
func (m *Main) runDaemon(ctx context.Context, args []string) (err error) {
	cfg, flags, err := m.loadDaemonConfig(args)
	if err != nil {
		return err
	}
	logw := m.Stderr
	if flags.logFile != "" {
		f, err := openLogFile(flags.logFile)
		if err != nil {
			return &configError{err: fmt.Errorf("run: --log-file %s: %w", flags.logFile, err)}
		}
		// Closed last: every deferred step below still logs.
		defer f.Close()
		logw = f
	}
	log := newLogger(cfg.Log, logw)
	tuneGC(m.Getenv)

	dbPath := cfg.DatabasePath()
	if err := prepareDataDir(cfg, flags.newDatabase, log); err != nil {
		return err
	}
	// The store wakes the orchestrator after every commit that may have made
	// work ready; the orchestrator exists only after the lease is held.
	feed := service.NewFeed()
	oc := cfg.Orchestrator
	met := metrics.New(metrics.Config{Window: oc.Window, GlobalBudget: oc.GlobalTokenBudget, Outbox: cfg.Discord.Enabled(),
		Logger: log.With("component", "metrics")})
	var (
		orch  atomic.Pointer[orchestrator.Orchestrator]
		bot   atomic.Pointer[discord.Bot]
		hookd atomic.Pointer[hooks.Engine]
	)
	st, err := store.Open(ctx, store.Config{Path: dbPath, Logger: log.With("component", "store"), OnChange: func() {
		if o := orch.Load(); o != nil {
			o.Wake()
		}
		if b := bot.Load(); b != nil {
			b.Wake()
		}
		if h := hookd.Load(); h != nil {
			h.Wake()
		}
		feed.Notify()
		if m.OnChange != nil {
			m.OnChange()
		}
	}, OnStateChange: feed.Notify, Observer: met})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := st.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close store: %w", cerr))
		}
	}()

	met.ReadFrom(st)
	if err := markDataDir(cfg); err != nil {
		return err
	}
	watch, err := newDBWatch(dbPath, m.dbWatchEvery)
	if err != nil {
		return err
	}
	watch.save = st.SaveCopy

	holder, err := m.leaseHolder()
	if err != nil {
		return err
	}
	if err := st.AcquireLease(ctx, holder, cfg.Lease.TTL); err != nil {
		return fmt.Errorf("start daemon on %s: %w", dbPath, err)
	}
	m.mu.Lock()
	m.owner = holder.Owner
	m.mu.Unlock()
	log.Info("lease acquired", "owner", holder.Owner, "hostname", holder.Hostname, "pid", holder.PID, "ttl", cfg.Lease.TTL)
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaseReleaseTimeout)
		defer cancel()
		rerr := st.ReleaseLease(rctx, holder.Owner)
		if errors.Is(rerr, store.ErrLeaseLost) {
			log.Info("lease not released: another daemon holds it", "owner", holder.Owner)
			return
		}
		if rerr != nil {
			log.Error("release lease failed", "owner", holder.Owner, "err", rerr)
			err = errors.Join(err, rerr)
			return
		}
		log.Info("lease released", "owner", holder.Owner)
	}()

	for _, a := range cfg.Agents {
		if _, err := st.UpsertAgent(ctx, a); err != nil {
			return fmt.Errorf("agent %s from the configuration: %w", a.ID, err)
		}
	}
	rc := repo.Config{BaseDir: filepath.Join(cfg.DataDir, "workspaces"), Logger: log.With("component", "repo")}
	if cfg.GitHub.Enabled() {
		hosts, err := repo.GitHubHosts(cfg.GitHub.APIBaseURL)
		if err != nil {
			return err
		}
		rc.Credentials = repo.TokenCredentials(cfg.GitHub.Token, strings.HasPrefix(cfg.GitHub.APIBaseURL, "http://"), hosts...)
	}
	ws, err := repo.New(rc)
	if err != nil {
		return err
	}
	if err := registerProjects(ctx, cfg.Projects, st, ws, log); err != nil {
		return err
	}
	socket := filepath.Join(cfg.DataDir, "agent.sock")
	self := m.Executable
	if self == "" {
		if self, err = os.Executable(); err != nil {
			log.Warn("own executable unknown: agents get no agentqueued MCP server", "err", err)
			self = ""
		}
	}
	var pulls orchestrator.PullRequests
	if cfg.GitHub.Enabled() {
		gh, err := repo.NewGitHub(repo.GitHubConfig{Token: cfg.GitHub.Token, APIBaseURL: cfg.GitHub.APIBaseURL,
			Logger: log.With("component", "github"), Observer: met}, ws)
		if err != nil {
			return err
		}
		pulls = gh
	} else {
		log.Info("github disabled: set github.token to land tasks through pull requests")
	}
	rules, err := st.InitRules(ctx, cfg.Rules)
	if err != nil {
		return fmt.Errorf("rules: %w", err)
	}
	log.Info("rules loaded", "rules", len(rules.Rules), "source", rules.Source)
	o, err := orchestrator.New(orchestrator.Config{SafetyTick: oc.SafetyTick, Window: oc.Window, IdleTimeout: oc.IdleTimeout,
		MaxRuntime: oc.MaxRuntime, StartTimeout: oc.StartTimeout, PrepareTimeout: oc.PrepareTimeout, RetryBackoff: oc.RetryBackoff, MaxBackoff: oc.MaxBackoff,
		StopGrace: oc.StopGrace, PauseDelay: oc.PauseDelay, GlobalBudget: oc.GlobalTokenBudget, CurrentRules: st.CurrentRules,
		InputTimeout: oc.InputTimeout, RunDir: filepath.Join(cfg.DataDir, "runs"), SocketPath: socket,
		CheckTimeout: cfg.Verification.CheckTimeout, Profiles: cfg.Profiles, PlanPaths: cfg.Plans.Paths,
		QAAgent: cfg.Verification.QAAgent, QAProfile: cfg.Verification.QAProfile, Executable: self, Environ: m.Environ,
		PullRequests: pulls, PRPollInterval: cfg.GitHub.PollInterval, LandPollInterval: cfg.Verification.LandPollInterval,
		OnOutput: feed.Output, Observer: met,
		Logger: log.With("component", "orchestrator")}, st, ws, agent.DefaultRegistry())
	if err != nil {
		return err
	}
	orch.Store(o)
	rpc, err := api.NewRPCServer(api.RPCConfig{SocketPath: socket, Logger: log.With("component", "rpc")}, o)
	if err != nil {
		return err
	}
	rpcLn, err := rpc.Listen()
	if err != nil {
		return fmt.Errorf("agent socket: %w", err)
	}
	// The service goes through the orchestrator, the hook engine and the
	// workflow engine; the hook engine's own actions go through a service
	// without those engines (a hook creates tasks, gives feedback and
	// notifies, as a person's commands would).
	sc := service.Config{Store: st, Orchestrator: o, Repos: ws, Traces: ws, Logger: log.With("component", "service"),
		Feed: feed, Profiles: cfg.Profiles,
		Window: oc.Window, GlobalBudget: oc.GlobalTokenBudget, RetryBackoff: oc.RetryBackoff, MaxBackoff: oc.MaxBackoff,
		DeskWebhooks: slices.Sorted(maps.Keys(cfg.Desk.Webhooks))}
	actions := service.New(sc)
	onHookRunEnd := met.HookRunEnded
	if m.OnHookRunEnd != nil {
		onHookRunEnd = func(r models.HookRun) {
			met.HookRunEnded(r)
			m.OnHookRunEnd(r)
		}
	}
	eng, err := newHooks(cfg, st, actions, ws, log, onHookRunEnd)
	if err != nil {
		return err
	}
	hookd.Store(eng)
	// Runs an earlier life left running are closed before anyone can fire a hook.
	if err := eng.Start(ctx); err != nil {
		return err
	}
	wf, err := workflow.New(workflow.Config{Dir: cfg.Workflows.Dir, PollInterval: cfg.Workflows.PollInterval,
		KnownProfile: actions.HasProfile, Logger: log.With("component", "workflows")}, st, o)
	if err != nil {
		return err
	}
	if err := wf.LoadDir(ctx); err != nil {
		return &configError{err: err}
	}
	sc.Hooks, sc.Workflows = eng, wf
	svc := service.New(sc)
	b, err := newBot(cfg, svc, st, log)
	if err != nil {
		return err
	}
	bot.Store(b)
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
		apiMetrics = met.Handler()
	}
	ui, err := web.New(web.Config{Token: cfg.API.Token, Logger: log.With("component", "web"), Stopping: api.Stopping}, svc)
	if err != nil {
		rpcLn.Close()
		return err
	}
	srv, err := api.New(api.Config{Addr: cfg.Listen, Token: cfg.API.Token, AllowedHosts: cfg.API.AllowedHosts,
		Logger: log.With("component", "api"), Health: health.Check, DatabaseID: databaseID(dbPath), Metrics: apiMetrics,
		GitHubWebhook: webhook, Hooks: svc, Workflows: svc, Logs: svc, UI: ui.Handler()}, svc)
	if err != nil {
		rpcLn.Close()
		return err
	}
	ln, err := srv.Listen()
	if err != nil {
		return err
	}
	var metricsLn net.Listener
	if cfg.Metrics.Listen != "" {
		if metricsLn, err = net.Listen("tcp", cfg.Metrics.Listen); err != nil {
			ln.Close()
			rpcLn.Close()
			return fmt.Errorf("metrics.listen: %w", err)
		}
		log.Info("metrics listening", "addr", metricsLn.Addr().String(), "remote", cfg.Metrics.AllowRemote)
		m.mu.Lock()
		m.metricsAddr = metricsLn.Addr().String()
		m.mu.Unlock()
	}
	addr := ln.Addr().String()
	log.Info("agentqueued listening", "addr", addr, "data_dir", cfg.DataDir, "database", dbPath,
		"auth", cfg.API.Token != "")
	m.mu.Lock()
	m.addr = addr
	close(m.readyLocked())
	m.mu.Unlock()

	// Every part runs until ctx ends or one of them fails; then they stop
	// in stages, each awaited before the next: first what takes work in
	// (the API, Discord, hook and workflow schedules, the metrics
	// listener), then the orchestrator and its pull-request and landing
	// watchers (runs end and their reports still reach the RPC), then the
	// RPC, the database watch and the lease renewal. Only then is the lease
	// released and the store closed.
	s := newStages(ctx)
	intake, work, support := s.next(), s.next(), s.next()
	intake.run(s, func(ctx context.Context) error { return srv.Serve(ctx, ln) })
	intake.run(s, eng.Run)
	intake.run(s, wf.Run)
	ret := cfg.Retention
	pruner := retention.New(retention.Config{Store: st, RunDir: filepath.Join(cfg.DataDir, "runs"), Notices: ret.Notices,
		RunLogs: ret.RunLogs, HookRuns: ret.HookRuns, WorkflowRuns: ret.WorkflowRuns, ArchiveTasks: ret.ArchiveTasks, Archived: ret.Archived,
		Interval: ret.Interval, Batch: ret.Batch, Clock: m.retentionClock, Logger: log.With("component", "retention")})
	intake.run(s, pruner.Run)
	notifier, err := desk.New(desk.Config{Clock: m.deskClock, PollInterval: cfg.Desk.PollInterval, Webhooks: cfg.Desk.Webhooks,
		Logger: log.With("component", "desk")}, st)
	if err != nil {
		return err
	}
	intake.run(s, notifier.Run)
	if metricsLn != nil {
		intake.run(s, func(ctx context.Context) error {
			return serveMetrics(ctx, metricsLn, met.ListenerHandler(!cfg.Metrics.AllowRemote), log.With("component", "metrics"))
		})
	}
	if b != nil {
		intake.run(s, b.Run)
	}
	work.run(s, o.Run)
	work.run(s, o.WatchPullRequests)
	work.run(s, o.WatchLandings)
	support.run(s, func(ctx context.Context) error { return rpc.Serve(ctx, rpcLn) })
	support.run(s, watch.Run)
	support.run(s, func(ctx context.Context) error { return renewLease(ctx, st, holder.Owner, cfg.Lease.TTL, log) })
	err = s.wait()
	if gone := watch.Check(); gone != nil {
		// New connections to a deleted file fail: whatever failed first, the
		// cause is the file, and the open connection still holds its state.
		err = saveLostDatabase(context.WithoutCancel(ctx), st, gone, dbPath, time.Now(), watch.earlyCopy(), log)
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
