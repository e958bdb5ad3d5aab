package api

import (
	"net/http"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds a person's decision on a task waiting for one: approve
// or reject.

// DecisionRequest is the body of a task's approve or reject.
type DecisionRequest struct {
	// Feedback says why; required to reject (it reaches the next attempt).
	Feedback string `json:"feedback,omitempty"`
	// By names who decides; default "api".
	By string `json:"by,omitempty"`
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
