package runner

import (
	"context"
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/clock"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/repo"
)

// Defaults of a Runner.
const (
	// DefaultMinBackoff is the first wait after a failed request.
	DefaultMinBackoff = time.Second
	// DefaultMaxBackoff caps the wait between failed requests.
	DefaultMaxBackoff = time.Minute
	// answerMargin is how much longer than the daemon's hold the runner
	// waits for a poll's answer before it takes the connection for lost.
	answerMargin = 30 * time.Second
	// helloTimeout bounds a hello's answer.
	helloTimeout = time.Minute
	// DefaultHeartbeat is how often runs' leases are renewed when the
	// daemon did not say.
	DefaultHeartbeat = 10 * time.Second
)

// Config configures a Runner.
type Config struct {
	// Server is the daemon's base URL (https://host:port).
	Server *url.URL
	// Token is the runner's token (aqr_…).
	Token string
	// Name, when set, is checked against the runner the token names.
	Name string
	// Version is the runner's version, told to the daemon.
	Version string
	// Agents are the runner's agents as it announces them.
	Agents []models.RunnerAgent
	// HTTPClient makes the requests; nil is a client of its own with the
	// environment's proxy settings, trusting CABundle.
	HTTPClient *http.Client
	// CABundle, when set, holds PEM certificates of authorities trusted
	// for the daemon's certificate besides the system's (--ca-file): a
	// daemon with a certificate of its own authority, or self-signed. The
	// runner's requests trust them, and so does its git, through
	// DataDir/ca-bundle.pem (WriteCABundle).
	CABundle []byte
	// Clock times the backoff; nil is the real clock.
	Clock clock.Clock
	// Logger receives the runner's logs; nil discards them.
	Logger *slog.Logger
	// MinBackoff and MaxBackoff bound the wait after failed requests.
	MinBackoff, MaxBackoff time.Duration
	// OnWelcome, when set, is called with each welcome (tests).
	OnWelcome func(models.RunnerWelcome)
	// OnPoll, when set, is called with each poll's answer (tests).
	OnPoll func(models.RunnerPoll)

	// AgentConfigs are the runner's agents as its configuration has them
	// (command, arguments, environment): what runs them. Their ids are
	// the names of Agents.
	AgentConfigs []models.Agent
	// DataDir holds the runner's checkouts and runs (required to run).
	DataDir string
	// SocketPath is the runner's agent RPC socket (default
	// DataDir/rpc.sock), which relays its agents' calls to the daemon.
	SocketPath string
	// Adapters start the agents; nil is agent.DefaultRegistry().
	Adapters *agent.Registry
	// Executable is the runner's own binary, its agents' AQ_BIN and MCP
	// server; "" leaves both out.
	Executable string
	// Environ is the runner's environment, scrubbed for each run (default
	// os.Environ()).
	Environ []string
	// Git is the git binary (default "git").
	Git string
	// Shim is the command that runs an agent's shim (agent.RunShim) with
	// the arguments that follow it; default `Executable runner shim`.
	// Agents run detached under it, their output in files, so that the
	// runner's next life takes them up (docs/runners.md, "When a runner
	// restarts"); without it (no Executable) they run on pipes and a
	// restart ends them.
	Shim []string
	// OutputPoll is how often a detached agent's output files are read
	// (default agent.DefaultPoll), on Clock.
	OutputPoll time.Duration
}

// Runner is the runner's side of its connection to the daemon: it says
// hello, then keeps one poll outstanding, and says hello again after it
// lost the daemon.
type Runner struct {
	cfg   Config
	api   *api.Client
	clock clock.Clock
	log   *slog.Logger
	rnd   *rand.Rand
	ws    *repo.Workspaces

	agents map[string]models.Agent // by name

	mu   sync.Mutex
	jobs map[int64]*job // by run id
	// beat wakes the heartbeats when a run is taken.
	beat chan struct{}
	wg   sync.WaitGroup
}

