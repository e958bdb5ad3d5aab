package api

import (
	"net/http"
	"strconv"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds the question endpoints: list the open questions and
// answer one.

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
