package api_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/repo"
	"github.com/agentqueued/agentqueued/internal/service/servicetest"
)

// commandHook is the attack's hook: manual, so that it can be fired at once.
const commandHook = `{"project_id":"web","name":"pwn","trigger":{"type":"manual"},
	"context_steps":[{"type":"db_query","query":"task_counts"}]}`

// TestBrowserRequestsChangeNothing drives the API as a page open in the
// owner's browser could, with no api.token set (the default): fetch() in
// no-cors mode sends POST with no Content-Type or a text/plain one; a
// cross-origin page sends Origin and Sec-Fetch-Site; a page whose domain
// was rebound to 127.0.0.1 sends its own Host and reads the answers.
// Each is refused and nothing is written.
func TestBrowserRequestsChangeNothing(t *testing.T) {
	t.Parallel()
	e, engine := newHookEnvWith(t, api.Config{AllowedHosts: []string{"agentqueued.lan"}})
	e.createProject("web")
	e.do("POST", "/api/v1/hooks", reportHook).decode(t, http.StatusCreated, &models.Hook{})
	origin := e.srv.URL // http://127.0.0.1:PORT: the API's own origin
	foreignHost := "attacker.example"

	tests := []struct {
		name, method, path, body string
		headers                  []string
		status                   int
		msg                      string
	}{
		{"no-cors POST without Content-Type", "POST", "/api/v1/projects", `{"id":"pwn"}`,
			[]string{"Content-Type", ""}, 415, "Content-Type must be application/json (got none)"},
		{"text/plain POST", "POST", "/api/v1/projects", `{"id":"pwn"}`,
			[]string{"Content-Type", "text/plain;charset=UTF-8"}, 415, `Content-Type must be application/json (got "text/plain;charset=UTF-8")`},
		{"form POST", "POST", "/api/v1/hooks", commandHook,
			[]string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "Content-Type must be application/json"},
		{"multipart POST", "POST", "/api/v1/hooks", commandHook,
			[]string{"Content-Type", "multipart/form-data; boundary=x"}, 415, "Content-Type must be application/json"},
		{"bodiless fire without Content-Type", "POST", "/api/v1/hooks/nightly-report/fire", "",
			[]string{"Content-Type", ""}, 415, "a POST request needs it, with or without a body"},
		{"bodiless DELETE without Content-Type", "DELETE", "/api/v1/hooks/nightly-report", "",
			[]string{"Content-Type", ""}, 415, "Content-Type must be application/json"},
		{"foreign Origin", "POST", "/api/v1/hooks", commandHook,
			[]string{"Origin", "http://attacker.example"}, 403, `cross-origin request refused`},
		{"foreign Origin on a loopback port", "POST", "/api/v1/hooks/nightly-report/fire", "{}",
			[]string{"Origin", "http://127.0.0.1:1"}, 403, `Origin "http://127.0.0.1:1"`},
		{"opaque Origin", "POST", "/api/v1/projects", `{"id":"pwn"}`,
			[]string{"Origin", "null"}, 403, "cross-origin request refused"},
		{"Sec-Fetch-Site cross-site", "POST", "/api/v1/projects", `{"id":"pwn"}`,
			[]string{"Sec-Fetch-Site", "cross-site"}, 403, `Sec-Fetch-Site "cross-site"`},
		{"Sec-Fetch-Site same-site", "PATCH", "/api/v1/hooks/nightly-report", `{"enabled":false}`,
			[]string{"Sec-Fetch-Site", "same-site", "Origin", "http://other.localhost:7700"}, 403, "cross-origin request refused"},
		{"cross-site even with our Origin", "POST", "/api/v1/hooks/nightly-report/fire", "{}",
			[]string{"Sec-Fetch-Site", "cross-site", "Origin", origin}, 403, "cross-origin request refused"},
		{"rebound Host reads", "GET", "/api/v1/projects", "",
			[]string{"Host", foreignHost}, 403, `host "attacker.example" is not served`},
		{"rebound Host with a port reads", "GET", "/api/v1/hooks/nightly-report", "",
			[]string{"Host", foreignHost + ":7700"}, 403, "api.allowed_hosts"},
		{"rebound Host health", "GET", "/healthz", "",
			[]string{"Host", foreignHost}, 403, "api.allowed_hosts"},
		{"rebound Host writes", "POST", "/api/v1/hooks/nightly-report/fire", "{}",
			[]string{"Host", foreignHost}, 403, "api.allowed_hosts"},
		{"rebound Host on a look-alike of the webhook path", "POST", "/webhooks/github/../../api/v1/projects", `{"id":"pwn"}`,
			[]string{"Host", foreignHost}, 403, "api.allowed_hosts"},
		{"a name that merely contains localhost", "GET", "/api/v1/projects", "",
			[]string{"Host", "localhost.attacker.example"}, 403, "api.allowed_hosts"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.method, tc.path, tc.body, tc.headers...)
			code := models.CodeUnauthorized
			if tc.status == http.StatusUnsupportedMediaType {
				code = models.CodeInvalid
			}
			r.wantError(t, tc.status, code, tc.msg)
		})
	}
	engine.Wait()

	// Nothing was written: no project, no hook, no run, the hook unchanged.
	ctx := context.Background()
	if _, err := e.store.GetProject(ctx, "pwn"); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Errorf("project pwn: %v, want not found", err)
	}
	hs, err := e.store.ListHooks(ctx, "")
	if err != nil || len(hs) != 1 || hs[0].ID != "nightly-report" || !hs[0].Enabled {
		t.Errorf("hooks after the attack: %+v, %v; want nightly-report alone, enabled", hs, err)
	}
	if runs, err := e.store.ListHookRuns(ctx, models.HookRunFilter{}); err != nil || len(runs) != 0 {
		t.Errorf("hook runs after the attack: %+v, %v; want none", runs, err)
	}
	if !strings.Contains(e.logs.String(), `msg="request refused: host not allowed" host=attacker.example`) ||
		!strings.Contains(e.logs.String(), `msg="request refused: cross-origin" origin=http://attacker.example`) {
		t.Errorf("refusals not logged:\n%s", e.logs)
	}
}

