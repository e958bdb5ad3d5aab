package web_test

import (
	"net/http"
	"strings"
	"testing"
)

func TestLayoutServesEveryNavigationEntry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	p := e.get("/ui/overview")
	if p.status != http.StatusOK {
		t.Fatalf("GET /ui/overview: %d\n%s", p.status, p.body)
	}
	for _, want := range []string{`href="/ui/overview" aria-current="page"`, `href="/ui/queue"`, `href="/ui/projects"`,
		`href="/ui/workflows"`, `href="/ui/hooks"`, `href="/ui/budget"`, `name="viewport"`, `data-events="/ui/events?since=`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the overview lacks %s:\n%s", want, p.body)
		}
	}
	if csp := p.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	if css := e.get("/ui/static/style.css"); css.status != http.StatusOK || !strings.Contains(css.body, ":focus-visible") {
		t.Errorf("GET style.css: %d", css.status)
	}
}