// New returns a Runner, or an error naming what is wrong with cfg.
func New(cfg Config) (*Runner, error) {
	switch {
	case cfg.Server == nil || cfg.Server.Host == "" || (cfg.Server.Scheme != "http" && cfg.Server.Scheme != "https"):
		return nil, errors.New("runner: server: an http or https URL with a host is required")
	case cfg.Server.Scheme == "http" && !loopback(cfg.Server.Hostname()):
		return nil, fmt.Errorf("runner: server %s: plain http is allowed only to this machine (its token would cross the "+
			"network in the clear): use https", cfg.Server.Redacted())
	case !strings.HasPrefix(cfg.Token, models.RunnerTokenPrefix):
		return nil, fmt.Errorf("runner: token: not a runner token (they start with %s)", models.RunnerTokenPrefix)
	}
	if err := (models.RunnerHello{Name: cfg.Name, Version: cfg.Version, Agents: cfg.Agents}).Validate(); err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	var roots *x509.CertPool
	if len(cfg.CABundle) > 0 {
		var err error
		if roots, err = api.TrustedRoots(cfg.CABundle); err != nil {
			return nil, fmt.Errorf("runner: the certificate authorities: %w", err)
		}
	}
	hc := cfg.HTTPClient
	if hc == nil {
		// No client-wide timeout: each request has its own (a poll's is
		// the daemon's hold and a margin).
		hc = &http.Client{Transport: api.NewTransport(roots)}
	}
	c, err := api.NewClient(cfg.Server.String(), cfg.Token, hc)
	if err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	r := &Runner{cfg: cfg, api: c, clock: clock.Or(cfg.Clock), log: cfg.Logger,
		rnd: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())), agents: map[string]models.Agent{}, jobs: map[int64]*job{},
		beat: make(chan struct{}, 1)}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	for _, a := range cfg.AgentConfigs {
		r.agents[a.ID] = a
	}
	if r.cfg.Adapters == nil {
		r.cfg.Adapters = agent.DefaultRegistry()
	}
	if r.cfg.Shim == nil && r.cfg.Executable != "" {
		r.cfg.Shim = []string{r.cfg.Executable, "runner", "shim"}
	}
	if r.cfg.OutputPoll <= 0 {
		r.cfg.OutputPoll = agent.DefaultPoll
	}
	if r.cfg.Environ == nil {
		r.cfg.Environ = os.Environ()
	}
	if cfg.DataDir != "" {
		if !filepath.IsAbs(cfg.DataDir) {
			return nil, fmt.Errorf("runner: data dir %q is not an absolute path", cfg.DataDir)
		}
		if r.cfg.SocketPath == "" {
			r.cfg.SocketPath = filepath.Join(cfg.DataDir, "rpc.sock")
		}
		token := cfg.Token
		prefix := strings.TrimSuffix(cfg.Server.String(), "/") + api.RunnerPrefix + "/git/"
		caFile := ""
		if len(cfg.CABundle) > 0 {
			if caFile, err = WriteCABundle(cfg.DataDir, cfg.CABundle); err != nil {
				return nil, fmt.Errorf("runner: %w", err)
			}
		}
		ws, err := repo.New(repo.Config{BaseDir: filepath.Join(cfg.DataDir, "work"), Git: cfg.Git, Logger: r.log,
			Clock: cfg.Clock, AdoptRemote: true, CAFile: caFile,
			Credentials: func(u string) (string, string, bool) {
				if strings.HasPrefix(u, prefix) {
					return "runner", token, true
				}
				return "", "", false
			}})
		if err != nil {
			return nil, fmt.Errorf("runner: %w", err)
		}
		r.ws = ws
	}
	return r, nil
}

// Fatal reports whether err means the runner cannot go on by waiting: its
// token is wrong or was removed (or its host is not served), its hello
// is refused, or the daemon's certificate is not trusted.
func Fatal(err error) bool {
	if api.CertificateError(err) {
		return true
	}
	switch models.ErrorCodeOf(err) {
	case models.CodeUnauthorized, models.CodeInvalid, models.CodeConflict:
		return true
	}
	return false
}

// Run says hello and polls until ctx ends, or until the daemon refuses the
// runner for good (a wrong or removed token, a refused hello, a
// certificate the runner does not trust): that error is returned. A
// daemon that cannot be reached, or answers with a failure of its own, is
// tried again after a growing, jittered wait.
func (r *Runner) Run(ctx context.Context) error {
	if r.ws != nil {
		// The socket first: a second runner on this data directory stops
		// here, before it touches the first one's runs.
		main, err := r.listenRelay(r.cfg.SocketPath)
		if err != nil {
			return err
		}
		relays := []*relay{main}
		sockets, err := r.recoverJournal(ctx)
		if err != nil {
			main.ln.Close()
			return err
		}
		// Agents taken up call on the socket they were given.
		for _, path := range sockets {
			rl, err := r.listenRelay(path)
			if err != nil {
				r.log.Warn("an agent's socket cannot be listened on", "err", err)
				continue
			}
			relays = append(relays, rl)
		}
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		served := make(chan error, len(relays))
		for _, rl := range relays {
			go func() { served <- rl.serve(rctx) }()
		}
		// Heartbeats go on whatever the poll's fate: a daemon that comes
		// back finds the leases of the runs renewed at once.
		beats := make(chan struct{})
		hctx, stopBeats := context.WithCancel(ctx)
		go func() {
			defer close(beats)
			r.heartbeats(hctx)
		}()
		defer func() {
			r.wg.Wait() // the runs end first: their agents may still call
			stopBeats()
			cancel()
			for range relays {
				<-served
			}
			<-beats
		}()
	}
	failures := 0
	for ctx.Err() == nil {
		err := r.session(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case Fatal(err):
			return err
		default: // a session ends only by a failed request
			failures++
			wait := r.backoff(failures)
			r.log.Warn("lost the daemon; trying again", "err", err, "after", wait)
			select {
			case <-ctx.Done():
				return nil
			case <-r.clock.After(wait):
			}
		}
	}
	return nil
}

