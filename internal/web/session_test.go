package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/service/servicetest"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/web"
)

// gate is the dashboard's handler driven request by request, each with
// exactly the Cookie header the test gives, over a fake clock; with
// viaAPI the API's handler (its guards and logs) stands in front.
type gate struct {
	t     *testing.T
	h     http.Handler
	clk   *clocktest.Fake
	store *store.Store
	// task is a task of the project "web", its priority at first
	// startPriority.
	task          string
	startPriority int
	// viaAPI: the API's answers (its refusals) carry no dashboard
	// headers.
	viaAPI bool
}

// gateConfig configures newGate.
type gateConfig struct {
	token  string
	viaAPI bool
	logger *slog.Logger
}

func newGate(t *testing.T, cfg gateConfig) *gate {
	t.Helper()
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.DiscardHandler)
	}
	clk := clocktest.New(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	k := servicetest.New(t)
	ui, err := web.New(web.Config{Token: cfg.token, Now: clk.Now, Logger: cfg.logger}, k.Service)
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{t: t, h: ui.Handler(), clk: clk, store: k.Store, viaAPI: cfg.viaAPI}
	if cfg.viaAPI {
		a, err := api.New(api.Config{Addr: "127.0.0.1:0", Token: cfg.token, UI: ui.Handler(), Logger: cfg.logger}, k.Service)
		if err != nil {
			t.Fatal(err)
		}
		g.h = a.Handler()
	}
	ctx := context.Background()
	if _, err := k.Store.CreateProject(ctx, models.Project{ID: "web", Name: "web"}); err != nil {
		t.Fatal(err)
	}
	res, err := k.Store.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", CreatedBy: "ana", Tasks: []models.BatchTask{{Title: "Build"}}})
	if err != nil {
		t.Fatal(err)
	}
	g.task = res[0].TaskID
	g.startPriority = g.priority()
	return g
}

// answer is one answer of the dashboard.
type answer struct {
	status int
	header http.Header
	body   string
}

func (a answer) location() string { return a.header.Get("Location") }

// do sends a request with cookie as its Cookie header ("": none), and
// form as its body (nil: none), with extra headers as name, value pairs.
func (g *gate) do(method, path, cookie string, form url.Values, headers ...string) answer {
	g.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, "http://127.0.0.1:7700"+path, body)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if cookie != "" {
		r.Header.Set("Cookie", cookie)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	w := &streamRecorder{ResponseRecorder: httptest.NewRecorder(), cancel: cancel}
	g.h.ServeHTTP(w, r.WithContext(ctx))
	if got := w.Header().Get("Referrer-Policy"); got != "same-origin" && !g.viaAPI {
		g.t.Errorf("%s %s: Referrer-Policy %q, want same-origin", method, path, got)
	}
	return answer{status: w.Code, header: w.Header(), body: w.Body.String()}
}

// streamRecorder records an answer; an event stream's is cut at its
// first flush, as a browser that goes away would (a granted stream would
// otherwise never end).
type streamRecorder struct {
	*httptest.ResponseRecorder
	cancel func()
}

func (w *streamRecorder) Flush() {
	w.ResponseRecorder.Flush()
	w.cancel()
}

// sess is a login as a browser holds it.
type sess struct {
	// cookie is the Cookie header the browser sends with it; id the
	// cookie's value.
	cookie, id string
	// page is where the login led (the overview).
	page string
	// base is the path its pages are under and secret the path secret
	// in it (empty when the login led elsewhere).
	base, secret string
	// csrf is its forms' token.
	csrf string
}

// at returns the dashboard path p ("/ui/tasks/x") under the session's
// base.
func (s sess) at(p string) string { return s.base + strings.TrimPrefix(p, web.Prefix) }

