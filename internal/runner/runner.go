package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock"
	"github.com/agentqueued/agentqueued/internal/models"
)

// Paths of the daemon's runner endpoints (docs/runners.md).
const (
	// Prefix is where the daemon serves runners.
	Prefix    = "/runner/v1"
	HelloPath = Prefix + "/hello"
	PollPath  = Prefix + "/poll"
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
	// maxAnswerBytes caps an answer of the daemon.
	maxAnswerBytes = 8 << 20
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
	http  *http.Client
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
	r := &Runner{cfg: cfg, http: cfg.HTTPClient, clock: clock.Or(cfg.Clock), log: cfg.Logger,
		rnd: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
	if r.http == nil {
		r.http = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	return r, nil
}

// Error is an answer of the daemon that refuses a request.
type Error struct {
	Status  int
	Code    models.ErrorCode
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("the daemon refused: %s (%d %s)", e.Message, e.Status, e.Code)
}

// Fatal reports whether err means the runner cannot go on by waiting: its
// token is wrong or was removed, or its configuration is refused.
func Fatal(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden ||
		e.Status == http.StatusBadRequest || e.Status == http.StatusConflict)
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
	var welcome models.RunnerWelcome
	if err := r.call(ctx, http.MethodPost, HelloPath, models.RunnerHello{Name: r.cfg.Name, Version: r.cfg.Version,
		Agents: r.cfg.Agents}, &welcome, 0); err != nil {
		return err
	}
	r.log.Info("connected to the daemon", "runner", welcome.Runner, "agents", len(welcome.Agents))
	if r.cfg.OnWelcome != nil {
		r.cfg.OnWelcome(welcome)
	}
	hold := welcome.PollHold.Std()
	for {
		var poll models.RunnerPoll
		if err := r.call(ctx, http.MethodGet, PollPath, nil, &poll, hold+answerMargin); err != nil {
			return err
		}
		if r.cfg.OnPoll != nil {
			r.cfg.OnPoll(poll)
		}
	}
}

// call makes one request with the runner's token and decodes its answer
// into out; timeout, when set, bounds it.
func (r *Runner) call(ctx context.Context, method, path string, in, out any, timeout time.Duration) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, method, r.cfg.Server.JoinPath(path).String(), body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+r.cfg.Token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return fmt.Errorf("read the daemon's answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct {
				Code    models.ErrorCode `json:"code"`
				Message string           `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal(data, &e)
		msg := e.Error.Message
		if msg == "" {
			msg = http.StatusText(resp.StatusCode)
		}
		return &Error{Status: resp.StatusCode, Code: e.Error.Code, Message: msg}
	}
	if out == nil || len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("the daemon's answer to %s %s: %w", method, path, err)
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
