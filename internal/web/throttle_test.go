package web_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/service/servicetest"
	"github.com/agentqueued/agentqueued/internal/throttle"
	"github.com/agentqueued/agentqueued/internal/web"
)

// TestWrongLoginsAreThrottledBySource: past its budget of wrong tokens a
// source's logins get 429 with Retry-After, right token or wrong, while
// other sources log in, and a session started before the flood from the
// same address keeps working.
func TestWrongLoginsAreThrottledBySource(t *testing.T) {
	t.Parallel()
	const token = "right-token"
	clk := clocktest.New(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	ui, err := web.New(web.Config{Token: token, Logger: slog.New(slog.DiscardHandler),
		Throttle: throttle.New(throttle.Config{Clock: clk, SourceRate: 1, SourceBurst: 10})}, servicetest.New(t).Service)
	if err != nil {
		t.Fatal(err)
	}
	h := ui.Handler()
	login := func(remote, tok string) *httptest.ResponseRecorder {
		t.Helper()
		form := url.Values{"token": {tok}, "next": {"/ui/overview"}}
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/ui/login", strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.RemoteAddr = remote
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	const attacker, owner = "192.0.2.1:5000", "198.51.100.2:6000"
	ok := login(attacker, token)
	if ok.Code != http.StatusSeeOther {
		t.Fatalf("right login: status %d, want 303: %s", ok.Code, ok.Body)
	}
	cookies := ok.Result().Cookies()
	for i := range 10 {
		if w := login(attacker, "guess"); w.Code != http.StatusUnauthorized {
			t.Fatalf("wrong guess %d: status %d, want 401", i+1, w.Code)
		}
	}
	for _, tok := range []string{"guess", token} {
		w := login(attacker, tok)
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" ||
			!strings.Contains(w.Body.String(), "too many wrong tokens from this address") {
			t.Errorf("login from a throttled source: status %d, Retry-After %q; want 429, 1:\n%s",
				w.Code, w.Header().Get("Retry-After"), w.Body)
		}
	}
	if w := login(owner, token); w.Code != http.StatusSeeOther {
		t.Errorf("right login from another source during a flood: status %d, want 303", w.Code)
	}
	r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1"+ok.Header().Get("Location"), nil)
	r.RemoteAddr = attacker
	for _, c := range cookies {
		r.AddCookie(c)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Errorf("session from the throttled address: status %d, want 200", w.Code)
	}
	clk.Advance(time.Second)
	if w := login(attacker, token); w.Code != http.StatusSeeOther {
		t.Errorf("right login after Retry-After: status %d, want 303", w.Code)
	}
}
