package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/service"
	"github.com/agentqueued/agentqueued/internal/service/servicetest"
	"github.com/agentqueued/agentqueued/internal/store"
)

// syncBuffer is a bytes.Buffer safe for concurrent use by a logger.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testEnv is an API server over the daemon's real command layer
// (servicetest: the service, its orchestrator and engines over a real
// store in a temporary directory).
type testEnv struct {
	t      *testing.T
	store  *store.Store
	kit    *servicetest.Kit
	srv    *httptest.Server
	client *api.Client
	logs   *syncBuffer
	token  string
}

// budgetWindow is the window of the test service's budget report, and
// budgetLimit the global token budget in it.
const (
	budgetWindow = time.Hour
	budgetLimit  = int64(100)
)

// newKit builds the real service for the API's tests, its parts logging to
// logger: its budget report covers budgetWindow against a global budget of
// budgetLimit tokens.
func newKit(t *testing.T, logger *slog.Logger, opts ...servicetest.Option) *servicetest.Kit {
	t.Helper()
	limit := budgetLimit
	return servicetest.New(t, append([]servicetest.Option{servicetest.WithLogger(logger),
		servicetest.WithService(func(c *service.Config) { c.Window, c.GlobalBudget = budgetWindow, &limit })}, opts...)...)
}

// newLogger returns a logger that records into a new buffer.
func newLogger() (*slog.Logger, *syncBuffer) {
	logs := &syncBuffer{}
	return slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), logs
}

// newEnv starts a server over a fresh store; cfg's Logger is replaced by
// one that records into env.logs.
func newEnv(t *testing.T, cfg api.Config) *testEnv {
	t.Helper()
	logger, logs := newLogger()
	cfg.Logger = logger
	return serveKit(t, cfg, newKit(t, logger), logs)
}

// serveKit starts a server of cfg over the kit's service.
func serveKit(t *testing.T, cfg api.Config, k *servicetest.Kit, logs *syncBuffer) *testEnv {
	t.Helper()
	s, err := api.New(cfg, k.Service)
	if err != nil {
		t.Fatalf("api.New: %v", err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	client, err := api.NewClient(srv.URL, cfg.Token, srv.Client())
	if err != nil {
		t.Fatalf("api.NewClient: %v", err)
	}
	return &testEnv{t: t, store: k.Store, kit: k, srv: srv, client: client, logs: logs, token: cfg.Token}
}

// response is a raw answer of the server.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request with a raw body (none when body is "") and the
// environment's token, plus extra headers given as name, value pairs (an
// empty value removes the header; "Host" sets the request's Host). Requests other than GET, HEAD and
// OPTIONS say Content-Type application/json unless told otherwise.
func (e *testEnv) do(method, path, body string, headers ...string) response {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" || (method != "GET" && method != "HEAD" && method != "OPTIONS") {
		// As the API's client does: state-changing requests say JSON, with or without a body.
		req.Header.Set("Content-Type", "application/json")
	}
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		switch {
		case headers[i] == "Host":
			req.Host = headers[i+1]
		case headers[i+1] == "":
			req.Header.Del(headers[i])
		default:
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

// decode decodes the answer into v, failing unless its status is want.
func (r response) decode(t *testing.T, want int, v any) {
	t.Helper()
	if r.status != want {
		t.Fatalf("status = %d, want %d; body: %s", r.status, want, r.body)
	}
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// wantError checks an error answer's status and code and that its message
// contains msg.
func (r response) wantError(t *testing.T, status int, code models.ErrorCode, msg string) {
	t.Helper()
	var eb api.ErrorBody
	r.decode(t, status, &eb)
	if eb.Error.Code != code {
		t.Errorf("error code = %q, want %q (message %q)", eb.Error.Code, code, eb.Error.Message)
	}
	if !strings.Contains(eb.Error.Message, msg) {
		t.Errorf("error message = %q, want it to contain %q", eb.Error.Message, msg)
	}
}

// createProject creates a project through the API.
func (e *testEnv) createProject(id string) models.Project {
	e.t.Helper()
	var p models.Project
	e.do("POST", "/api/v1/projects", `{"id":"`+id+`"}`).decode(e.t, http.StatusCreated, &p)
	return p
}

// createTasks posts a batch body and returns its results.
func (e *testEnv) createTasks(body string) []models.BatchResult {
	e.t.Helper()
	var br api.BatchResponse
	e.do("POST", "/api/v1/tasks", body).decode(e.t, http.StatusCreated, &br)
	return br.Results
}

// listTasks lists tasks with a raw query.
func (e *testEnv) listTasks(query string) []models.Task {
	e.t.Helper()
	var tl api.TaskList
	e.do("GET", "/api/v1/tasks"+query, "").decode(e.t, http.StatusOK, &tl)
	return tl.Tasks
}

// taskDetail returns a task's detail.
func (e *testEnv) taskDetail(id string) models.TaskDetail {
	e.t.Helper()
	var d models.TaskDetail
	e.do("GET", "/api/v1/tasks/"+id, "").decode(e.t, http.StatusOK, &d)
	return d
}