// login logs in with the token and returns the session.
func (g *gate) login() sess {
	g.t.Helper()
	a := g.do(http.MethodPost, "/ui/login", "", url.Values{"token": {testToken}, "next": {"/ui/overview"}})
	var s sess
	for _, c := range (&http.Response{Header: a.header}).Cookies() {
		if c.Name == web.CookieName {
			s.id, s.cookie = c.Value, c.Name+"="+c.Value
		}
	}
	s.page = a.location()
	if a.status != http.StatusSeeOther || s.id == "" {
		g.t.Fatalf("login: %d, Location %q, Set-Cookie %q", a.status, s.page, a.header.Get("Set-Cookie"))
	}
	s.base = strings.TrimSuffix(s.page, "/overview")
	if m := sessionBase.FindStringSubmatch(s.page); m != nil {
		s.secret = m[1]
	}
	p := g.do(http.MethodGet, s.page, s.cookie, nil)
	m := csrfField.FindStringSubmatch(p.body)
	if p.status != http.StatusOK || m == nil {
		g.t.Fatalf("the page the login led to (%s): %d, no csrf field:\n%s", s.page, p.status, p.body)
	}
	s.csrf = m[1]
	return s
}

// priority returns the gate's task's priority.
func (g *gate) priority() int {
	g.t.Helper()
	task, err := g.store.GetTask(context.Background(), g.task)
	if err != nil {
		g.t.Fatal(err)
	}
	return task.Priority
}

// route is a request to one of the routes behind the login.
type route struct {
	method string
	// path is under web.Prefix, as the routes name it.
	path string
}

// routes returns a request to every route behind the login (web.Routes),
// naming the gate's task and project where a route names one.
func (g *gate) routes() []route { return routesFor(g.task) }

// routesFor returns a request to every route behind the login
// (web.Routes), naming the task and the project "web" where a route
// names one.
func routesFor(task string) []route {
	var out []route
	for _, pattern := range web.Routes() {
		method, path, _ := strings.Cut(pattern, " ")
		path = strings.NewReplacer("{id}", task, "{name}", "nightly").Replace(path)
		if strings.HasPrefix(path, web.Prefix+"/projects/") {
			path = strings.Replace(path, task, "web", 1)
		}
		out = append(out, route{method, path})
	}
	return out
}

// refused checks that a request to rt without a session was answered as
// one: a page with the way to the login page (back to rt's page, the
// path secret nowhere in the answer), the event stream with 401 and a
// form with 403; secrets are the strings no answer may hold.
func refused(t *testing.T, what string, rt route, a answer, secrets ...string) {
	t.Helper()
	switch {
	case rt.method == http.MethodPost:
		if a.status != http.StatusForbidden {
			t.Errorf("%s: POST %s: %d, want 403", what, rt.path, a.status)
		}
	case rt.path == web.Prefix+"/events":
		if a.status != http.StatusUnauthorized {
			t.Errorf("%s: GET %s: %d, want 401", what, rt.path, a.status)
		}
	default:
		if want := "/ui/login?next=" + url.QueryEscape(rt.path); a.status != http.StatusSeeOther || a.location() != want {
			t.Errorf("%s: GET %s: %d %q, want 303 to %s", what, rt.path, a.status, a.location(), want)
		}
	}
	if strings.Contains(a.header.Get("Set-Cookie"), web.CookieName) {
		t.Errorf("%s: %s %s: a cookie: %q", what, rt.method, rt.path, a.header.Get("Set-Cookie"))
	}
	for _, s := range secrets {
		if s == "" {
			continue
		}
		if strings.Contains(a.body, s) || strings.Contains(a.location(), s) {
			t.Errorf("%s: %s %s: the answer holds a secret of the session:\n%v\n%s", what, rt.method, rt.path, a.header, a.body)
		}
	}
}

// formFor is a valid form for rt in session s: its CSRF token, and for
// the priority form a priority.
func formFor(rt route, s sess, priority int) url.Values {
	if rt.method != http.MethodPost {
		return nil
	}
	return url.Values{"csrf": {s.csrf}, "priority": {strconv.Itoa(priority)}, "back": {"/ui/overview"}}
}

// TestTheCookieAloneGrantsNothing: the session cookie a browser got at
// login, sent to every route of the dashboard without the session's path
// secret (as a server elsewhere on the host that received it would), gets
// the way to the login page, or 403 for a form (which changes nothing).
func TestTheCookieAloneGrantsNothing(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateConfig{token: testToken})
	s := g.login()
	for i, rt := range g.routes() {
		a := g.do(rt.method, rt.path, s.cookie, formFor(rt, s, 1+i%8))
		refused(t, "the cookie alone", rt, a, s.secret)
	}
	if p := g.priority(); p != g.startPriority {
		t.Errorf("the cookie alone set the task's priority to %d", p)
	}
}

