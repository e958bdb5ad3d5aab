package repo_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/repo"
)

func TestParseRepoURL(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in                string
		host, owner, name string
		wantErr           bool
	}{
		{"https://github.com/acme/shop.git", "github.com", "acme", "shop", false},
		{"https://github.com/acme/shop", "github.com", "acme", "shop", false},
		{"https://x-access-token:t@GitHub.com/acme/shop.git/", "github.com", "acme", "shop", false},
		{"git@github.com:acme/shop.git", "github.com", "acme", "shop", false},
		{"ssh://git@github.com/acme/shop.git", "github.com", "acme", "shop", false},
		{"https://ghe.example.com/team/repo.git", "ghe.example.com", "team", "repo", false},
		{"/srv/git/shop.git", "", "", "", true},
		{"https://github.com/acme", "", "", "", true},
	}
	for _, c := range cases {
		host, owner, name, err := repo.ParseRepoURL(c.in)
		if (err != nil) != c.wantErr || host != c.host || owner != c.owner || name != c.name {
			t.Errorf("ParseRepoURL(%q) = %q %q %q %v", c.in, host, owner, name, err)
		}
	}
}

func sign(secret, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func TestWebhookHandler(t *testing.T) {
	t.Parallel()
	type poke struct {
		owner, name string
		n           int
	}
	var pokes []poke
	h := repo.WebhookHandler("s3cret", nil, func(o, n string, num int) { pokes = append(pokes, poke{o, n, num}) })
	body := `{"action":"closed","number":7,"pull_request":{"number":7},"repository":{"name":"shop","owner":{"login":"acme"}}}`
	cases := []struct {
		name, event, sig, body string
		status                 int
	}{
		{"good", "pull_request", sign("s3cret", body), body, http.StatusNoContent},
		{"review", "pull_request_review", sign("s3cret", body), body, http.StatusNoContent},
		{"bad signature", "pull_request", sign("other", body), body, http.StatusUnauthorized},
		{"no signature", "pull_request", "", body, http.StatusUnauthorized},
		{"ping", "ping", sign("s3cret", `{"zen":"x"}`), `{"zen":"x"}`, http.StatusNoContent},
		{"no repository", "pull_request", sign("s3cret", `{"number":3}`), `{"number":3}`, http.StatusBadRequest},
	}
	for _, c := range cases {
		req := httptest.NewRequest(http.MethodPost, "/webhooks/github", strings.NewReader(c.body))
		req.Header.Set("X-GitHub-Event", c.event)
		if c.sig != "" {
			req.Header.Set("X-Hub-Signature-256", c.sig)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != c.status {
			t.Errorf("%s: status %d, want %d", c.name, w.Code, c.status)
		}
	}
	// GitHub's "form" content type carries the JSON in a payload field.
	form := "payload=" + url.QueryEscape(body)
	req := httptest.NewRequest(http.MethodPost, "/webhooks/github", strings.NewReader(form))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-GitHub-Event", "pull_request")
	req.Header.Set("X-Hub-Signature-256", sign("s3cret", form))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusNoContent {
		t.Errorf("form delivery: %d", w.Code)
	}
	if len(pokes) != 3 || pokes[0] != (poke{"acme", "shop", 7}) || pokes[2] != pokes[0] {
		t.Errorf("pokes %+v", pokes)
	}
}

func TestTokenCredentials(t *testing.T) {
	t.Parallel()
	creds := repo.TokenCredentials("tok", true, "github.com", "127.0.0.1")
	for _, c := range []struct {
		url string
		ok  bool
	}{
		{"https://github.com/acme/shop.git", true},
		{"http://127.0.0.1:8080/acme/shop.git", true},
		{"https://gitlab.com/acme/shop.git", false},
		{"git@github.com:acme/shop.git", false}, // ssh uses its own keys
		{"/srv/git/shop.git", false},
	} {
		user, pass, ok := creds(c.url)
		if ok != c.ok || (ok && (user != "x-access-token" || pass != "tok")) {
			t.Errorf("%s: %q %q %v", c.url, user, pass, ok)
		}
	}
	for in, want := range map[string]string{"https://GHE.example.com/api/v3/": "ghe.example.com", "": "github.com",
		"https://api.github.com": "github.com", "https://api.acme.ghe.com/": "acme.ghe.com"} {
		if hosts, err := repo.GitHubHosts(in); err != nil || hosts[0] != want {
			t.Errorf("hosts of %q: %v %v", in, hosts, err)
		}
	}
	// Plain http only when allowed.
	if _, _, ok := repo.TokenCredentials("tok", false, "github.com")("http://github.com/acme/shop.git"); ok {
		t.Error("a token went over plain http")
	}
}
