package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
)

// TestMetricsAreGuardedLikeTheAPI: GET /metrics needs the API's token when
// one is set and is refused to a Host the API does not serve; without a
// handler there is no such endpoint.
func TestMetricsAreGuardedLikeTheAPI(t *testing.T) {
	t.Parallel()
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "# TYPE up gauge\nup 1\n")
	})
	tests := []struct {
		name    string
		cfg     api.Config
		method  string
		host    string
		auth    string
		status  int
		bodyHas string
	}{
		{name: "token", cfg: api.Config{Token: "s3cret", Metrics: metrics}, auth: "Bearer s3cret", status: 200, bodyHas: "up 1"},
		{name: "no token", cfg: api.Config{Token: "s3cret", Metrics: metrics}, status: 401, bodyHas: "missing bearer token"},
		{name: "wrong token", cfg: api.Config{Token: "s3cret", Metrics: metrics}, auth: "Bearer nope", status: 401, bodyHas: "invalid bearer token"},
		{name: "no token configured", cfg: api.Config{Metrics: metrics}, status: 200, bodyHas: "up 1"},
		{name: "foreign host", cfg: api.Config{Token: "s3cret", Metrics: metrics}, host: "attacker.example",
			auth: "Bearer s3cret", status: 403, bodyHas: "is not served"},
		{name: "POST", cfg: api.Config{Token: "s3cret", Metrics: metrics}, method: "POST", auth: "Bearer s3cret", status: 405},
		{name: "no handler", cfg: api.Config{Token: "s3cret"}, auth: "Bearer s3cret", status: 404, bodyHas: "no such endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tt.cfg)
			method := tt.method
			if method == "" {
				method = http.MethodGet
			}
			req, err := http.NewRequest(method, e.srv.URL+api.MetricsPath, nil)
			if err != nil {
				t.Fatal(err)
			}
			if method == http.MethodPost {
				req.Header.Set("Content-Type", "application/json")
			}
			if tt.host != "" {
				req.Host = tt.host
			}
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := e.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || !strings.Contains(string(body), tt.bodyHas) {
				t.Errorf("%s /metrics: %d %s, want %d with %q", method, resp.StatusCode, body, tt.status, tt.bodyHas)
			}
		})
	}
}