// TestASessionNeedsItsCookieAndItsOwnPath sends every route of the
// dashboard with each combination of a session cookie and a session
// path: only the cookie of the session whose path secret the path holds
// is granted.
func TestASessionNeedsItsCookieAndItsOwnPath(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateConfig{token: testToken})
	a, b := g.login(), g.login()
	if a.secret == "" || b.secret == "" || a.secret == b.secret || a.secret == a.id || len(a.secret) < 43 {
		t.Fatalf("the logins led to %s and %s: want each under a path of its own, its secret not its cookie's", a.page, b.page)
	}
	secrets := []string{a.secret, a.id, b.secret, b.id}
	refusedCases := []struct {
		name, cookie string
		path         func(p string) string
	}{
		{"the path without a cookie", "", a.at},
		{"another session's cookie at this path", b.cookie, a.at},
		{"the cookie's value as the path secret", a.cookie, func(p string) string { return web.SessionPrefix + a.id + strings.TrimPrefix(p, web.Prefix) }},
		{"an unknown path secret", a.cookie, func(p string) string {
			return web.SessionPrefix + strings.Repeat("x", 43) + strings.TrimPrefix(p, web.Prefix)
		}},
		{"an empty path secret", a.cookie, func(p string) string { return web.SessionPrefix + strings.TrimPrefix(p, web.Prefix) }},
		{"a cookie of another name", "other=" + a.id, a.at},
	}
	for _, tc := range refusedCases {
		for i, rt := range g.routes() {
			refused(t, tc.name, rt, g.do(rt.method, tc.path(rt.path), tc.cookie, formFor(rt, a, 1+i%8)), secrets...)
		}
	}
	if p := g.priority(); p != g.startPriority {
		t.Fatalf("a refused form set the task's priority to %d", p)
	}
	granted := []struct {
		name, cookie string
		s            sess
	}{
		{"the cookie and its own path", a.cookie, a},
		{"both sessions' cookies at one's path", b.cookie + "; " + a.cookie, a},
		{"the other session at its own path", b.cookie, b},
	}
	for i, tc := range granted {
		ov := g.do(http.MethodGet, tc.s.at("/ui/overview"), tc.cookie, nil)
		if ov.status != http.StatusOK || !strings.Contains(ov.body, "Log out") ||
			!strings.Contains(ov.body, `href="`+tc.s.base+`/queue"`) || !strings.Contains(ov.body, `action="`+tc.s.base+`/logout"`) {
			t.Fatalf("%s: the overview: %d, or its links are not under %s:\n%s", tc.name, ov.status, tc.s.base, ov.body)
		}
		f := g.do(http.MethodPost, tc.s.at("/ui/tasks/"+g.task+"/priority"), tc.cookie,
			url.Values{"csrf": {tc.s.csrf}, "priority": {strconv.Itoa(11 + i)}, "back": {"/ui/tasks/" + g.task}})
		if want := tc.s.at("/ui/tasks/" + g.task); f.status != http.StatusSeeOther || f.location() != want || g.priority() != 11+i {
			t.Fatalf("%s: the priority form: %d %q, priority %d; want 303 to %s, %d", tc.name, f.status, f.location(), g.priority(), want, 11+i)
		}
	}
}

// TestAnExpiredSessionGrantsNothing: a session unused for longer than
// its lifetime is over, its cookie and path together refused; each
// request before then extends it.
func TestAnExpiredSessionGrantsNothing(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateConfig{token: testToken})
	s := g.login()
	page := route{http.MethodGet, "/ui/overview"}
	for range 2 {
		g.clk.Advance(web.DefaultSessionTTL - time.Minute)
		if a := g.do(page.method, s.at(page.path), s.cookie, nil); a.status != http.StatusOK {
			t.Fatalf("a session used within its lifetime: %d", a.status)
		}
	}
	g.clk.Advance(web.DefaultSessionTTL + time.Second)
	refused(t, "an expired session", page, g.do(page.method, s.at(page.path), s.cookie, nil), s.secret, s.id)
	form := route{http.MethodPost, "/ui/tasks/" + g.task + "/priority"}
	refused(t, "an expired session", form, g.do(form.method, s.at(form.path), s.cookie, formFor(form, s, 4)), s.secret, s.id)
}

