package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// TestProjectAndHookShowOutput: `ctl project show` prints its settings
// under one heading (or says it has the defaults); `ctl hook show` says
// which LLM a hook calls: none without a prompt template, the daemon's
// without overrides, else its overrides (the key only said to be set).
func TestProjectAndHookShowOutput(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	temp := float32(0.2)
	var out bytes.Buffer
	out.WriteString("--- ctl project show web\n")
	printProject(&out, models.Project{ID: "web", Name: "web", Status: models.ProjectActive, CreditWeight: 1,
		MaxConcurrentAgents: 2, CreatedAt: at, UpdatedAt: at,
		Settings: models.ProjectSettings{PRMode: models.PRNever, DefaultProfile: "careful"}})
	out.WriteString("\n--- ctl project show docs\n")
	printProject(&out, models.Project{ID: "docs", Name: "Docs", Status: models.ProjectActive, CreditWeight: 1,
		MaxConcurrentAgents: 1, CreatedAt: at, UpdatedAt: at})
	for _, h := range []models.Hook{
		{ID: "collect", ProjectID: "web", Name: "Collect", Enabled: true, Trigger: models.HookTrigger{Type: models.TriggerManual}},
		{ID: "triage", ProjectID: "web", Name: "Triage", Enabled: true, Trigger: models.HookTrigger{Type: models.TriggerManual},
			PromptTemplate: "Triage {{step_0}}"},
		{ID: "review", ProjectID: "web", Name: "Review", Enabled: true, Trigger: models.HookTrigger{Type: models.TriggerManual},
			PromptTemplate: "Review", LLMConfig: &models.HookLLMConfig{Model: "small", BaseURL: "http://127.0.0.1:11434/v1",
				APIKey: models.RedactedKey, Temperature: &temp}},
		{ID: "quiet", ProjectID: "web", Name: "Quiet", Enabled: true, Trigger: models.HookTrigger{Type: models.TriggerManual},
			LLMConfig: &models.HookLLMConfig{Model: "small"}},
	} {
		h.CreatedAt, h.UpdatedAt, h.ScheduleFrom = at, at, at
		out.WriteString("\n--- ctl hook show " + h.ID + "\n")
		printHook(&out, h)
	}
	got := out.String()
	if regexp.MustCompile(`(?m)^Settings:\s+-$`).MatchString(got) || strings.Contains(got, "the daemon's\n") {
		t.Errorf("a settings heading with a value, or the daemon's LLM said of a hook without one:\n%s", got)
	}
	golden(t, "testdata/ctl-project-hook-show.golden", got)
}

// TestCtlAgentShowAsksForTheAgent: `ctl agent show ID` reads the agent by
// GET /api/v1/agents/{id} (never the whole list), shows the env values as
// the daemon masks them, and says which id is unknown.
func TestCtlAgentShowAsksForTheAgent(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.APIPrefix+"/agents", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("ctl agent show read the whole list")
		http.Error(w, "no", http.StatusInternalServerError)
	})
	mux.HandleFunc("GET "+api.APIPrefix+"/agents/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if id := r.PathValue("id"); id != "worker" {
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorDetail{Code: models.CodeNotFound, //nolint:errcheck // a test's answer
				Message: `agent "` + id + `" not found`}})
			return
		}
		json.NewEncoder(w).Encode(models.Agent{ID: "worker", Name: "worker", AgentType: "command", State: models.AgentIdle, //nolint:errcheck // a test's answer
			CreatedAt: at, AgentSettings: models.AgentSettings{Command: "/bin/true", Env: map[string]string{"TOKEN": models.RedactedValue}}})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	out := mustCtl(t, addr, "agent", "show", "worker")
	if !strings.Contains(out, "worker") || !strings.Contains(out, "TOKEN="+models.RedactedValue) {
		t.Errorf("ctl agent show worker:\n%s", out)
	}
	if r := runCtl(t, addr, nil, "agent", "show", "ghost"); r.code == 0 || !strings.Contains(r.stderr, `agent "ghost" not found`) {
		t.Errorf("ctl agent show ghost: exit %d, %s", r.code, r.stderr)
	}
}
