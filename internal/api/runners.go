package api

import (
	"context"
	"net/http"
	"net/url"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/service/areas"
)

// This file holds the runner endpoints (docs/runners.md, "The registry"):
// add a runner (its token answered once), list, read, drain, resume and
// remove runners; and the Client's methods for them.

// RunnerService is what the runner endpoints need: the registry of
// runners.
type RunnerService interface {
	areas.Runners
}

// RunnerRequest is the body of POST /api/v1/runners.
type RunnerRequest struct {
	// Name is the runner's name, an id.
	Name string `json:"name"`
	// Labels describe its machine; each an id, at most
	// models.MaxRunnerLabels.
	Labels []string `json:"labels,omitempty"`
	// Capacity is the most runs it holds at once; 0 (the default) is as
	// many as it has agents.
	Capacity int `json:"capacity,omitempty"`
}

// RunnerAdded answers POST /api/v1/runners: the runner and its token,
// which no other answer ever shows again.
type RunnerAdded struct {
	Runner models.Runner `json:"runner"`
	Token  string        `json:"token"`
}

// RunnerList answers GET /api/v1/runners.
type RunnerList struct {
	Runners []models.Runner `json:"runners"`
}

func (s *Server) runnerRoutes(mux *routeMux) {
	mux.HandleFunc("POST "+APIPrefix+"/runners", s.handleAddRunner)
	mux.HandleFunc("GET "+APIPrefix+"/runners", s.handleListRunners)
	mux.HandleFunc("GET "+APIPrefix+"/runners/{name}", s.handleGetRunner)
	mux.HandleFunc("DELETE "+APIPrefix+"/runners/{name}", s.handleRemoveRunner)
	mux.HandleFunc("POST "+APIPrefix+"/runners/{name}/drain", s.handleRunnerState(models.RunnerDraining))
	mux.HandleFunc("POST "+APIPrefix+"/runners/{name}/resume", s.handleRunnerState(models.RunnerActive))
}

func (s *Server) handleAddRunner(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	var req RunnerRequest
	if err := s.decodeBody(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	runner, token, err := s.svc.AddRunner(r.Context(), req.Name, req.Labels, req.Capacity)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "runner added", "runner", runner.Name)
	// The token is a credential: no cache keeps the answer.
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusCreated, RunnerAdded{Runner: runner, Token: token})
}

func (s *Server) handleListRunners(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	rs, err := s.svc.ListRunners(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, RunnerList{Runners: nonNil(rs)})
}

func (s *Server) handleGetRunner(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	runner, err := s.svc.GetRunner(r.Context(), r.PathValue("name"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, runner)
}

func (s *Server) handleRemoveRunner(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	name := r.PathValue("name")
	if err := s.svc.RemoveRunner(r.Context(), name); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "runner removed", "runner", name)
	w.WriteHeader(http.StatusNoContent)
}

// handleRunnerState drains a runner (no new run) or makes it ACTIVE again.
func (s *Server) handleRunnerState(state models.RunnerState) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := noQuery(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		set := s.svc.ResumeRunner
		if state == models.RunnerDraining {
			set = s.svc.DrainRunner
		}
		runner, err := set(r.Context(), r.PathValue("name"))
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.log.InfoContext(r.Context(), "runner state set", "runner", runner.Name, "state", runner.State)
		s.writeJSON(w, r, http.StatusOK, runner)
	}
}

// runnerPath is the path of a runner's endpoints.
func runnerPath(name string) string { return APIPrefix + "/runners/" + url.PathEscape(name) }

// AddRunner registers a runner and returns it with its token, which the
// daemon never shows again.
func (c *Client) AddRunner(ctx context.Context, name string, labels []string, capacity int) (models.Runner, string, error) {
	var out RunnerAdded
	err := c.do(ctx, http.MethodPost, APIPrefix+"/runners", nil, RunnerRequest{Name: name, Labels: labels, Capacity: capacity}, &out)
	return out.Runner, out.Token, err
}

// ListRunners lists the runners with their agents.
func (c *Client) ListRunners(ctx context.Context) ([]models.Runner, error) {
	var out RunnerList
	return out.Runners, c.do(ctx, http.MethodGet, APIPrefix+"/runners", nil, nil, &out)
}

// GetRunner returns one runner.
func (c *Client) GetRunner(ctx context.Context, name string) (models.Runner, error) {
	var out models.Runner
	return out, c.do(ctx, http.MethodGet, runnerPath(name), nil, nil, &out)
}

// DrainRunner makes a runner DRAINING.
func (c *Client) DrainRunner(ctx context.Context, name string) (models.Runner, error) {
	var out models.Runner
	return out, c.do(ctx, http.MethodPost, runnerPath(name)+"/drain", nil, nil, &out)
}

// ResumeRunner makes a runner ACTIVE again.
func (c *Client) ResumeRunner(ctx context.Context, name string) (models.Runner, error) {
	var out models.Runner
	return out, c.do(ctx, http.MethodPost, runnerPath(name)+"/resume", nil, nil, &out)
}

// RemoveRunner removes a runner and its agents.
func (c *Client) RemoveRunner(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, runnerPath(name), nil, nil, nil)
}
