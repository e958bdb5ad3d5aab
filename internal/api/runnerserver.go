package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/fleet"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/throttle"
)

// Paths of the runner endpoints (docs/runners.md, "The connection").
const (
	// RunnerPrefix is where runners are served.
	RunnerPrefix = "/runner/v1"
)

// RunnerConnService is what the runner endpoints need of the daemon.
type RunnerConnService interface {
	// RunnerByToken returns the runner a token names; not_found when none.
	RunnerByToken(ctx context.Context, token string) (models.Runner, error)
	// TouchRunner records that a runner was seen now, with version from
	// address.
	TouchRunner(ctx context.Context, name, version, address string) error
	// GetRunner reads a runner as it is now.
	GetRunner(ctx context.Context, name string) (models.Runner, error)
	// RunnerHello records a runner's hello from address: its agents and
	// version. It returns the names of its agents as the daemon knows them.
	RunnerHello(ctx context.Context, runner string, hello models.RunnerHello, address string) ([]string, error)
}

// RunnerHub holds the runners' polls (internal/fleet's Hub).
type RunnerHub interface {
	Seen(name, version, address string)
	Wait(ctx context.Context, name string) fleet.WaitResult
	Record(name string, every time.Duration) (due bool, version, address string)
	PollHold() time.Duration
}

// RunnerConfig configures a RunnerServer.
type RunnerConfig struct {
	// Throttle counts wrong runner tokens by source (share the API's).
	Throttle *throttle.Limiter
	// Logger receives error logs; default discards.
	Logger *slog.Logger
	// MaxBodyBytes caps request bodies; default DefaultMaxBodyBytes.
	MaxBodyBytes int64
}

// RunnerServer serves runners under RunnerPrefix, each request
// authenticated by the runner's token.
type RunnerServer struct {
	cfg     RunnerConfig
	svc     RunnerConnService
	hub     RunnerHub
	resp    *Server // writes answers and reads bodies as the HTTP API does
	handler http.Handler
}

// NewRunnerServer returns the runner endpoints of svc and hub.
func NewRunnerServer(cfg RunnerConfig, svc RunnerConnService, hub RunnerHub) (*RunnerServer, error) {
	if svc == nil || hub == nil {
		return nil, errors.New("new runner server: service or hub is nil")
	}
	if cfg.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("new runner server: MaxBodyBytes %d is negative", cfg.MaxBodyBytes)
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Throttle == nil {
		cfg.Throttle = throttle.New(throttle.Config{Logger: cfg.Logger})
	}
	s := &RunnerServer{cfg: cfg, svc: svc, hub: hub,
		resp: &Server{cfg: Config{MaxBodyBytes: cfg.MaxBodyBytes}, log: cfg.Logger}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+RunnerPrefix+"/hello", s.authenticated(s.handleHello))
	mux.HandleFunc("GET "+RunnerPrefix+"/poll", s.authenticated(s.handlePoll))
	mux.HandleFunc(RunnerPrefix+"/", func(w http.ResponseWriter, r *http.Request) {
		s.resp.writeError(w, r, models.Errorf(models.CodeNotFound, "no such runner endpoint: %s %s", r.Method, r.URL.Path))
	})
	s.handler = mux
	return s, nil
}

// Handler serves RunnerPrefix.
func (s *RunnerServer) Handler() http.Handler { return s.handler }

// authenticated calls next with the runner the request's bearer token
// names; a missing, wrong or removed token is refused (401), and a source
// of many wrong ones is throttled (429).
func (s *RunnerServer) authenticated(next func(w http.ResponseWriter, r *http.Request, rn models.Runner)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		token = strings.TrimSpace(token)
		if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentqueued-runner"`)
			s.resp.writeError(w, r, models.Errorf(models.CodeUnauthorized, "missing runner token (Authorization: Bearer aqr_…)"))
			return
		}
		attempt, wait := s.cfg.Throttle.Begin(r.RemoteAddr)
		if attempt == nil {
			secs := int64(wait / time.Second)
			w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
			s.resp.writeError(w, r, &httpError{status: http.StatusTooManyRequests, err: models.Errorf(models.CodeUnavailable,
				"too many wrong runner tokens from this address: try again in %d s", secs)})
			return
		}
		rn, err := s.svc.RunnerByToken(r.Context(), token)
		if models.ErrorCodeOf(err) == models.CodeNotFound {
			attempt.Failed()
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentqueued-runner", error="invalid_token"`)
			s.resp.writeError(w, r, models.Errorf(models.CodeUnauthorized, "invalid runner token (wrong, or its runner was removed)"))
			return
		}
		if err != nil {
			attempt.Succeeded() // not the token's fault
			s.resp.writeError(w, r, err)
			return
		}
		attempt.Succeeded()
		next(w, r, rn)
	}
}

func (s *RunnerServer) handleHello(w http.ResponseWriter, r *http.Request, rn models.Runner) {
	var hello models.RunnerHello
	if err := s.resp.decodeBody(w, r, &hello); err != nil {
		s.resp.writeError(w, r, err)
		return
	}
	if err := hello.Validate(); err != nil {
		s.resp.writeError(w, r, err)
		return
	}
	if hello.Name != "" && hello.Name != rn.Name {
		s.resp.writeError(w, r, models.Errorf(models.CodeConflict,
			"this token is runner %q's, not %q's: give the runner its own token (ctl runner add)", rn.Name, hello.Name))
		return
	}
	agents, err := s.svc.RunnerHello(r.Context(), rn.Name, hello, r.RemoteAddr)
	if err != nil {
		s.resp.writeError(w, r, err)
		return
	}
	s.hub.Seen(rn.Name, hello.Version, r.RemoteAddr)
	s.hub.Record(rn.Name, 0) // written by the hello
	s.resp.writeJSON(w, r, http.StatusOK, models.RunnerWelcome{Runner: rn.Name, Agents: agents,
		PollHold: models.Duration(s.hub.PollHold())})
}

// recordEvery is how often a polling runner's presence is written to the
// database (its last_seen_at): a hello writes it at once.
const recordEvery = time.Minute

func (s *RunnerServer) handlePoll(w http.ResponseWriter, r *http.Request, rn models.Runner) {
	s.hub.Seen(rn.Name, "", r.RemoteAddr)
	if due, version, address := s.hub.Record(rn.Name, recordEvery); due {
		if err := s.svc.TouchRunner(r.Context(), rn.Name, version, address); err != nil {
			s.resp.writeError(w, r, err)
			return
		}
	}
	switch s.hub.Wait(r.Context(), rn.Name) {
	case fleet.Removed:
		s.resp.writeError(w, r, models.Errorf(models.CodeUnauthorized, "this runner was removed"))
		return
	case fleet.Ended:
		return // the runner went away, or the daemon stops
	}
	// Read again: the runner may have been drained or removed meanwhile.
	rn, err := s.svc.GetRunner(r.Context(), rn.Name)
	if models.ErrorCodeOf(err) == models.CodeNotFound {
		s.resp.writeError(w, r, models.Errorf(models.CodeUnauthorized, "this runner was removed"))
		return
	}
	if err != nil {
		s.resp.writeError(w, r, err)
		return
	}
	s.resp.writeJSON(w, r, http.StatusOK, models.RunnerPoll{Draining: rn.State == models.RunnerDraining})
}
