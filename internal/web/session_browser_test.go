package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/agentqueued/agentqueued/internal/web"
)

// otherServer is a server on the dashboard's host at another port (an
// agent's dev server, another user's process): it records the Cookie and
// Referer headers of every request the browser makes to it. Its page
// /ui/elsewhere loads, from itself, what a browser would send the
// dashboard's cookie with were it scoped by host and /ui alone.
type otherServer struct {
	srv *httptest.Server
	// loaded is closed once every path of want has been asked for.
	loaded chan struct{}

	mu   sync.Mutex
	want map[string]bool
	seen []otherRequest
}

// otherRequest is a request the other server received.
type otherRequest struct {
	path, cookie, referer string
}

func newOtherServer(t *testing.T, paths ...string) *otherServer {
	t.Helper()
	o := &otherServer{loaded: make(chan struct{}), want: map[string]bool{"/ui/elsewhere": true}}
	var page strings.Builder
	page.WriteString(`<!doctype html><title>elsewhere</title><h1 id="elsewhere">Another server</h1>`)
	for _, p := range paths {
		o.want[p] = true
		fmt.Fprintf(&page, `<iframe src="%s"></iframe>`, p)
	}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.seen = append(o.seen, otherRequest{r.URL.Path, r.Header.Get("Cookie"), r.Header.Get("Referer")})
		if o.want[r.URL.Path] {
			delete(o.want, r.URL.Path)
			if len(o.want) == 0 {
				close(o.loaded)
			}
		}
		o.mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if r.URL.Path == "/ui/elsewhere" {
			_, _ = io.WriteString(w, page.String())
			return
		}
		_, _ = io.WriteString(w, "<!doctype html><p>nothing here</p>")
	}))
	t.Cleanup(o.srv.Close)
	return o
}

// requests returns the requests received so far.
func (o *otherServer) requests() []otherRequest {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]otherRequest(nil), o.seen...)
}

// replay sends a request to the dashboard as a program would, with
// exactly the Cookie header given, following redirects (the header goes
// along: same host), and returns the final answer; an event stream's
// status only (its body never ends).
func replay(t *testing.T, base, method, path, cookie string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(url.Values{"priority": {"9"}}.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Cookie", cookie)
	client := &http.Client{}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, ""
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// loginPage reports whether a page is the dashboard's login page.
func loginPage(body string) bool {
	return strings.Contains(body, "<h1>Log in</h1>") && !strings.Contains(body, "Log out")
}

// TestBrowserCookieReceivedElsewhereGrantsNothing logs in in Chromium,
// then opens a page of another server on the same host (another port)
// from the dashboard: whatever that server received — a cookie, a Referer
// — replayed to every route of the dashboard gets the login page (a form
// 403), and so does the session cookie taken from the browser's jar,
// which opens the dashboard only at the session's own path.
func TestBrowserCookieReceivedElsewhereGrantsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testToken)
	b, ctx := graphBrowser(t)
	id := e.task("web", "Build")
	other := newOtherServer(t, "/ui/overview", "/ui/tasks/"+id, "/ui/queue", "/ui/", "/")

	b.Do("open a task's link", chromedp.Navigate(e.srv.URL+"/ui/tasks/"+id))
	b.WaitText("h1", "Log in")
	b.Do("log in", chromedp.WaitVisible("#token"), chromedp.SendKeys("#token", testToken), chromedp.Submit("#token"))
	b.WaitText("h1", "Build")
	tab, cancel := b.Context()
	loc, err := chromedp.Run(tab, chromedp.Location())
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	page := strings.TrimPrefix(loc, e.srv.URL)
	base := strings.TrimSuffix(page, "/tasks/"+id)
	t.Logf("the login led to the task's page at %s", strings.Replace(page, strings.TrimPrefix(base, web.SessionPrefix), "<secret>", 1))

	// The dashboard's page sends the browser to the other server.
	b.Do("leave for the other server", chromedp.Evaluate[chromedp.Void](fmt.Sprintf("location.href = %q", other.srv.URL+"/ui/elsewhere")))
	select {
	case <-other.loaded:
	case <-ctx.Done():
		t.Fatalf("the other server's page did not load: %v (requests %v)", ctx.Err(), other.requests())
	}
	b.WaitText("#elsewhere", "Another server")

	routes := routesFor(id)
	granted := func(status int, body string) bool {
		return status == http.StatusOK && !loginPage(body)
	}
	// Whatever the other server received, replayed.
	for _, rq := range other.requests() {
		if rq.cookie != "" {
			t.Errorf("the other server's %s received the cookie header %q", rq.path, rq.cookie)
		}
		if strings.HasPrefix(rq.referer, e.srv.URL) {
			t.Errorf("the other server's %s received the dashboard's address as its Referer: %q", rq.path, rq.referer)
		}
		if rq.cookie == "" {
			continue
		}
		for _, rt := range routes {
			if status, body := replay(t, e.srv.URL, rt.method, rt.path, rq.cookie); granted(status, body) || rt.method == http.MethodPost && status != http.StatusForbidden {
				t.Errorf("the cookie header the other server received, replayed to %s %s: %d, not the login page:\n%.300s", rt.method, rt.path, status, body)
			}
		}
	}

	// The cookie in the browser's jar: it is scoped to the session's own
	// path, and alone, at any other path, it opens nothing.
	tab, cancel = b.Context()
	jar, err := chromedp.Run(tab, func(ctx context.Context, tg *chromedp.Target) ([]*network.Cookie, error) {
		res, err := cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{loc}})
		return res.Cookies, err
	})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	var value string
	for _, c := range jar {
		if c.Name == web.CookieName {
			value = c.Value
			if c.Path != base+"/" || !c.HTTPOnly || c.SameSite != network.CookieSameSiteStrict {
				t.Errorf("the session cookie is at path %q, HttpOnly %v, SameSite %q; want %s/, true, Strict", c.Path, c.HTTPOnly, c.SameSite, base)
			}
		}
	}
	if value == "" {
		t.Fatalf("no %s cookie for %s in the browser: %+v", web.CookieName, loc, jar)
	}
	cookie := web.CookieName + "=" + value
	for _, rt := range routes {
		for _, path := range []string{rt.path, web.SessionPrefix + value + strings.TrimPrefix(rt.path, web.Prefix)} {
			status, body := replay(t, e.srv.URL, rt.method, path, cookie)
			switch {
			case rt.method == http.MethodPost && status != http.StatusForbidden:
				t.Errorf("the jar's cookie replayed to POST %s: %d, want 403", path, status)
			case rt.method == http.MethodGet && rt.path == web.Prefix+"/events" && status != http.StatusUnauthorized:
				t.Errorf("the jar's cookie replayed to GET %s: %d, want 401", path, status)
			case rt.method == http.MethodGet && rt.path != web.Prefix+"/events" && !(status == http.StatusOK && loginPage(body)):
				t.Errorf("the jar's cookie replayed to GET %s: %d, not the login page:\n%.300s", path, status, body)
			}
		}
	}
	// With the session's own path the same cookie is the login: the
	// replay above was refused for want of the path, not of a cookie.
	if status, body := replay(t, e.srv.URL, http.MethodGet, base+"/overview", cookie); !granted(status, body) || !strings.Contains(body, "Log out") {
		t.Fatalf("the jar's cookie at the session's own path: %d\n%.300s", status, body)
	}
	task, err := e.store.GetTask(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if task.Priority == 9 {
		t.Fatal("a replayed form set the task's priority")
	}
}
