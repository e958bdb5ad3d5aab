package api

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/service/areas"
)

// WorkflowService is what the API needs for workflows and their runs: the
// service's workflow areas.
type WorkflowService interface {
	areas.Workflows
	areas.WorkflowDocuments
	areas.RunStarterWithInputs
	areas.WorkflowRuns
	areas.RunTaskLogs
}

// Request and answer shapes of the workflow endpoints.
type (
	// WorkflowList answers GET /api/v1/workflows.
	WorkflowList struct {
		Workflows []models.Workflow `json:"workflows"`
	}
	// WorkflowPatch is the body of PATCH /api/v1/workflows/{name}.
	WorkflowPatch struct {
		// ScheduleEnabled turns the workflow's schedule on or off; required.
		ScheduleEnabled *bool `json:"schedule_enabled,omitempty"`
	}
	// ActorRequest is the optional body of POST
	// /api/v1/workflows/{name}/runs, /api/v1/runs/{id}/cancel and
	// /api/v1/runs/{id}/retry.
	ActorRequest struct {
		// Actor names who acts; default DefaultActor.
		Actor string `json:"actor,omitempty"`
	}
	// RunRequest is the optional body of POST /api/v1/workflows/{name}/runs.
	RunRequest struct {
		// Actor names who starts the run; default DefaultActor.
		Actor string `json:"actor,omitempty"`
		// Inputs are values for the workflow's inputs, by name.
		Inputs map[string]string `json:"inputs,omitempty"`
	}
	// WorkflowRunList answers GET /api/v1/runs.
	WorkflowRunList struct {
		Runs []models.WorkflowRun `json:"runs"`
		// Next, when set, continues the list: ?after=<Next>.
		Next string `json:"next,omitempty"`
	}
	// RunTaskList answers GET /api/v1/runs/{id}/tasks.
	RunTaskList struct {
		Tasks []models.RunTask `json:"tasks"`
	}
)

// WorkflowDocumentName labels the positions of the problems of a posted
// workflow document: "request:LINE:COL: PATH: MESSAGE".
const WorkflowDocumentName = "request"

// workflowMediaTypes are the Content-Types a workflow document may be
// posted with (or none); types ending in +json or +yaml are accepted too.
var workflowMediaTypes = []string{"application/yaml", "application/x-yaml", "text/yaml", "application/json"}

// runStatuses lists the statuses GET /api/v1/runs filters on, for messages.
var runStatuses = func() string {
	names := make([]string, len(models.WorkflowRunStatuses))
	for i, st := range models.WorkflowRunStatuses {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}()

// workflowRoutes registers the workflow and run endpoints on mux.
func (s *Server) workflowRoutes(mux *routeMux) {
	mux.HandleFunc("GET "+APIPrefix+"/workflows", s.handleListWorkflows)
	mux.HandleFunc("POST "+APIPrefix+"/workflows", s.handleSaveWorkflow)
	mux.HandleFunc("GET "+APIPrefix+"/workflows/{name}", s.handleGetWorkflow)
	mux.HandleFunc("PATCH "+APIPrefix+"/workflows/{name}", s.handlePatchWorkflow)
	mux.HandleFunc("DELETE "+APIPrefix+"/workflows/{name}", s.handleDeleteWorkflow)
	mux.HandleFunc("POST "+APIPrefix+"/workflows/{name}/runs", s.handleStartRun)
	mux.HandleFunc("GET "+APIPrefix+"/runs", s.handleListRuns)
	mux.HandleFunc("GET "+APIPrefix+"/runs/{id}", s.handleGetRun)
	mux.HandleFunc("POST "+APIPrefix+"/runs/{id}/cancel", s.handleRunAction(false))
	mux.HandleFunc("POST "+APIPrefix+"/runs/{id}/retry", s.handleRunAction(true))
	mux.HandleFunc("GET "+APIPrefix+"/runs/{id}/tasks", s.handleRunTasks)
	mux.HandleFunc("GET "+APIPrefix+"/runs/{id}/tasks/{name}/logs", s.handleRunTaskLogs)
}

func (s *Server) handleListWorkflows(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r.URL.RawQuery, "project")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	project := q.Get("project")
	// An unknown project is a 404, not an empty list.
	if project != "" {
		if _, err := s.svc.GetProject(r.Context(), project); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	ws, err := s.cfg.Workflows.ListWorkflows(r.Context(), project)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, WorkflowList{Workflows: nonNil(ws)})
}

