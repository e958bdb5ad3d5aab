package models_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

func TestRepoURLWithCredentialsIsRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		url     string
		refused bool
	}{
		{"https://user:tok3n@example.com/x.git", true},
		{"https://tok3n@example.com/x.git", true},
		{"HTTP://tok3n@example.com/x.git", true},
		{"https://user:a/b-tok3n@example.com/x.git", true}, // unencoded '/' in the password: not a URL
		{"ssh://git:tok3n@example.com/x.git", true},
		{"git:tok3n@example.com:owner/x.git", true},
		{"https://example.com/owner/x.git", false},
		{"https://example.com/owner/x@v2.git", false},
		{"git@example.com:owner/x.git", false},
		{"ssh://git@example.com/owner/x.git", false},
		{"/srv/git/x@y.git", false},
		{"file:///srv/git/x.git", false},
		{"https://example.com/x.git?access_token=tok3n", true},
		{"https://example.com/x.git?ref=main&token=tok3n", true},
		{"https://gitlab.example.com/x.git?private_token=tok3n#frag", true},
		{"https://example.com/x.git?PRIVATE%5FTOKEN=tok3n", true},
		{"https://example.com/x.git?ref=main", false},
		{"https://example.com/x.git?token=", false},
	}
	for _, c := range cases {
		p := models.Project{ID: "p", Repo: &models.RepoConfig{SourceType: models.RepoClone, URL: c.url}}
		p.ApplyDefaults()
		err := p.Validate()
		if !c.refused {
			if err != nil {
				t.Errorf("%s: refused: %v", c.url, err)
			}
			continue
		}
		msg := models.ErrorMessageOf(err)
		switch {
		case err == nil:
			t.Errorf("%s: accepted", c.url)
		case models.ErrorCodeOf(err) != models.CodeInvalid:
			t.Errorf("%s: code %s, want invalid", c.url, models.ErrorCodeOf(err))
		case !strings.HasPrefix(msg, "repo.url: ") || !strings.Contains(msg, "github.token") || !strings.Contains(msg, "SSH"):
			t.Errorf("%s: message %q does not name repo.url, github.token and SSH", c.url, msg)
		case strings.Contains(msg, "tok3n"):
			t.Errorf("%s: message repeats the secret: %q", c.url, msg)
		}
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"https://user:tok3n@example.com/x.git", "https://***@example.com/x.git"},
		{"https://tok3n@example.com/x.git", "https://***@example.com/x.git"},
		{"fatal: unable to access 'https://u:tok3n@example.com/x.git/': 403", "fatal: unable to access 'https://***@example.com/x.git/': 403"},
		{"clone https://a:tok3n@h/x.git and https://b:tok3n@h/y.git: exit 128", "clone https://***@h/x.git and https://***@h/y.git: exit 128"},
		{"https://user:a/b-tok3n@example.com/x.git", "https://***@example.com/x.git"},
		{"ssh://git:tok3n@example.com/x.git", "ssh://***@example.com/x.git"},
		{"git:tok3n@example.com:owner/x.git", "***@example.com:owner/x.git"},
		{"https://***@example.com/x.git", "https://***@example.com/x.git"},
		{"https://example.com/x.git?access_token=tok3n", "https://example.com/x.git?access_token=***"},
		{"clone 'https://example.com/x.git?ref=main&Token=tok3n#f': 403", "clone 'https://example.com/x.git?ref=main&Token=***#f': 403"},
		{"https://u:pw@gitlab.example.com/x.git?private_token=tok3n&a=b", "https://***@gitlab.example.com/x.git?private_token=***&a=b"},
		{"https://example.com/x.git?PRIVATE%5FTOKEN=tok3n", "https://example.com/x.git?PRIVATE%5FTOKEN=***"},
		// Nothing secret: unchanged.
		{"ssh://git@example.com/x.git", "ssh://git@example.com/x.git"},
		{"git@example.com:owner/x.git", "git@example.com:owner/x.git"},
		{"https://example.com/owner/x@v2.git", "https://example.com/owner/x@v2.git"},
		{"mail alice@example.com about it", "mail alice@example.com about it"},
		{"https://example.com/search?q=token&ref=main", "https://example.com/search?q=token&ref=main"},
		{"why? because", "why? because"},
		{"", ""},
	}
	for _, c := range cases {
		if got := models.RedactURL(c.in); got != c.want {
			t.Errorf("RedactURL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestProjectRedactedHidesRepoCredentials(t *testing.T) {
	t.Parallel()
	p := models.Project{ID: "p", Repo: &models.RepoConfig{SourceType: models.RepoClone, URL: "https://u:tok3n@example.com/x.git"}}
	r := p.Redacted()
	if r.Repo.URL != "https://***@example.com/x.git" {
		t.Errorf("redacted url %q", r.Repo.URL)
	}
	if p.Repo.URL != "https://u:tok3n@example.com/x.git" {
		t.Errorf("the project itself changed: %q", p.Repo.URL)
	}
}

func TestAgentRedactedMasksEnvValues(t *testing.T) {
	t.Parallel()
	a := models.Agent{ID: "a", AgentType: "claude", AgentSettings: models.AgentSettings{
		Env:     map[string]string{"ANTHROPIC_API_KEY": "sk-secret"},
		PassEnv: []string{"OPENAI_API_KEY"},
		Profile: models.Profile{MCPServers: []models.MCPServer{
			{Name: "gh", Command: "gh-mcp", Env: map[string]string{"GITHUB_TOKEN": "ghp-secret"}},
			{Name: "docs", URL: "https://u:mcp-secret@docs.example.com/mcp"},
		}},
	}}
	b, err := json.Marshal(a.Redacted())
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"sk-secret", "ghp-secret", "mcp-secret"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("redacted agent shows %s: %s", secret, b)
		}
	}
	for _, name := range []string{`"ANTHROPIC_API_KEY":"` + models.RedactedValue + `"`, `"GITHUB_TOKEN":"` + models.RedactedValue + `"`,
		`"pass_env":["OPENAI_API_KEY"]`} {
		if !strings.Contains(string(b), name) {
			t.Errorf("redacted agent lacks %s: %s", name, b)
		}
	}
	if a.Env["ANTHROPIC_API_KEY"] != "sk-secret" || a.Profile.MCPServers[0].Env["GITHUB_TOKEN"] != "ghp-secret" ||
		a.Profile.MCPServers[1].URL != "https://u:mcp-secret@docs.example.com/mcp" {
		t.Errorf("the agent itself changed: %+v", a)
	}
}