// TestLegitimateClientsStillWork: programs (the API's client, curl,
// scripts) send no Origin or Sec-Fetch-Site and say application/json; a
// page of the API's own origin, loopback names and the configured hosts
// are served.
func TestLegitimateClientsStillWork(t *testing.T) {
	t.Parallel()
	e, engine := newHookEnvWith(t, api.Config{AllowedHosts: []string{"agentqueued.lan", "192.168.1.20"}})
	ctx := context.Background()
	port := e.srv.Listener.Addr().(*net.TCPAddr).Port

	// The client, bodiless requests included (it says JSON on them).
	if _, err := e.client.CreateProject(ctx, models.ProjectSpec{ID: "web"}.Project()); err != nil {
		t.Fatalf("client CreateProject: %v", err)
	}
	if _, err := e.client.CreateHook(ctx, models.HookSpec{}); models.ErrorCodeOf(err) != models.CodeInvalid {
		t.Fatalf("client CreateHook of nothing: %v, want invalid", err)
	}
	e.do("POST", "/api/v1/hooks", reportHook).decode(t, http.StatusCreated, &models.Hook{})
	run, err := e.client.FireHook(ctx, "nightly-report", api.FireRequest{})
	if err != nil || run.Status != models.HookRunRunning {
		t.Fatalf("client FireHook: %+v, %v", run, err)
	}
	engine.Wait()
	if err := e.client.DeleteHook(ctx, "nightly-report"); err != nil {
		t.Fatalf("client DeleteHook: %v", err)
	}

	tests := []struct {
		name    string
		headers []string
	}{
		{"curl with a charset", []string{"Content-Type", "application/json; charset=utf-8"}},
		{"a +json media type", []string{"Content-Type", "application/merge-patch+json"}},
		{"the API's own page", []string{"Origin", e.srv.URL, "Sec-Fetch-Site", "same-origin"}},
		{"an address typed by the user", []string{"Sec-Fetch-Site", "none"}},
		{"localhost", []string{"Host", fmt.Sprintf("localhost:%d", port)}},
		{"localhost without port, upper case", []string{"Host", "LOCALHOST"}},
		{"another loopback address", []string{"Host", "127.0.0.2"}},
		{"IPv6 loopback", []string{"Host", fmt.Sprintf("[::1]:%d", port)}},
		{"an allowed host name", []string{"Host", "agentqueued.lan:7700"}},
		{"an allowed host name, trailing dot", []string{"Host", "AgentQueued.LAN."}},
		{"an allowed address", []string{"Host", "192.168.1.20"}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("p%d", i)
			var p models.Project
			e.do("POST", "/api/v1/projects", `{"id":"`+id+`"}`, tc.headers...).decode(t, http.StatusCreated, &p)
			if got, err := e.store.GetProject(ctx, id); err != nil || got.ID != id {
				t.Fatalf("project %s: %+v, %v", id, got, err)
			}
			var list api.ProjectList
			e.do("GET", "/api/v1/projects", "", tc.headers...).decode(t, http.StatusOK, &list)
		})
	}
}

