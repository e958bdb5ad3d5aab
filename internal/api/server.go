package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/agentqueued/agentqueued/internal/service/areas"
	"github.com/agentqueued/agentqueued/internal/throttle"
)

// Defaults of the server's configuration.
const (
	// DefaultMaxBodyBytes caps request bodies.
	DefaultMaxBodyBytes = 32 << 20
	// DefaultReadHeaderTimeout bounds the time to read request headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds the time to read a whole request, body
	// included: a client trickling its body is cut off with a 408.
	DefaultReadTimeout = time.Minute
	// DefaultIdleTimeout closes idle keep-alive connections.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultShutdownTimeout bounds the wait for in-flight requests on shutdown.
	DefaultShutdownTimeout = 10 * time.Second
	// DefaultActor is recorded as the actor of events sent without one.
	DefaultActor = "api"
)

// Service is what the API needs from the daemon's service
// (*service.Service): its areas, each declared once in package areas.
type Service interface {
	areas.Status
	areas.Projects
	areas.Landing
	areas.Tasks
	areas.Agents
	areas.Questions
	areas.Approvals
	RuleService
	RunnerService
}

// Config configures a Server.
type Config struct {
	// Addr is the host:port Run listens on; port 0 picks a free port.
	Addr string
	// Token, when not empty, is the bearer token every /api/v1 request must carry.
	Token string
	// Throttle counts wrong bearer tokens by source and refuses, with 429
	// and Retry-After, to check more from a source over its budget (see
	// internal/throttle); nil makes one with the defaults. Share one with
	// the dashboard's login so that both draw on the same budgets.
	Throttle *throttle.Limiter
	// Logger receives request and error logs; default discards.
	Logger *slog.Logger
	// MaxBodyBytes caps request bodies; default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// ShutdownTimeout bounds the graceful shutdown; default DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// GitHubWebhook, when set, serves POST /webhooks/github (authenticated
	// by the delivery's signature, not by Token).
	GitHubWebhook http.Handler
	// Metrics, when set, serves GET /metrics (MetricsPath) behind the same
	// Host check and Token as /api/v1.
	Metrics http.Handler
	// Runners, when set, serves the runners under RunnerPrefix
	// (RunnerServer's Handler), each request authenticated by its
	// runner's token, not by Token.
	Runners http.Handler
	// UI, when set, serves the web dashboard under /ui/ (web.Server's
	// Handler), behind the same Host and cross-origin checks as the API;
	// the dashboard does its own login (a cookie, not the bearer token).
	UI http.Handler
	// Hooks, when set, serves the hook endpoints (/api/v1/hooks and
	// /api/v1/hook-runs); without it they are not found.
	Hooks HookService
	// Workflows, when set, serves the workflow endpoints (/api/v1/workflows
	// and /api/v1/runs); without it they are not found.
	Workflows WorkflowService
	// Logs, when set, serves GET /api/v1/tasks/{id}/logs (a task's run
	// log, followed live) and GET /api/v1/changes (a long poll for a
	// change); without it they are not found.
	Logs LogService
	// AllowedHosts are host names or IP addresses (no port: any port is
	// accepted) the Host header may name besides loopback hosts and the
	// host of Addr; any other Host is refused with a 403, except on
	// WebhookPath.
	AllowedHosts []string
	// ReadTimeout bounds the time to read a request, body included;
	// default DefaultReadTimeout.
	ReadTimeout time.Duration
	// Health, when set, is asked by GET /healthz after the store's Ping:
	// an error makes the answer 503 {"status": "unhealthy", "reason":
	// err's text}. The text is shown to whoever asks: it must hold no secret.
	Health func(ctx context.Context) error
	// DatabaseID, when set, is sent in every /healthz answer as
	// "database": it names the database the daemon serves without saying
	// where it is (the answer needs no token), such as a hash of the
	// database file's path.
	DatabaseID string
	// TLS, when set, makes Serve serve HTTPS with it (its Certificates or
	// GetCertificate): TLS 1.2 at least (a lower MinVersion is raised) and
	// HTTP/1.1 only, the protocol of the plain listener, so that long
	// polls, followed logs and git's pushes behave alike behind either
	// (ServerTLS). A plain HTTP request on the port is answered 400.
	TLS *tls.Config
	// MaxListBytes bounds the encoded size of a page of GET /api/v1/tasks:
	// a page ends early, with "next", before it would pass it; default
	// DefaultMaxListBytes.
	MaxListBytes int
}

