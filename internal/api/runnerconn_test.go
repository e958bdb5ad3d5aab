package api_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/fleet"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/runner"
	"github.com/agentqueued/agentqueued/internal/service"
	"github.com/agentqueued/agentqueued/internal/service/servicetest"
)

// runnerEnv is a daemon's API with its runner endpoints, over a fleet hub
// on a fake clock.
type runnerEnv struct {
	*testEnv
	hub *fleet.Hub
	clk *clocktest.Fake
	// holds receives a runner's name each time a poll of it is held.
	holds chan string
	// down makes the runner endpoints answer 503, as a daemon that is
	// away would (behind a proxy) or could not serve.
	down *atomic.Bool
}

func newRunnerEnv(t *testing.T) *runnerEnv {
	t.Helper()
	clk := clocktest.New(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	holds := make(chan string, 100)
	hub := fleet.New(fleet.Config{Clock: clk, OnHold: func(name string) { holds <- name }})
	logger, logs := newLogger()
	k := newKit(t, logger, servicetest.WithService(func(c *service.Config) { c.Runners, c.Clock = hub, clk }))
	rs, err := api.NewRunnerServer(api.RunnerConfig{Logger: logger}, k.Service, hub)
	if err != nil {
		t.Fatal(err)
	}
	down := new(atomic.Bool)
	runners := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "away", http.StatusServiceUnavailable)
			return
		}
		rs.Handler().ServeHTTP(w, r)
	})
	return &runnerEnv{testEnv: serveKit(t, api.Config{Token: "admin", Logger: logger, Runners: runners}, k, logs),
		hub: hub, clk: clk, holds: holds, down: down}
}

// startRunner runs a runner client with token until the test ends; its
// welcomes and poll answers arrive on the channels returned.
func (e *runnerEnv) startRunner(t *testing.T, token string, agents []models.RunnerAgent) (<-chan models.RunnerWelcome,
	<-chan models.RunnerPoll, <-chan error) {
	t.Helper()
	u, _ := url.Parse(e.srv.URL)
	welcomes, polls, done := make(chan models.RunnerWelcome, 10), make(chan models.RunnerPoll, 10), make(chan error, 1)
	r, err := runner.New(runner.Config{Server: u, Token: token, Version: "test", Agents: agents, HTTPClient: e.srv.Client(),
		Clock: e.clk, OnWelcome: func(w models.RunnerWelcome) { welcomes <- w }, OnPoll: func(p models.RunnerPoll) { polls <- p }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		done <- r.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-finished
	})
	return welcomes, polls, done
}

// waitPolling waits until a poll of runner name is held, its timer armed.
func (e *runnerEnv) waitPolling(t *testing.T, name string) {
	t.Helper()
	if got := <-e.holds; got != name {
		t.Fatalf("a poll of %s is held, want %s", got, name)
	}
}

// A runner says hello with its agents, which the daemon registers as
// RUNNER/NAME; its poll is held until the hold ends or it is woken; once
// removed, its held poll is refused and the runner stops.
func TestRunnerConnects(t *testing.T) {
	t.Parallel()
	e := newRunnerEnv(t)
	var added api.RunnerAdded
	e.do("POST", "/api/v1/runners", `{"name":"build-1"}`).decode(t, http.StatusCreated, &added)

	welcomes, polls, done := e.startRunner(t, added.Token, []models.RunnerAgent{
		{Name: "claude-1", AgentType: "claude"}, {Name: "sh", AgentType: "command"}})
	w := <-welcomes
	if w.Runner != "build-1" || !slices.Equal(w.Agents, []string{"build-1/claude-1", "build-1/sh"}) ||
		w.PollHold != models.Duration(fleet.DefaultPollHold) {
		t.Fatalf("welcome %+v", w)
	}
	var shown models.Runner
	e.do("GET", "/api/v1/runners/build-1", "").decode(t, http.StatusOK, &shown)
	if shown.Version != "test" || shown.LastSeenAt == nil || !slices.Equal(shown.Agents, w.Agents) || !shown.Connected ||
		!strings.HasPrefix(shown.Address, "127.0.0.1:") {
		t.Fatalf("the runner as the API shows it: %+v", shown)
	}

	// Held until the hold ends: answered empty, and polled again.
	e.waitPolling(t, "build-1")
	e.clk.Advance(fleet.DefaultPollHold)
	if p := <-polls; p.Draining {
		t.Fatalf("poll %+v", p)
	}
	// A runner that polls on is written down as seen once a minute: not
	// at its polls of 25 and 50 s, at its poll of 75 s.
	hello := e.clk.Now().Add(-fleet.DefaultPollHold)
	e.waitPolling(t, "build-1")
	e.clk.Advance(fleet.DefaultPollHold)
	<-polls
	e.waitPolling(t, "build-1")
	written, err := e.store.GetRunner(context.Background(), "build-1")
	if err != nil || written.LastSeenAt == nil || !written.LastSeenAt.Equal(hello) {
		t.Fatalf("written as seen at %v (%v) after 50 s of polls, want %v (the hello's)", written.LastSeenAt, err, hello)
	}
	// The API answers the last request the daemon's connections saw.
	e.do("GET", "/api/v1/runners/build-1", "").decode(t, http.StatusOK, &shown)
	if shown.LastSeenAt == nil || !shown.LastSeenAt.Equal(e.clk.Now()) {
		t.Fatalf("shown as seen at %v after 50 s of polls, want %v", shown.LastSeenAt, e.clk.Now())
	}
	e.clk.Advance(fleet.DefaultPollHold)
	<-polls
	e.waitPolling(t, "build-1")
	written, err = e.store.GetRunner(context.Background(), "build-1")
	if err != nil || written.LastSeenAt == nil || !written.LastSeenAt.Equal(e.clk.Now()) {
		t.Fatalf("written as seen at %v (%v) after 75 s of polls, want %v", written.LastSeenAt, err, e.clk.Now())
	}
	// Drained: the held poll is answered at once, saying so (a poll that
	// ends its hold answers what was read before it, so a drain must wake
	// the runner).
	e.do("POST", "/api/v1/runners/build-1/drain", "").decode(t, http.StatusOK, &shown)
	if p := <-polls; !p.Draining {
		t.Fatalf("poll after the drain: %+v", p)
	}
	// Resumed, likewise.
	e.waitPolling(t, "build-1")
	e.do("POST", "/api/v1/runners/build-1/resume", "").decode(t, http.StatusOK, &shown)
	if p := <-polls; p.Draining {
		t.Fatalf("poll after the resume: %+v", p)
	}

	// Removed while its poll is held: the poll is refused at once and the
	// runner stops with the daemon's reason.
	e.waitPolling(t, "build-1")
	e.do("DELETE", "/api/v1/runners/build-1", "")
	err = <-done
	if models.ErrorCodeOf(err) != models.CodeUnauthorized || !strings.Contains(err.Error(), "this runner was removed") {
		t.Fatalf("the removed runner ended with %v", err)
	}
}

