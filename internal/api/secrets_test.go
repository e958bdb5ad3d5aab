package api_test

import (
	"context"
	"database/sql"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/service/servicetest"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// newEnvWithDB is newEnv that also returns the database file, for tests
// that write rows as an older daemon left them.
func newEnvWithDB(t *testing.T) (*testEnv, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	logger, logs := newLogger()
	k := newKit(t, logger, servicetest.WithStoreOptions(storetest.WithPath(path)))
	return serveKit(t, api.Config{Logger: logger}, k, logs), path
}

// rawSQL runs a statement on the database file directly, as an older
// daemon (which accepted what this one refuses) would have written.
func rawSQL(t *testing.T, path, stmt string, args ...any) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Exec(stmt, args...)
	if err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("%s: %d rows changed, want 1", stmt, n)
	}
}

// noSecret fails when an answer's raw bytes hold secret.
func noSecret(t *testing.T, what string, r response, secret string) {
	t.Helper()
	if strings.Contains(string(r.body), secret) {
		t.Errorf("%s shows the secret %q: %s", what, secret, r.body)
	}
}

func TestAgentEnvValuesAreMaskedInAnswers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	reg := e.do("POST", "/api/v1/agents", `{"id":"claude-1","agent_type":"claude","env":{"ANTHROPIC_API_KEY":"sk-secret"},`+
		`"profile":{"mcp_servers":[{"name":"gh","command":"gh-mcp","env":{"GITHUB_TOKEN":"ghp-secret"}}]}}`)
	var a models.Agent
	reg.decode(t, http.StatusCreated, &a)
	list := e.do("GET", "/api/v1/agents", "")
	one := e.do("GET", "/api/v1/agents/claude-1", "")
	paused := e.do("POST", "/api/v1/agents/claude-1/pause", "")
	for _, r := range []struct {
		what string
		r    response
	}{{"the registration's answer", reg}, {"the list", list}, {"the agent's answer", one}, {"the pause's answer", paused}} {
		noSecret(t, r.what, r.r, "sk-secret")
		noSecret(t, r.what, r.r, "ghp-secret")
		for _, want := range []string{`"ANTHROPIC_API_KEY":"` + models.RedactedValue + `"`, `"GITHUB_TOKEN":"` + models.RedactedValue + `"`} {
			if !strings.Contains(string(r.r.body), want) {
				t.Errorf("%s lacks %s: %s", r.what, want, r.r.body)
			}
		}
	}
	if strings.Contains(e.logs.String(), "sk-secret") {
		t.Errorf("the log shows the secret: %s", e.logs.String())
	}
	// The store keeps the value: runs need it.
	stored, err := e.store.GetAgent(context.Background(), "claude-1")
	if err != nil {
		t.Fatal(err)
	}
	if stored.Env["ANTHROPIC_API_KEY"] != "sk-secret" || stored.Profile.MCPServers[0].Env["GITHUB_TOKEN"] != "ghp-secret" {
		t.Errorf("stored settings changed: %+v", stored.AgentSettings)
	}
}

func TestAgentRegistrationRefusesTheMask(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	// An answer's env fed back would store the mask as the value.
	e.do("POST", "/api/v1/agents", `{"id":"claude-1","agent_type":"claude","env":{"ANTHROPIC_API_KEY":"`+models.RedactedValue+`"}}`).
		wantError(t, http.StatusBadRequest, models.CodeInvalid, "env.ANTHROPIC_API_KEY: \"********\" is the mask")
	e.do("POST", "/api/v1/agents", `{"id":"claude-1","agent_type":"claude","pass_env":["AQ_RUN_TOKEN"]}`).
		wantError(t, http.StatusBadRequest, models.CodeInvalid, "pass_env[0]: AQ_RUN_TOKEN cannot be passed")
	if as, err := e.store.ListAgents(context.Background()); err != nil || len(as) != 0 {
		t.Errorf("agents after refused registrations: %v, %v", as, err)
	}
}

func TestAgentPassEnvIsAnsweredByName(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	var a models.Agent
	e.do("POST", "/api/v1/agents", `{"id":"claude-1","agent_type":"claude","pass_env":["ANTHROPIC_API_KEY"]}`).
		decode(t, http.StatusCreated, &a)
	if len(a.PassEnv) != 1 || a.PassEnv[0] != "ANTHROPIC_API_KEY" {
		t.Errorf("registration answer pass_env = %v", a.PassEnv)
	}
	stored, err := e.store.GetAgent(context.Background(), "claude-1")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(stored.PassEnv, ",") != "ANTHROPIC_API_KEY" {
		t.Fatalf("stored pass_env = %v", stored.PassEnv)
	}
	var list api.AgentList
	e.do("GET", "/api/v1/agents", "").decode(t, http.StatusOK, &list)
	if len(list.Agents) != 1 || strings.Join(list.Agents[0].PassEnv, ",") != "ANTHROPIC_API_KEY" {
		t.Errorf("listed agents: %+v", list.Agents)
	}
}

func TestProjectURLWithCredentialsIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	for _, url := range []string{"https://user:tok3n-s3cret@example.com/x.git", "https://tok3n-s3cret@example.com/x.git"} {
		r := e.do("POST", "/api/v1/projects", `{"id":"web","repo":{"source_type":"CLONE","url":"`+url+`"}}`)
		r.wantError(t, http.StatusBadRequest, models.CodeInvalid, "repo.url: credentials in the URL are refused (https://***@example.com/x.git)")
		r.wantError(t, http.StatusBadRequest, models.CodeInvalid, "github.token")
		noSecret(t, "the refusal", r, "tok3n")
	}
	e.createProject("web")
	r := e.do("PATCH", "/api/v1/projects/web", `{"repo":{"source_type":"CLONE","url":"https://user:tok3n-s3cret@example.com/x.git"}}`)
	r.wantError(t, http.StatusBadRequest, models.CodeInvalid, "repo.url: credentials in the URL are refused")
	noSecret(t, "the refused patch", r, "tok3n")
	if p, err := e.store.GetProject(context.Background(), "web"); err != nil || p.Repo != nil {
		t.Errorf("project after refusals: %+v, %v", p, err)
	}
	// SSH URLs with a user name and no password are fine.
	var p models.Project
	e.do("POST", "/api/v1/projects", `{"id":"ssh","repo":{"source_type":"CLONE","url":"git@example.com:owner/x.git"}}`).
		decode(t, http.StatusCreated, &p)
	if p.Repo.URL != "git@example.com:owner/x.git" {
		t.Errorf("ssh url answered as %q", p.Repo.URL)
	}
	if strings.Contains(e.logs.String(), "tok3n") {
		t.Errorf("the log shows the secret: %s", e.logs.String())
	}
}

func TestLegacyProjectURLIsAnsweredRedacted(t *testing.T) {
	t.Parallel()
	e, db := newEnvWithDB(t)
	e.do("POST", "/api/v1/projects", `{"id":"legacy","repo":{"source_type":"CLONE","url":"https://example.com/owner/x.git"}}`).
		decode(t, http.StatusCreated, &models.Project{})
	const secretURL = "https://user:tok3n-s3cret@example.com/owner/x.git"
	rawSQL(t, db, "UPDATE repos SET url = ? WHERE project_id = ?", secretURL, "legacy")
	res := e.createTasks(`{"project_id":"legacy","tasks":[{"title":"t"}]}`)
	rawSQL(t, db, "UPDATE tasks SET status_reason = ? WHERE id = ?", "fetch from "+secretURL+": 403", res[0].TaskID)
	if p, err := e.store.GetProject(context.Background(), "legacy"); err != nil || p.Repo.URL != secretURL {
		t.Fatalf("the legacy row was not written: %+v, %v", p, err)
	}
	const redacted = "https://***@example.com/owner/x.git"
	for _, path := range []string{"/api/v1/projects/legacy", "/api/v1/projects", "/api/v1/tasks/" + res[0].TaskID, "/api/v1/tasks"} {
		r := e.do("GET", path, "")
		if r.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, r.status, r.body)
		}
		noSecret(t, "GET "+path, r, "tok3n")
		if !strings.Contains(string(r.body), redacted) {
			t.Errorf("GET %s does not show the redacted URL: %s", path, r.body)
		}
	}
	// An update that leaves the repo alone says what to fix, without the secret.
	r := e.do("PATCH", "/api/v1/projects/legacy", `{"name":"Legacy"}`)
	r.wantError(t, http.StatusBadRequest, models.CodeInvalid, "repo.url: credentials in the URL are refused ("+redacted+")")
	noSecret(t, "the refused patch", r, "tok3n")
	// A repo without credentials mends it.
	var p models.Project
	e.do("PATCH", "/api/v1/projects/legacy", `{"name":"Legacy","repo":{"source_type":"CLONE","url":"https://example.com/owner/x.git"}}`).
		decode(t, http.StatusOK, &p)
	if p.Repo.URL != "https://example.com/owner/x.git" || p.Name != "Legacy" {
		t.Errorf("mended project: %+v", p)
	}
}