// TestGitHubWebhookKeepsWorkingThroughAProxy: GitHub delivers to the
// public host name of a tunnel or proxy, so the webhook is exempt from the
// Host check (its signature authenticates it), and its Content-Type may be
// GitHub's form encoding; the rest of the API behind the same proxy is not
// served.
func TestGitHubWebhookKeepsWorkingThroughAProxy(t *testing.T) {
	t.Parallel()
	const secret = "webhook-secret"
	var (
		mu     sync.Mutex
		pokes  []string
		public = "hooks.example.com"
	)
	webhook := repo.WebhookHandler(secret, nil, func(owner, name string, n int) {
		mu.Lock()
		defer mu.Unlock()
		pokes = append(pokes, fmt.Sprintf("%s/%s#%d", owner, name, n))
	})
	e := newEnv(t, api.Config{GitHubWebhook: webhook})
	sign := func(body string) string {
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(body))
		return "sha256=" + hex.EncodeToString(mac.Sum(nil))
	}
	payload := `{"action":"closed","number":7,"pull_request":{"number":7},"repository":{"name":"shop","owner":{"login":"acme"}}}`

	r := e.do("POST", api.WebhookPath, payload, "Host", public, "X-GitHub-Event", "pull_request",
		"X-GitHub-Delivery", "d1", "X-Hub-Signature-256", sign(payload), "User-Agent", "GitHub-Hookshot/abc")
	if r.status != http.StatusNoContent {
		t.Fatalf("signed delivery through %s: %d %s", public, r.status, r.body)
	}
	form := "payload=" + url.QueryEscape(payload)
	r = e.do("POST", api.WebhookPath, form, "Host", public, "Content-Type", "application/x-www-form-urlencoded",
		"X-GitHub-Event", "pull_request", "X-GitHub-Delivery", "d2", "X-Hub-Signature-256", sign(form))
	if r.status != http.StatusNoContent {
		t.Fatalf("signed form delivery: %d %s", r.status, r.body)
	}
	r = e.do("POST", api.WebhookPath, payload, "Host", public, "X-GitHub-Event", "pull_request",
		"X-Hub-Signature-256", sign("something else"))
	if r.status != http.StatusUnauthorized {
		t.Fatalf("badly signed delivery: %d %s", r.status, r.body)
	}
	mu.Lock()
	if got := strings.Join(pokes, ","); got != "acme/shop#7,acme/shop#7" {
		t.Errorf("pull requests poked: %q", got)
	}
	mu.Unlock()

	// Only the exact path is exempt: not a path that leads elsewhere.
	for _, path := range []string{"/webhooks/github/../../api/v1/projects", "/webhooks/github/", "/webhooks/github/x"} {
		e.do("POST", path, `{"id":"x"}`, "Host", public).wantError(t, http.StatusForbidden, models.CodeUnauthorized, "api.allowed_hosts")
	}

	// The same proxy does not expose the API itself.
	e.do("GET", "/api/v1/projects", "", "Host", public).wantError(t, http.StatusForbidden, models.CodeUnauthorized, "api.allowed_hosts")
	e.do("POST", "/api/v1/projects", `{"id":"x"}`, "Host", public).wantError(t, http.StatusForbidden, models.CodeUnauthorized, "api.allowed_hosts")

	// Without a webhook configured the path is not exempt.
	plain := newEnv(t, api.Config{})
	plain.do("POST", api.WebhookPath, payload, "Host", public).wantError(t, http.StatusForbidden, models.CodeUnauthorized, "not served")
}

