package api

import (
	"net/http"
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds the daemon's reports: its health, the budget, the
// projects' throughput, the status overview and the desk.

// Health answers GET /healthz: status "ok", or "unhealthy" with the
// reason (and the error, with status 503).
type Health struct {
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

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	reason := ""
	if err := s.svc.Ping(r.Context()); err != nil {
		s.log.ErrorContext(r.Context(), "health check failed", "err", err)
		// The store's words (a damaged database says so), free of secrets.
		reason = "store unavailable: " + strings.TrimPrefix(err.Error(), "ping store: ")
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
	o.Desk, o.Rules, o.Runners = nonNil(o.Desk), nonNil(o.Rules), nonNil(o.Runners)
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
