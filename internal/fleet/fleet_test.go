package fleet_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/fleet"
)

// wait runs a Wait in its own goroutine and returns where its result
// arrives.
func wait(ctx context.Context, h *fleet.Hub, name string) <-chan fleet.WaitResult {
	ch := make(chan fleet.WaitResult, 1)
	go func() { ch <- h.Wait(ctx, name) }()
	return ch
}

func TestWaitEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		end  func(h *fleet.Hub, clk *clocktest.Fake, cancel context.CancelFunc)
		want fleet.WaitResult
	}{
		{"woken", func(h *fleet.Hub, _ *clocktest.Fake, _ context.CancelFunc) { h.Wake("r1") }, fleet.Woken},
		{"held", func(_ *fleet.Hub, clk *clocktest.Fake, _ context.CancelFunc) { clk.Advance(fleet.DefaultPollHold) }, fleet.Held},
		{"removed", func(h *fleet.Hub, _ *clocktest.Fake, _ context.CancelFunc) { h.Remove("r1") }, fleet.Removed},
		{"ended", func(_ *fleet.Hub, _ *clocktest.Fake, cancel context.CancelFunc) { cancel() }, fleet.Ended},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := clocktest.New(start)
			h := fleet.New(fleet.Config{Clock: clk})
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			got := wait(wctx, h, "r1")
			// The poll is outstanding once its hold's timer is armed.
			if err := clk.WaitTimer(ctx, fleet.DefaultPollHold); err != nil {
				t.Fatal(err)
			}
			if st := h.Statuses(); len(st) != 1 || !st[0].Polling || !st[0].Connected {
				t.Fatalf("statuses while polling: %+v", st)
			}
			tc.end(h, clk, cancel)
			if r := <-got; r != tc.want {
				t.Fatalf("wait ended %v, want %v", r, tc.want)
			}
		})
	}
}

// A wake-up while no poll is outstanding is kept for the next poll, and
// any number of them count as one.
func TestWakeBeforePollIsKept(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	h := fleet.New(fleet.Config{Clock: clk})
	h.Wake("r1")
	h.Wake("r1")
	if r := h.Wait(context.Background(), "r1"); r != fleet.Woken {
		t.Fatalf("first poll after wake-ups: %v", r)
	}
	got := wait(context.Background(), h, "r1")
	if err := clk.WaitTimer(context.Background(), fleet.DefaultPollHold); err != nil {
		t.Fatal(err)
	}
	clk.Advance(fleet.DefaultPollHold)
	if r := <-got; r != fleet.Held {
		t.Fatalf("second poll: %v, want held (the wake-ups were one)", r)
	}
}

// A runner counts as connected while it polls and for SeenTimeout after its
// last request; its connection's start is kept across its polls.
func TestConnectedFollowsRequests(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	clk := clocktest.New(start)
	h := fleet.New(fleet.Config{Clock: clk})
	h.Seen("r1", "v1", "127.0.0.2:5000")
	clk.Advance(10 * time.Second)
	h.Seen("r1", "", "")
	st := h.Statuses()
	if len(st) != 1 || !st[0].Connected || !st[0].Since.Equal(start) || st[0].Version != "v1" || st[0].Address != "127.0.0.2:5000" {
		t.Fatalf("after two requests: %+v", st)
	}
	if !h.Connected("r1") || h.Connected("r2") {
		t.Fatalf("connected: r1 %v, r2 (never seen) %v", h.Connected("r1"), h.Connected("r2"))
	}
	clk.Advance(fleet.DefaultSeenTimeout + time.Second)
	if h.Connected("r1") {
		t.Fatal("r1 still connected after the seen timeout")
	}
	if st := h.Statuses(); st[0].Connected || !st[0].Since.IsZero() || !st[0].LastSeen.Equal(start.Add(10*time.Second)) {
		t.Fatalf("after the seen timeout: %+v", st)
	}
	h.Seen("r1", "", "")
	if st := h.Statuses(); !st[0].Connected || !st[0].Since.Equal(clk.Now()) {
		t.Fatalf("back: %+v", st)
	}
	// A removed runner is forgotten, and its next poll ends at once.
	h.Remove("r1")
	if st := h.Statuses(); len(st) != 0 {
		t.Fatalf("after removal: %+v", st)
	}
}

// A runner counts as connected for SeenTimeout after its last request,
// however long its poll is held; one that let a lease expire counts as
// away until its next request.
func TestConnectedNeedsRecentRequests(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	h := fleet.New(fleet.Config{Clock: clk})
	if h.Connected("r1") {
		t.Fatal("a runner never seen is connected")
	}
	h.Seen("r1", "v1", "127.0.0.2:1")
	if !h.Connected("r1") {
		t.Fatal("a runner just seen is not connected")
	}
	h.Unresponsive("r1")
	if h.Connected("r1") {
		t.Fatal("a runner that let a lease expire is connected")
	}
	h.Seen("r1", "", "")
	if !h.Connected("r1") {
		t.Fatal("a runner back after letting a lease expire is not connected")
	}
	// A poll held as long as it is ever held: its start keeps the runner
	// connected; a process that stopped after starting it is away once
	// SeenTimeout has passed, although its connection is still open.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := wait(ctx, h, "r1")
	if err := clk.WaitTimer(ctx, fleet.DefaultPollHold); err != nil {
		t.Fatal(err)
	}
	clk.Advance(fleet.DefaultSeenTimeout + time.Second)
	if h.Connected("r1") {
		t.Fatalf("a runner whose last request began over %s ago is connected", fleet.DefaultSeenTimeout)
	}
	<-got
}

// News gives a runner each offer and each order to end once until its
// next hello, forgets what is not listed any more, and tells an offer
// from an order to end the same run.
func TestNewsGivesEachOnceUntilHello(t *testing.T) {
	t.Parallel()
	h := fleet.New(fleet.Config{Clock: clocktest.New(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))})
	type ids = []int64
	steps := []struct {
		name               string
		hello              bool
		offers, ends       ids
		wantOffer, wantEnd ids
	}{
		{"first offer", false, ids{1}, nil, ids{1}, nil},
		{"offered again before it is taken up", false, ids{1}, nil, nil, nil},
		{"another joins", false, ids{1, 2}, nil, ids{2}, nil},
		{"another runner is not this one", false, ids{1, 2}, nil, nil, nil},
		{"ended after it was offered", false, ids{2}, ids{1}, nil, ids{1}},
		{"the end again", false, ids{2}, ids{1}, nil, nil},
		{"a hello gives all again", true, ids{2}, ids{1}, ids{2}, ids{1}},
		{"nothing listed forgets all", false, nil, nil, nil, nil},
		{"so a run listed again is news", false, ids{2}, nil, ids{2}, nil},
	}
	for _, s := range steps {
		if s.hello {
			h.Hello("r1")
		}
		name := "r1"
		if s.name == "another runner is not this one" {
			if o, e := h.News("r2", s.offers, s.ends); len(o) != 2 || len(e) != 0 {
				t.Fatalf("%s: r2 given %v %v, want all offers", s.name, o, e)
			}
			continue
		}
		o, e := h.News(name, s.offers, s.ends)
		if !slices.Equal(o, s.wantOffer) || !slices.Equal(e, s.wantEnd) {
			t.Fatalf("%s: given offers %v ends %v, want %v %v", s.name, o, e, s.wantOffer, s.wantEnd)
		}
	}
}