func TestNewRefusesBadAllowedHosts(t *testing.T) {
	t.Parallel()
	svc := servicetest.New(t).Service
	for _, h := range []string{"http://agentqueued.lan", "agentqueued.lan:7700", "*.lan", "", "a b"} {
		_, err := api.New(api.Config{AllowedHosts: []string{"ok.lan", h}}, svc)
		if err == nil || !strings.Contains(err.Error(), "AllowedHosts[1]") {
			t.Errorf("New with AllowedHosts %q: %v, want an error naming AllowedHosts[1]", h, err)
		}
	}
}

// TestHealthReportsTheDaemonsOwnChecks: /healthz is unhealthy when
// Config.Health says so, with its reason, not only when the store fails.
func TestHealthReportsTheDaemonsOwnChecks(t *testing.T) {
	t.Parallel()
	var failing atomic.Bool
	e := newEnv(t, api.Config{Health: func(context.Context) error {
		if failing.Load() {
			return errors.New("token totals overflowed: bookings refused")
		}
		return nil
	}})
	if r := e.do("GET", "/healthz", ""); r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"status":"ok"}` {
		t.Fatalf("healthy: %d %s", r.status, r.body)
	}
	failing.Store(true)
	r := e.do("GET", "/healthz", "")
	var h api.Health
	r.decode(t, http.StatusServiceUnavailable, &h)
	if h.Status != "unhealthy" || h.Reason != "token totals overflowed: bookings refused" {
		t.Fatalf("unhealthy answer %s", r.body)
	}
	_, err := e.client.Health(context.Background())
	wantErr(t, err, models.CodeInternal, "token totals overflowed")
	failing.Store(false)
	if h, err := e.client.Health(context.Background()); err != nil || h.Status != "ok" {
		t.Fatalf("healthy again: %+v, %v", h, err)
	}
}

// TestEmptyProjectPatchIsRefused: like a task's or a hook's, a project
// patch that changes nothing is a 400, not a silent 200.
func TestEmptyProjectPatchIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	e.createProject("web")
	for _, body := range []string{`{}`, `{"name":null}`} {
		e.do("PATCH", "/api/v1/projects/web", body).wantError(t, http.StatusBadRequest, models.CodeInvalid,
			"nothing to change: set one of name, credit_weight")
	}
	var p models.Project
	e.do("PATCH", "/api/v1/projects/web", `{"name":"Web"}`).decode(t, http.StatusOK, &p)
	if p.Name != "Web" {
		t.Fatalf("patched %+v", p)
	}
}

// TestProjectPatchRefusesNegativeBudget: PATCH refuses a negative
// budget_limit as create does, instead of silently removing the budget;
// null is the explicit way to remove it.
func TestProjectPatchRefusesNegativeBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	var p models.Project
	e.do("POST", "/api/v1/projects", `{"id":"web","budget_limit":100}`).decode(t, http.StatusCreated, &p)
	e.do("POST", "/api/v1/projects", `{"id":"neg","budget_limit":-1}`).wantError(t, http.StatusBadRequest, models.CodeInvalid,
		"budget_limit: must not be negative")
	e.do("PATCH", "/api/v1/projects/web", `{"budget_limit":-1}`).wantError(t, http.StatusBadRequest, models.CodeInvalid,
		"budget_limit: must not be negative")
	e.do("GET", "/api/v1/projects/web", "").decode(t, http.StatusOK, &p)
	if p.BudgetLimit == nil || *p.BudgetLimit != 100 {
		t.Fatalf("budget after a refused patch: %v", p.BudgetLimit)
	}
	p = models.Project{} // a nil budget is left out of the answer
	e.do("PATCH", "/api/v1/projects/web", `{"budget_limit":null}`).decode(t, http.StatusOK, &p)
	if p.BudgetLimit != nil {
		t.Fatalf("budget after null: %v", *p.BudgetLimit)
	}
	e.do("PATCH", "/api/v1/projects/web", `{"budget_limit":7}`).decode(t, http.StatusOK, &p)
	if p.BudgetLimit == nil || *p.BudgetLimit != 7 {
		t.Fatalf("budget after 7: %v", p.BudgetLimit)
	}
	e.do("PATCH", "/api/v1/projects/web", `{"budgetlimit":7}`).wantError(t, http.StatusBadRequest, models.CodeInvalid, "budgetlimit")
}

// TestJSONKeysAreExact: encoding/json matches keys to fields ignoring case
// and lets the last of repeated keys win; both are refused, naming the
// key, at any depth, before anything is written.
func TestJSONKeysAreExact(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	e.createProject("web")
	task := e.createTasks(`{"project_id":"web","tasks":[{"title":"Keep"}]}`)[0].TaskID

	tests := []struct {
		name, method, path, body, msg string
	}{
		{"upper-case key", "POST", "/api/v1/projects", `{"ID":"caps"}`,
			`unknown field "ID" (keys are case-sensitive: did you mean "id"?)`},
		{"mixed-case key", "POST", "/api/v1/projects", `{"id":"caps","Credit_Weight":2}`,
			`unknown field "Credit_Weight" (keys are case-sensitive: did you mean "credit_weight"?)`},
		{"repeated key", "POST", "/api/v1/projects", `{"id":"first","id":"second"}`, `duplicate key "id"`},
		{"repeated key in a nested object", "POST", "/api/v1/projects", `{"id":"nested","repo":{"url":"a","url":"b"}}`,
			`duplicate key "repo.url"`},
		{"nested upper-case key", "POST", "/api/v1/tasks", `{"project_id":"web","tasks":[{"title":"a"},{"Title":"b"}]}`,
			`unknown field "tasks[1].Title"`},
		{"repeated key in a free-form map", "POST", "/api/v1/tasks",
			`{"project_id":"web","tasks":[{"title":"a","metadata":{"team":"x","team":"y"}}]}`,
			`duplicate key "tasks[0].metadata.team"`},
		{"repeated key in a bare batch", "POST", "/api/v1/tasks", `[{"project_id":"web","title":"a","title":"b"}]`,
			`duplicate key "[0].title"`},
		{"a patch that says title twice", "PATCH", "/api/v1/tasks/" + task, `{"title":"x","Title":"y"}`,
			`unknown field "Title"`},
		{"a patch that repeats title", "PATCH", "/api/v1/tasks/" + task, `{"title":"x","title":"y"}`,
			`duplicate key "title"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e.do(tc.method, tc.path, tc.body).wantError(t, http.StatusBadRequest, models.CodeInvalid, tc.msg)
		})
	}
	ctx := context.Background()
	ps, err := e.store.ListProjects(ctx)
	if err != nil || len(ps) != 1 {
		t.Errorf("projects after refused bodies: %+v, %v; want web alone", ps, err)
	}
	ts, err := e.store.ListTasks(ctx, models.TaskFilter{})
	if err != nil || len(ts) != 1 || ts[0].Title != "Keep" {
		t.Errorf("tasks after refused bodies: %+v, %v; want the one task, unchanged", ts, err)
	}
	// Exact keys still decode, and a key a struct does not have at all is
	// still "unknown field".
	e.do("POST", "/api/v1/projects", `{"id":"fine","credit_weight":2}`).decode(t, http.StatusCreated, &models.Project{})
	e.do("POST", "/api/v1/projects", `{"id":"x","colour":"red"}`).wantError(t, 400, models.CodeInvalid, `unknown field "colour"`)
}

