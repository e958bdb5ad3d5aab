package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// waitLimit guards channel waits so that a broken test fails instead of
// hanging; it never orders events. It is the generous stall limit of
// progresstest: a loaded machine must never reach it.
var waitLimit = progresstest.Stall()

// askCall is one ask the service is waiting on; the test answers it.
type askCall struct {
	run      models.Run
	question string
	answer   chan string
	// gone is closed when the call's context ends unanswered.
	gone chan struct{}
}

// storeRunService is a RunService over the real store, recording what it
// was told.
type storeRunService struct {
	st   *store.Store
	asks chan *askCall

	mu         sync.Mutex
	heartbeats int
	progress   []string
	rateLimits []models.RateLimit
	verdicts   []string
	// heartbeatErr, when set, is returned by Heartbeat.
	heartbeatErr error
}

func (s *storeRunService) Authenticate(ctx context.Context, token string) (models.Run, error) {
	return s.st.RunByToken(ctx, token)
}

func (s *storeRunService) Heartbeat(ctx context.Context, run models.Run) error {
	s.mu.Lock()
	s.heartbeats++
	err := s.heartbeatErr
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.st.TouchRun(ctx, run.ID)
}

func (s *storeRunService) Progress(ctx context.Context, run models.Run, p models.TaskProgress) error {
	s.mu.Lock()
	s.progress = append(s.progress, p.Message)
	s.mu.Unlock()
	if p.HasCounts() {
		if _, err := s.st.SetTaskProgress(ctx, run.ID, p.Succeeded, p.Failed); err != nil {
			return err
		}
	}
	return s.st.TouchRun(ctx, run.ID)
}

func (s *storeRunService) Ask(ctx context.Context, run models.Run, ask models.Ask) (string, error) {
	call := &askCall{run: run, question: ask.Question, answer: make(chan string, 1), gone: make(chan struct{})}
	select {
	case s.asks <- call:
	case <-ctx.Done():
		close(call.gone)
		return "", ctx.Err()
	}
	select {
	case a := <-call.answer:
		return a, nil
	case <-ctx.Done():
		close(call.gone)
		return "", fmt.Errorf("ask for task %s: %w", run.TaskID, ctx.Err())
	}
}

func (s *storeRunService) Complete(ctx context.Context, run models.Run, c models.Completion) error {
	_, err := s.st.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentCompleted,
		ExpectFrom: models.StatusInProgress, Reason: c.Summary, Outcome: "completed"})
	return err
}

func (s *storeRunService) Fail(ctx context.Context, run models.Run, message string) error {
	_, err := s.st.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentFailed,
		ExpectFrom: models.StatusInProgress, Reason: message, Outcome: "failed", Error: message})
	return err
}

func (s *storeRunService) Usage(ctx context.Context, _ models.Run, u models.TokenUsage) error {
	return s.st.RecordTokenUsage(ctx, u)
}

func (s *storeRunService) RateLimited(ctx context.Context, run models.Run, r models.RateLimit) error {
	s.mu.Lock()
	s.rateLimits = append(s.rateLimits, r)
	s.mu.Unlock()
	resume := time.Now().Add(time.Minute)
	if r.ResetAt != nil {
		resume = *r.ResetAt
	}
	_, err := s.st.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventTokensExhausted,
		ExpectFrom: models.StatusInProgress, Reason: r.Message, ResumeAfter: &resume, Outcome: "rate_limited"})
	return err
}

func (s *storeRunService) Verdict(ctx context.Context, run models.Run, approve bool, reasons string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.verdicts = append(s.verdicts, fmt.Sprintf("%v:%s", approve, reasons))
	return nil
}

func (s *storeRunService) ProposePlan(ctx context.Context, run models.Run, plan models.TaskBatch) ([]models.BatchResult, error) {
	for i := range plan.Tasks {
		plan.Tasks[i].ParentTaskID = run.TaskID
		plan.Tasks[i].IsPlanSubtask = true
		plan.Tasks[i].PlanSource = "agent:" + run.AgentID
	}
	return s.st.CreateTasks(ctx, plan)
}

