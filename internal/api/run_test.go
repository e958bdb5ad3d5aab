package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/service/servicetest"
)

func TestServerRunAndShutdown(t *testing.T) {
	t.Parallel()
	svc := servicetest.New(t).Service
	s, err := api.New(api.Config{Addr: "127.0.0.1:0"}, svc)
	if err != nil {
		t.Fatal(err)
	}
	if s.Addr() != nil {
		t.Fatalf("Addr before listening = %v", s.Addr())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	select {
	case <-s.Ready():
	case err := <-done:
		t.Fatalf("Run returned before listening: %v", err)
	}
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	client, err := api.NewClient("http://"+s.Addr().String(), "", hc)
	if err != nil {
		t.Fatal(err)
	}
	if h, err := client.Health(ctx); err != nil || h.Status != "ok" {
		t.Fatalf("Health = %+v, %v", h, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after cancel = %v, want nil", err)
	}
	if _, err := client.Health(context.Background()); err == nil {
		t.Error("server still answers after shutdown")
	}
}

func TestRunFailsOnBusyAddress(t *testing.T) {
	t.Parallel()
	svc := servicetest.New(t).Service
	first, err := api.New(api.Config{Addr: "127.0.0.1:0"}, svc)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := first.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	second, err := api.New(api.Config{Addr: ln.Addr().String()}, svc)
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Run(context.Background()); err == nil {
		t.Error("Run on a busy address succeeded")
	}
}

func TestNewRejectsNilService(t *testing.T) {
	t.Parallel()
	if _, err := api.New(api.Config{}, nil); err == nil {
		t.Error("New(nil service) succeeded")
	}
}
