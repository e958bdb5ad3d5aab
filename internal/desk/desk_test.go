package desk_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/desk"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hookServer is a webhook receiver on 127.0.0.1 that refuses its first
// failFirst requests with a 500, then takes them; each body is kept.
type hookServer struct {
	*httptest.Server
	mu        sync.Mutex
	failFirst int
	bodies    [][]byte // every request's body
	got       chan struct{}
}

func newHookServer(t *testing.T, failFirst int) *hookServer {
	t.Helper()
	h := &hookServer{failFirst: failFirst, got: make(chan struct{}, 100)}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.bodies = append(h.bodies, body)
		fail := len(h.bodies) <= h.failFirst
		h.mu.Unlock()
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || r.URL.Query().Get("token") != "s3cret" {
			http.Error(w, "bad request", http.StatusBadRequest)
		} else if fail {
			http.Error(w, "try later", http.StatusInternalServerError)
		}
		h.got <- struct{}{}
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookServer) requests() [][]byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([][]byte(nil), h.bodies...)
}

// run runs a notifier until the test ends or stop is called; each look is
// sent on the returned channel.
func run(t *testing.T, st *store.Store, clock *clocktest.Fake, hooks map[string]string) (chan time.Time, func()) {
	t.Helper()
	passes := make(chan time.Time, 100)
	n, err := desk.New(desk.Config{Clock: clock, PollInterval: 24 * time.Hour, Webhooks: hooks,
		OnPass: func(next time.Time) { passes <- next }}, st)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("notifier: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return passes, stop
}

// advanceAfter moves the clock by d once the notifier, whose last look
// said its next look is due at next, has armed its timer for it. Moved
// before, the clock would leave the timer, armed for the wait the
// notifier worked out, that wait after the moved time.
func advanceAfter(t *testing.T, clock *clocktest.Fake, next time.Time, d time.Duration) {
	t.Helper()
	if wait := next.Sub(clock.Now()); wait > 0 {
		if err := clock.WaitTimer(progresstest.Context(t), wait); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(d)
}

// TestAnEscalationIsPostedToItsWebhookOnce: a project's escalate_webhook
// names one of the daemon's desk webhooks; an escalation is POSTed there as
// JSON, retried after a failure (also by a notifier that starts over on
// the database: a restart), and delivered once. The URL, which holds its
// token, is in neither the body nor the project's settings.
func TestAnEscalationIsPostedToItsWebhookOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	db := filepath.Join(t.TempDir(), "aq.db")
	st := storetest.OpenAt(t, db, storetest.WithClock(clock))
	if _, err := st.CreateProject(ctx, models.Project{ID: "web", Settings: models.ProjectSettings{
		EscalateAfter: models.Duration(time.Hour), EscalateWebhook: "oncall"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RegisterAgent(ctx, models.Agent{ID: "a1", AgentType: "command", AgentSettings: models.AgentSettings{Command: "/bin/true"}}); err != nil {
		t.Fatal(err)
	}
	res, err := st.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{{Title: "Pick a database"}}})
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := st.ClaimTask(ctx, res[0].TaskID, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.StartRun(ctx, r.ID, 1, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AskQuestion(ctx, r.ID, "Postgres or SQLite?"); err != nil {
		t.Fatal(err)
	}
	srv := newHookServer(t, 1)
	hooks := map[string]string{"oncall": srv.URL + "/hook?token=s3cret"}

	passes, stop := run(t, st, clock, hooks)
	advanceAfter(t, clock, <-passes, time.Hour) // the question has waited its escalate_after
	<-passes
	<-srv.got // the first POST, refused
	if got := len(srv.requests()); got != 1 {
		t.Fatalf("%d posts, want 1 (refused)", got)
	}
	stop()

	// A restart: the delivery is retried after the backoff, and made once.
	// A clock of its own for the new life, at the same time: the stopped
	// notifier's last timer, for the same backoff, stays on the old one
	// and cannot be taken for the new notifier's.
	clock = clocktest.New(clock.Now())
	st2 := storetest.OpenAt(t, db, storetest.WithClock(clock))
	passes, stop = run(t, st2, clock, hooks)
	next := <-passes
	if !next.Equal(clock.Now().Add(desk.WebhookBackoff)) {
		t.Fatalf("the next look after the restart is due at %v, want the retry at %v", next, clock.Now().Add(desk.WebhookBackoff))
	}
	advanceAfter(t, clock, next, desk.WebhookBackoff)
	next = <-passes
	<-srv.got
	advanceAfter(t, clock, next, 24*time.Hour) // a day on: nothing is sent again
	<-passes
	stop()
	bodies := srv.requests()
	if len(bodies) != 2 {
		t.Fatalf("%d posts, want 2 (one refused, one taken)", len(bodies))
	}
	var body models.DeskWebhookBody
	if err := json.Unmarshal(bodies[1], &body); err != nil {
		t.Fatal(err)
	}
	if body.Kind != models.NoticeDeskEscalation || body.ProjectID != "web" || body.Item.Kind != models.DeskQuestion ||
		body.Item.What != "Postgres or SQLite?" || body.Waited.Std() != time.Hour ||
		!strings.Contains(body.Text, "Waiting on you for 1h0m0s") || !strings.Contains(body.Text, "ctl question answer") {
		t.Fatalf("the webhook's body: %s", bodies[1])
	}
	if strings.Contains(string(bodies[1]), "s3cret") {
		t.Fatalf("the body holds the webhook's token: %s", bodies[1])
	}
	p, err := st2.GetProject(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if settings, _ := json.Marshal(p.Settings); strings.Contains(string(settings), "s3cret") {
		t.Fatalf("the project's settings hold the webhook's URL: %s", settings)
	}
}

// TestDeskWebhooksMustBeSafeURLs: a webhook's URL must be https (or http to
// a loopback address) without a user or password.
func TestDeskWebhooksMustBeSafeURLs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url, want string
	}{
		{"http://example.com/hook", "must be https"},
		{"https://user:pw@example.com/hook", "must not hold a user or password"},
		{"not a url", "not a URL with a host"},
	} {
		_, err := desk.New(desk.Config{Webhooks: map[string]string{"oncall": tc.url}}, &store.Store{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), tc.url) && tc.url != "not a url" {
			t.Errorf("%s: %v, want %q without the URL", tc.url, err, tc.want)
		}
	}
	if _, err := desk.New(desk.Config{Webhooks: map[string]string{"oncall": "https://hooks.example.com/x?token=1"}}, &store.Store{}); err != nil {
		t.Errorf("an https webhook: %v", err)
	}
}
