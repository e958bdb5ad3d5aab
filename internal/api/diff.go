package api

import "net/http"

// TaskDiff is the answer of GET /api/v1/tasks/{id}/diff.
type TaskDiff struct {
	TaskID string `json:"task_id"`
	// Diff is the change the task's branch makes against its project's
	// default branch (for a landed task, the change its landing brought
	// to the default branch), in git's unified format; empty when it
	// changes nothing.
	Diff string `json:"diff"`
}

// handleTaskDiff answers the change of a task's branch: what a person
// approving the task would merge.
func (s *Server) handleTaskDiff(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	d, err := s.svc.TaskDiff(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, TaskDiff{TaskID: id, Diff: d})
}