// readDocument reads a workflow document of at most Config.MaxBodyBytes
// with a YAML or JSON (or absent) Content-Type.
func (s *Server) readDocument(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !(slices.Contains(workflowMediaTypes, mt) || strings.HasSuffix(mt, "+json") || strings.HasSuffix(mt, "+yaml")) {
			return nil, &httpError{status: http.StatusUnsupportedMediaType, err: models.Errorf(models.CodeInvalid,
				"request body: Content-Type must be one of %s (got %q)", strings.Join(workflowMediaTypes, ", "), ct)}
		}
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &httpError{status: http.StatusRequestEntityTooLarge,
				err: models.Errorf(models.CodeInvalid, "request body: larger than %d bytes", mbe.Limit)}
		}
		return nil, bodyReadError(err)
	}
	return data, nil
}

// handleSaveWorkflow creates a workflow from the posted document (201) or
// replaces the one of its name (200).
func (s *Server) handleSaveWorkflow(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	src, err := s.readDocument(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// Whether it replaces one only chooses the status: the save itself
	// creates or replaces atomically.
	existed := false
	if name := documentName(src); name != "" {
		_, err := s.cfg.Workflows.GetWorkflow(r.Context(), name)
		switch {
		case err == nil:
			existed = true
		case models.ErrorCodeOf(err) != models.CodeNotFound:
			s.writeError(w, r, err)
			return
		}
	}
	wf, err := s.cfg.Workflows.SaveWorkflowDocument(r.Context(), WorkflowDocumentName, src)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status, msg := http.StatusCreated, "workflow created"
	if existed {
		status, msg = http.StatusOK, "workflow replaced"
	}
	s.log.InfoContext(r.Context(), msg, "workflow", wf.Name, "project_id", wf.ProjectID, "steps", len(wf.Steps),
		"schedule", wf.Schedule, "schedule_enabled", wf.ScheduleEnabled)
	if status == http.StatusCreated {
		w.Header().Set("Location", APIPrefix+"/workflows/"+url.PathEscape(wf.Name))
	}
	s.writeJSON(w, r, status, wf)
}

// documentName returns the top-level name of a workflow document, or ""
// when it has none that reads (the parse that follows says why).
func documentName(src []byte) string {
	var doc struct {
		Name string `yaml:"name"`
	}
	if yaml.Unmarshal(src, &doc) != nil {
		return ""
	}
	return doc.Name
}

func (s *Server) handleGetWorkflow(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	wf, err := s.cfg.Workflows.GetWorkflow(r.Context(), r.PathValue("name"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, wf)
}

func (s *Server) handlePatchWorkflow(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	var patch WorkflowPatch
	if err := s.decodeBody(w, r, &patch); err != nil {
		s.writeError(w, r, err)
		return
	}
	if patch.ScheduleEnabled == nil {
		s.writeError(w, r, invalid("request body: nothing to change (set schedule_enabled)"))
		return
	}
	wf, err := s.cfg.Workflows.SetWorkflowSchedule(r.Context(), r.PathValue("name"), *patch.ScheduleEnabled)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "workflow schedule changed", "workflow", wf.Name, "project_id", wf.ProjectID,
		"schedule_enabled", wf.ScheduleEnabled)
	s.writeJSON(w, r, http.StatusOK, wf)
}

func (s *Server) handleDeleteWorkflow(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	name := r.PathValue("name")
	if err := s.cfg.Workflows.DeleteWorkflow(r.Context(), name); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "workflow deleted", "workflow", name)
	w.WriteHeader(http.StatusNoContent)
}