// rpcEnv is an RPC server over a store-backed service on a short socket path.
type rpcEnv struct {
	t      *testing.T
	st     *store.Store
	svc    *storeRunService
	srv    *api.RPCServer
	socket string
	logs   *syncBuffer
	cancel context.CancelFunc
	done   chan error
}

// shortTempDir returns a temporary directory with a path short enough for
// a Unix socket.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "aq")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// newRPCEnv starts an RPC server with a socket in a directory it creates,
// over a fresh store with project "web". cfg's SocketPath and Logger are set here.
func newRPCEnv(t *testing.T, cfg api.RPCConfig) *rpcEnv {
	t.Helper()
	st := storetest.Open(t)
	if _, err := st.CreateProject(context.Background(), models.Project{ID: "web"}); err != nil {
		t.Fatal(err)
	}
	e := &rpcEnv{t: t, st: st, svc: &storeRunService{st: st, asks: make(chan *askCall)}, logs: &syncBuffer{}}
	cfg.SocketPath = filepath.Join(shortTempDir(t), "run", "rpc.sock")
	cfg.Logger = slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.socket = cfg.SocketPath
	var err error
	e.srv, err = api.NewRPCServer(cfg, e.svc)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := e.srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel, e.done = cancel, make(chan error, 1)
	go func() { e.done <- e.srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		if err := e.stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return e
}

// stop shuts the server down and returns Serve's error; later calls return nil.
func (e *rpcEnv) stop() error {
	if e.cancel == nil {
		return nil
	}
	e.cancel()
	e.cancel = nil
	select {
	case err := <-e.done:
		return err
	case <-time.After(waitLimit):
		return errors.New("Serve did not return after cancel")
	}
}

// startRun creates a READY task, claims it for a new agent and starts the
// run: the task is IN_PROGRESS. It returns the run and its token.
func (e *rpcEnv) startRun(title string) (models.Run, string) {
	e.t.Helper()
	ctx := context.Background()
	res, err := e.st.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{{Title: title}}})
	if err != nil {
		e.t.Fatal(err)
	}
	agentID := "agent-" + res[0].TaskID
	if _, err := e.st.RegisterAgent(ctx, models.Agent{ID: agentID, AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "/bin/true"}}); err != nil {
		e.t.Fatal(err)
	}
	run, token, err := e.st.ClaimTask(ctx, res[0].TaskID, agentID)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.st.StartRun(ctx, run.ID, 4242, "/work/"+agentID); err != nil {
		e.t.Fatal(err)
	}
	return run, token
}

// client returns an RPC client for taskID with token.
func (e *rpcEnv) client(taskID, token string) *api.RPCClient {
	e.t.Helper()
	c, err := api.NewRPCClient(e.socket, taskID, token)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(c.CloseIdleConnections)
	return c
}

// task returns a task's detail from the store.
func (e *rpcEnv) task(id string) models.TaskDetail {
	e.t.Helper()
	d, err := e.st.GetTaskDetail(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

// raw sends a raw call with the given body and headers (name, value pairs;
// an empty value leaves the header out) and returns the status and body.
func (e *rpcEnv) raw(method, path, body string, headers ...string) (int, []byte) {
	e.t.Helper()
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", e.socket)
		},
		DisableKeepAlives: true,
	}}
	defer hc.CloseIdleConnections()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://agentqueued"+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] != "" {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := hc.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, data
}

// wantErr checks that err is a *models.Error with code whose message contains msg.
func wantErr(t *testing.T, err error, code models.ErrorCode, msg string) {
	t.Helper()
	var me *models.Error
	if !errors.As(err, &me) {
		t.Fatalf("error = %v (%T), want a *models.Error with code %s", err, err, code)
	}
	if me.Code != code || !strings.Contains(me.Message, msg) {
		t.Errorf("error = %s %q, want %s containing %q", me.Code, me.Message, code, msg)
	}
}