// backoff is the wait after the n-th failure in a row: doubling from
// MinBackoff up to MaxBackoff, then a random part of it, so that runners
// that lost the daemon together do not come back together.
func (r *Runner) backoff(n int) time.Duration {
	d := r.cfg.MinBackoff
	for i := 1; i < n && d < r.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, r.cfg.MaxBackoff)
	return d/2 + time.Duration(r.rnd.Int64N(int64(d/2)+1))
}

// session says hello and polls until a request fails; it returns that
// failure.
func (r *Runner) session(ctx context.Context) error {
	hctx, cancel := context.WithTimeout(ctx, helloTimeout)
	welcome, err := r.api.RunnerHello(hctx, models.RunnerHello{Name: r.cfg.Name, Version: r.cfg.Version, Agents: r.cfg.Agents})
	cancel()
	if err != nil {
		return err
	}
	r.log.Info("connected to the daemon", "runner", welcome.Runner, "agents", len(welcome.Agents))
	if r.cfg.OnWelcome != nil {
		r.cfg.OnWelcome(welcome)
	}
	hold := welcome.PollHold.Std()
	for {
		pctx, cancel := context.WithTimeout(ctx, hold+answerMargin)
		poll, err := r.api.RunnerPoll(pctx)
		cancel()
		if err != nil {
			return err
		}
		if r.cfg.OnPoll != nil {
			r.cfg.OnPoll(poll)
		}
		r.take(ctx, poll)
	}
}

// take starts the runs of a poll's answer the runner does not hold yet and
// ends those the daemon ends.
func (r *Runner) take(ctx context.Context, poll models.RunnerPoll) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range poll.End {
		if j := r.jobs[e.RunID]; j != nil {
			r.log.Info("the daemon ends a run", "run_id", e.RunID, "reason", e.Reason)
			j.end()
		}
	}
	for _, asg := range poll.Runs {
		if r.jobs[asg.RunID] != nil {
			continue // offered again: its answer was lost on the way
		}
		cfg, ok := r.agents[asg.Agent]
		if !ok || r.ws == nil {
			r.log.Warn("a run for an agent this runner does not have", "run_id", asg.RunID, "agent", asg.Agent)
			continue
		}
		j := &job{r: r, asg: asg, cfg: cfg, stop: make(chan struct{}), gone: make(chan struct{}),
			evWake: make(chan struct{}, 1), done: make(chan struct{})}
		r.jobs[asg.RunID] = j
		r.log.Info("run taken", "run_id", asg.RunID, "task_id", asg.Task.ID, "agent", asg.Agent)
		select {
		case r.beat <- struct{}{}: // its lease is renewed at once, and then at its interval
		default:
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			j.run(ctx)
			r.mu.Lock()
			delete(r.jobs, asg.RunID)
			r.mu.Unlock()
		}()
	}
}

// heartbeats renews the leases of the runs the runner holds, every
// heartbeat interval the daemon gave them, until ctx ends; runs the
// daemon answers are ended.
func (r *Runner) heartbeats(ctx context.Context) {
	for {
		r.mu.Lock()
		ids := make([]int64, 0, len(r.jobs))
		every := DefaultHeartbeat
		for id, j := range r.jobs {
			ids = append(ids, id)
			if h := j.asg.Heartbeat.Std(); h > 0 && h < every {
				every = h
			}
		}
		r.mu.Unlock()
		if len(ids) > 0 {
			hctx, cancel := context.WithTimeout(ctx, every)
			ans, err := r.api.RunnerHeartbeat(hctx, models.RunnerHeartbeat{Runs: ids})
			cancel()
			if err != nil && ctx.Err() == nil {
				r.log.Warn("heartbeat not delivered", "err", err)
			}
			r.mu.Lock()
			for _, e := range ans.End {
				if j := r.jobs[e.RunID]; j != nil {
					r.log.Info("the daemon ends a run", "run_id", e.RunID, "reason", e.Reason)
					j.lose()
				}
			}
			r.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-r.beat:
		case <-r.clock.After(every):
		}
	}
}

// repoURL is where the daemon serves repository id to this runner.
func (r *Runner) repoURL(id string) string {
	return strings.TrimSuffix(r.cfg.Server.String(), "/") + api.RunnerPrefix + "/git/" + id + ".git"
}

// jobByToken returns the run a token is for, or nil.
func (r *Runner) jobByToken(token string) *job {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, j := range r.jobs {
		if subtle.ConstantTimeCompare([]byte(j.asg.Token), []byte(token)) == 1 {
			return j
		}
	}
	return nil
}

// loopback reports whether host names this machine: localhost or a
// loopback address.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