// TestLogoutEndsTheCookieAndThePath: after logout the session's cookie
// and path open nothing, the browser is told to forget the cookie, and
// another session goes on.
func TestLogoutEndsTheCookieAndThePath(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateConfig{token: testToken})
	a, b := g.login(), g.login()
	out := g.do(http.MethodPost, a.at("/ui/logout"), a.cookie, url.Values{"csrf": {a.csrf}})
	if out.status != http.StatusSeeOther || out.location() != "/ui/login" {
		t.Fatalf("logout: %d %q", out.status, out.location())
	}
	c := out.header.Get("Set-Cookie")
	for _, want := range []string{web.CookieName + "=;", "Path=" + a.base + "/;", "Max-Age=0"} {
		if !strings.Contains(c, want) {
			t.Errorf("logout's cookie %q lacks %s", c, want)
		}
	}
	for _, rt := range g.routes() {
		refused(t, "after logout", rt, g.do(rt.method, a.at(rt.path), a.cookie, formFor(rt, a, 5)), a.secret, a.id)
	}
	if p := g.do(http.MethodGet, b.at("/ui/overview"), b.cookie, nil); p.status != http.StatusOK {
		t.Errorf("the other session after one's logout: %d", p.status)
	}
}

// TestLoginReturnsToTheAskedPageUnderTheSessionsPath: a link to a bare
// page (a task's link in Discord) leads to the login page, which leads
// back to that page under the new session's path; a next that leaves
// the dashboard leads to the overview.
func TestLoginReturnsToTheAskedPageUnderTheSessionsPath(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateConfig{token: testToken})
	first := g.do(http.MethodGet, "/ui/tasks/"+g.task+"?x=1", "", nil)
	next := "/ui/tasks/" + g.task + "?x=1"
	if first.status != http.StatusSeeOther || first.location() != "/ui/login?next="+url.QueryEscape(next) {
		t.Fatalf("a bare page: %d %q", first.status, first.location())
	}
	if p := g.do(http.MethodGet, first.location(), "", nil); p.status != http.StatusOK ||
		!strings.Contains(p.body, `name="next" value="/ui/tasks/`+g.task+`?x`) {
		t.Fatalf("the login page does not carry the page asked for (%s):\n%s", next, p.body)
	}
	for _, tc := range []struct{ next, want string }{
		{next, "/tasks/" + g.task + "?x=1"},
		{"/ui/queue?status=all", "/queue?status=all"},
		{"https://evil.example/ui/queue", "/overview"},
		{"//evil.example/ui/queue", "/overview"},
		{"/ui/s/" + strings.Repeat("A", 43) + "/queue", "/overview"},
		{"", "/overview"},
	} {
		a := g.do(http.MethodPost, "/ui/login", "", url.Values{"token": {testToken}, "next": {tc.next}})
		loc := a.location()
		base, rest, ok := strings.Cut(strings.TrimPrefix(loc, web.SessionPrefix), "/")
		if a.status != http.StatusSeeOther || !strings.HasPrefix(loc, web.SessionPrefix) || !ok || len(base) != 43 || "/"+rest != tc.want {
			t.Errorf("login with next %q: %d to %q, want %s under the session's path", tc.next, a.status, loc, tc.want)
		}
	}
}

// TestWithoutATokenPagesStayUnderUI: without a token there is nothing to
// log in with: a page opens at once under /ui with a session for its
// forms (its cookie at Path=/ui), and a session path is sent there.
func TestWithoutATokenPagesStayUnderUI(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateConfig{})
	first := g.do(http.MethodGet, "/ui/overview", "", nil)
	c := first.header.Get("Set-Cookie")
	if first.status != http.StatusOK || !strings.Contains(c, "Path=/ui;") || !strings.Contains(first.body, `href="/ui/queue"`) ||
		strings.Contains(first.body, web.SessionPrefix) {
		t.Fatalf("the overview without a token: %d, cookie %q:\n%s", first.status, c, first.body)
	}
	cookie, _, _ := strings.Cut(c, ";")
	if again := g.do(http.MethodGet, "/ui/queue", cookie, nil); again.status != http.StatusOK || again.header.Get("Set-Cookie") != "" {
		t.Errorf("the next page with the cookie: %d, a new cookie %q", again.status, again.header.Get("Set-Cookie"))
	}
	if a := g.do(http.MethodGet, "/ui/s/whatever/queue?status=all", cookie, nil); a.status != http.StatusSeeOther || a.location() != "/ui/queue?status=all" {
		t.Errorf("a session path without a token: %d %q, want 303 to /ui/queue?status=all", a.status, a.location())
	}
	m := csrfField.FindStringSubmatch(g.do(http.MethodGet, "/ui/tasks/"+g.task, cookie, nil).body)
	if m == nil {
		t.Fatal("the task's page has no csrf field")
	}
	form := route{http.MethodPost, "/ui/tasks/" + g.task + "/priority"}
	if a := g.do(form.method, "/ui/s/whatever"+strings.TrimPrefix(form.path, "/ui"), cookie, url.Values{"csrf": {m[1]}, "priority": {"3"}}); a.status != http.StatusForbidden {
		t.Errorf("a form at a session path without a token: %d, want 403", a.status)
	}
	if a := g.do(form.method, form.path, cookie, url.Values{"csrf": {m[1]}, "priority": {"3"}}); a.status != http.StatusSeeOther || g.priority() != 3 {
		t.Errorf("the priority form without a token: %d, priority %d", a.status, g.priority())
	}
}