func TestRPCToolsThroughClient(t *testing.T) {
	t.Parallel()
	e := newRPCEnv(t, api.RPCConfig{})
	ctx := context.Background()
	run, token := e.startRun("Build the thing")
	c := e.client(run.TaskID, token)

	if err := c.Heartbeat(ctx); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	if err := c.Progress(ctx, "schema drafted"); err != nil {
		t.Fatalf("Progress: %v", err)
	}
	if err := c.Usage(ctx, api.UsageReport{Input: 100, Output: 20, CacheRead: 5, CacheWrite: 1}); err != nil {
		t.Fatalf("Usage: %v", err)
	}
	e.svc.mu.Lock()
	if e.svc.heartbeats != 1 || len(e.svc.progress) != 1 || e.svc.progress[0] != "schema drafted" {
		t.Errorf("service saw heartbeats=%d progress=%q", e.svc.heartbeats, e.svc.progress)
	}
	e.svc.mu.Unlock()
	if n, err := e.st.TokensUsedSince(ctx, "web", time.Time{}); err != nil || n != 126 {
		t.Errorf("tokens booked to the run's project = %d, %v; want 126", n, err)
	}

	results, err := c.ProposePlan(ctx, []models.BatchTask{
		{LocalID: "a", Title: "First part"},
		{LocalID: "b", Title: "Second part", Dependencies: []models.BatchDependency{{ID: "a"}}},
	})
	if err != nil {
		t.Fatalf("ProposePlan: %v", err)
	}
	if len(results) != 2 || results[0].LocalID != "a" || results[0].Status != models.StatusReady ||
		results[1].Status != models.StatusDefined {
		t.Fatalf("ProposePlan results = %+v", results)
	}
	sub := e.task(results[1].TaskID)
	if sub.Task.ParentTaskID == nil || *sub.Task.ParentTaskID != run.TaskID || !sub.Task.IsPlanSubtask || sub.Task.ProjectID != "web" {
		t.Errorf("subtask = %+v, want a plan subtask of %s in web", sub.Task, run.TaskID)
	}

	answered := make(chan error, 1)
	var answer string
	go func() {
		var err error
		answer, err = c.Ask(ctx, models.Ask{Question: "Postgres or SQLite?"})
		answered <- err
	}()
	var call *askCall
	select {
	case call = <-e.svc.asks:
	case err := <-answered:
		t.Fatalf("Ask returned before the service was asked: %v", err)
	case <-time.After(waitLimit):
		t.Fatal("the service was never asked")
	}
	if call.question != "Postgres or SQLite?" || call.run.ID != run.ID {
		t.Errorf("service asked %q for run %d", call.question, call.run.ID)
	}
	select {
	case err := <-answered:
		t.Fatalf("Ask returned before the answer: %v", err)
	default:
	}
	call.answer <- "SQLite"
	select {
	case err := <-answered:
		if err != nil || answer != "SQLite" {
			t.Fatalf("Ask = %q, %v; want SQLite", answer, err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Ask did not return after the answer")
	}

	if err := c.Complete(ctx, models.Completion{Summary: "built it", FilesChanged: []string{"main.go"},
		Outputs: json.RawMessage(`{"port":8080}`)}); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	before := e.task(run.TaskID)
	if before.Task.Status != models.StatusVerifying {
		t.Fatalf("task after complete = %s, want VERIFYING", before.Task.Status)
	}
	// A second complete changes nothing: the run has ended, so its token is refused.
	err = c.Complete(ctx, models.Completion{Summary: "built it again"})
	if err != nil {
		code := models.ErrorCodeOf(err)
		if code != models.CodeUnauthorized && code != models.CodeConflict {
			t.Errorf("second complete = %v, want no error, unauthorized or conflict", err)
		}
		if !strings.Contains(err.Error(), "ended") {
			t.Errorf("second complete error %q does not say the run ended", err)
		}
	}
	after := e.task(run.TaskID)
	if after.Task.Status != before.Task.Status || len(after.Events) != len(before.Events) {
		t.Errorf("second complete changed the task: %s with %d events, was %s with %d",
			after.Task.Status, len(after.Events), before.Task.Status, len(before.Events))
	}
	if strings.Contains(e.logs.String(), token) {
		t.Error("the run token appears in the logs")
	}
}

func TestRPCFailAndRateLimited(t *testing.T) {
	t.Parallel()
	e := newRPCEnv(t, api.RPCConfig{})
	ctx := context.Background()

	run, token := e.startRun("Doomed")
	if err := e.client(run.TaskID, token).Fail(ctx, "the API is gone"); err != nil {
		t.Fatalf("Fail: %v", err)
	}
	if d := e.task(run.TaskID); d.Task.Status != models.StatusFailed {
		t.Errorf("task after fail = %s, want FAILED", d.Task.Status)
	}

	run2, token2 := e.startRun("Throttled")
	reset := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	err := e.client(run2.TaskID, token2).RateLimited(ctx, models.RateLimit{ResetAt: &reset, Kind: "rate_limit", Message: "429"})
	if err != nil {
		t.Fatalf("RateLimited: %v", err)
	}
	d := e.task(run2.TaskID)
	if d.Task.Status != models.StatusPaused || d.Task.ResumeAfter == nil || !d.Task.ResumeAfter.Equal(reset) {
		t.Errorf("task after rate_limited = %s resume %v, want PAUSED until %v", d.Task.Status, d.Task.ResumeAfter, reset)
	}
	e.svc.mu.Lock()
	if len(e.svc.rateLimits) != 1 || e.svc.rateLimits[0].Kind != "rate_limit" || e.svc.rateLimits[0].Message != "429" {
		t.Errorf("service saw %+v", e.svc.rateLimits)
	}
	e.svc.mu.Unlock()
}

func TestRPCAuthentication(t *testing.T) {
	t.Parallel()
	e := newRPCEnv(t, api.RPCConfig{})
	ctx := context.Background()
	runA, tokenA := e.startRun("Task A")
	runB, tokenB := e.startRun("Task B")

	wantErr(t, e.client(runA.TaskID, "not-a-token").Heartbeat(ctx), models.CodeUnauthorized, "unknown run token")
	// A run's token authorises only its own task.
	wantErr(t, e.client(runB.TaskID, tokenA).Progress(ctx, "sneaky"), models.CodeUnauthorized, "this run token is for another task")
	e.svc.mu.Lock()
	if len(e.svc.progress) != 0 {
		t.Errorf("a refused call reached the service: %q", e.svc.progress)
	}
	e.svc.mu.Unlock()

	status, body := e.raw("POST", "/rpc/v1/heartbeat", "{}", api.HeaderTaskID, runA.TaskID)
	wantBody(t, status, body, http.StatusUnauthorized, models.CodeUnauthorized, "missing run token")
	status, body = e.raw("POST", "/rpc/v1/heartbeat", "{}", "Authorization", "Bearer "+tokenA)
	wantBody(t, status, body, http.StatusUnauthorized, models.CodeUnauthorized, "missing X-AQ-Task-ID")
	status, body = e.raw("POST", "/rpc/v1/heartbeat", "{}", "Authorization", "Basic "+tokenA, api.HeaderTaskID, runA.TaskID)
	wantBody(t, status, body, http.StatusUnauthorized, models.CodeUnauthorized, "missing run token")

	// Once the run has ended its token is stale.
	if err := e.client(runB.TaskID, tokenB).Fail(ctx, "giving up"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, e.client(runB.TaskID, tokenB).Heartbeat(ctx), models.CodeUnauthorized, "ended")
	// Task A's run is untouched by all of this.
	if err := e.client(runA.TaskID, tokenA).Heartbeat(ctx); err != nil {
		t.Errorf("heartbeat of A: %v", err)
	}
	logs := e.logs.String()
	if strings.Contains(logs, tokenA) || strings.Contains(logs, tokenB) {
		t.Error("a run token appears in the logs")
	}
	if !strings.Contains(logs, `msg="rpc call refused"`) {
		t.Errorf("refused calls are not logged:\n%s", logs)
	}
}

// wantBody checks a raw error answer's status, code and message.
func wantBody(t *testing.T, status int, body []byte, wantStatus int, code models.ErrorCode, msg string) {
	t.Helper()
	var eb api.ErrorBody
	if err := json.Unmarshal(body, &eb); err != nil {
		t.Fatalf("answer %d %s is not an error body: %v", status, body, err)
	}
	if status != wantStatus || eb.Error.Code != code || !strings.Contains(eb.Error.Message, msg) {
		t.Errorf("answer = %d %s %q, want %d %s containing %q", status, eb.Error.Code, eb.Error.Message, wantStatus, code, msg)
	}
}

func TestRPCBadRequests(t *testing.T) {
	t.Parallel()
	e := newRPCEnv(t, api.RPCConfig{MaxBodyBytes: 4096})
	run, token := e.startRun("Strict")
	auth := []string{"Authorization", "Bearer " + token, api.HeaderTaskID, run.TaskID, "Content-Type", "application/json"}
	cases := []struct {
		tool, body string
		status     int
		code       models.ErrorCode
		msg        string
	}{
		{"progress", `{"msg":"hi"}`, 400, models.CodeInvalid, `unknown field "msg"`},
		{"progress", `{"message":"  "}`, 400, models.CodeInvalid, "message: required"},
		{"progress", `{"message":"a"} {"message":"b"}`, 400, models.CodeInvalid, "unexpected data after the JSON value"},
		{"progress", ``, 400, models.CodeInvalid, "empty"},
		{"heartbeat", `{"alive":true}`, 400, models.CodeInvalid, `unknown field "alive"`},
		{"ask", `{"question":""}`, 400, models.CodeInvalid, "question: required"},
		{"complete", `{"summary":1}`, 400, models.CodeInvalid, `field "summary"`},
		{"complete", `{"summary":"x","outputs":[1]}`, 400, models.CodeInvalid, "outputs: must be a JSON object"},
		{"fail", `{}`, 400, models.CodeInvalid, "message: required"},
		{"usage", `{"input_tokens":1,"output_tokens":2,"project_id":"other"}`, 400, models.CodeInvalid, `unknown field "project_id"`},
		{"usage", `{"input_tokens":1,"output_tokens":2,"task_id":"x"}`, 400, models.CodeInvalid, `unknown field "task_id"`},
		{"usage", `{"input_tokens":-1,"output_tokens":2}`, 400, models.CodeInvalid, "input_tokens: must not be negative"},
		{"rate_limited", `{"kind":"weather"}`, 400, models.CodeInvalid, "kind: must be rate_limit or tokens"},
		{"rate_limited", `{"reset_at":"tomorrow"}`, 400, models.CodeInvalid, "reset_at"},
		{"propose_plan", `{"tasks":[]}`, 400, models.CodeInvalid, "tasks: at least one task"},
		{"propose_plan", `{"project_id":"web","tasks":[{"title":"x"}]}`, 400, models.CodeInvalid, `unknown field "project_id"`},
		{"propose_plan", `{"tasks":[{"id":"x","title":"x","project_id":"web"}]}`, 400, models.CodeInvalid, "tasks[0] (x): project_id: set by the daemon"},
		{"propose_plan", `{"tasks":[{"title":"x","is_plan_subtask":true}]}`, 400, models.CodeInvalid, "is_plan_subtask"},
		{"propose_plan", `{"tasks":[{"title":""}]}`, 400, models.CodeInvalid, "title"},
		{"dance", `{}`, 404, models.CodeNotFound, `unknown tool "dance"`},
		{"progress", `{"message":"` + strings.Repeat("x", 5000) + `"}`, 413, models.CodeInvalid, "larger than 4096 bytes"},
	}
	for _, tc := range cases {
		status, body := e.raw("POST", "/rpc/v1/"+tc.tool, tc.body, auth...)
		t.Run(tc.tool, func(t *testing.T) { wantBody(t, status, body, tc.status, tc.code, tc.msg) })
	}

	status, body := e.raw("GET", "/rpc/v1/heartbeat", "", auth...)
	wantBody(t, status, body, http.StatusMethodNotAllowed, models.CodeInvalid, "method GET is not allowed")
	status, body = e.raw("POST", "/rpc/v1/progress", `{"message":"x"}`, "Authorization", "Bearer "+token,
		api.HeaderTaskID, run.TaskID, "Content-Type", "text/plain")
	wantBody(t, status, body, http.StatusUnsupportedMediaType, models.CodeInvalid, "Content-Type must be application/json")
	status, body = e.raw("POST", "/api/v1/tasks", `{}`, auth...)
	wantBody(t, status, body, http.StatusNotFound, models.CodeNotFound, "no such endpoint")

	// An empty heartbeat body reads as {}.
	status, body = e.raw("POST", "/rpc/v1/heartbeat", "", auth[:4]...)
	if status != http.StatusOK || strings.TrimSpace(string(body)) != `{"ok":true}` {
		t.Errorf("empty heartbeat = %d %s", status, body)
	}
	e.svc.mu.Lock()
	if len(e.svc.progress) != 0 {
		t.Errorf("a refused body reached the service: %q", e.svc.progress)
	}
	e.svc.mu.Unlock()
}

func TestRPCInternalErrorsDoNotLeak(t *testing.T) {
	t.Parallel()
	e := newRPCEnv(t, api.RPCConfig{})
	run, token := e.startRun("Leaky")
	e.svc.mu.Lock()
	e.svc.heartbeatErr = errors.New("disk on fire at /secret/path")
	e.svc.mu.Unlock()
	err := e.client(run.TaskID, token).Heartbeat(context.Background())
	wantErr(t, err, models.CodeInternal, "internal error")
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("the internal error leaked to the agent: %v", err)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "disk on fire") || !strings.Contains(logs, "task_id="+run.TaskID) ||
		!strings.Contains(logs, fmt.Sprintf("run_id=%d", run.ID)) {
		t.Errorf("the internal error is not logged with the run:\n%s", logs)
	}
}

func TestRPCAskCancelledWhenClientGoesAway(t *testing.T) {
	t.Parallel()
	e := newRPCEnv(t, api.RPCConfig{})
	run, token := e.startRun("Curious")
	c := e.client(run.TaskID, token)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	returned := make(chan error, 1)
	go func() {
		_, err := c.Ask(ctx, models.Ask{Question: "Which colour?"})
		returned <- err
	}()
	var call *askCall
	select {
	case call = <-e.svc.asks:
	case <-time.After(waitLimit):
		t.Fatal("the service was never asked")
	}
	cancel()
	select {
	case <-call.gone:
	case <-time.After(waitLimit):
		t.Fatal("the service's ask was not cancelled when the agent went away")
	}
	if err := <-returned; !errors.Is(err, context.Canceled) {
		t.Errorf("Ask after cancel = %v, want context.Canceled", err)
	}
}

func TestRPCAskEndsOnShutdown(t *testing.T) {
	t.Parallel()
	e := newRPCEnv(t, api.RPCConfig{})
	run, token := e.startRun("Patient")
	c := e.client(run.TaskID, token)
	returned := make(chan error, 1)
	go func() {
		_, err := c.Ask(context.Background(), models.Ask{Question: "Still there?"})
		returned <- err
	}()
	var call *askCall
	select {
	case call = <-e.svc.asks:
	case <-time.After(waitLimit):
		t.Fatal("the service was never asked")
	}
	if err := e.stop(); err != nil {
		t.Fatalf("Serve with an ask waiting: %v", err)
	}
	<-call.gone
	wantErr(t, <-returned, models.CodeInternal, "shutting down")
	if _, err := os.Stat(e.socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket file after shutdown: %v", err)
	}
}

func TestRPCSocket(t *testing.T) {
	t.Parallel()
	e := newRPCEnv(t, api.RPCConfig{})
	fi, err := os.Stat(e.socket)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode = %s, want a socket with 0600", fi.Mode())
	}
	if di, err := os.Stat(filepath.Dir(e.socket)); err != nil || di.Mode().Perm() != 0o700 {
		t.Errorf("created socket directory: %v, %v; want mode 0700", di.Mode(), err)
	}

	// A second server on the live socket refuses to start and leaves it alone.
	second, err := api.NewRPCServer(api.RPCConfig{SocketPath: e.socket}, e.svc)
	if err != nil {
		t.Fatal(err)
	}
	if ln, err := second.Listen(); err == nil {
		ln.Close()
		t.Fatal("a second server listened on a live socket")
	} else if !strings.Contains(err.Error(), "socket in use") {
		t.Errorf("second Listen = %v, want socket in use", err)
	}
	run, token := e.startRun("Still served")
	if err := e.client(run.TaskID, token).Heartbeat(context.Background()); err != nil {
		t.Errorf("the first server stopped answering: %v", err)
	}
}

