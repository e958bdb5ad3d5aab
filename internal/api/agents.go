package api

import (
	"net/http"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds the agent endpoints: register, list, read, pause, resume
// and remove agents.

// AgentList answers GET /api/v1/agents. Like every agent the service
// answers, env values are masked (models.Agent.Redacted): names and
// pass_env are shown, values never.
type AgentList struct {
	Agents []models.Agent `json:"agents"`
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