// TestEveryAnswerKeepsItsAddressFromOtherOrigins: each kind of answer —
// the login page, a page, an asset, a redirect, a refusal, an error —
// tells the browser to send its address (which holds the path secret) as
// a Referer to the dashboard's own origin only.
func TestEveryAnswerKeepsItsAddressFromOtherOrigins(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateConfig{token: testToken})
	s := g.login()
	for _, rq := range []struct{ method, path, cookie string }{
		{http.MethodGet, "/ui/login", ""},
		{http.MethodGet, "/ui/static/style.css", ""},
		{http.MethodGet, "/ui/overview", ""},
		{http.MethodPost, "/ui/tasks/x/cancel", ""},
		{http.MethodGet, s.at("/ui/overview"), s.cookie},
		{http.MethodGet, s.at("/ui/"), s.cookie},
		{http.MethodGet, s.at("/ui/no-such-page"), s.cookie},
		{http.MethodPost, s.at("/ui/tasks/x/cancel"), s.cookie},
	} {
		if a := g.do(rq.method, rq.path, rq.cookie, url.Values{}); a.header.Get("Referrer-Policy") != web.ReferrerPolicy {
			t.Errorf("%s %s: Referrer-Policy %q", rq.method, rq.path, a.header.Get("Referrer-Policy"))
		}
	}
}

// lockedBuffer is a log's destination that handlers may share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestThePathSecretIsNeverLogged: with the API in front and its debug log
// on (a line for every request, with its path), a session's pages, a
// refused form, a cross-origin form, a missing page and a guessed path
// log their paths with the path secret cut out.
func TestThePathSecretIsNeverLogged(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	g := newGate(t, gateConfig{token: testToken, viaAPI: true,
		logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	s := g.login()
	if s.secret == "" {
		t.Fatalf("the login led to %s, not to a session's own path", s.page)
	}
	g.do(http.MethodGet, s.at("/ui/tasks/"+g.task), s.cookie, nil)
	g.do(http.MethodGet, s.at("/ui/no-such-page"), s.cookie, nil)
	g.do(http.MethodPost, s.at("/ui/tasks/"+g.task+"/priority"), s.cookie, url.Values{"csrf": {"stale"}, "priority": {"2"}})
	g.do(http.MethodPost, s.at("/ui/tasks/"+g.task+"/priority"), s.cookie, url.Values{"csrf": {s.csrf}, "priority": {"2"}},
		"Origin", "http://127.0.0.1:9999")
	g.do(http.MethodGet, s.at("/ui/overview"), "", nil)
	g.do(http.MethodPost, s.at("/ui/logout"), s.cookie, url.Values{"csrf": {s.csrf}})
	out := logs.String()
	for _, secret := range []string{s.secret, s.id, s.csrf, testToken} {
		if strings.Contains(out, secret) {
			t.Fatalf("the log holds a secret of the session:\n%s", out)
		}
	}
	for _, want := range []string{`"path":"/ui/s/-/tasks/` + g.task + `"`, `"path":"/ui/tasks/` + g.task + `/priority"`, `request refused: cross-origin`} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %s:\n%s", want, out)
		}
	}
}

