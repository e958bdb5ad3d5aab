package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/fleet"
	"github.com/agentqueued/agentqueued/internal/gitserve"
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
	// Hello starts a runner afresh: News gives it everything again.
	Hello(name string)
	// News returns, of the runs offered and the runs to end, those not
	// given to the runner since its hello, and counts them as given.
	News(name string, offers, ends []int64) (newOffers, newEnds []int64)
}

// RemoteRuns is what the runner endpoints need of the runs on runners
// (the orchestrator): the agent RPC's service, whose tools are relayed,
// and the runs' reports.
type RemoteRuns interface {
	RunService
	// RunnerRepo returns the served repository repoID of runner's live
	// runs and the branches they may push there; ok is false when runner
	// holds no live run of that repository.
	RunnerRepo(runner, repoID string) (dir string, push []string, ok bool)
	// RunnerWork returns the runs offered to runner and not taken up, and
	// the runs it must end.
	RunnerWork(runner string) ([]models.RunnerAssignment, []models.RunnerEnd)
	// RenewRuns renews the leases of runner's runs ids and returns those it
	// must end.
	RenewRuns(runner string, ids []int64) []models.RunnerEnd
	// RemoteReport applies a numbered report of run; call runs a relayed
	// RPC call.
	RemoteReport(ctx context.Context, runner string, run models.Run, rep models.RunnerReport,
		call func(ctx context.Context) (int, json.RawMessage)) (models.RunnerReportAnswer, error)
	// RemoteLog appends a chunk of run's output from offset and returns
	// how much of it the daemon has.
	RemoteLog(ctx context.Context, runner string, run models.Run, offset int64, data []byte) (int64, error)
}

// HeaderRunToken carries a run's token on a runner's reports about it.
const HeaderRunToken = "X-AQ-Run-Token"

// RunnerConfig configures a RunnerServer.
type RunnerConfig struct {
	// Runs, when set, gives runners work and takes their reports; nil
	// answers the run endpoints 404 and every poll empty.
	Runs RemoteRuns
	// Throttle counts wrong runner tokens by source (share the API's).
	Throttle *throttle.Limiter
	// Logger receives error logs; default discards.
	Logger *slog.Logger
	// MaxBodyBytes caps request bodies; default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Git is the git binary that serves repositories (default "git").
	Git string
	// MaxTokenChecks caps the runner tokens checked at once; default
	// DefaultMaxTokenChecks. The throttle counts a check as a failure
	// until it is known to be right, so that concurrent guesses cannot all
	// pass a nearly empty budget; without a cap, hundreds of runners
	// behind one address (a NAT, a proxy) connecting at once would spend
	// their address's budget with right tokens and be refused (429).
	MaxTokenChecks int
}

// DefaultMaxTokenChecks is RunnerConfig.MaxTokenChecks's default: well
// under the throttle's budget of one source (throttle.DefaultSourceBurst).
const DefaultMaxTokenChecks = 4

