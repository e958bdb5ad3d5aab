package api

import (
	"bytes"
	"net/http"
	"net/url"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds the project endpoints: create, list, read, update and
// delete projects, and retry their landings.

// ProjectList answers GET /api/v1/projects. Like every project the
// service answers, a repository URL is shown without credentials
// (models.Project.Redacted).
type ProjectList struct {
	Projects []models.Project `json:"projects"`
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
