package web

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/service/areas"
	"github.com/agentqueued/agentqueued/internal/throttle"
)

// Prefix is the path every page, form and asset of the dashboard is under.
const Prefix = "/ui"

// ReferrerPolicy is the Referrer-Policy of every answer: a page's address
// (which holds its session's path secret) goes as a Referer only to the
// dashboard's own origin; a link or a redirect to any other origin —
// another port of the same host too — carries none. "no-referrer" would
// also keep it from the dashboard itself, but a browser then sends
// "Origin: null" with every form, and where it sends no Sec-Fetch-Site
// (plain HTTP beyond loopback) the cross-origin check would refuse them all.
const ReferrerPolicy = "same-origin"

// Defaults of the dashboard's configuration.
const (
	// DefaultSessionTTL is how long a login lasts without a request; each
	// request extends it.
	DefaultSessionTTL = 24 * time.Hour
	// DefaultMaxSessions caps the logins kept at once; the least recently
	// used one is forgotten first.
	DefaultMaxSessions = 1000
	// maxFormBytes caps a form's body.
	maxFormBytes = 1 << 20
	// DefaultActor is recorded as the actor of what the dashboard's forms do.
	DefaultActor = "web"
)

// Service is what the dashboard needs from the daemon's service
// (*service.Service): the areas its pages read and its forms act through.
type Service interface {
	areas.Status
	areas.Usage
	areas.Projects
	areas.Tasks
	areas.Agents
	areas.Questions
	areas.Approvals
	areas.Logs
	areas.Hooks
	areas.Workflows
	areas.WorkflowRuns
	areas.TaskGraphs
	areas.TokenHistory
}

