package api

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Request and answer shapes of the API besides the models themselves.
type (
	// EventRequest is the body of POST /api/v1/tasks/{id}/events.
	EventRequest struct {
		// Event is one of models.AdminEvents.
		Event models.TaskEvent `json:"event"`
		// Reason is recorded with the transition.
		Reason string `json:"reason,omitempty"`
		// Actor names who sent the event; default DefaultActor.
		Actor string `json:"actor,omitempty"`
	}
	// BatchResponse answers POST /api/v1/tasks.
	BatchResponse struct {
		Results []models.BatchResult `json:"results"`
	}
	// ProjectList answers GET /api/v1/projects. Like every project the
	// service answers, a repository URL is shown without credentials
	// (models.Project.Redacted).
	ProjectList struct {
		Projects []models.Project `json:"projects"`
	}
	// TaskList answers GET /api/v1/tasks.
	TaskList struct {
		Tasks []models.Task `json:"tasks"`
		// Next, when set, continues the list: ?after=<Next>.
		Next string `json:"next,omitempty"`
	}
	// AgentList answers GET /api/v1/agents. Like every agent the service
	// answers, env values are masked (models.Agent.Redacted): names and
	// pass_env are shown, values never.
	AgentList struct {
		Agents []models.Agent `json:"agents"`
	}
	// Health answers GET /healthz: status "ok", or "unhealthy" with the
	// reason (and the error, with status 503).
	Health struct {
		Status string `json:"status"`
		Reason string `json:"reason,omitempty"`
		// Database identifies the database the daemon serves
		// (Config.DatabaseID): a client compares it with the one its own
		// configuration names, to tell this daemon from another one
		// answering at the same address.
		Database string `json:"database,omitempty"`
		// Error is set when unhealthy, so that clients reading errors see one.
		Error *ErrorDetail `json:"error,omitempty"`
	}
)

// APIPrefix is the path prefix of the authenticated API.
const APIPrefix = "/api/v1"

// UIPrefix is the path prefix of the web dashboard (Config.UI).
const UIPrefix = "/ui"

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
		// Comparing digests keeps the comparison constant-time whatever the lengths.
		got := sha256.Sum256([]byte(strings.TrimSpace(token)))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentqueued", error="invalid_token"`)
			s.writeError(w, r, models.Errorf(models.CodeUnauthorized, "invalid bearer token"))
			return
		}
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
		s.log.DebugContext(r.Context(), "http request", "method", cleanHeader(r.Method), "path", cleanHeader(r.URL.Path),
			"status", rec.status, "duration", time.Since(start))
	})
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	reason := ""
	if err := s.svc.Ping(r.Context()); err != nil {
		s.log.ErrorContext(r.Context(), "health check failed", "err", err)
		reason = "store unavailable"
	} else if s.cfg.Health != nil {
		if err := s.cfg.Health(r.Context()); err != nil {
			// The daemon's own words for its operators, free of secrets.
			s.log.WarnContext(r.Context(), "health check failed", "err", err)
			reason = err.Error()
		}
	}
	if reason != "" {
		s.writeJSON(w, r, http.StatusServiceUnavailable, Health{Status: "unhealthy", Reason: reason, Database: s.cfg.DatabaseID,
			Error: &ErrorDetail{Code: models.CodeInternal, Message: "unhealthy: " + reason}})
		return
	}
	s.writeJSON(w, r, http.StatusOK, Health{Status: "ok", Database: s.cfg.DatabaseID})
}

func (s *Server) handleCreateProject(w http.ResponseWriter, r *http.Request) {
	var spec models.ProjectSpec
	if err := s.decodeBody(w, r, &spec); err != nil {
		s.writeError(w, r, err)
		return
	}
	p, err := s.svc.CreateProject(r.Context(), spec.Project())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "project created", "project_id", p.ID)
	w.Header().Set("Location", APIPrefix+"/projects/"+url.PathEscape(p.ID))
	s.writeJSON(w, r, http.StatusCreated, p)
}

func (s *Server) handleListProjects(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	ps, err := s.svc.ListProjects(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, ProjectList{Projects: nonNil(ps)})
}