// DefaultMaxListBytes is the default Config.MaxListBytes: a page of tasks
// with long descriptions stays a few megabytes instead of hundreds.
const DefaultMaxListBytes = 4 << 20

// listBytes is the byte budget of a page of tasks.
func (s *Server) listBytes() int {
	if s.cfg.MaxListBytes > 0 {
		return s.cfg.MaxListBytes
	}
	return DefaultMaxListBytes
}

// Server serves the HTTP API over a Service.
type Server struct {
	cfg     Config
	svc     Service
	log     *slog.Logger
	hosts   hostSet
	handler http.Handler
	// patterns are the routes the handler serves, as registered.
	patterns []string

	mu    sync.Mutex
	addr  net.Addr
	ready chan struct{}
}

// New returns a server for svc. It starts nothing: call Run, or Listen and
// Serve, or mount Handler yourself.
func New(cfg Config, svc Service) (*Server, error) {
	if svc == nil {
		return nil, errors.New("new api server: service is nil")
	}
	if cfg.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("new api server: MaxBodyBytes %d is negative", cfg.MaxBodyBytes)
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	if cfg.ReadTimeout < 0 {
		return nil, fmt.Errorf("new api server: ReadTimeout %s is negative", cfg.ReadTimeout)
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.TLS != nil && len(cfg.TLS.Certificates) == 0 && cfg.TLS.GetCertificate == nil {
		return nil, errors.New("new api server: TLS has no certificate")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Throttle == nil {
		cfg.Throttle = throttle.New(throttle.Config{Logger: cfg.Logger})
	}
	hosts, err := newHostSet(cfg.Addr, cfg.AllowedHosts)
	if err != nil {
		return nil, fmt.Errorf("new api server: %w", err)
	}
	s := &Server{cfg: cfg, svc: svc, log: cfg.Logger, hosts: hosts, ready: make(chan struct{})}
	s.handler = s.routes()
	return s, nil
}

// Handler returns the API's handler, its Host, cross-origin, Content-Type
// and token checks included.
func (s *Server) Handler() http.Handler { return s.handler }

// Listen binds Config.Addr. Addr reports the bound address afterwards and
// Ready is closed.
func (s *Server) Listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", s.cfg.Addr, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.addr == nil {
		s.addr = ln.Addr()
		close(s.ready)
	}
	return ln, nil
}

// Addr returns the address of the listener bound by Listen, or nil before.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Ready is closed once Listen has bound its listener.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Run listens on Config.Addr and serves until ctx is cancelled, then shuts
// down gracefully.
func (s *Server) Run(ctx context.Context) error {
	ln, err := s.Listen()
	if err != nil {
		return err
	}
	return s.Serve(ctx, ln)
}

// Serve serves requests on ln until ctx is cancelled, then stops accepting
// connections and waits up to Config.ShutdownTimeout for in-flight requests.
// With Config.TLS the connections are TLS (ServerTLS).
// Requests that wait on the daemon rather than work for it end at once: a
// log follow ends as when its run ends, a change wait answers as when its
// wait runs out. It closes ln and returns nil after a graceful shutdown.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: min(DefaultReadHeaderTimeout, s.cfg.ReadTimeout),
		ReadTimeout:       s.cfg.ReadTimeout,
		IdleTimeout:       DefaultIdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		// Requests are not cancelled by ctx itself: shutdown lets them
		// finish. Waits read ctx through stopping.
		BaseContext: func(net.Listener) context.Context {
			return context.WithValue(context.WithoutCancel(ctx), serveCtxKey{}, ctx)
		},
	}
	what := "http"
	if s.cfg.TLS != nil {
		ln, what = tls.NewListener(ln, ServerTLS(s.cfg.TLS)), "https"
	}
	return serveUntilDone(ctx, srv, ln, what, s.cfg.ShutdownTimeout)
}

// serveUntilDone serves srv on ln until ctx is cancelled, then shuts it
// down gracefully within timeout (closing it when that runs out); what
// names the server in errors ("http", "rpc").
func serveUntilDone(ctx context.Context, srv *http.Server, ln net.Listener, what string, timeout time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	select {
	case err := <-errc:
		return fmt.Errorf("serve %s on %s: %w", what, ln.Addr(), err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if serveErr := <-errc; !errors.Is(serveErr, http.ErrServerClosed) && serveErr != nil {
		err = errors.Join(err, serveErr)
	}
	if err != nil {
		srv.Close()
		return fmt.Errorf("shut down %s server: %w", what, err)
	}
	return nil
}
