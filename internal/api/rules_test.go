package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

func TestRulesAreListedAndReplacedWhole(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	var rs models.RuleSet
	e.do("GET", "/api/v1/rules", "").decode(t, http.StatusOK, &rs)
	if rs.Rules == nil || len(rs.Rules) != 0 || rs.Source != "" {
		t.Fatalf("no rules yet: %+v", rs)
	}

	e.do("PUT", "/api/v1/rules", `{"actor": "ops", "rules": [
		{"id": "one-deploy", "type": "Concurency", "matcher": {"kind": "deploy"}, "max_concurency": 1},
		{"id": "ingest-cap", "type": "capacity", "matcher": {"kind": "ingest", "status": "Running"}, "max_capacity": 100}]}`).
		decode(t, http.StatusOK, &rs)
	if len(rs.Rules) != 2 || rs.Source != models.RulesFromAPI || rs.UpdatedBy != "ops" ||
		rs.Rules[0].Type != models.RuleConcurrency || rs.Rules[0].MaxConcurrency != 1 || rs.Rules[1].Type != models.RuleCapacity {
		t.Fatalf("replaced: %+v", rs)
	}
	var got models.RuleSet
	e.do("GET", "/api/v1/rules", "").decode(t, http.StatusOK, &got)
	if len(got.Rules) != 2 || got.Rules[1].ID != "ingest-cap" || got.Rules[1].MaxCapacity != 100 {
		t.Fatalf("listed: %+v", got)
	}

	// Refusals name what was wrong and change nothing.
	for _, tc := range []struct {
		name, body string
		status     int
		code       models.ErrorCode
		msg        string
	}{
		{"no rules key", `{"actor": "ops"}`, 400, models.CodeInvalid, "rules: required"},
		{"an actor of two lines", `{"actor": "a\nb", "rules": []}`, 400, models.CodeInvalid, "actor: control character U+000A"},
		{"an unknown key in a rule", `{"rules": [{"type": "Capacity", "matcher": {"kind": "k"}, "max_capacity": 1, "limit": 2}]}`,
			400, models.CodeInvalid, `unknown key "limit"`},
		{"an invalid rule", `{"rules": [{"id": "ok", "type": "Concurrency", "matcher": {"kind": "k"}, "max_concurrency": 1},
			{"id": "bad", "type": "Concurrency", "matcher": {"kind": "k"}}]}`, 400, models.CodeInvalid, "rules[1] (bad): max_concurrency: must be at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.do("PUT", "/api/v1/rules", tc.body).wantError(t, tc.status, tc.code, tc.msg)
			var after models.RuleSet
			e.do("GET", "/api/v1/rules", "").decode(t, http.StatusOK, &after)
			if len(after.Rules) != 2 {
				t.Fatalf("a refused PUT changed the rules: %+v", after)
			}
		})
	}

	// The rules are checked at submission: a task the Capacity rule applies
	// to needs an expected_count that fits.
	e.createProject("p")
	e.do("POST", "/api/v1/tasks", `{"project_id": "p", "tasks": [{"title": "a", "kind": "ingest", "expected_count": 250}]}`).
		wantError(t, 400, models.CodeInvalid, "tasks[0]: expected_count: 250 exceeds max_capacity 100 of the Capacity rule rules[1] (ingest-cap)")

	// The client, as ctl uses it: an empty set removes every rule.
	rs, err := e.client.ReplaceRules(context.Background(), nil, "ctl")
	if err != nil || len(rs.Rules) != 0 || rs.UpdatedBy != "ctl" {
		t.Fatalf("cleared: %+v, %v", rs, err)
	}
	if got, err := e.client.Rules(context.Background()); err != nil || len(got.Rules) != 0 || got.Source != models.RulesFromAPI {
		t.Fatalf("after clearing: %+v, %v", got, err)
	}
}
