package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentqueued/agentqueued/internal/clock"
	"github.com/agentqueued/agentqueued/internal/fleet"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
)

// Namespace prefixes every metric of the daemon's own.
const Namespace = "agentqueued"

// Defaults of the configuration.
const (
	// DefaultWindow is the budget window when Config.Window is zero (the
	// orchestrator's default).
	DefaultWindow = 24 * time.Hour
	// DefaultReadTimeout bounds the store reads of one scrape.
	DefaultReadTimeout = 10 * time.Second
	// maxScrapesInFlight caps the scrapes served at once; more wait.
	maxScrapesInFlight = 4
)

// Buckets of the histograms, in seconds.
var (
	// waitBuckets span 100 ms to about 7 hours: a task may wait READY
	// for a free agent for a long time.
	waitBuckets = prometheus.ExponentialBuckets(0.1, 4, 10)
	// latencyBuckets span 10 ms to about 45 minutes: a dependent starts
	// within a round of its dependencies being met, unless agents are busy.
	latencyBuckets = prometheus.ExponentialBuckets(0.01, 4, 10)
	// roundBuckets span 1 ms to about 65 s.
	roundBuckets = prometheus.ExponentialBuckets(0.001, 4, 9)
)

// Store is what a scrape reads, each method one statement.
type Store interface {
	TaskStatusCounts(ctx context.Context) ([]store.StatusCount, error)
	AgentStates(ctx context.Context) ([]store.AgentState, error)
	OutboxBacklog(ctx context.Context) (store.OutboxBacklog, error)
	RunUsageSince(ctx context.Context, since, now time.Time) ([]store.RunUsage, error)
	TokensUsedByProjectSince(ctx context.Context, since time.Time) (map[string]int64, error)
	ProjectTokens(ctx context.Context) ([]store.ProjectTokens, error)
	RunnerActivity(ctx context.Context) ([]store.RunnerActivity, error)
	FileSizes() (db, wal int64, err error)
	// WaitDurable returns once every commit made so far is durable and
	// reported to the observer that feeds the counters.
	WaitDurable(ctx context.Context) error
}

// Config configures Metrics.
type Config struct {
	// Window is the budget window tokens and agent time are summed over
	// (orchestrator.window); default DefaultWindow.
	Window time.Duration
	// GlobalBudget is orchestrator.global_token_budget; nil is unlimited
	// (not exported).
	GlobalBudget *int64
	// Outbox exports the outbox backlog; set it when something delivers
	// the outbox (the Discord bot): without, every notice stays undelivered.
	Outbox bool
	// Clock tells the time of a scrape; nil: the real clock.
	Clock clock.Clock
	// ReadTimeout bounds the store reads of one scrape; default
	// DefaultReadTimeout.
	ReadTimeout time.Duration
	// Logger receives the errors of scrapes; default discards.
	Logger *slog.Logger
}

// RunnerConnections are the runners' live connections a scrape reads
// (the fleet's hub): whether each runner is connected now and its last
// request.
type RunnerConnections interface {
	Statuses() []fleet.Status
}

// Metrics is the daemon's metrics: a registry of its own, the observers
// that feed it, and the scrape-time reads of the store and of the
// runners' connections.
type Metrics struct {
	cfg   Config
	reg   *prometheus.Registry
	names []string
	// st is the store scrapes read, set by ReadFrom.
	st Store
	// conns holds the runners' connections, set by RunnersFrom.
	conns atomic.Pointer[runnerConns]

	transitions     *prometheus.CounterVec
	queueWait       *prometheus.HistogramVec
	dependencyStart *prometheus.HistogramVec
	runs            *prometheus.CounterVec
	rounds          prometheus.Histogram
	githubRequests  *prometheus.CounterVec
	githubRemaining prometheus.Gauge
	hookRuns        *prometheus.CounterVec
}

// New returns the metrics fed by events, and the Go runtime's and the
// process's; ReadFrom adds those read from the store at scrape time.
func New(cfg Config) *Metrics {
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{cfg: cfg, reg: prometheus.NewRegistry()}
	m.transitions = m.counterVec("transitions_total", "Task status transitions committed, by project and event.", "project", "event")
	m.queueWait = m.histogramVec("queue_wait_seconds", "Time tasks were READY before an agent claimed them, by project.",
		waitBuckets, "project")
	m.dependencyStart = m.histogramVec("dependency_start_latency_seconds",
		"Time from a task's dependencies being met (the last upstream finished) to its agent starting, by project.",
		latencyBuckets, "project")
	m.runs = m.counterVec("runs_total", "Agent runs ended, by project, agent and outcome.", "project", "agent", "outcome")
	m.rounds = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "scheduler_round_duration_seconds",
		Help: "Duration of the orchestrator's rounds: timers, reviews, scheduling, dispatch, reconciliation.", Buckets: roundBuckets})
	m.register(m.rounds, "scheduler_round_duration_seconds")
	m.githubRequests = m.counterVec("github_requests_total",
		`Requests to GitHub's API, by HTTP status ("error" when no answer came).`, "status")
	m.githubRemaining = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "github_rate_limit_remaining",
		Help: "Requests GitHub's rate limit allows until its reset, as of the last answer that said."})
	m.register(m.githubRemaining, "github_rate_limit_remaining")
	m.hookRuns = m.counterVec("hook_runs_total", "Hook runs ended, by project and outcome (completed, failed, skipped).",
		"project", "outcome")
	for _, n := range storeMetricNames {
		m.names = append(m.names, Namespace+"_"+n)
	}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ReadFrom makes every scrape read st (see Store). Call it once.