func TestAgentSettingsPassEnvAndMask(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		s    models.AgentSettings
		want string // a part of the error; empty: valid
	}{
		{"names", models.AgentSettings{PassEnv: []string{"ANTHROPIC_API_KEY", "_X", "lower1"}}, ""},
		{"aq", models.AgentSettings{PassEnv: []string{"PATH", "AQ_RUN_TOKEN"}}, "pass_env[1]: AQ_RUN_TOKEN cannot be passed: the daemon sets the AQ_ variables"},
		{"bad name", models.AgentSettings{PassEnv: []string{"A=B"}}, `pass_env[0]: "A=B" is not an environment variable name`},
		{"digit", models.AgentSettings{PassEnv: []string{"1A"}}, `pass_env[0]: "1A" is not an environment variable name`},
		{"empty", models.AgentSettings{PassEnv: []string{""}}, `pass_env[0]: "" is not an environment variable name`},
		{"twice", models.AgentSettings{PassEnv: []string{"K", "K"}}, "pass_env[1]: K is named twice"},
		{"also env", models.AgentSettings{PassEnv: []string{"K"}, Env: map[string]string{"K": "v"}}, "pass_env[0]: K is also set in env"},
		{"mask", models.AgentSettings{Env: map[string]string{"K": models.RedactedValue}}, "env.K: \"********\" is the mask"},
		{"mcp mask", models.AgentSettings{Profile: models.Profile{MCPServers: []models.MCPServer{{Name: "m", Command: "m",
			Env: map[string]string{"T": models.RedactedValue}}}}}, "profile.mcp_servers[0].env.T: \"********\" is the mask"},
		{"mcp url", models.AgentSettings{Profile: models.Profile{MCPServers: []models.MCPServer{{Name: "m",
			URL: "https://u:mcp-secret@h/mcp"}}}}, "profile.mcp_servers[0].url: credentials in the URL are refused (https://***@h/mcp)"},
	}
	for _, c := range cases {
		err := c.s.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		case c.want != "" && models.ErrorCodeOf(err) != models.CodeInvalid:
			t.Errorf("%s: code %s", c.name, models.ErrorCodeOf(err))
		}
	}
}
