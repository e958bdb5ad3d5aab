package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds the table of routes and the middleware every request
// goes through (logging, the guard, authentication). The handlers sit in
// a file per area: projects.go, tasks.go, approvals.go, diff.go,
// agents.go, runners.go, questions.go, status.go, follow.go, rules.go,
// hooks.go and workflows.go.

// APIPrefix is the path prefix of the authenticated API.
const APIPrefix = "/api/v1"

// UIPrefix is the path prefix of the web dashboard (Config.UI).
const UIPrefix = "/ui"

// UISessionPrefix starts the paths of the dashboard's logged-in pages
// (web.SessionPrefix): the path segment after it is a session's secret,
// which the logs never show (logPath).
const UISessionPrefix = UIPrefix + "/s/"

// logPath is a request's path as a log line shows it: cleanHeader's,
// with a dashboard session's path secret replaced by "-".
func logPath(p string) string {
	if rest, ok := strings.CutPrefix(p, UISessionPrefix); ok {
		p = UISessionPrefix + "-"
		if _, tail, more := strings.Cut(rest, "/"); more {
			p += "/" + tail
		}
	}
	return cleanHeader(p)
}

// routeMux is the API's ServeMux, remembering the pattern of every route
// registered on it (the endpoint list of the package documentation is
// checked against them).
type routeMux struct {
	*http.ServeMux
	patterns []string
}

// Handle registers h for pattern and remembers the pattern.
func (m *routeMux) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, h)
}

// HandleFunc registers h for pattern and remembers the pattern.
func (m *routeMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(h))
}

func (s *Server) routes() http.Handler {
	mux := &routeMux{ServeMux: http.NewServeMux()}
	mux.HandleFunc("GET /healthz", s.handleHealth)
	mux.HandleFunc("POST "+APIPrefix+"/projects", s.handleCreateProject)
	mux.HandleFunc("GET "+APIPrefix+"/projects", s.handleListProjects)
	mux.HandleFunc("GET "+APIPrefix+"/projects/{id}", s.handleGetProject)
	mux.HandleFunc("PATCH "+APIPrefix+"/projects/{id}", s.handleUpdateProject)
	mux.HandleFunc("DELETE "+APIPrefix+"/projects/{id}", s.handleDeleteProject)
	mux.HandleFunc("POST "+APIPrefix+"/tasks", s.handleCreateTasks)
	mux.HandleFunc("GET "+APIPrefix+"/tasks", s.handleListTasks)
	mux.HandleFunc("GET "+APIPrefix+"/tasks/{id}", s.handleGetTask)
	mux.HandleFunc("PATCH "+APIPrefix+"/tasks/{id}", s.handleEditTask)
	mux.HandleFunc("DELETE "+APIPrefix+"/tasks/{id}", s.handleDeleteTask)
	mux.HandleFunc("POST "+APIPrefix+"/tasks/{id}/dependencies", s.handleChangeDependencies)
	mux.HandleFunc("POST "+APIPrefix+"/tasks/{id}/events", s.handleTaskEvent)
	mux.HandleFunc("POST "+APIPrefix+"/tasks/{id}/cancel", s.handleCancelTask)
	mux.HandleFunc("POST "+APIPrefix+"/tasks/{id}/approve", s.handleDecision(true))
	mux.HandleFunc("POST "+APIPrefix+"/projects/{id}/land", s.handleLandProject)
	mux.HandleFunc("POST "+APIPrefix+"/tasks/{id}/reject", s.handleDecision(false))
	mux.HandleFunc("GET "+APIPrefix+"/tasks/{id}/diff", s.handleTaskDiff)
	mux.HandleFunc("POST "+APIPrefix+"/agents", s.handleRegisterAgent)
	mux.HandleFunc("GET "+APIPrefix+"/agents", s.handleListAgents)
	mux.HandleFunc("GET "+APIPrefix+"/agents/{id}", s.handleGetAgent)
	mux.HandleFunc("DELETE "+APIPrefix+"/agents/{id}", s.handleRemoveAgent)
	mux.HandleFunc("POST "+APIPrefix+"/agents/{id}/pause", s.handlePauseAgent(true))
	mux.HandleFunc("POST "+APIPrefix+"/agents/{id}/resume", s.handlePauseAgent(false))
	mux.HandleFunc("GET "+APIPrefix+"/questions", s.handleListQuestions)
	mux.HandleFunc("POST "+APIPrefix+"/questions/{id}/answer", s.handleAnswerQuestion)
	mux.HandleFunc("GET "+APIPrefix+"/budget", s.handleBudget)
	mux.HandleFunc("GET "+APIPrefix+"/status", s.handleStatus)
	mux.HandleFunc("GET "+APIPrefix+"/desk", s.handleDesk)
	mux.HandleFunc("GET "+APIPrefix+"/stats", s.handleStats)
	if s.cfg.Logs != nil {
		mux.HandleFunc("GET "+APIPrefix+"/tasks/{id}/logs", s.handleTaskLog)
		mux.HandleFunc("GET "+APIPrefix+"/changes", s.handleChanges)
	}
	s.ruleRoutes(mux)
	s.runnerRoutes(mux)
	if s.cfg.Hooks != nil {
		s.hookRoutes(mux)
	}
	if s.cfg.Workflows != nil {
		s.workflowRoutes(mux)
	}
	if s.cfg.GitHubWebhook != nil {
		mux.Handle("POST "+WebhookPath, s.cfg.GitHubWebhook)
	}
	if s.cfg.Metrics != nil {
		mux.Handle("GET "+MetricsPath, s.cfg.Metrics)
	}
	if s.cfg.Runners != nil {
		mux.Handle(RunnerPrefix+"/", s.cfg.Runners)
	}
	if s.cfg.UI != nil {
		mux.Handle(UIPrefix+"/", s.cfg.UI)
		mux.Handle("GET "+UIPrefix, http.RedirectHandler(UIPrefix+"/", http.StatusSeeOther))
	}
	s.patterns = mux.patterns
	// Not a route: the answer to every request no route matches.
	mux.ServeMux.HandleFunc("/", s.noRoute(mux.ServeMux))
	return s.logRequests(s.guard(s.authenticate(s.requireJSON(mux))))
}