func (s *Server) handleGetProject(w http.ResponseWriter, r *http.Request) {
	p, err := s.svc.GetProject(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, p)
}

func (s *Server) handleUpdateProject(w http.ResponseWriter, r *http.Request) {
	var patch models.ProjectPatch
	if err := s.decodeBody(w, r, &patch); err != nil {
		s.writeError(w, r, err)
		return
	}
	if patch == (models.ProjectPatch{}) {
		// As models.ProjectPatch.Apply says it, refused here before any read.
		s.writeError(w, r, invalid("nothing to change: set one of name, credit_weight, max_concurrent_agents, "+
			"status, budget_limit, discord_channel_id, repo, settings"))
		return
	}
	p, err := s.svc.UpdateProject(r.Context(), r.PathValue("id"), patch)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "project updated", "project_id", p.ID)
	s.writeJSON(w, r, http.StatusOK, p)
}

func (s *Server) handleDeleteProject(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	if err := s.svc.DeleteProject(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "project deleted", "project_id", id)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleCreateTasks(w http.ResponseWriter, r *http.Request) {
	data, err := s.readBody(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	b, err := DecodeBatch(data)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	results, err := s.svc.CreateTasks(r.Context(), b)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	created, skipped := 0, 0
	for _, res := range results {
		if res.Skipped {
			skipped++
		} else {
			created++
		}
	}
	attrs := []any{"project_id", b.ProjectID, "created", created, "skipped", skipped}
	if created == 1 && skipped == 0 {
		attrs = append(attrs, "task_id", results[0].TaskID, "status", results[0].Status)
	}
	s.log.InfoContext(r.Context(), "tasks created", attrs...)
	s.writeJSON(w, r, http.StatusCreated, BatchResponse{Results: nonNil(results)})
}

// DecodeBatch decodes a task batch: either a models.TaskBatch object or a
// bare JSON array of models.BatchTask entries that name their own project.
// It is as strict as the API: unknown fields and trailing data are errors.
func DecodeBatch(data []byte) (models.TaskBatch, error) {
	var b models.TaskBatch
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '[' {
		if err := decodeJSON(data, &b.Tasks); err != nil {
			return models.TaskBatch{}, err
		}
		return b, nil
	}
	if err := decodeJSON(data, &b); err != nil {
		return models.TaskBatch{}, err
	}
	return b, nil
}

// taskQuery lists the query parameters of GET /api/v1/tasks.
var taskQuery = []string{"project", "status", "limit", "after", "archived"}

func (s *Server) handleListTasks(w http.ResponseWriter, r *http.Request) {
	f, err := parseTaskFilter(r.URL.RawQuery)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if f.ProjectID != "" {
		if _, err := s.svc.GetProject(r.Context(), f.ProjectID); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	limit := f.Limit
	f.Limit = limit + 1
	ts, err := s.svc.ListTasks(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ts, next := pageOf(ts, limit, func(t models.Task) string { return t.ID })
	for i := range ts {
		ts[i] = redactTask(ts[i])
	}
	s.writeJSON(w, r, http.StatusOK, TaskList{Tasks: nonNil(ts), Next: next})
}

// parseTaskFilter reads project, status (comma-separated statuses or
// status groups, repeatable), limit (DefaultPageSize when absent) and after.
func parseTaskFilter(rawQuery string) (models.TaskFilter, error) {
	var f models.TaskFilter
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return f, invalid("query: %v", err)
	}
	for name, vals := range q {
		if !slices.Contains(taskQuery, name) {
			return f, invalid("query parameter %q: unknown (known: %s)", name, strings.Join(taskQuery, ", "))
		}
		if name != "status" && len(vals) > 1 {
			return f, invalid("query parameter %q: given more than once", name)
		}
	}
	f.ProjectID = q.Get("project")
	f.AfterID = q.Get("after")
	if v := q.Get("archived"); v != "" {
		if f.Archived, err = strconv.ParseBool(v); err != nil {
			return f, invalid("query parameter \"archived\": %q is not true or false", v)
		}
	}
	if f.Limit, err = parseLimit(q.Get("limit")); err != nil {
		return f, err
	}
	for _, v := range q["status"] {
		for part := range strings.SplitSeq(v, ",") {
			if part = strings.TrimSpace(part); part == "" {
				continue
			}
			set, err := models.ResolveStatusSet(part)
			if err != nil {
				return f, err
			}
			f.Statuses = append(f.Statuses, set...)
		}
	}
	slices.Sort(f.Statuses)
	f.Statuses = slices.Compact(f.Statuses)
	return f, nil
}

func (s *Server) handleGetTask(w http.ResponseWriter, r *http.Request) {
	d, err := s.svc.GetTaskDetail(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	d.Dependencies, d.Dependents, d.Events = nonNil(d.Dependencies), nonNil(d.Dependents), nonNil(d.Events)
	d.Task = redactTask(d.Task)
	for i := range d.Events {
		d.Events[i].Reason = models.RedactURL(d.Events[i].Reason)
	}
	if d.Verification != nil {
		v := *d.Verification
		v.Actor, v.Text = models.RedactURL(v.Actor), models.RedactURL(v.Text)
		d.Verification = &v
	}
	s.writeJSON(w, r, http.StatusOK, d)
}

func (s *Server) handleEditTask(w http.ResponseWriter, r *http.Request) {
	var patch models.TaskPatch
	if err := s.decodeBody(w, r, &patch); err != nil {
		s.writeError(w, r, err)
		return
	}
	t, err := s.svc.EditTask(r.Context(), r.PathValue("id"), patch)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "task edited", "task_id", t.ID, "fields", patch.Fields())
	s.writeJSON(w, r, http.StatusOK, redactTask(t))
}

func (s *Server) handleDeleteTask(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	if err := s.svc.DeleteTask(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "task deleted", "task_id", id)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleChangeDependencies(w http.ResponseWriter, r *http.Request) {
	var req models.DependencyChange
	if err := s.decodeBody(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.svc.ChangeDependencies(r.Context(), r.PathValue("id"), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res.Dependencies = nonNil(res.Dependencies)
	res.Task = redactTask(res.Task)
	s.log.InfoContext(r.Context(), "task dependencies changed", "task_id", res.Task.ID, "added", res.Added,
		"removed", res.Removed, "status", res.Task.Status)
	s.writeJSON(w, r, http.StatusOK, res)
}

func (s *Server) handleTaskEvent(w http.ResponseWriter, r *http.Request) {
	var req EventRequest
	if err := s.decodeBody(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := checkAdminEvent(req.Event); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Actor == "" {
		req.Actor = DefaultActor
	}
	s.applyAdminEvent(w, r, models.TransitionRequest{TaskID: r.PathValue("id"), Event: req.Event, Reason: req.Reason, Actor: req.Actor})
}

// applyAdminEvent validates and applies an admin event, logs it and answers
// with the transition's result.
func (s *Server) applyAdminEvent(w http.ResponseWriter, r *http.Request, tr models.TransitionRequest) {
	if err := tr.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.svc.ApplyEvent(r.Context(), tr)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "task event applied", "task_id", tr.TaskID, "event", tr.Event, "actor", tr.Actor,
		"from", res.From, "to", res.To, "duplicate", res.Duplicate, "blocked", len(res.Blocked))
	res.Task = redactTask(res.Task)
	s.writeJSON(w, r, http.StatusOK, res)
}

// CancelRequest is the body of POST /api/v1/tasks/{id}/cancel.
type CancelRequest struct {
	// Reason says why; it follows "cancelled by <actor>: " in the task's
	// status reason.
	Reason string `json:"reason,omitempty"`
	// Actor names who cancels; default DefaultActor.
	Actor string `json:"actor,omitempty"`
}

// handleCancelTask cancels a task in any unfinished status (ADMIN_CANCEL):
// its run ends and it becomes BLOCKED. A repeat answers the same result
// with duplicate set; a COMPLETED or otherwise BLOCKED task is a conflict.
func (s *Server) handleCancelTask(w http.ResponseWriter, r *http.Request) {
	var req CancelRequest
	data, err := s.readBody(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(bytes.TrimSpace(data)) > 0 { // the body is optional
		if err := decodeJSON(data, &req); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	if req.Actor == "" {
		req.Actor = DefaultActor
	}
	s.applyAdminEvent(w, r, models.TransitionRequest{TaskID: r.PathValue("id"), Event: models.EventAdminCancel,
		Reason: req.Reason, Actor: req.Actor})
}

// checkAdminEvent accepts only the events a person may send.
func checkAdminEvent(e models.TaskEvent) error {
	allowed := make([]string, len(models.AdminEvents))
	for i, a := range models.AdminEvents {
		allowed[i] = string(a)
	}
	list := strings.Join(allowed, ", ")
	switch {
	case e == "":
		return invalid("event: required (one of %s)", list)
	case !e.Valid():
		return invalid("event %q: unknown event (allowed: %s)", e, list)
	case !e.IsAdmin():
		return invalid("event %q: not accepted through the API (allowed: %s)", e, list)
	}
	return nil
}

func (s *Server) handleRegisterAgent(w http.ResponseWriter, r *http.Request) {
	var reg models.AgentRegistration
	if err := s.decodeBody(w, r, &reg); err != nil {
		s.writeError(w, r, err)
		return
	}
	a, err := s.svc.RegisterAgent(r.Context(), reg.Agent())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "agent registered", "agent", a.ID)
	s.writeJSON(w, r, http.StatusCreated, a)
}

func (s *Server) handleListAgents(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	as, err := s.svc.ListAgents(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, AgentList{Agents: nonNil(as)})
}

// handleGetAgent answers one agent (redacted by the service, as the list).
func (s *Server) handleGetAgent(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	a, err := s.svc.GetAgent(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, a)
}

func (s *Server) handleRemoveAgent(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	if err := s.svc.RemoveAgent(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "agent removed", "agent", id)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleBudget(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	b, err := s.svc.Budget(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	b.Projects = nonNil(b.Projects)
	s.writeJSON(w, r, http.StatusOK, b)
}

// handleStats answers each project's throughput over the last day.
func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	st, err := s.svc.Stats(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, st)
}

// handleStatus answers the daemon's overview with the budget report:
// what Discord's /status and "ctl status" show.
func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := s.svc.Overview(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	b, err := s.svc.Budget(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	b.Projects = nonNil(b.Projects)
	o.Budget = &b
	o.Projects, o.Agents, o.Working = nonNil(o.Projects), nonNil(o.Agents), nonNil(o.Working)
	o.Desk, o.Rules = nonNil(o.Desk), nonNil(o.Rules)
	if o.Counts == nil {
		o.Counts = map[string]map[models.TaskStatus]int{}
	}
	if o.ProjectActivity == nil {
		o.ProjectActivity = map[string]models.Activity{}
	}
	s.writeJSON(w, r, http.StatusOK, o)
}

// handleDesk answers what waits on a person, of every project or of the
// one the query names.
func (s *Server) handleDesk(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r.URL.RawQuery, "project")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	d, err := s.svc.Desk(r.Context(), q.Get("project"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	d.Items = nonNil(d.Items)
	s.writeJSON(w, r, http.StatusOK, d)
}

// noQuery refuses query parameters on endpoints that take none.
func noQuery(r *http.Request) error {
	if r.URL.RawQuery != "" {
		return invalid("query parameters are not accepted on %s", r.URL.Path)
	}
	return nil
}

// redactTask removes the credentials of URLs from a task's reasons (its
// next event's quotes the status reason): an older daemon copied a
// repository URL's credentials into reasons.
func redactTask(t models.Task) models.Task {
	t.StatusReason = models.RedactURL(t.StatusReason)
	t.NextEventReason = models.RedactURL(t.NextEventReason)
	return t
}

// nonNil makes nil slices encode as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// QuestionList is the answer of GET /api/v1/questions.
type QuestionList struct {
	Questions []models.Question `json:"questions"`
	// Next, when set, continues the list: ?after=<Next>.
	Next string `json:"next,omitempty"`
}

// AnswerRequest is the body of POST /api/v1/questions/{id}/answer.
type AnswerRequest struct {
	Answer string `json:"answer"`
	// AnsweredBy names who answers; default "api".
	AnsweredBy string `json:"answered_by,omitempty"`
}

// DecisionRequest is the body of a task's approve or reject.
type DecisionRequest struct {
	// Feedback says why; required to reject (it reaches the next attempt).
	Feedback string `json:"feedback,omitempty"`
	// By names who decides; default "api".
	By string `json:"by,omitempty"`
}

// handleLandProject retries a project's waiting landings and answers
// which tasks landed and which still wait.
func (s *Server) handleLandProject(w http.ResponseWriter, r *http.Request) {
	// The body is empty or {}: the request has no field.
	data, err := s.readBody(w, r)
	if err == nil && len(bytes.TrimSpace(data)) > 0 {
		err = decodeJSON(data, &struct{}{})
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.svc.LandProject(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "landings retried", "project_id", res.ProjectID, "landed", len(res.Landed),
		"waiting", len(res.Waiting))
	s.writeJSON(w, r, http.StatusOK, res)
}

// handleDecision approves or rejects a task waiting for a person.
func (s *Server) handleDecision(approve bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req DecisionRequest
		if err := s.decodeBody(w, r, &req); err != nil {
			s.writeError(w, r, err)
			return
		}
		if req.By == "" {
			req.By = DefaultActor
		}
		if err := models.CheckLine("by", req.By, models.MaxActorLen); err != nil {
			s.writeError(w, r, err)
			return
		}
		if err := models.CheckText("feedback", req.Feedback, models.MaxDescriptionLen); err != nil {
			s.writeError(w, r, err)
			return
		}
		var res models.TransitionResult
		var err error
		if approve {
			res, err = s.svc.ApproveTask(r.Context(), r.PathValue("id"), req.By, req.Feedback)
		} else {
			res, err = s.svc.RejectTask(r.Context(), r.PathValue("id"), req.By, req.Feedback)
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.log.InfoContext(r.Context(), "task decided", "task_id", res.Task.ID, "approve", approve, "to", res.To)
		res.Task = redactTask(res.Task)
		s.writeJSON(w, r, http.StatusOK, res)
	}
}

func (s *Server) handleListQuestions(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r.URL.RawQuery, "limit", "after")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limit, err := parseLimit(q.Get("limit"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var after int64
	if v := q.Get("after"); v != "" {
		if after, err = strconv.ParseInt(v, 10, 64); err != nil || after <= 0 {
			s.writeError(w, r, invalid("after: %s is not a cursor of this list (pass back the answer's next)", quoteShort(v)))
			return
		}
	}
	qs, err := s.svc.OpenQuestionsPage(r.Context(), after, limit+1)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	qs, next := pageOf(qs, limit, func(q models.Question) string { return strconv.FormatInt(q.ID, 10) })
	s.writeJSON(w, r, http.StatusOK, QuestionList{Questions: nonNil(qs), Next: next})
}

func (s *Server) handleAnswerQuestion(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		s.writeError(w, r, invalid("question id %s: not a number", quoteShort(r.PathValue("id"))))
		return
	}
	var req AnswerRequest
	if err := s.decodeBody(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.AnsweredBy == "" {
		req.AnsweredBy = "api"
	}
	q, err := s.svc.AnswerQuestion(r.Context(), id, req.Answer, req.AnsweredBy)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "question answered", "task_id", q.TaskID, "question_id", q.ID)
	s.writeJSON(w, r, http.StatusOK, q)
}

// handlePauseAgent pauses (no new task) or resumes an agent.
func (s *Server) handlePauseAgent(paused bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := noQuery(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		a, err := s.svc.SetAgentPaused(r.Context(), r.PathValue("id"), paused)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.log.InfoContext(r.Context(), "agent paused", "agent", a.ID, "paused", paused)
		s.writeJSON(w, r, http.StatusOK, a)
	}
}
