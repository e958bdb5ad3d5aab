package service

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
)

// TestServiceAnswersAreRedacted: every project and agent the service
// answers is redacted (a repository URL without its credentials, env
// values masked), so that the API, Discord and the web dashboard show
// them redacted without doing it themselves; the store keeps the values.
func TestServiceAnswersAreRedacted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "aq.db")
	st, err := store.Open(ctx, store.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s := New(Config{Store: st})

	const secretURL, secret = "https://user:tok3n-s3cret@example.com/owner/x.git", "sk-secret"
	if _, err := s.CreateProject(ctx, models.Project{ID: "legacy", Repo: &models.RepoConfig{SourceType: models.RepoClone,
		URL: "https://example.com/owner/x.git"}}); err != nil {
		t.Fatal(err)
	}
	// As an older daemon, which accepted credentials in a URL, wrote it.
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE repos SET url = ? WHERE project_id = ?", secretURL, "legacy"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	reg := models.AgentRegistration{ID: "a1", AgentType: "command", AgentSettings: models.AgentSettings{Command: "/bin/true",
		Env: map[string]string{"API_KEY": secret}}}
	registered, err := s.RegisterAgent(ctx, reg.Agent())
	if err != nil {
		t.Fatal(err)
	}

	project := func(what string, p models.Project, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if p.Repo == nil || p.Repo.URL != "https://***@example.com/owner/x.git" {
			t.Errorf("%s: repo %+v, want the URL redacted", what, p.Repo)
		}
	}
	agent := func(what string, a models.Agent, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if a.Env["API_KEY"] != models.RedactedValue {
			t.Errorf("%s: env %v, want the value masked", what, a.Env)
		}
	}
	p, err := s.GetProject(ctx, "legacy")
	project("GetProject", p, err)
	ps, err := s.ListProjects(ctx)
	if len(ps) != 1 {
		t.Fatalf("ListProjects: %v, %v", ps, err)
	}
	project("ListProjects", ps[0], err)
	agent("RegisterAgent", registered, nil)
	a, err := s.GetAgent(ctx, "a1")
	agent("GetAgent", a, err)
	as, err := s.ListAgents(ctx)
	if len(as) != 1 {
		t.Fatalf("ListAgents: %v, %v", as, err)
	}
	agent("ListAgents", as[0], err)
	a, err = s.SetAgentPaused(ctx, "a1", true)
	agent("SetAgentPaused", a, err)
	o, err := s.Overview(ctx)
	if err != nil || len(o.Projects) != 1 || len(o.Agents) != 1 {
		t.Fatalf("Overview: %+v, %v", o, err)
	}
	project("Overview's project", o.Projects[0], nil)
	agent("Overview's agent", o.Agents[0], nil)

	// The store keeps the values: runs need them.
	if sp, err := st.GetProject(ctx, "legacy"); err != nil || sp.Repo.URL != secretURL {
		t.Errorf("stored project: %+v, %v", sp.Repo, err)
	}
	if sa, err := st.GetAgent(ctx, "a1"); err != nil || sa.Env["API_KEY"] != secret {
		t.Errorf("stored agent env: %v, %v", sa.Env, err)
	}
}