// Config configures the dashboard.
type Config struct {
	// Token, when not empty, is the API token a person types on the login
	// page; without it no login is asked (see docs/web.md).
	Token string
	// Throttle counts wrong tokens typed on the login page by source and
	// refuses, with 429 and Retry-After, to check more from a source over
	// its budget (see internal/throttle); nil makes one with the
	// defaults. Share the API's so that both draw on the same budgets.
	Throttle *throttle.Limiter
	// Logger receives errors; default discards.
	Logger *slog.Logger
	// Now is the clock sessions expire by; default time.Now.
	Now func() time.Time
	// SessionTTL is how long a login lasts without a request; default
	// DefaultSessionTTL.
	SessionTTL time.Duration
	// MaxSessions caps the logins kept at once; default DefaultMaxSessions.
	MaxSessions int
	// Stopping, when set, returns a channel closed once the server that
	// accepted r shuts down (api.Stopping): event streams end then
	// instead of holding up the shutdown.
	Stopping func(r *http.Request) <-chan struct{}
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Server serves the dashboard over a Service. It holds the logins; pages
// and forms hold nothing else.
type Server struct {
	cfg      Config
	svc      Service
	log      *slog.Logger
	sessions *sessions
	base     *template.Template
	pages    map[string]*template.Template
	mux      *http.ServeMux
	cop      *http.CrossOriginProtection
}

// New returns the dashboard's server for svc; mount Handler under Prefix
// (api.Config.UI).
func New(cfg Config, svc Service) (*Server, error) {
	if svc == nil {
		return nil, errors.New("new web server: service is nil")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Throttle == nil {
		cfg.Throttle = throttle.New(throttle.Config{Logger: cfg.Logger})
	}
	if cfg.SessionTTL < 0 {
		return nil, fmt.Errorf("new web server: SessionTTL %s is negative", cfg.SessionTTL)
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.MaxSessions < 0 {
		return nil, fmt.Errorf("new web server: MaxSessions %d is negative", cfg.MaxSessions)
	}
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.Stopping == nil {
		cfg.Stopping = func(*http.Request) <-chan struct{} { return nil }
	}
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("new web server: parse layout: %w", err)
	}
	s := &Server{cfg: cfg, svc: svc, log: cfg.Logger, base: base, pages: map[string]*template.Template{},
		mux: http.NewServeMux(), cop: http.NewCrossOriginProtection(),
		sessions: newSessions(cfg.Now, cfg.SessionTTL, cfg.MaxSessions)}
	if err := s.routes(); err != nil {
		return nil, fmt.Errorf("new web server: %w", err)
	}
	return s, nil
}

// Handler serves the dashboard: everything under Prefix. Every answer
// carries the security headers; the request's session is found (and a
// path under SessionPrefix granted or refused) before the cross-origin
// check and the routes.
func (s *Server) Handler() http.Handler { return s.headers(s.sessionGate(s.crossOrigin(s.mux))) }

// routes registers every page, form and asset. A page is added with
// s.page, a form with s.action (see doc.go).
func (s *Server) routes() error {
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return err
	}
	for _, name := range []string{"error", "login"} {
		if err := s.parsePage(name); err != nil {
			return err
		}
	}
	s.mux.Handle("GET "+Prefix+"/static/", http.StripPrefix(Prefix+"/static/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET "+Prefix+"/login", s.handleLoginPage)
	s.mux.HandleFunc("POST "+Prefix+"/login", s.handleLogin)
	s.mux.HandleFunc("GET "+Prefix+"/events", s.requireSession(s.handleEvents))
	s.mux.HandleFunc("POST "+Prefix+"/logout", s.requireSession(s.handleLogout))
	s.mux.HandleFunc("GET "+Prefix+"/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, link(r, Prefix+"/overview"), http.StatusSeeOther)
	})
	for _, p := range pages {
		if err := s.page(p); err != nil {
			return err
		}
	}
	for _, a := range actions {
		s.action(a)
	}
	s.mux.HandleFunc(Prefix+"/", func(w http.ResponseWriter, r *http.Request) {
		s.renderError(w, r, http.StatusNotFound, models.Errorf(models.CodeNotFound, "no page %s", r.URL.Path))
	})
	return nil
}

// Nav names a navigation entry of the layout.
type Nav string

// The navigation entries, in the order the layout shows them.
const (
	NavOverview  Nav = "overview"
	NavQueue     Nav = "queue"
	NavProjects  Nav = "projects"
	NavWorkflows Nav = "workflows"
	NavHooks     Nav = "hooks"
	NavBudget    Nav = "budget"
)

// navEntries are the layout's navigation: entry, title, path (after the
// session's base, View.Base).
var navEntries = []struct {
	Nav   Nav
	Title string
	Path  string
}{
	{NavOverview, "Overview", "/overview"},
	{NavQueue, "Queue", "/queue"},
	{NavProjects, "Projects", "/projects"},
	{NavWorkflows, "Workflows", "/workflows"},
	{NavHooks, "Hooks", "/hooks"},
	{NavBudget, "Budget", "/budget"},
}

// Page is one GET route of the dashboard: its template (templates/<Template>.html,
// which defines "title" and "content"), the navigation entry it belongs
// to, and Load, which reads what the template shows (its .Data).
type Page struct {
	// Pattern is the route, e.g. "GET /ui/tasks/{id}".
	Pattern string
	// Template names the page's file in templates/, without ".html".
	Template string
	// Nav is the navigation entry highlighted.
	Nav Nav
	// Load returns the page's data; a models error is shown with its
	// status (not_found: 404, ...), any other as an internal error.
	Load func(s *Server, r *http.Request) (any, error)
}

// pages are the dashboard's pages; each file that adds one appends to it
// in an init function (register).
var pages []Page

// register adds pages to the dashboard.
func register(p ...Page) { pages = append(pages, p...) }

// parsePage parses templates/<name>.html with its own copy of the layout.
func (s *Server) parsePage(name string) error {
	base, err := s.base.Clone()
	if err != nil {
		return fmt.Errorf("parse page %s: %w", name, err)
	}
	t, err := base.ParseFS(templateFS, "templates/"+name+".html")
	if err != nil {
		return fmt.Errorf("parse page %s: %w", name, err)
	}
	s.pages[name] = t
	return nil
}

// page parses p's template with the layout and serves p behind the login.
func (s *Server) page(p Page) error {
	if err := s.parsePage(p.Template); err != nil {
		return err
	}
	s.mux.HandleFunc(p.Pattern, s.requireSession(func(w http.ResponseWriter, r *http.Request) {
		// The page shows the state as of this change or later: its stream
		// reports every change after it, even one before it connects.
		seq, _ := s.svc.Changed()
		r = r.WithContext(context.WithValue(r.Context(), seqKey{}, seq))
		data, err := p.Load(s, r)
		if err != nil {
			s.renderError(w, r, 0, err)
			return
		}
		s.render(w, r, http.StatusOK, p.Template, p.Nav, data)
	}))
	return nil
}

// LiveHeader marks the requests by which static/live.js re-reads a page
// for its live parts.
const LiveHeader = "X-AQ-Live"

// seqKey keys the number of changes a page was read after.
type seqKey struct{}

// View is what every template executes with: the page's Data and what the
// layout needs.
type View struct {
	// Nav is the navigation entry the page belongs to (highlighted).
	Nav Nav
	// Data is the page's (Page.Load's answer).
	Data any
	// CSRF is the session's token every form posts as the field "csrf".
	CSRF string
	// LoggedIn is set when a person logged in with the token (a logout
	// button is shown).
	LoggedIn bool
	// Flash is the message of the last form's answer: an error's text
	// (Error set) or what was done.
	Flash string
	Error bool
	// Now is the time the page was rendered.
	Now time.Time
	// NavEntries are the navigation's entries.
	NavEntries any
	// Path is the request's path and query under Prefix, without the
	// session's path secret (forms return to it as "back").
	Path string
	// Base is the path the session's pages are under: every link and
	// form of a page starts with it (SessionPrefix and the session's path
	// secret with a token configured, else Prefix).
	Base string
	// Events is the URL of the page's event stream (empty: the page is
	// not live): /ui/events, or what the Data's EventsURL method says,
	// under Base.
	Events string
}

// Live is implemented by page data whose page follows more than the
// daemon's state changes (a task's log), or none of them (an empty URL).
type Live interface {
	EventsURL() string
}

// render writes a page with the layout. The page is rendered whole before
// anything is written, so that an error is an error page, not half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, tmpl string, nav Nav, data any) {
	t := s.pages[tmpl]
	if t == nil {
		s.log.ErrorContext(r.Context(), "render page failed: no template", "template", tmpl)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	v := View{Nav: nav, Data: data, Now: s.cfg.Now(), NavEntries: navEntries, Path: r.URL.RequestURI(),
		Base: baseOf(r)}
	if sess := sessionOf(r); sess != nil {
		v.CSRF = sess.csrf
		v.LoggedIn = s.cfg.Token != ""
		if r.Header.Get(LiveHeader) == "" { // a live re-read leaves the message to the page a form leads to
			v.Flash, v.Error = s.sessions.takeFlash(sess)
		}
		if seq, ok := r.Context().Value(seqKey{}).(uint64); ok && status == http.StatusOK {
			v.Events = Prefix + "/events"
			if l, ok := data.(Live); ok {
				v.Events = l.EventsURL()
			}
			if v.Events != "" {
				sep := "?"
				if strings.Contains(v.Events, "?") {
					sep = "&"
				}
				v.Events = link(r, v.Events+sep+"since="+strconv.FormatUint(seq, 10))
			}
		}
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", v); err != nil {
		s.log.ErrorContext(r.Context(), "render page failed", "template", tmpl, "err", err)
		http.Error(w, "internal error (see the daemon's log)", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorPage is the data of the error page.
type errorPage struct {
	Status  int
	Message string
}

// renderError shows err as a page: a models error's message with its
// status (status, when not 0, overrides it), anything else as "internal
// error" (logged).
func (s *Server) renderError(w http.ResponseWriter, r *http.Request, status int, err error) {
	st, msg := s.describe(r, err)
	if status != 0 {
		st = status
	}
	s.render(w, r, st, "error", "", errorPage{Status: st, Message: msg})
}

// describe returns the status and the message a person sees for err: a
// models error's own message, never an internal one's text.
func (s *Server) describe(r *http.Request, err error) (int, string) {
	code := models.ErrorCodeOf(err)
	if code == models.CodeInternal {
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		return http.StatusInternalServerError, "internal error (see the daemon's log)"
	}
	return code.HTTPStatus(), models.ErrorMessageOf(err)
}

// Action is a state-changing form: Do acts through the service and
// returns the message shown on the next page and the page to go to
// (empty: the form's "back" field, else the overview). An error's message
// is shown instead.
type Action struct {
	// Pattern is the route, e.g. "POST /ui/tasks/{id}/cancel".
	Pattern string
	Do      func(s *Server, r *http.Request) (msg, next string, err error)
}

// actions are the dashboard's forms; each file that adds one appends to
// it in an init function (registerAction).
var actions []Action

// registerAction adds forms to the dashboard.
func registerAction(a ...Action) { actions = append(actions, a...) }

// action serves a form post: the session, its CSRF token and a same-origin
// request are required (else 403), then Do runs and the browser is sent on
// (303) with Do's message, or its error's, as the next page's flash.
func (s *Server) action(a Action) {
	s.mux.HandleFunc(a.Pattern, s.requireSession(func(w http.ResponseWriter, r *http.Request) {
		sess := sessionOf(r)
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if !validCSRF(sess, r.PostFormValue("csrf")) {
			s.log.InfoContext(r.Context(), "form refused: bad csrf token", "path", r.URL.Path)
			s.renderError(w, r, http.StatusForbidden, models.Errorf(models.CodeUnauthorized,
				"the form's security token is missing or stale: reload the page and try again"))
			return
		}
		msg, next, err := a.Do(s, r)
		if next == "" {
			next = backTo(r)
		}
		if err != nil {
			_, m := s.describe(r, err)
			s.sessions.setFlash(sess, m, true)
		} else if msg != "" {
			s.sessions.setFlash(sess, msg, false)
		}
		http.Redirect(w, r, link(r, next), http.StatusSeeOther)
	}))
}

// backTo returns the form's "back" field when it is a dashboard path, else
// the overview (a path under Prefix: link puts it under the session's
// base).
func backTo(r *http.Request) string {
	if b := r.PostFormValue("back"); localPath(b) {
		return b
	}
	return Prefix + "/overview"
}

// localPath reports whether p is a path of the dashboard (not another
// site), as the routes name it: under Prefix, not under SessionPrefix.
func localPath(p string) bool {
	if !strings.HasPrefix(p, Prefix+"/") || strings.HasPrefix(p, SessionPrefix) || strings.Contains(p, "\\") {
		return false
	}
	u, err := url.Parse(p)
	return err == nil && u.Scheme == "" && u.Host == ""
}

// headers sets the security headers of every answer.
func (s *Server) headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
			"connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", ReferrerPolicy)
		if !strings.HasPrefix(r.URL.Path, Prefix+"/static/") {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

// crossOrigin refuses a cross-origin state-changing request (403) before
// the routes see it.
func (s *Server) crossOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.cop.Check(r); err != nil {
			s.log.InfoContext(r.Context(), "form refused: cross-origin", "origin", r.Header.Get("Origin"),
				"sec_fetch_site", r.Header.Get("Sec-Fetch-Site"), "path", r.URL.Path)
			s.renderError(w, r, http.StatusForbidden, models.Errorf(models.CodeUnauthorized,
				"cross-site form refused: a page of another site may not post to the dashboard"))
			return
		}
		next.ServeHTTP(w, r)
	})
}
