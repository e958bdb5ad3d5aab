package web_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/web"
)

const testToken = "s3cret-token"

func TestLoginSetsAStrictCookieThatIsNotTheToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testToken)
	p := e.get("/ui/overview")
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/login?next=%2Fui%2Foverview" {
		t.Fatalf("a page without login: %d %q", p.status, p.header.Get("Location"))
	}
	if ev := e.get("/ui/events"); ev.status != http.StatusUnauthorized {
		t.Fatalf("the event stream without login: %d", ev.status)
	}
	tests := []struct {
		name, token string
		status      int
	}{
		{"wrong token", "nope", http.StatusUnauthorized},
		{"empty token", "", http.StatusUnauthorized},
		{"the bearer token's neighbour", testToken + "x", http.StatusUnauthorized},
		{"right token", testToken, http.StatusSeeOther},
	}
	for _, tc := range tests {
		p := e.post("/ui/login", url.Values{"token": {tc.token}, "next": {"/ui/queue"}})
		if p.status != tc.status {
			t.Fatalf("%s: %d\n%s", tc.name, p.status, p.body)
		}
		if tc.status != http.StatusSeeOther {
			if !strings.Contains(p.body, "wrong token") || p.header.Get("Set-Cookie") != "" {
				t.Errorf("%s: no message, or a cookie: %q\n%s", tc.name, p.header.Get("Set-Cookie"), p.body)
			}
			continue
		}
		loc := p.header.Get("Location")
		m := regexp.MustCompile(`^(/ui/s/([A-Za-z0-9_-]{43}))/queue$`).FindStringSubmatch(loc)
		if m == nil {
			t.Fatalf("login goes to %q, want /ui/queue under the session's own path", loc)
		}
		e.base = m[1]
		c := p.header.Get("Set-Cookie")
		for _, want := range []string{web.CookieName + "=", "Path=" + m[1] + "/;", "HttpOnly", "SameSite=Strict"} {
			if !strings.Contains(c, want) {
				t.Errorf("cookie %q lacks %s", c, want)
			}
		}
		if strings.Contains(c, testToken) || strings.Contains(c, web.CookieName+"="+m[2]) {
			t.Errorf("cookie %q holds the token or the path secret", c)
		}
	}
	if p := e.get(e.in("/ui/overview")); p.status != http.StatusOK || !strings.Contains(p.body, "Log out") {
		t.Fatalf("the overview after login: %d\n%s", p.status, p.body)
	}
	// The session's pages are not at the bare paths: the cookie is not
	// sent there, and would not open them.
	if p := e.get("/ui/overview"); p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/login?next=%2Fui%2Foverview" {
		t.Fatalf("the bare overview after login: %d %q", p.status, p.header.Get("Location"))
	}
	// A next that leaves the dashboard, or names a session's path, is
	// ignored.
	for _, next := range []string{"//evil.example/x", "https://evil.example/x", "/ui/s/" + strings.Repeat("A", 43) + "/queue", `/ui\\evil.example`} {
		p := e.post("/ui/login", url.Values{"token": {testToken}, "next": {next}})
		if loc := p.header.Get("Location"); !sessionBase.MatchString(loc) {
			t.Errorf("login with the next %q goes to %q", next, loc)
		}
	}
	// Logging out ends the session: its cookie and its path no longer
	// open a page.
	e.logout()
	if p := e.get(e.in("/ui/overview")); p.status != http.StatusSeeOther {
		t.Fatalf("a page after logout: %d", p.status)
	}
}

