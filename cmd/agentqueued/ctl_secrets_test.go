package main

import (
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// TestCtlShowsNoSecrets: ctl's agent outputs, tables and JSON, show env
// names with masked values; a repository URL with credentials is refused
// without being repeated.
func TestCtlShowsNoSecrets(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, t.TempDir())
	addr := d.m.Addr()
	outs := map[string]string{
		"agent add": mustCtl(t, addr, "agent", "add", "claude-1", "--type", "claude", "--command", "/bin/true", "--env", "ANTHROPIC_API_KEY=sk-s3cret",
			"--pass-env", "OPENAI_API_KEY"),
		"agent add --json": mustCtl(t, addr, "--json", "agent", "add", "claude-2", "--type", "claude", "--command", "/bin/true",
			"--env", "ANTHROPIC_API_KEY=sk-s3cret", "--pass-env", "OPENAI_API_KEY"),
		"agent list":        mustCtl(t, addr, "agent", "list"),
		"agent list --json": mustCtl(t, addr, "--json", "agent", "list"),
		"agent show":        mustCtl(t, addr, "agent", "show", "claude-1"),
		"agent show --json": mustCtl(t, addr, "--json", "agent", "show", "claude-1"),
		"agent pause":       mustCtl(t, addr, "--json", "agent", "pause", "claude-1"),
	}
	for what, out := range outs {
		if strings.Contains(out, "sk-s3cret") {
			t.Errorf("ctl %s shows the value:\n%s", what, out)
		}
	}
	for what, want := range map[string]string{
		"agent add --json":  `"ANTHROPIC_API_KEY": "` + models.RedactedValue + `"`,
		"agent list --json": `"ANTHROPIC_API_KEY": "` + models.RedactedValue + `"`,
		"agent show":        "ANTHROPIC_API_KEY=" + models.RedactedValue,
		"agent show --json": `"ANTHROPIC_API_KEY": "` + models.RedactedValue + `"`,
	} {
		if !strings.Contains(outs[what], want) {
			t.Errorf("ctl %s lacks %s:\n%s", what, want, outs[what])
		}
	}
	if !strings.Contains(outs["agent add --json"], `"pass_env": [`) || !strings.Contains(outs["agent add --json"], `"OPENAI_API_KEY"`) {
		t.Errorf("ctl agent add --json lacks pass_env:\n%s", outs["agent add --json"])
	}
	if r := runCtl(t, addr, nil, "agent", "show", "ghost"); r.code != 1 || !strings.Contains(r.stderr, `agent "ghost" not found`) {
		t.Errorf("showing an unknown agent: %+v", r)
	}

	r := runCtl(t, addr, nil, "project", "create", "web", "--repo-url", "https://user:tok3n-s3cret@example.com/x.git")
	if r.code != 1 || !strings.Contains(r.stderr, "repo.url: credentials in the URL are refused (https://***@example.com/x.git)") {
		t.Errorf("creating a project with credentials in its URL: %+v", r)
	}
	if strings.Contains(r.stdout+r.stderr, "tok3n") {
		t.Errorf("the refusal repeats the credentials: %+v", r)
	}
	if strings.Contains(d.logs.String(), "s3cret") {
		t.Errorf("the daemon's log shows a secret:\n%s", d.logs.String())
	}
}

func TestRepoSummaryHidesCredentials(t *testing.T) {
	t.Parallel()
	got := repoSummary(&models.RepoConfig{SourceType: models.RepoClone, URL: "https://tok3n@example.com/x.git", DefaultBranch: "main"})
	if got != "CLONE https://***@example.com/x.git (main)" {
		t.Errorf("repoSummary = %q", got)
	}
}
