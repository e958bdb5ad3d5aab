package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/service/servicetest"
)

// askedLogs is a fixedLogs that signals each call of Changed: a handler
// that asks is past its checks and about to wait for the answer's change.
type askedLogs struct {
	*fixedLogs
	asked chan struct{}
}

func (a askedLogs) Changed() (uint64, <-chan struct{}) {
	select {
	case a.asked <- struct{}{}:
	default:
	}
	return a.fixedLogs.Changed()
}

// TestShutdownEndsWaitingRequests: requests that wait on the daemon — a
// long poll for a change (ctl watch) and a log follow (ctl task logs -f)
// — do not hold up the server's stop: once Serve's context is cancelled
// they end as when their wait runs out or their run ends, and Serve
// returns nil long before its shutdown timeout (an hour here: a server
// that waits for them stalls the test's watchdog instead).
func TestShutdownEndsWaitingRequests(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		follow, poll bool
	}{
		{name: "a change wait", poll: true},
		{name: "a log follow", follow: true},
		{name: "both", follow: true, poll: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			logs := askedLogs{fixedLogs: newFixedLogs(), asked: make(chan struct{}, 8)}
			logs.Append("one\n", false)
			client, served, stop := serveForShutdown(t, logs)
			dog := progresstest.New(t, "the server's start")

			type followed struct {
				text string
				err  error
			}
			var followDone chan followed
			if tt.follow {
				got := make(chan string, 8)
				followDone = make(chan followed, 1)
				go func() {
					var text string
					w := writerFunc(func(p []byte) (int, error) {
						text += string(p)
						got <- string(p)
						return len(p), nil
					})
					err := client.FollowTaskLog(context.Background(), "t1", 0, true, w)
					followDone <- followed{text, err}
				}()
				select {
				case <-got: // the follow has written the log so far and waits for more
					dog.Progress("the follow's first chunk")
				case f := <-followDone:
					t.Fatalf("the follow ended before the shutdown: %q, %v", f.text, f.err)
				case <-dog.Done():
					t.Fatalf("the follow's first chunk: %v", dog.Err())
				}
			}
			type polled struct {
				ch  api.Changes
				err error
			}
			var pollDone chan polled
			if tt.poll {
				for len(logs.asked) > 0 {
					<-logs.asked // the follow's
				}
				pollDone = make(chan polled, 1)
				go func() {
					ch, err := client.WaitForChange(context.Background(), 1, api.MaxChangeWait)
					pollDone <- polled{ch, err}
				}()
				select {
				case <-logs.asked: // the wait has read the number of changes and waits for the next
					dog.Progress("the change wait's start")
				case p := <-pollDone:
					t.Fatalf("the change wait ended before the shutdown: %+v, %v", p.ch, p.err)
				case <-dog.Done():
					t.Fatalf("the change wait's start: %v", dog.Err())
				}
			}

			stop()
			dog.Progress("the shutdown's start")
			select {
			case err := <-served:
				if err != nil {
					t.Errorf("Serve = %v, want nil", err)
				}
			case <-dog.Done():
				t.Fatalf("Serve did not return while a request waited: %v", dog.Err())
			}
			if tt.follow {
				select {
				case f := <-followDone:
					if f.err != nil || f.text != "one\n" {
						t.Errorf("the follow = %q, %v; want %q, nil", f.text, f.err, "one\n")
					}
				case <-dog.Done():
					t.Fatalf("the follow did not end: %v", dog.Err())
				}
			}
			if tt.poll {
				select {
				case p := <-pollDone:
					if want := (api.Changes{Changed: false, Seq: 1}); p.err != nil || p.ch != want {
						t.Errorf("the change wait = %+v, %v; want %+v, nil", p.ch, p.err, want)
					}
				case <-dog.Done():
					t.Fatalf("the change wait did not end: %v", dog.Err())
				}
			}
		})
	}
}

// serveForShutdown serves the API over a fresh store and logs with an
// hour's shutdown timeout. stop cancels Serve's context; Serve's result
// arrives on served. When the test ends the run ends and a change is
// made, so that even a server that waits for its requests returns.
func serveForShutdown(t *testing.T, logs askedLogs) (client *api.Client, served <-chan error, stop func()) {
	t.Helper()
	k := servicetest.New(t)
	s, err := api.New(api.Config{Addr: "127.0.0.1:0", ShutdownTimeout: time.Hour, Logs: logs}, k.Service)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	client, err = api.NewClient("http://"+ln.Addr().String(), "", hc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		result <- s.Serve(ctx, ln)
	}()
	t.Cleanup(func() {
		cancel()
		logs.Append("", true)
		<-finished
	})
	return client, result, cancel
}

// writerFunc is an io.Writer made of a function.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