// TestFormsRequireTheCSRFTokenAndTheSameOrigin posts the priority form with
// each way a forged form could arrive: each is a 403 and changes nothing.
func TestFormsRequireTheCSRFTokenAndTheSameOrigin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testToken)
	e.login(testToken)
	id := e.task("web", "Build")
	csrf := e.csrf(e.in("/ui/tasks/" + id))
	tests := []struct {
		name    string
		form    url.Values
		headers []string
		status  int
	}{
		{"no csrf field", url.Values{"priority": {"7"}}, nil, http.StatusForbidden},
		{"another csrf", url.Values{"priority": {"7"}, "csrf": {csrf + "x"}}, nil, http.StatusForbidden},
		{"cross-site origin", url.Values{"priority": {"7"}, "csrf": {csrf}}, []string{"Origin", "http://evil.example"}, http.StatusForbidden},
		{"cross-site fetch", url.Values{"priority": {"7"}, "csrf": {csrf}}, []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{"same-site fetch", url.Values{"priority": {"7"}, "csrf": {csrf}}, []string{"Sec-Fetch-Site", "same-site"}, http.StatusForbidden},
		{"same origin", url.Values{"priority": {"7"}, "csrf": {csrf}}, []string{"Sec-Fetch-Site", "same-origin"}, http.StatusSeeOther},
	}
	for _, tc := range tests {
		p := e.post(e.in("/ui/tasks/"+id+"/priority"), tc.form, tc.headers...)
		if p.status != tc.status {
			t.Fatalf("%s: %d, want %d\n%s", tc.name, p.status, tc.status, p.body)
		}
		got, err := e.store.GetTask(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if changed := got.Priority == 7; changed != (tc.status == http.StatusSeeOther) {
			t.Fatalf("%s: priority %d after a %d", tc.name, got.Priority, p.status)
		}
	}
	if p := e.get(e.in("/ui/tasks/" + id)); !strings.Contains(p.body, "Priority set to 7.") {
		t.Errorf("the task's page does not say what the form did:\n%s", p.body)
	}
}

func TestFormErrorsShowTheModelsMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	id := e.task("web", "Build")
	csrf := e.csrf("/ui/tasks/" + id)
	tests := []struct {
		name, path, field, value, want string
	}{
		{"not a number", "/ui/tasks/" + id + "/priority", "priority", "soon", `priority: must be a whole number (got &#34;soon&#34;)`},
		{"unknown agent type", "/ui/tasks/" + id + "/agent-type", "agent_type", "gpt", `agent_type: &#34;gpt&#34; is not an agent type`},
		{"timeout not a duration", "/ui/tasks/" + id + "/limits", "timeout", "soon", `timeout: &#34;soon&#34; is not a duration such as 30m or 2h`},
		{"timeout too short", "/ui/tasks/" + id + "/limits", "timeout", "1ms", `timeout: must be 0 (none) or between 1s and`},
		{"expected count not a number", "/ui/tasks/" + id + "/limits", "expected_count", "many", `expected_count: must be a whole number (got &#34;many&#34;)`},
		{"negative expected count", "/ui/tasks/" + id + "/limits", "expected_count", "-1", `expected_count: must not be negative`},
		{"metadata line without =", "/ui/tasks/" + id + "/limits", "metadata", "team=web\nowner", `metadata: line 2: &#34;owner&#34; is not key=value`},
		{"metadata key twice", "/ui/tasks/" + id + "/limits", "metadata", "a=1\na=2", `metadata: line 2: key &#34;a&#34; is already set on line 1`},
		{"unknown task", "/ui/tasks/no-such-task/priority", "priority", "3", "no-such-task"},
	}
	for _, tc := range tests {
		p := e.post(tc.path, url.Values{tc.field: {tc.value}, "csrf": {csrf}})
		if p.status != http.StatusSeeOther {
			t.Fatalf("%s: %d\n%s", tc.name, p.status, p.body)
		}
		next := e.get(p.header.Get("Location"))
		if !strings.Contains(next.body, `class="flash error"`) || !strings.Contains(next.body, tc.want) {
			t.Errorf("%s: the next page (%s, %d) lacks the error %q:\n%s", tc.name, p.header.Get("Location"), next.status, tc.want, next.body)
		}
	}
}