// RunnerServer serves runners under RunnerPrefix, each request
// authenticated by the runner's token.
type RunnerServer struct {
	cfg     RunnerConfig
	checks  chan struct{} // one value per token check under way
	svc     RunnerConnService
	hub     RunnerHub
	resp    *Server // writes answers and reads bodies as the HTTP API does
	tools   map[string]rpcTool
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
	if cfg.MaxTokenChecks < 0 {
		return nil, fmt.Errorf("new runner server: MaxTokenChecks %d is negative", cfg.MaxTokenChecks)
	}
	if cfg.MaxTokenChecks == 0 {
		cfg.MaxTokenChecks = DefaultMaxTokenChecks
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Throttle == nil {
		cfg.Throttle = throttle.New(throttle.Config{Logger: cfg.Logger})
	}
	s := &RunnerServer{cfg: cfg, svc: svc, hub: hub, checks: make(chan struct{}, cfg.MaxTokenChecks),
		resp: &Server{cfg: Config{MaxBodyBytes: cfg.MaxBodyBytes}, log: cfg.Logger}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+RunnerPrefix+"/hello", s.authenticated(s.handleHello))
	mux.HandleFunc("GET "+RunnerPrefix+"/poll", s.authenticated(s.handlePoll))
	if cfg.Runs != nil {
		s.tools = (&RPCServer{svc: cfg.Runs, log: cfg.Logger, resp: s.resp}).toolTable()
		mux.HandleFunc("POST "+RunnerPrefix+"/heartbeat", s.authenticated(s.handleHeartbeat))
		mux.HandleFunc("POST "+RunnerPrefix+"/runs/{id}/reports", s.authenticated(s.handleReport))
		mux.HandleFunc("POST "+RunnerPrefix+"/runs/{id}/log", s.authenticated(s.handleLog))
		gh, err := gitserve.New(gitserve.Config{Resolve: s.resolveGit, Git: cfg.Git, Logger: cfg.Logger})
		if err != nil {
			return nil, fmt.Errorf("new runner server: %w", err)
		}
		mux.Handle(RunnerPrefix+"/git/{repo}/", gh)
	}
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
		rn, err := s.checkToken(r, token)
		var tm *tooMany
		switch {
		case errors.As(err, &tm):
			secs := int64(tm.wait / time.Second)
			w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
			s.resp.writeError(w, r, &httpError{status: http.StatusTooManyRequests, err: models.Errorf(models.CodeUnavailable,
				"too many wrong runner tokens from this address: try again in %d s", secs)})
			return
		case models.ErrorCodeOf(err) == models.CodeNotFound:
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentqueued-runner", error="invalid_token"`)
			s.resp.writeError(w, r, models.Errorf(models.CodeUnauthorized, "invalid runner token (wrong, or its runner was removed)"))
			return
		case err != nil:
			s.resp.writeError(w, r, err)
			return
		}
		next(w, r, rn)
	}
}

// tooMany is checkToken's refusal of a source over the throttle's
// budget: try again after wait.
type tooMany struct{ wait time.Duration }

func (e *tooMany) Error() string { return "too many wrong runner tokens" }

