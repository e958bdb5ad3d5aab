package repo_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/repo"
	"github.com/agentqueued/agentqueued/internal/repo/githubtest"
	"go.uber.org/goleak"
)

// answers is a GitHubObserver that keeps what it is told.
type answers struct {
	mu  sync.Mutex
	got [][2]int
}

func (a *answers) GitHubResponse(status, remaining int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got = append(a.got, [2]int{status, remaining})
}

func (a *answers) take() [][2]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	got := a.got
	a.got = nil
	return got
}

// TestGitHubObserverSeesEveryAnswer: each request of the go-github client
// is reported with its status and the rate limit GitHub says remains; a
// request that got no answer with status 0. The caller's client is left
// as it was.
func TestGitHubObserverSeesEveryAnswer(t *testing.T) {
	t.Parallel()
	const token = "tok"
	srv := githubtest.New(githubtest.Options{Token: token, Logf: t.Logf, RateLimit: 100})
	t.Cleanup(srv.Close)
	srv.CreateRepo("acme", "shop", "main")
	ws, err := repo.New(repo.Config{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rec := &answers{}
	hc := &http.Client{}
	gh, err := repo.NewGitHub(repo.GitHubConfig{Token: token, APIBaseURL: srv.URL() + "/api/v3/", HTTPClient: hc, Observer: rec}, ws)
	if err != nil {
		t.Fatal(err)
	}
	if hc.Transport != nil {
		t.Errorf("the caller's client got transport %T", hc.Transport)
	}
	pr := models.PullRequest{Owner: "acme", Repo: "shop", Number: 7}
	ctx := context.Background()
	steps := []struct {
		name   string
		before func()
		want   [2]int
	}{
		{name: "no such pull request", want: [2]int{http.StatusNotFound, 99}},
		{name: "rate limited", before: func() { srv.RateLimitNext(1, "primary", 0) }, want: [2]int{http.StatusForbidden, 0}},
		{name: "no answer", before: srv.Close, want: [2]int{0, -1}},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		if _, err := gh.Check(ctx, pr, false); err == nil {
			t.Fatalf("%s: Check succeeded", st.name)
		}
		got := rec.take()
		if len(got) != 1 || got[0] != st.want {
			t.Errorf("%s: observed %v, want [%v]", st.name, got, st.want)
		}
	}
}

// TestGitHubErrorAnswersLeaveNoGoroutine: go-github replaces the body of an
// error answer (a 404 here; a 304 to a conditional check is one too) and
// never closes the original. The daemon's GitHub client must not keep a
// goroutine per such answer until a timeout, as http.Client.Timeout would:
// polling fifty pull requests answered 304 kept thousands.
func TestGitHubErrorAnswersLeaveNoGoroutine(t *testing.T) {
	// Not parallel: goleak compares the goroutines before and after.
	before := goleak.IgnoreCurrent()
	const token = "tok"
	srv := githubtest.New(githubtest.Options{Token: token, Logf: t.Logf})
	srv.CreateRepo("acme", "shop", "main")
	ws, err := repo.New(repo.Config{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	gh, err := repo.NewGitHub(repo.GitHubConfig{Token: token, APIBaseURL: srv.URL() + "/api/v3/"}, ws)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := gh.Check(context.Background(), models.PullRequest{Owner: "acme", Repo: "shop", Number: 7}, false); err == nil {
			t.Fatal("Check of a missing pull request succeeded")
		}
	}
	srv.Close()
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	goleak.VerifyNone(t, before)
}