// TestSessionPrefixIsTheAPIs: the API's logs hide the path secret after
// the prefix the dashboard puts it under.
func TestSessionPrefixIsTheAPIs(t *testing.T) {
	t.Parallel()
	if web.SessionPrefix != api.UISessionPrefix || web.Prefix != api.UIPrefix {
		t.Fatalf("web.SessionPrefix %q, api.UISessionPrefix %q", web.SessionPrefix, api.UISessionPrefix)
	}
}

// linkAttr finds the URLs a page's links, forms, scripts, styles and
// event stream point to.
var linkAttr = regexp.MustCompile(`(?:href|action|src|data-events)="([^"]*)"`)

// TestEveryLinkOfASessionStaysUnderItsPath reads every kind of page a
// session shows — with a task graph, a workflow run and a hook to draw —
// and follows each of their links and forms' addresses: each is under
// the session's path (but the assets, under /ui/static/) and opens with
// the session's cookie, none leads to the login page.
func TestEveryLinkOfASessionStaysUnderItsPath(t *testing.T) {
	t.Parallel()
	e := newEngineEnvWith(t, testToken)
	ctx := progresstest.Context(t)
	ids := threeLevels(t, e.store)
	if _, err := e.svc.SaveWorkflowDocument(ctx, "pipeline.yaml", []byte(pipeline)); err != nil {
		t.Fatal(err)
	}
	run, err := e.svc.StartRun(ctx, "pipeline", "ana")
	if err != nil {
		t.Fatal(err)
	}
	var spec models.HookSpec
	if err := json.Unmarshal([]byte(reportHook), &spec); err != nil {
		t.Fatal(err)
	}
	h, err := e.svc.CreateHook(ctx, spec.Hook())
	if err != nil {
		t.Fatal(err)
	}
	e.login(testToken)
	pages := []string{"/ui/overview", "/ui/queue?status=all", "/ui/projects", "/ui/projects/p/dag", "/ui/workflows",
		"/ui/workflows/pipeline", "/ui/runs/" + run.ID, "/ui/hooks", "/ui/hooks/" + h.ID, "/ui/budget"}
	for _, id := range ids {
		pages = append(pages, "/ui/tasks/"+id)
	}
	followed := map[string]bool{}
	for _, p := range pages {
		page := e.get(e.in(p))
		if page.status != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", p, page.status, page.body)
		}
		for _, m := range linkAttr.FindAllStringSubmatch(page.body, -1) {
			u := html.UnescapeString(m[1])
			switch {
			case strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "#"):
				continue
			case strings.HasPrefix(u, "/ui/static/"):
				continue
			case !strings.HasPrefix(u, e.base+"/"):
				t.Errorf("%s links to %q, not under the session's path", p, u)
				continue
			}
			u, _, _ = strings.Cut(u, "#")
			if followed[u] || strings.Contains(u, "/events") {
				continue
			}
			followed[u] = true
			if !strings.Contains(m[0], "action=") {
				if a := e.get(u); a.status != http.StatusOK {
					t.Errorf("%s's link %s: %d %q", p, u, a.status, a.header.Get("Location"))
				}
			}
		}
	}
	if len(followed) < 20 {
		t.Errorf("only %d links followed: %v", len(followed), followed)
	}
	// The event stream a page names opens with the session's cookie
	// (and is cut at once).
	page := e.get(e.in("/ui/tasks/" + ids["ship"]))
	ev := regexp.MustCompile(`data-events="([^"]*)"`).FindStringSubmatch(page.body)
	if ev == nil || !strings.HasPrefix(html.UnescapeString(ev[1]), e.base+"/events?") {
		t.Fatalf("the task page's event stream: %v", ev)
	}
	status, _ := replay(t, e.srv.URL, http.MethodGet, html.UnescapeString(ev[1]), web.CookieName+"="+sessionCookie(t, e.env))
	if status != http.StatusOK {
		t.Errorf("the page's event stream with the session: %d", status)
	}
}

// sessionCookie returns the value of the session cookie the env's
// client holds for its session's pages.
func sessionCookie(t *testing.T, e *env) string {
	t.Helper()
	u, err := url.Parse(e.srv.URL + e.base + "/overview")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range e.client.Jar.Cookies(u) {
		if c.Name == web.CookieName {
			return c.Value
		}
	}
	t.Fatalf("no %s cookie for %s", web.CookieName, u)
	return ""
}