// TestErrorsDoNotEchoHugeValues: an id, name or parameter of 5,000 bytes
// is answered with a short error that quotes at most a little of it.
func TestErrorsDoNotEchoHugeValues(t *testing.T) {
	t.Parallel()
	e := newWorkflowEnv(t)
	huge := strings.Repeat("A", 5000)
	tests := []struct {
		name, method, path, body string
		status                   int
	}{
		{"task id in the path", "GET", "/api/v1/tasks/" + huge, "", 404},
		{"task id to edit", "PATCH", "/api/v1/tasks/" + huge, `{"title":"x"}`, 404},
		{"agent id to remove", "DELETE", "/api/v1/agents/" + huge, "", 404},
		{"project id", "GET", "/api/v1/projects/" + huge, "", 404},
		{"workflow name", "GET", "/api/v1/workflows/" + huge, "", 404},
		{"run id", "GET", "/api/v1/runs/" + huge, "", 404},
		{"run task name", "GET", "/api/v1/runs/" + huge + "/tasks/" + huge + "/logs", "", 404},
		{"question id", "POST", "/api/v1/questions/" + huge + "/answer", `{"answer":"x"}`, 400},
		{"unknown endpoint", "GET", "/api/v1/" + huge, "", 404},
		{"project filter", "GET", "/api/v1/tasks?project=" + huge, "", 404},
		{"status filter", "GET", "/api/v1/tasks?status=" + huge, "", 400},
		{"cursor", "GET", "/api/v1/tasks?after=" + huge, "", 400},
		{"limit", "GET", "/api/v1/tasks?limit=" + huge, "", 400},
		{"unknown parameter", "GET", "/api/v1/tasks?" + huge + "=1", "", 400},
		{"run status", "GET", "/api/v1/runs?status=" + huge, "", 400},
		{"unknown field", "POST", "/api/v1/projects", `{"` + huge + `":1}`, 400},
		{"project id in a body", "POST", "/api/v1/tasks", `{"project_id":"` + huge + `","tasks":[{"title":"a"}]}`, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.method, tc.path, tc.body)
			var eb api.ErrorBody
			if err := json.Unmarshal(r.body, &eb); err != nil || eb.Error.Message == "" {
				t.Fatalf("answer %d %.200s is not an error", r.status, r.body)
			}
			if tc.status != 0 && r.status != tc.status {
				t.Errorf("status %d, want %d (%s)", r.status, tc.status, eb.Error.Message)
			}
			if len(eb.Error.Message) > 400 || strings.Contains(eb.Error.Message, strings.Repeat("A", 100)) {
				t.Errorf("message of %d bytes echoes the value: %.300s", len(eb.Error.Message), eb.Error.Message)
			}
			if !strings.Contains(eb.Error.Message, strings.Repeat("A", 20)) || !strings.Contains(eb.Error.Message, "…") {
				t.Errorf("message %q does not quote the start of the value, cut with …", eb.Error.Message)
			}
		})
	}
}