// checkToken returns the runner token names, counting a wrong token
// against the request's source: not_found for a wrong token, *tooMany
// for a source over budget. At most MaxTokenChecks run at once (see
// RunnerConfig.MaxTokenChecks); the others wait their turn.
func (s *RunnerServer) checkToken(r *http.Request, token string) (models.Runner, error) {
	select {
	case s.checks <- struct{}{}:
	case <-r.Context().Done():
		return models.Runner{}, r.Context().Err()
	}
	defer func() { <-s.checks }()
	attempt, wait := s.cfg.Throttle.Begin(r.RemoteAddr)
	if attempt == nil {
		return models.Runner{}, &tooMany{wait: wait}
	}
	rn, err := s.svc.RunnerByToken(r.Context(), token)
	if models.ErrorCodeOf(err) == models.CodeNotFound {
		attempt.Failed()
		return models.Runner{}, err
	}
	attempt.Succeeded() // right, or not the token's fault
	return rn, err
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
	s.hub.Hello(rn.Name)
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
	if ans := s.work(rn); len(ans.Runs) > 0 || len(ans.End) > 0 {
		s.resp.writeJSON(w, r, http.StatusOK, ans) // offered before this poll (an answer lost on the way)
		return
	}
	ctx, cancel := untilStopping(r)
	defer cancel()
	switch s.hub.Wait(ctx, rn.Name) {
	case fleet.Removed:
		s.resp.writeError(w, r, models.Errorf(models.CodeUnauthorized, "this runner was removed"))
		return
	case fleet.Ended:
		if r.Context().Err() == nil { // the daemon stops
			s.resp.writeError(w, r, &httpError{status: http.StatusServiceUnavailable, err: models.Errorf(models.CodeUnavailable,
				"the daemon is shutting down: poll again once it is back")})
		}
		return // or the runner went away
	case fleet.Held:
		// Nothing happened: every offer, end, drain or resume of the
		// runner wakes it, so what was read before the hold still holds.
		s.resp.writeJSON(w, r, http.StatusOK, models.RunnerPoll{Draining: rn.State == models.RunnerDraining})
		return
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
	s.resp.writeJSON(w, r, http.StatusOK, s.work(rn))
}

// untilStopping is the request's context, also ended when the server that
// accepted it shuts down: a held poll or report must not hold up the
// daemon's shutdown.
func untilStopping(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	if st := stopping(r); st != nil {
		go func() {
			select {
			case <-st:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	return ctx, cancel
}

// work is a poll's answer for rn: its state and the runs to start and
// end it was not given since its hello.
func (s *RunnerServer) work(rn models.Runner) models.RunnerPoll {
	ans := models.RunnerPoll{Draining: rn.State == models.RunnerDraining}
	if s.cfg.Runs == nil {
		return ans
	}
	runs, end := s.cfg.Runs.RunnerWork(rn.Name)
	offers, ends := make([]int64, len(runs)), make([]int64, len(end))
	for i, a := range runs {
		offers[i] = a.RunID
	}
	for i, e := range end {
		ends[i] = e.RunID
	}
	offers, ends = s.hub.News(rn.Name, offers, ends)
	for _, a := range runs {
		if slices.Contains(offers, a.RunID) {
			ans.Runs = append(ans.Runs, a)
		}
	}
	for _, e := range end {
		if slices.Contains(ends, e.RunID) {
			ans.End = append(ans.End, e)
		}
	}
	return ans
}

// MaxHeartbeatRuns caps the runs one heartbeat renews.
const MaxHeartbeatRuns = 10000

func (s *RunnerServer) handleHeartbeat(w http.ResponseWriter, r *http.Request, rn models.Runner) {
	var hb models.RunnerHeartbeat
	if err := s.resp.decodeBody(w, r, &hb); err != nil {
		s.resp.writeError(w, r, err)
		return
	}
	if len(hb.Runs) > MaxHeartbeatRuns {
		s.resp.writeError(w, r, models.Errorf(models.CodeInvalid, "runs: at most %d (got %d)", MaxHeartbeatRuns, len(hb.Runs)))
		return
	}
	s.hub.Seen(rn.Name, "", r.RemoteAddr)
	s.resp.writeJSON(w, r, http.StatusOK, models.RunnerHeartbeatAnswer{End: s.cfg.Runs.RenewRuns(rn.Name, hb.Runs)})
}

// run returns the run a report is about: the run of its token, which
// must be the path's run and one of rn's agents'. A token of an ended run
// is refused as a conflict (the runner ends the run), not as a wrong
// runner token.
func (s *RunnerServer) run(r *http.Request, rn models.Runner) (models.Run, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return models.Run{}, models.Errorf(models.CodeInvalid, "%q is not a run id", r.PathValue("id"))
	}
	token := strings.TrimSpace(r.Header.Get(HeaderRunToken))
	if token == "" {
		return models.Run{}, models.Errorf(models.CodeInvalid, "missing %s header (the run's token)", HeaderRunToken)
	}
	run, err := s.cfg.Runs.Authenticate(r.Context(), token)
	if models.ErrorCodeOf(err) == models.CodeUnauthorized {
		return models.Run{}, models.Errorf(models.CodeConflict, "run %d is not this runner's: it ended or its token is wrong", id)
	}
	if err != nil {
		return models.Run{}, err
	}
	if run.ID != id || !strings.HasPrefix(run.AgentID, rn.Name+"/") {
		return models.Run{}, models.Errorf(models.CodeConflict, "run %d is not this runner's", id)
	}
	return run, nil
}

func (s *RunnerServer) handleReport(w http.ResponseWriter, r *http.Request, rn models.Runner) {
	run, err := s.run(r, rn)
	if err != nil {
		s.resp.writeError(w, r, err)
		return
	}
	var rep models.RunnerReport
	if err := s.resp.decodeBody(w, r, &rep); err != nil {
		s.resp.writeError(w, r, err)
		return
	}
	if err := rep.Validate(); err != nil {
		s.resp.writeError(w, r, err)
		return
	}
	var call func(ctx context.Context) (int, json.RawMessage)
	if rep.Kind == models.ReportRPC {
		tool, ok := s.tools[rep.Tool]
		if !ok {
			s.resp.writeError(w, r, models.Errorf(models.CodeInvalid, "tool: unknown tool %q (want one of %s)",
				rep.Tool, strings.Join(RPCTools, ", ")))
			return
		}
		body := []byte(rep.Body)
		if tool.emptyBody && len(bytes.TrimSpace(body)) == 0 {
			body = []byte("{}")
		}
		call = func(ctx context.Context) (int, json.RawMessage) {
			out, err := tool.call(ctx, run, body)
			if err != nil {
				st, b := s.resp.errorAnswer(r, err)
				return st, b
			}
			b, err := json.Marshal(out)
			if err != nil {
				st, b := s.resp.errorAnswer(r, err)
				return st, b
			}
			return http.StatusOK, b
		}
	}
	s.hub.Seen(rn.Name, "", r.RemoteAddr)
	ctx, cancel := untilStopping(r)
	defer cancel()
	ans, err := s.cfg.Runs.RemoteReport(ctx, rn.Name, run, rep, call)
	if err != nil {
		s.resp.writeError(w, r, err)
		return
	}
	s.resp.writeJSON(w, r, http.StatusOK, ans)
}

// resolveGit authorises a runner's git request for /git/{repo}.git/…: the
// runner's token (as a Basic password, or a Bearer token) and a live run
// of that repository on the runner; it may push the task branches of
// those runs only.
func (s *RunnerServer) resolveGit(r *http.Request) (gitserve.Target, error) {
	token := ""
	if _, pass, ok := r.BasicAuth(); ok {
		token = pass
	} else if scheme, t, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		token = strings.TrimSpace(t)
	}
	if token == "" {
		return gitserve.Target{}, gitserve.ErrUnauthorized
	}
	rn, err := s.checkToken(r, token)
	var tm *tooMany
	switch {
	case errors.As(err, &tm):
		return gitserve.Target{}, models.Errorf(models.CodeUnavailable,
			"too many wrong runner tokens from this address: try again in %d s", int64(tm.wait/time.Second))
	case models.ErrorCodeOf(err) == models.CodeNotFound:
		return gitserve.Target{}, gitserve.ErrUnauthorized
	case err != nil:
		return gitserve.Target{}, err
	}
	repo, ok := strings.CutSuffix(r.PathValue("repo"), ".git")
	if !ok || !models.ValidID(repo) {
		return gitserve.Target{}, gitserve.ErrNotFound
	}
	dir, push, ok := s.cfg.Runs.RunnerRepo(rn.Name, repo)
	if !ok {
		s.cfg.Logger.Info("git refused: the runner holds no run of the repository", "runner", rn.Name, "repo_id", repo)
		return gitserve.Target{}, gitserve.ErrForbidden
	}
	return gitserve.Target{Dir: dir, Read: true, Push: push}, nil
}

// RunnerLogAnswer answers a chunk of a run's log: how much of the
// runner's log the daemon has.
type RunnerLogAnswer struct {
	Have int64 `json:"have"`
}

func (s *RunnerServer) handleLog(w http.ResponseWriter, r *http.Request, rn models.Runner) {
	run, err := s.run(r, rn)
	if err != nil {
		s.resp.writeError(w, r, err)
		return
	}
	offset, err := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
	if err != nil || offset < 0 {
		s.resp.writeError(w, r, models.Errorf(models.CodeInvalid, "offset: %q is not a byte offset",
			r.URL.Query().Get("offset")))
		return
	}
	data, err := readAll(w, r, MaxRunnerLogChunk)
	if err != nil {
		s.resp.writeError(w, r, err)
		return
	}
	have, err := s.cfg.Runs.RemoteLog(r.Context(), rn.Name, run, offset, data)
	if err != nil {
		s.resp.writeError(w, r, err)
		return
	}
	s.resp.writeJSON(w, r, http.StatusOK, RunnerLogAnswer{Have: have})
}

// MaxRunnerLogChunk caps the body of one chunk of a run's log.
const MaxRunnerLogChunk = 1 << 20

// readAll reads a request body of at most limit bytes, refusing a longer
// one with 413.
func readAll(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, &httpError{status: http.StatusRequestEntityTooLarge, err: models.Errorf(models.CodeInvalid,
			"request body: larger than %d bytes", limit)}
	}
	if err != nil {
		return nil, models.Errorf(models.CodeInvalid, "request body: %v", err)
	}
	return data, nil
}
