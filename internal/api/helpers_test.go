package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
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

// testEnv is an API server over a real store in a temporary directory.
type testEnv struct {
	t      *testing.T
	store  *store.Store
	srv    *httptest.Server
	client *api.Client
	logs   *syncBuffer
	token  string
}

// newEnv starts a server over a fresh store; cfg's Logger is replaced by
// one that records into env.logs.
func newEnv(t *testing.T, cfg api.Config) *testEnv {
	t.Helper()
	st, err := store.Open(context.Background(), store.Config{Path: filepath.Join(t.TempDir(), "db.sqlite")})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	logs := &syncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := api.New(cfg, decisions{st})
	if err != nil {
		t.Fatalf("api.New: %v", err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	client, err := api.NewClient(srv.URL, cfg.Token, srv.Client())
	if err != nil {
		t.Fatalf("api.NewClient: %v", err)
	}
	return &testEnv{t: t, store: st, srv: srv, client: client, logs: logs, token: cfg.Token}
}

// decisions is the store as the API's service, with a person's decisions
// applied straight to the store: HUMAN_APPROVED, and VERIFY_FAILED with the
// feedback (the orchestrator's work of merging is not part of these tests).
type decisions struct{ *store.Store }

func (d decisions) ApproveTask(ctx context.Context, id, by, note string) (models.TransitionResult, error) {
	return d.ApplyEvent(ctx, models.TransitionRequest{TaskID: id, Event: models.EventHumanApproved, Actor: by, Reason: note})
}

func (d decisions) RejectTask(ctx context.Context, id, by, feedback string) (models.TransitionResult, error) {
	return d.ApplyEvent(ctx, models.TransitionRequest{TaskID: id, Event: models.EventVerifyFailed, Actor: by, Reason: feedback,
		Feedback: &models.Feedback{Source: by, Verdict: models.VerdictReject, Text: feedback}})
}

// TaskDiff answers a fixed change for an existing task (the orchestrator's
// git work is not part of these tests).
func (d decisions) TaskDiff(ctx context.Context, id string) (string, error) {
	if _, err := d.GetTask(ctx, id); err != nil {
		return "", err
	}
	return "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-old\n+new\n", nil
}

// LandProject answers that nothing waits to land in an existing project
// (the orchestrator's git work is not part of these tests).
func (d decisions) LandProject(ctx context.Context, id string) (models.LandResult, error) {
	if _, err := d.GetProject(ctx, id); err != nil {
		return models.LandResult{}, err
	}
	return models.LandResult{ProjectID: id, Landed: []models.LandTask{}, Waiting: []models.LandTask{}, Failed: []models.LandTask{}}, nil
}

// Desk is the store's desk, as the daemon's command layer answers it.
func (d decisions) Desk(ctx context.Context, projectID string) (models.Desk, error) {
	return d.DeskFor(ctx, projectID)
}

// budgetWindow is the window of the test service's budget report.
const budgetWindow = time.Hour

// Budget reports usage in the last budgetWindow against a global budget of
// 100 tokens, as the daemon's command layer does.
func (d decisions) Budget(ctx context.Context) (models.BudgetReport, error) {
	since := time.Now().Add(-budgetWindow)
	used, err := d.TokensUsedByProjectSince(ctx, since)
	if err != nil {
		return models.BudgetReport{}, err
	}
	ps, err := d.ListProjects(ctx)
	if err != nil {
		return models.BudgetReport{}, err
	}
	limit := int64(100)
	r := models.BudgetReport{Window: models.Duration(budgetWindow), Since: since, Global: models.GlobalBudget{Budget: &limit}}
	for _, p := range ps {
		r.Global.TokensInWindow += used[p.ID]
		r.Projects = append(r.Projects, models.ProjectBudget{ProjectID: p.ID, Name: p.Name, Status: p.Status,
			TokensInWindow: used[p.ID], TotalTokensUsed: p.TotalTokensUsed, BudgetLimit: p.BudgetLimit})
	}
	r.Global.Exhausted = r.Global.TokensInWindow >= limit
	return r, nil
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

// The service redacts every project and agent it answers; the test
// service does as it does.

func (d decisions) CreateProject(ctx context.Context, p models.Project) (models.Project, error) {
	p, err := d.Store.CreateProject(ctx, p)
	return p.Redacted(), err
}

func (d decisions) GetProject(ctx context.Context, id string) (models.Project, error) {
	p, err := d.Store.GetProject(ctx, id)
	return p.Redacted(), err
}

func (d decisions) ListProjects(ctx context.Context) ([]models.Project, error) {
	ps, err := d.Store.ListProjects(ctx)
	for i := range ps {
		ps[i] = ps[i].Redacted()
	}
	return ps, err
}

func (d decisions) UpdateProject(ctx context.Context, id string, patch models.ProjectPatch) (models.Project, error) {
	p, err := d.Store.UpdateProject(ctx, id, patch)
	return p.Redacted(), err
}

func (d decisions) RegisterAgent(ctx context.Context, a models.Agent) (models.Agent, error) {
	a, err := d.Store.RegisterAgent(ctx, a)
	return a.Redacted(), err
}

func (d decisions) GetAgent(ctx context.Context, id string) (models.Agent, error) {
	a, err := d.Store.GetAgent(ctx, id)
	return a.Redacted(), err
}

func (d decisions) ListAgents(ctx context.Context) ([]models.Agent, error) {
	as, err := d.Store.ListAgents(ctx)
	for i := range as {
		as[i] = as[i].Redacted()
	}
	return as, err
}

func (d decisions) SetAgentPaused(ctx context.Context, id string, paused bool) (models.Agent, error) {
	a, err := d.Store.SetAgentPaused(ctx, id, paused)
	return a.Redacted(), err
}

func (d decisions) Overview(ctx context.Context) (models.Overview, error) {
	o, err := d.Store.Overview(ctx)
	for i := range o.Projects {
		o.Projects[i] = o.Projects[i].Redacted()
	}
	for i := range o.Agents {
		o.Agents[i] = o.Agents[i].Redacted()
	}
	return o, err
}
