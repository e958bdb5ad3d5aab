package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/clock"
	"github.com/agentqueued/agentqueued/internal/models"
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
	// environment's proxy settings.
	HTTPClient *http.Client
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
	hc := cfg.HTTPClient
	if hc == nil {
		// No client-wide timeout: each request has its own (a poll's is
		// the daemon's hold and a margin).
		hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	c, err := api.NewClient(cfg.Server.String(), cfg.Token, hc)
	if err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	r := &Runner{cfg: cfg, api: c, clock: clock.Or(cfg.Clock), log: cfg.Logger,
		rnd: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	return r, nil
}

// Fatal reports whether err means the runner cannot go on by waiting: its
// token is wrong or was removed (or its host is not served), or its hello
// is refused.
func Fatal(err error) bool {
	switch models.ErrorCodeOf(err) {
	case models.CodeUnauthorized, models.CodeInvalid, models.CodeConflict:
		return true
	}
	return false
}

// Run says hello and polls until ctx ends, or until the daemon refuses the
// runner for good (a wrong or removed token, a refused hello): that error
// is returned. A daemon that cannot be reached, or answers with a failure
// of its own, is tried again after a growing, jittered wait.
func (r *Runner) Run(ctx context.Context) error {
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
	}
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