// noRoute answers requests no pattern matches: 405 naming the allowed
// methods when the path exists, else 404.
func (s *Server) noRoute(mux *http.ServeMux) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var allowed []string
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			if _, pattern := mux.Handler(&http.Request{Method: m, URL: r.URL, Host: r.Host}); pattern != "" && pattern != "/" {
				allowed = append(allowed, m)
			}
		}
		if len(allowed) > 0 {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			s.writeError(w, r, &httpError{status: http.StatusMethodNotAllowed, err: models.Errorf(models.CodeInvalid,
				"method %s is not allowed on %s (allowed: %s)", shortText(r.Method), shortText(r.URL.Path), strings.Join(allowed, ", "))})
			return
		}
		s.writeError(w, r, models.Errorf(models.CodeNotFound, "no such endpoint: %s %s", shortText(r.Method), shortText(r.URL.Path)))
	}
}

// MetricsPath is the path of the Prometheus metrics (Config.Metrics).
const MetricsPath = "/metrics"

// authenticate requires the bearer token on /api/v1 and /metrics when one
// is configured.
func (s *Server) authenticate(next http.Handler) http.Handler {
	if s.cfg.Token == "" {
		return next
	}
	want := sha256.Sum256([]byte(s.cfg.Token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !underAPI(r.URL.Path) && r.URL.Path != MetricsPath {
			next.ServeHTTP(w, r)
			return
		}
		scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentqueued"`)
			s.writeError(w, r, models.Errorf(models.CodeUnauthorized, "missing bearer token (Authorization: Bearer <token>)"))
			return
		}
		// Over budget, the token is not checked at all: right and wrong
		// ones get the same answer (internal/throttle).
		attempt, wait := s.cfg.Throttle.Begin(r.RemoteAddr)
		if attempt == nil {
			secs := int64(wait / time.Second)
			w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
			s.writeError(w, r, &httpError{status: http.StatusTooManyRequests, err: models.Errorf(models.CodeUnavailable,
				"too many wrong bearer tokens from this address: try again in %d s", secs)})
			return
		}
		// Comparing digests keeps the comparison constant-time whatever the lengths.
		got := sha256.Sum256([]byte(strings.TrimSpace(token)))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			attempt.Failed()
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentqueued", error="invalid_token"`)
			s.writeError(w, r, models.Errorf(models.CodeUnauthorized, "invalid bearer token"))
			return
		}
		attempt.Succeeded()
		next.ServeHTTP(w, r)
	})
}

// statusRecorder remembers the status written through it.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (sr *statusRecorder) WriteHeader(code int) {
	if sr.status == 0 {
		sr.status = code
	}
	sr.ResponseWriter.WriteHeader(code)
}

func (sr *statusRecorder) Write(b []byte) (int, error) {
	if sr.status == 0 {
		sr.status = http.StatusOK
	}
	return sr.ResponseWriter.Write(b)
}

func (sr *statusRecorder) Unwrap() http.ResponseWriter { return sr.ResponseWriter }

// logRequests logs each request at debug level (never its headers).
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		s.log.DebugContext(r.Context(), "http request", "method", cleanHeader(r.Method), "path", logPath(r.URL.Path),
			"status", rec.status, "duration", time.Since(start))
	})
}