func (m *Metrics) ReadFrom(st Store) {
	m.st = st
	m.reg.MustRegister(newStoreCollector(m, st))
}

// runnerConns holds a RunnerConnections for an atomic pointer.
type runnerConns struct{ c RunnerConnections }

// RunnersFrom makes scrapes read which runners are connected, and when
// each made its last request, from c. Without it no runner counts as
// connected and a runner's last request is the one the database holds.
func (m *Metrics) RunnersFrom(c RunnerConnections) { m.conns.Store(&runnerConns{c: c}) }

// runnerStatuses returns the runners' connections by name (none without
// RunnersFrom).
func (m *Metrics) runnerStatuses() map[string]fleet.Status {
	out := map[string]fleet.Status{}
	if rc := m.conns.Load(); rc != nil {
		for _, st := range rc.c.Statuses() {
			out[st.Name] = st
		}
	}
	return out
}

// counterVec registers a counter vector named Namespace_name.
func (m *Metrics) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
	m.register(v, name)
	return v
}

// histogramVec registers a histogram vector named Namespace_name.
func (m *Metrics) histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: name, Help: help, Buckets: buckets}, labels)
	m.register(v, name)
	return v
}

func (m *Metrics) register(c prometheus.Collector, name string) {
	m.reg.MustRegister(c)
	m.names = append(m.names, Namespace+"_"+name)
}

// Registry returns the registry the metrics are in.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Names returns the name of every metric family the daemon can export,
// sorted: its own (histograms by their base name) and the Go runtime's and
// process's it exports now.
func (m *Metrics) Names() []string {
	names := slices.Clone(m.names)
	runtime := prometheus.NewRegistry()
	runtime.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if mfs, err := runtime.Gather(); err == nil {
		for _, mf := range mfs {
			names = append(names, mf.GetName())
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Handler serves the metrics in the Prometheus text format. A store read
// that fails is logged and its metrics left out; the others are served.
//
// With a store to read (ReadFrom), a scrape first waits for the commits
// made so far to be durable and reported: the counters then include every
// transition a read made before the scrape could have seen.
func (m *Metrics) Handler() http.Handler {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: promLogger{m.cfg.Logger},
		ErrorHandling: promhttp.ContinueOnError, MaxRequestsInFlight: maxScrapesInFlight})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.st != nil {
			ctx, cancel := context.WithTimeout(r.Context(), m.cfg.ReadTimeout)
			err := m.st.WaitDurable(ctx)
			cancel()
			if err != nil {
				m.cfg.Logger.Warn("metrics: the scrape did not wait for the database's writes", "err", err)
			}
		}
		h.ServeHTTP(w, r)
	})
}

// promLogger is promhttp's logger over slog.
type promLogger struct{ log *slog.Logger }

func (l promLogger) Println(v ...any) { l.log.Error("metrics scrape", "err", fmt.Sprint(v...)) }

// Transitioned counts a committed status change and observes the waits it
// ends (store.Observer).
func (m *Metrics) Transitioned(t store.ObservedTransition) {
	m.transitions.WithLabelValues(t.ProjectID, string(t.Event)).Inc()
	switch t.Event {
	case models.EventAssigned:
		m.queueWait.WithLabelValues(t.ProjectID).Observe(t.QueueWait.Seconds())
	case models.EventAgentStarted:
		if t.DependencyStart > 0 {
			m.dependencyStart.WithLabelValues(t.ProjectID).Observe(t.DependencyStart.Seconds())
		}
	}
}

// RunEnded counts a run that ended (store.Observer).
func (m *Metrics) RunEnded(r store.ObservedRun) {
	m.runs.WithLabelValues(r.ProjectID, r.AgentID, orUnknown(string(r.Outcome))).Inc()
}

// RoundDone observes the duration of a round (orchestrator.Observer).
func (m *Metrics) RoundDone(d time.Duration) { m.rounds.Observe(d.Seconds()) }

// GitHubResponse counts a request to GitHub and keeps the rate limit left
// (repo.GitHubObserver).
func (m *Metrics) GitHubResponse(status, remaining int) {
	label := "error"
	if status > 0 {
		label = strconv.Itoa(status)
	}
	m.githubRequests.WithLabelValues(label).Inc()
	if remaining >= 0 {
		m.githubRemaining.Set(float64(remaining))
	}
}

// HookRunEnded counts a hook run that ended or was skipped (for
// hooks.Config.OnRunEnd).
func (m *Metrics) HookRunEnded(r models.HookRun) {
	m.hookRuns.WithLabelValues(r.ProjectID, orUnknown(string(r.Status))).Inc()
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// ListenerHandler is the handler of a listener of the metrics' own
// (metrics.listen): GET /metrics and nothing else, without a token. When
// loopbackOnly, a request whose Host header does not name a loopback host
// is refused with a 403, so that a web page whose domain was rebound to
// 127.0.0.1 cannot read the metrics.
func (m *Metrics) ListenerHandler(loopbackOnly bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if loopbackOnly && !models.IsLoopbackHost(hostOnly(r.Host)) {
			http.Error(w, "host not served: the metrics listener answers loopback hosts only", http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// hostOnly is a Host header's host, without port or IPv6 brackets,
// lower-case.
func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	return strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
}
