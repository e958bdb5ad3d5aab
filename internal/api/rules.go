package api

import (
	"context"
	"net/http"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/service/areas"
)

// RuleService is what the rule endpoints need: the rule set in force and
// its replacement, all or nothing.
type RuleService interface {
	areas.Rules
}

// RulesRequest is the body of PUT /api/v1/rules: the whole new rule set.
type RulesRequest struct {
	// Rules replace every rule in force; an empty list removes them all.
	Rules []models.Rule `json:"rules"`
	// Actor names who replaced them; default DefaultActor.
	Actor string `json:"actor,omitempty"`
}

func (s *Server) ruleRoutes(mux *routeMux) {
	mux.HandleFunc("GET "+APIPrefix+"/rules", s.handleRules)
	mux.HandleFunc("PUT "+APIPrefix+"/rules", s.handleReplaceRules)
}

func (s *Server) handleRules(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	rs, err := s.svc.Rules(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rs.Rules = nonNil(rs.Rules)
	s.writeJSON(w, r, http.StatusOK, rs)
}

func (s *Server) handleReplaceRules(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	var req struct {
		Rules *[]models.Rule `json:"rules"`
		Actor string         `json:"actor,omitempty"`
	}
	if err := s.decodeBody(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Rules == nil {
		s.writeError(w, r, invalid("rules: required (the whole new set; [] removes every rule)"))
		return
	}
	if req.Actor == "" {
		req.Actor = DefaultActor
	}
	rs, err := s.svc.ReplaceRules(r.Context(), *req.Rules, req.Actor)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "rules replaced", "rules", len(rs.Rules), "actor", req.Actor)
	rs.Rules = nonNil(rs.Rules)
	s.writeJSON(w, r, http.StatusOK, rs)
}

// Rules returns the rule set in force.
func (c *Client) Rules(ctx context.Context) (models.RuleSet, error) {
	var out models.RuleSet
	return out, c.do(ctx, http.MethodGet, APIPrefix+"/rules", nil, nil, &out)
}

// ReplaceRules replaces the whole rule set; actor names who did.
func (c *Client) ReplaceRules(ctx context.Context, rules []models.Rule, actor string) (models.RuleSet, error) {
	if rules == nil {
		rules = []models.Rule{}
	}
	var out models.RuleSet
	return out, c.do(ctx, http.MethodPut, APIPrefix+"/rules", nil, RulesRequest{Rules: rules, Actor: actor}, &out)
}