func TestRPCListenReplacesStaleSocketOnly(t *testing.T) {
	t.Parallel()
	dir := shortTempDir(t)
	path := filepath.Join(dir, "rpc.sock")
	// A socket left behind by a server that died: nothing answers on it.
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()

	srv, err := api.NewRPCServer(api.RPCConfig{SocketPath: path}, &storeRunService{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := srv.Listen()
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve = %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket file after Serve: %v", err)
	}

	// Any other file is never removed.
	plain := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(plain, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err = api.NewRPCServer(api.RPCConfig{SocketPath: plain}, &storeRunService{})
	if err != nil {
		t.Fatal(err)
	}
	if ln, err := srv.Listen(); err == nil {
		ln.Close()
		t.Fatal("Listen replaced a regular file")
	} else if !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Listen on a regular file = %v", err)
	}
	if data, err := os.ReadFile(plain); err != nil || string(data) != "keep me" {
		t.Errorf("regular file after Listen: %q, %v", data, err)
	}
}

func TestNewRPCServerAndClientChecks(t *testing.T) {
	t.Parallel()
	if _, err := api.NewRPCServer(api.RPCConfig{SocketPath: "/tmp/x.sock"}, nil); err == nil {
		t.Error("NewRPCServer(nil service) succeeded")
	}
	if _, err := api.NewRPCServer(api.RPCConfig{}, &storeRunService{}); err == nil {
		t.Error("NewRPCServer without a socket path succeeded")
	}
	env := map[string]string{api.EnvSocket: "/tmp/x.sock", api.EnvTaskID: "bold-orbit"}
	_, err := api.NewRPCClientFromEnv(func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "AQ_RUN_TOKEN is not set") || strings.Contains(err.Error(), "AQ_SOCKET is") {
		t.Errorf("client without AQ_RUN_TOKEN: %v", err)
	}
	env[api.EnvRunToken] = "t0k3n"
	c, err := api.NewRPCClientFromEnv(func(k string) string { return env[k] })
	if err != nil || c.TaskID() != "bold-orbit" {
		t.Errorf("client from a full environment: %v", err)
	}
}

func TestDecodePlan(t *testing.T) {
	t.Parallel()
	for _, in := range []string{`{"tasks":[{"id":"a","title":"A"}]}`, `[{"id":"a","title":"A"}]`} {
		tasks, err := api.DecodePlan([]byte(in))
		if err != nil || len(tasks) != 1 || tasks[0].LocalID != "a" {
			t.Errorf("DecodePlan(%s) = %+v, %v", in, tasks, err)
		}
	}
	if _, err := api.DecodePlan([]byte(`{"tasks":[],"extra":1}`)); err == nil || !strings.Contains(err.Error(), `"extra"`) {
		t.Errorf("DecodePlan with an unknown field: %v", err)
	}
}

func TestRPCListenNamesLongSocketPath(t *testing.T) {
	t.Parallel()
	path := filepath.Join(shortTempDir(t), strings.Repeat("d", 120), "rpc.sock")
	srv, err := api.NewRPCServer(api.RPCConfig{SocketPath: path}, &storeRunService{})
	if err != nil {
		t.Fatal(err)
	}
	if ln, err := srv.Listen(); err == nil {
		ln.Close()
		t.Skip("this system accepts socket paths this long")
	} else if !strings.Contains(err.Error(), "longer than a Unix socket path may be") {
		t.Errorf("Listen on a long path = %v", err)
	}
}