// Requests a runner endpoint refuses: no token, a wrong one, the API's
// admin token, a hello naming another runner, a malformed hello.
func TestRunnerEndpointsRefuse(t *testing.T) {
	t.Parallel()
	e := newRunnerEnv(t)
	var added api.RunnerAdded
	e.do("POST", "/api/v1/runners", `{"name":"build-1"}`).decode(t, http.StatusCreated, &added)
	call := func(method, path, token, body string) response {
		return e.do(method, path, body, "Authorization", "Bearer "+token)
	}
	for _, tc := range []struct {
		name, method, path, token, body string
		status                          int
		code                            models.ErrorCode
		msg                             string
	}{
		{"no token", "GET", "/runner/v1/poll", "", "", 401, models.CodeUnauthorized, "missing runner token"},
		{"wrong token", "GET", "/runner/v1/poll", "aqr_wrong", "", 401, models.CodeUnauthorized, "invalid runner token"},
		{"admin token", "GET", "/runner/v1/poll", "admin", "", 401, models.CodeUnauthorized, "invalid runner token"},
		{"another name", "POST", "/runner/v1/hello", added.Token, `{"name":"build-2","version":"v","agents":[]}`,
			409, models.CodeConflict, `this token is runner "build-1"'s`},
		{"bad agent", "POST", "/runner/v1/hello", added.Token, `{"version":"v","agents":[{"name":"x","agent_type":"vim"}]}`,
			400, models.CodeInvalid, "agents[0].agent_type"},
		{"unknown field", "POST", "/runner/v1/hello", added.Token, `{"version":"v","agents":[],"token":"x"}`,
			400, models.CodeInvalid, `unknown field "token"`},
		{"unknown endpoint", "POST", "/runner/v1/nothing", added.Token, `{}`, 404, models.CodeNotFound, "no such runner endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call(tc.method, tc.path, tc.token, tc.body).wantError(t, tc.status, tc.code, tc.msg)
		})
	}
	// A refused hello registered nothing.
	var shown models.Runner
	e.do("GET", "/api/v1/runners/build-1", "").decode(t, http.StatusOK, &shown)
	if len(shown.Agents) != 0 || shown.LastSeenAt != nil {
		t.Fatalf("after refused hellos: %+v", shown)
	}
}

// A runner that loses the daemon tries again after a growing, jittered
// wait, and says hello again once the daemon answers.
func TestRunnerComesBackAfterTheDaemon(t *testing.T) {
	t.Parallel()
	e := newRunnerEnv(t)
	var added api.RunnerAdded
	e.do("POST", "/api/v1/runners", `{"name":"build-1"}`).decode(t, http.StatusCreated, &added)
	welcomes, polls, _ := e.startRunner(t, added.Token, []models.RunnerAgent{{Name: "sh", AgentType: "command"}})
	<-welcomes
	e.waitPolling(t, "build-1")

	// Away: the held poll ends, the next one is refused with 503, and
	// the runner waits between 0.5 and 1 s (its first backoff) ...
	e.down.Store(true)
	e.clk.Advance(fleet.DefaultPollHold)
	<-polls
	wait := <-e.clk.Armed() // the hold's timer of the answered poll was the last before
	for wait == fleet.DefaultPollHold {
		wait = <-e.clk.Armed()
	}
	if wait < runner.DefaultMinBackoff/2 || wait > runner.DefaultMinBackoff {
		t.Fatalf("first wait %s, want between %s and %s", wait, runner.DefaultMinBackoff/2, runner.DefaultMinBackoff)
	}
	// ... then, still away, about twice as long.
	e.clk.Advance(wait)
	second := <-e.clk.Armed()
	if second < runner.DefaultMinBackoff || second > 2*runner.DefaultMinBackoff {
		t.Fatalf("second wait %s, want between %s and %s", second, runner.DefaultMinBackoff, 2*runner.DefaultMinBackoff)
	}
	// Back: the runner says hello again and polls.
	e.down.Store(false)
	e.clk.Advance(second)
	if w := <-welcomes; w.Runner != "build-1" {
		t.Fatalf("welcome after the outage: %+v", w)
	}
	e.waitPolling(t, "build-1")
}