// TestLiveReReadLeavesTheFormsMessage: the script's re-read of a page
// (header X-AQ-Live) does not take the message a form left for the page
// it leads to.
func TestLiveReReadLeavesTheFormsMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	id := e.task("web", "Build")
	csrf := e.csrf("/ui/tasks/" + id)
	if p := e.post("/ui/tasks/"+id+"/priority", url.Values{"priority": {"3"}, "csrf": {csrf}}); p.status != http.StatusSeeOther {
		t.Fatalf("priority: %d", p.status)
	}
	if live := e.do(http.MethodGet, "/ui/tasks/"+id, nil, web.LiveHeader, "1"); strings.Contains(live.body, "Priority set to 3.") {
		t.Errorf("the live re-read took the message")
	}
	if p := e.get("/ui/tasks/" + id); !strings.Contains(p.body, "Priority set to 3.") {
		t.Errorf("the page the form leads to lacks its message:\n%s", p.body)
	}
}

// TestCrossSiteSubresourcesStartNoSession: without a token, a request
// another site starts for an image, a script or a fetch (which never
// carries the SameSite=Strict cookie) is refused instead of starting a
// session that would evict people's; a link followed from elsewhere, or
// the dashboard's own request, still starts one.
func TestCrossSiteSubresourcesStartNoSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	tests := []struct {
		name             string
		site, mode, dest string
		status           int
		startsSession    bool
	}{
		{"an image on another site", "cross-site", "no-cors", "image", http.StatusForbidden, false},
		{"a fetch from another site", "cross-site", "cors", "empty", http.StatusForbidden, false},
		{"a frame on another site", "cross-site", "navigate", "iframe", http.StatusForbidden, false},
		{"an image on another port", "same-site", "no-cors", "image", http.StatusForbidden, false},
		{"a link from another site", "cross-site", "navigate", "document", http.StatusOK, true},
		{"the address typed", "none", "navigate", "document", http.StatusOK, true},
		{"the dashboard's own page", "same-origin", "navigate", "document", http.StatusOK, true},
		{"a client sending no fetch metadata", "", "", "", http.StatusOK, true},
	}
	for _, tc := range tests {
		req, err := http.NewRequest(http.MethodGet, e.srv.URL+"/ui/overview", nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{"Sec-Fetch-Site": tc.site, "Sec-Fetch-Mode": tc.mode, "Sec-Fetch-Dest": tc.dest} {
			if v != "" {
				req.Header.Set(k, v)
			}
		}
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cookie := strings.Contains(resp.Header.Get("Set-Cookie"), web.CookieName+"=")
		if resp.StatusCode != tc.status || cookie != tc.startsSession {
			t.Errorf("%s: %d, session started %v; want %d, %v", tc.name, resp.StatusCode, cookie, tc.status, tc.startsSession)
		}
	}
}

// TestAgentTypeForm routes a task to a type of agent from its page and back
// to any agent.
func TestAgentTypeForm(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	id := e.task("web", "Build")
	csrf := e.csrf("/ui/tasks/" + id)
	if p := e.get("/ui/tasks/" + id); !strings.Contains(p.body, `<dt>Agent type</dt><dd>any</dd>`) ||
		!strings.Contains(p.body, `<option value="" selected>any</option>`) {
		t.Fatalf("the task's page lacks its agent type and form:\n%s", p.body)
	}
	for _, tc := range []struct{ value, flash, fact string }{
		{"codex", "Only agents of type codex may take the task now.", `<dt>Agent type</dt><dd>codex</dd>`},
		{"", "Any agent may take the task now.", `<dt>Agent type</dt><dd>any</dd>`},
	} {
		p := e.post("/ui/tasks/"+id+"/agent-type", url.Values{"agent_type": {tc.value}, "csrf": {csrf}})
		if p.status != http.StatusSeeOther {
			t.Fatalf("agent type %q: %d\n%s", tc.value, p.status, p.body)
		}
		got, err := e.store.GetTask(context.Background(), id)
		if err != nil || got.AgentType != tc.value {
			t.Fatalf("agent type %q: stored %q, %v", tc.value, got.AgentType, err)
		}
		if next := e.get(p.header.Get("Location")); !strings.Contains(next.body, tc.flash) || !strings.Contains(next.body, tc.fact) {
			t.Errorf("agent type %q: the page lacks %q or %q:\n%s", tc.value, tc.flash, tc.fact, next.body)
		}
	}
}
