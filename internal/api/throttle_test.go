package api_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/throttle"
)

// TestWrongBearerTokensAreThrottledBySource: a source past its budget of
// wrong tokens gets 429 with Retry-After for any token, right or wrong,
// without it being checked; other sources are unaffected, and the source
// is served again once the wait has passed.
func TestWrongBearerTokensAreThrottledBySource(t *testing.T) {
	t.Parallel()
	const token = "right-token"
	clk := clocktest.New(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	e := newEnv(t, api.Config{Token: token,
		Throttle: throttle.New(throttle.Config{Clock: clk, SourceRate: 2, SourceBurst: 10})})
	h := e.srv.Config.Handler
	do := func(remote, tok string) *httptest.ResponseRecorder {
		t.Helper()
		r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/api/v1/status", nil)
		r.RemoteAddr = remote
		r.Header.Set("Authorization", "Bearer "+tok)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	const attacker, owner = "192.0.2.1:5000", "198.51.100.2:6000"
	for i := range 10 {
		if w := do(attacker, "guess"); w.Code != http.StatusUnauthorized {
			t.Fatalf("wrong guess %d: status %d, want 401: %s", i+1, w.Code, w.Body)
		}
	}
	wrong, right := do(attacker, "guess"), do(attacker, token)
	for name, w := range map[string]*httptest.ResponseRecorder{"wrong": wrong, "right": right} {
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
			t.Errorf("%s token from a throttled source: status %d, Retry-After %q; want 429, 1: %s",
				name, w.Code, w.Header().Get("Retry-After"), w.Body)
		}
		if !strings.Contains(w.Body.String(), "too many wrong bearer tokens") {
			t.Errorf("%s token from a throttled source: body %s", name, w.Body)
		}
	}
	if wrong.Body.String() != right.Body.String() {
		t.Errorf("throttled answers differ for right and wrong tokens:\n%s\n%s", wrong.Body, right.Body)
	}
	// The flood keeps going; another source's right token is served.
	for range 100 {
		do(attacker, "guess")
	}
	if w := do(owner, token); w.Code != http.StatusOK {
		t.Errorf("right token from another source during a flood: status %d, want 200: %s", w.Code, w.Body)
	}
	clk.Advance(time.Second)
	if w := do(attacker, token); w.Code != http.StatusOK {
		t.Errorf("right token after Retry-After: status %d, want 200: %s", w.Code, w.Body)
	}
}