// readActor reads the optional {"actor"} body; the actor defaults to
// DefaultActor.
func (s *Server) readActor(w http.ResponseWriter, r *http.Request) (string, error) {
	if err := noQuery(r); err != nil {
		return "", err
	}
	data, err := s.readBody(w, r)
	if err != nil {
		return "", err
	}
	var req ActorRequest
	if len(bytes.TrimSpace(data)) > 0 {
		if err := decodeJSON(data, &req); err != nil {
			return "", err
		}
	}
	if req.Actor == "" {
		req.Actor = DefaultActor
	}
	return req.Actor, nil
}

func (s *Server) handleStartRun(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	data, err := s.readBody(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req RunRequest
	if len(bytes.TrimSpace(data)) > 0 {
		if err := decodeJSON(data, &req); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	actor := req.Actor
	if actor == "" {
		actor = DefaultActor
	}
	run, err := s.cfg.Workflows.StartRunWith(r.Context(), r.PathValue("name"), actor, req.Inputs)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "workflow run started by hand", "workflow", run.Workflow, "project_id", run.ProjectID,
		"run_id", run.ID, "status", run.Status, "actor", actor)
	w.Header().Set("Location", APIPrefix+"/runs/"+url.PathEscape(run.ID))
	s.writeJSON(w, r, http.StatusCreated, run)
}

// handleRunAction cancels a run, or retries it.
func (s *Server) handleRunAction(retry bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		actor, err := s.readActor(w, r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		id := r.PathValue("id")
		var run models.WorkflowRun
		msg := "workflow run cancelled"
		if retry {
			msg = "workflow run retried"
			run, err = s.cfg.Workflows.RetryRun(r.Context(), id, actor)
		} else {
			run, err = s.cfg.Workflows.CancelRun(r.Context(), id, actor)
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.log.InfoContext(r.Context(), msg, "workflow", run.Workflow, "project_id", run.ProjectID, "run_id", run.ID,
			"status", run.Status, "actor", actor)
		s.writeJSON(w, r, http.StatusOK, run)
	}
}

func (s *Server) handleListRuns(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r.URL.RawQuery, "workflow", "project", "status", "limit", "after")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	f := models.RunFilter{Workflow: q.Get("workflow"), ProjectID: q.Get("project"), Status: models.WorkflowRunStatus(q.Get("status"))}
	if f.Status != "" && !f.Status.Valid() {
		s.writeError(w, r, invalid("status: must be one of %s (got %s)", runStatuses, quoteShort(string(f.Status))))
		return
	}
	limit, err := parseLimit(q.Get("limit"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	f.Limit = limit + 1
	// An unknown project is a 404; a workflow's runs outlive it, so an
	// unknown workflow is only an empty list.
	if f.ProjectID != "" {
		if _, err := s.svc.GetProject(r.Context(), f.ProjectID); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	runs, err := s.cfg.Workflows.ListWorkflowRunsAfter(r.Context(), f, q.Get("after"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	runs, next := pageOf(runs, limit, func(run models.WorkflowRun) string { return run.ID })
	s.writeJSON(w, r, http.StatusOK, WorkflowRunList{Runs: nonNil(runs), Next: next})
}

func (s *Server) handleGetRun(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	run, err := s.cfg.Workflows.GetWorkflowRun(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, run)
}

func (s *Server) handleRunTasks(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	ts, err := s.cfg.Workflows.RunTasks(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	for i := range ts {
		ts[i].Task = redactTask(ts[i].Task)
	}
	s.writeJSON(w, r, http.StatusOK, RunTaskList{Tasks: nonNil(ts)})
}

func (s *Server) handleRunTaskLogs(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r.URL.RawQuery, "attempt")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	attempt := 0
	if v := q.Get("attempt"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			s.writeError(w, r, invalid("attempt: must be a positive integer (got %s)", quoteShort(v)))
			return
		}
		attempt = n
	}
	logs, err := s.cfg.Workflows.RunTaskLogs(r.Context(), r.PathValue("id"), r.PathValue("name"), attempt)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	logs.Attempts = nonNil(logs.Attempts)
	s.writeJSON(w, r, http.StatusOK, logs)
}
