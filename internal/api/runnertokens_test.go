package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/fleet"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/service"
	"github.com/agentqueued/agentqueued/internal/service/servicetest"
)

// gatedTokens holds every runner token check until gate is closed, and
// says on entered when one begins.
type gatedTokens struct {
	api.RunnerConnService
	entered chan struct{}
	gate    chan struct{}
}

func (g gatedTokens) RunnerByToken(ctx context.Context, token string) (models.Runner, error) {
	g.entered <- struct{}{}
	<-g.gate
	return g.RunnerConnService.RunnerByToken(ctx, token)
}

// Many runners behind one address (a NAT, a proxy) that connect at once
// with right tokens are all let in: the throttle counts a check under way
// as a failure until it is known, so the checks run a few at a time
// rather than all spending the address's budget together.
func TestRunnersBehindOneAddressConnectAtOnce(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	hub := fleet.New(fleet.Config{Clock: clk})
	logger, _ := newLogger()
	k := newKit(t, logger, servicetest.WithService(func(c *service.Config) { c.Runners, c.Clock = hub, clk }))
	const n = 30 // three times the throttle's budget of one address
	tokens := make([]string, n)
	for i := range tokens {
		_, token, err := k.Service.AddRunner(context.Background(), fmt.Sprintf("nat-%d", i), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		tokens[i] = token
	}
	g := gatedTokens{RunnerConnService: k.Service, entered: make(chan struct{}, n), gate: make(chan struct{})}
	rs, err := api.NewRunnerServer(api.RunnerConfig{Logger: logger}, g, hub)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rs.Handler())
	t.Cleanup(srv.Close)

	statuses := make(chan string, n)
	var wg sync.WaitGroup
	for _, tok := range tokens {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+api.RunnerPrefix+"/hello",
				strings.NewReader(`{"version":"v","agents":[]}`))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			resp, err := srv.Client().Do(req)
			if err != nil {
				statuses <- err.Error()
				return
			}
			resp.Body.Close()
			statuses <- resp.Status
		})
	}
	// The first checks are under way; let them all finish.
	for range api.DefaultMaxTokenChecks {
		<-g.entered
	}
	close(g.gate)
	wg.Wait()
	close(statuses)
	for st := range statuses {
		if st != "200 OK" {
			t.Errorf("a runner with a right token was answered %s", st)
		}
	}
}
