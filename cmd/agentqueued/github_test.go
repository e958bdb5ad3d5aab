package main

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/repo/githubtest"
)

// TestGitHubWebhookEndpoint boots the daemon with GitHub configured: the
// webhook endpoint takes signed deliveries only, without the API's token,
// and the token is in no log line.
func TestGitHubWebhookEndpoint(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(githubtest.Options{Token: "ghs_daemon_secret_token"})
	t.Cleanup(gh.Close)
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.yaml", `
api:
  token: api-token
github:
  token: ghs_daemon_secret_token
  api_base_url: `+gh.URL()+`/api/v3/
  webhook_secret: hook-secret
`)
	d := startDaemon(t, filepath.Join(dir, "data"), "--config", cfg)
	url := "http://" + d.m.Addr() + "/webhooks/github"
	pr := githubtest.PullRequestEvent("closed", nil)
	for _, c := range []struct {
		secret string
		status int
	}{{"hook-secret", http.StatusNoContent}, {"wrong", http.StatusUnauthorized}} {
		resp, err := gh.Deliver(context.Background(), url, c.secret, "ping", pr)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("delivery signed with %q: %d, want %d", c.secret, resp.StatusCode, c.status)
		}
	}
	if err := d.m.Close(); err != nil {
		t.Fatal(err)
	}
	logs := d.logs.String()
	if strings.Contains(logs, "ghs_daemon_secret_token") || !strings.Contains(logs, "github webhook refused: bad signature") {
		t.Errorf("logs:\n%s", logs)
	}
}
