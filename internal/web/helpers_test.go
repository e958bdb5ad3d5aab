package web_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/service"
	"github.com/agentqueued/agentqueued/internal/service/servicetest"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/web"
)

// env is the dashboard mounted in the API as the daemon mounts it, over
// the daemon's real service (servicetest).
type env struct {
	t      *testing.T
	store  *store.Store
	srv    *httptest.Server
	client *http.Client
	// runDir holds the runs' logs (<task>/<attempt>.log); feed is told
	// of changes and output.
	runDir string
	feed   *service.Feed
	// stop shuts the server down (newEnvServed).
	stop func()
	// base is the path the pages of the last login's session are under
	// (login; in maps a path to it).
	base string
}

// envConfig configures newEnvWith.
type envConfig struct {
	// Token is the API token ("": none).
	Token string
	// Serve runs the API by its own Serve (an hour's shutdown timeout)
	// instead of httptest.
	Serve bool
	// Logger receives the API's and the dashboard's logs; nil discards.
	Logger *slog.Logger
	// Now is the dashboard's clock; nil is time.Now.
	Now func() time.Time
	// Runners are the runners' connections the service asks (nil: none).
	Runners service.RunnerConnections
}

// newEnv starts the API with the dashboard; token is the API token ("":
// none).
func newEnv(t *testing.T, token string) *env {
	t.Helper()
	e, _ := newEnvServed(t, token, false)
	return e
}

// newEnvServed is newEnv; with serve the API runs by its own Serve (an
// hour's shutdown timeout) instead of httptest, and stop cancels Serve's
// context, whose result arrives on the channel returned.
func newEnvServed(t *testing.T, token string, serve bool) (*env, <-chan error) {
	t.Helper()
	return newEnvWith(t, envConfig{Token: token, Serve: serve})
}

// newEnvWith is newEnvServed configured by cfg.
func newEnvWith(t *testing.T, cfg envConfig) (*env, <-chan error) {
	t.Helper()
	token, serve := cfg.Token, cfg.Serve
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	k := servicetest.New(t, servicetest.WithService(func(c *service.Config) { c.Runners = cfg.Runners }))
	st, svc := k.Store, k.Service
	ui, err := web.New(web.Config{Token: token, Logger: cfg.Logger, Now: cfg.Now, Stopping: api.Stopping}, svc)
	if err != nil {
		t.Fatal(err)
	}
	a, err := api.New(api.Config{Addr: "127.0.0.1:0", Token: token, UI: ui.Handler(), Logs: svc, Logger: cfg.Logger,
		ShutdownTimeout: time.Hour}, svc)
	if err != nil {
		t.Fatal(err)
	}
	var srv *httptest.Server
	var served chan error
	stop := func() {}
	if serve {
		ln, err := a.Listen()
		if err != nil {
			t.Fatal(err)
		}
		srv = &httptest.Server{URL: "http://" + ln.Addr().String()}
		ctx, cancel := context.WithCancel(context.Background())
		served = make(chan error, 1)
		finished := make(chan struct{})
		go func() {
			defer close(finished)
			served <- a.Serve(ctx, ln)
		}()
		stop = cancel
		t.Cleanup(func() {
			cancel()
			<-finished
		})
	} else {
		srv = httptest.NewServer(a.Handler())
		t.Cleanup(srv.Close)
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(client.CloseIdleConnections)
	return &env{t: t, store: st, srv: srv, client: client, runDir: k.RunDir, feed: k.Feed, stop: stop}, served
}

// page is an answer of the dashboard.
type page struct {
	status int
	header http.Header
	body   string
}

// get fetches a path with the env's cookies.
func (e *env) get(path string) page {
	e.t.Helper()
	return e.do(http.MethodGet, path, nil)
}

// post posts a form with extra headers given as name, value pairs.
func (e *env) post(path string, form url.Values, headers ...string) page {
	e.t.Helper()
	return e.do(http.MethodPost, path, form, headers...)
}

func (e *env) do(method, path string, form url.Values, headers ...string) page {
	e.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, e.srv.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return page{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf returns the CSRF token of the forms on a page.
func (e *env) csrf(path string) string {
	e.t.Helper()
	p := e.get(path)
	m := csrfField.FindStringSubmatch(p.body)
	if p.status != http.StatusOK || m == nil {
		e.t.Fatalf("GET %s: %d, no csrf field:\n%s", path, p.status, p.body)
	}
	return m[1]
}

// sessionBase matches where a login leads: a session's own path, its
// path secret the submatch.
var sessionBase = regexp.MustCompile(`^/ui/s/([A-Za-z0-9_-]{43})/overview$`)

// login logs in with token and fails the test unless it works: the
// browser is sent to the overview under the new session's own path,
// which in then maps paths to.
func (e *env) login(token string) {
	e.t.Helper()
	p := e.post("/ui/login", url.Values{"token": {token}, "next": {"/ui/overview"}})
	loc := p.header.Get("Location")
	if p.status != http.StatusSeeOther || !sessionBase.MatchString(loc) {
		e.t.Fatalf("login: %d %s:\n%s", p.status, loc, p.body)
	}
	e.base = strings.TrimSuffix(loc, "/overview")
}

// in returns the dashboard path p ("/ui/tasks/x") under the logged-in
// session's path (p itself before a login).
func (e *env) in(p string) string {
	if e.base == "" {
		return p
	}
	return e.base + strings.TrimPrefix(p, "/ui")
}

// task creates a project and a READY task in it and returns the task's id.
func (e *env) task(project, title string) string {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.store.GetProject(ctx, project); err != nil {
		if _, err := e.store.CreateProject(ctx, models.Project{ID: project, Name: project}); err != nil {
			e.t.Fatal(err)
		}
	}
	res, err := e.store.CreateTasks(ctx, models.TaskBatch{ProjectID: project, CreatedBy: "ana",
		Tasks: []models.BatchTask{{Title: title}}})
	if err != nil {
		e.t.Fatal(err)
	}
	return res[0].TaskID
}

// logout posts the logout form.
func (e *env) logout() {
	e.t.Helper()
	csrf := e.csrf(e.in("/ui/overview"))
	if p := e.post(e.in("/ui/logout"), url.Values{"csrf": {csrf}}); p.status != http.StatusSeeOther {
		e.t.Fatalf("logout: %d\n%s", p.status, p.body)
	}
}

// writeLog writes the log of a task's attempt as a run would.
func (e *env) writeLog(taskID string, attempt int, text string) {
	e.t.Helper()
	dir := filepath.Join(e.runDir, taskID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(attempt)+".log"), []byte(text), 0o600); err != nil {
		e.t.Fatal(err)
	}
}
