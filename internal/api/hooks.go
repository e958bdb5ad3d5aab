package api

import (
	"bytes"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/service/areas"
)

// HookService is what the API needs for hooks: the service's hook area.
// Answers carry no secrets (a hook's llm_config.api_key is redacted before
// it reaches the API).
type HookService interface {
	areas.Hooks
}

// Request and answer shapes of the hook endpoints.
type (
	// HookList answers GET /api/v1/hooks.
	HookList struct {
		Hooks []models.Hook `json:"hooks"`
	}
	// HookRunList answers GET /api/v1/hooks/{id}/runs.
	HookRunList struct {
		Runs []models.HookRun `json:"runs"`
		// Next, when set, continues the list: ?after=<Next>.
		Next string `json:"next,omitempty"`
	}
	// FireRequest is the optional body of POST /api/v1/hooks/{id}/fire.
	FireRequest struct {
		// Event, when set, is the event an event hook runs with (its
		// type defaults to the hook's event_type, its project is the hook's).
		Event *models.HookEvent `json:"event,omitempty"`
		// Actor names who fires the hook; default DefaultActor.
		Actor string `json:"actor,omitempty"`
	}
)

// hookRoutes registers the hook endpoints on mux.
func (s *Server) hookRoutes(mux *routeMux) {
	mux.HandleFunc("GET "+APIPrefix+"/hooks", s.handleListHooks)
	mux.HandleFunc("POST "+APIPrefix+"/hooks", s.handleCreateHook)
	mux.HandleFunc("GET "+APIPrefix+"/hooks/{id}", s.handleGetHook)
	mux.HandleFunc("PATCH "+APIPrefix+"/hooks/{id}", s.handleUpdateHook)
	mux.HandleFunc("DELETE "+APIPrefix+"/hooks/{id}", s.handleDeleteHook)
	mux.HandleFunc("POST "+APIPrefix+"/hooks/{id}/fire", s.handleFireHook)
	mux.HandleFunc("GET "+APIPrefix+"/hooks/{id}/runs", s.handleListHookRuns)
	mux.HandleFunc("GET "+APIPrefix+"/hook-runs/{id}", s.handleGetHookRun)
}

// parseQuery reads a query that may hold only the known parameters, each
// at most once.
func parseQuery(rawQuery string, known ...string) (url.Values, error) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, invalid("query: %v", err)
	}
	for name, vals := range q {
		if !slices.Contains(known, name) {
			if len(known) == 0 {
				return nil, invalid("query parameter %q: unknown (this endpoint takes none)", name)
			}
			return nil, invalid("query parameter %q: unknown (known: %s)", name, strings.Join(known, ", "))
		}
		if len(vals) > 1 {
			return nil, invalid("query parameter %q: given more than once", name)
		}
	}
	return q, nil
}

func (s *Server) handleListHooks(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r.URL.RawQuery, "project")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	hs, err := s.cfg.Hooks.ListHooks(r.Context(), q.Get("project"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, HookList{Hooks: nonNil(hs)})
}

func (s *Server) handleCreateHook(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	var spec models.HookSpec
	if err := s.decodeBody(w, r, &spec); err != nil {
		s.writeError(w, r, err)
		return
	}
	h, err := s.cfg.Hooks.CreateHook(r.Context(), spec.Hook())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "hook created", "hook_id", h.ID, "project_id", h.ProjectID,
		"trigger", h.Trigger.Type, "enabled", h.Enabled)
	w.Header().Set("Location", APIPrefix+"/hooks/"+url.PathEscape(h.ID))
	s.writeJSON(w, r, http.StatusCreated, h)
}

func (s *Server) handleGetHook(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	h, err := s.cfg.Hooks.GetHook(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, h)
}

func (s *Server) handleUpdateHook(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	var patch models.HookPatch
	if err := s.decodeBody(w, r, &patch); err != nil {
		s.writeError(w, r, err)
		return
	}
	if patch == (models.HookPatch{}) {
		s.writeError(w, r, invalid("request body: nothing to change (set name, enabled, trigger, context_steps, "+
			"prompt_template, llm_config, clear_llm_config, cooldown_seconds, max_tokens_per_run or clear_max_tokens_per_run)"))
		return
	}
	h, err := s.cfg.Hooks.UpdateHook(r.Context(), r.PathValue("id"), patch)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "hook updated", "hook_id", h.ID, "project_id", h.ProjectID, "enabled", h.Enabled)
	s.writeJSON(w, r, http.StatusOK, h)
}

func (s *Server) handleDeleteHook(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	if err := s.cfg.Hooks.DeleteHook(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "hook deleted", "hook_id", id)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleFireHook(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	data, err := s.readBody(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req FireRequest
	if len(bytes.TrimSpace(data)) > 0 {
		if err := decodeJSON(data, &req); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	if req.Actor == "" {
		req.Actor = DefaultActor
	}
	run, err := s.cfg.Hooks.FireHook(r.Context(), r.PathValue("id"), req.Actor, models.HookFire{Event: req.Event})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "hook fired by hand", "hook_id", run.HookID, "project_id", run.ProjectID,
		"run_id", run.ID, "status", run.Status, "actor", req.Actor)
	s.writeJSON(w, r, http.StatusAccepted, run)
}

func (s *Server) handleListHookRuns(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r.URL.RawQuery, "status", "limit", "after")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	f := models.HookRunFilter{HookID: r.PathValue("id"), Status: models.HookRunStatus(q.Get("status"))}
	if f.Status != "" && !slices.Contains(models.HookRunStatuses, f.Status) {
		s.writeError(w, r, invalid("status: must be one of %s (got %s)", joinEnum(models.HookRunStatuses, ", "),
			quoteShort(string(f.Status))))
		return
	}
	limit, err := parseLimit(q.Get("limit"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	f.Limit = limit + 1
	// An unknown hook is a 404, not an empty list.
	if _, err := s.cfg.Hooks.GetHook(r.Context(), f.HookID); err != nil {
		s.writeError(w, r, err)
		return
	}
	runs, err := s.cfg.Hooks.ListHookRunsAfter(r.Context(), f, q.Get("after"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	runs, next := pageOf(runs, limit, func(run models.HookRun) string { return run.ID })
	s.writeJSON(w, r, http.StatusOK, HookRunList{Runs: nonNil(runs), Next: next})
}

func (s *Server) handleGetHookRun(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	run, err := s.cfg.Hooks.GetHookRun(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, run)
}

// joinEnum joins the values of a string enum with sep.
func joinEnum[S ~string](values []S, sep string) string {
	ss := make([]string, len(values))
	for i, v := range values {
		ss[i] = string(v)
	}
	return strings.Join(ss, sep)
}