// TestSlowBodyIsCutOff: a client that sends its headers and then trickles
// (here: stops sending) its body is answered 408 and disconnected once the
// read timeout passes, instead of holding a connection and a handler for
// ever; nothing is written.
func TestSlowBodyIsCutOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	s, err := api.New(api.Config{Addr: "127.0.0.1:0", ReadTimeout: 200 * time.Millisecond}, e.kit.Service)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	wait := progresstest.Context(t)
	var d net.Dialer
	conn, err := d.DialContext(wait, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if dl, ok := wait.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	part := `{"id":"slow",`
	req := "POST /api/v1/projects HTTP/1.1\r\nHost: " + ln.Addr().String() + "\r\nContent-Type: application/json\r\n" +
		"Content-Length: 100\r\n\r\n" + part
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	// The rest of the body never comes: the server must answer and close.
	var got strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := conn.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the server still holds the connection of a stalled body; read so far: %q", got.String())
			}
			break // EOF or reset: the server closed it
		}
	}
	answer := got.String()
	if !strings.HasPrefix(answer, "HTTP/1.1 408 ") || !strings.Contains(answer, "request body: not received in time") {
		t.Errorf("answer to a stalled body: %q", answer)
	}
	if _, err := e.store.GetProject(context.Background(), "slow"); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Errorf("project of the stalled request: %v, want not found", err)
	}
}
