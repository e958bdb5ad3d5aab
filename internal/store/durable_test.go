package store_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// heldSync holds the store's first sync of its log from the moment it
// starts (entered is closed) until release is closed, then lets it and
// every later sync run (or fail with fail, when set). waiting receives a
// signal each time a caller starts to wait for another's sync.
type heldSync struct {
	entered, release chan struct{}
	waiting          chan struct{}
	once             sync.Once
}

// holdSync installs a heldSync on s; every sync fails with fail when it
// is not nil.
func holdSync(t *testing.T, s *store.Store, fail error) *heldSync {
	t.Helper()
	h := &heldSync{entered: make(chan struct{}), release: make(chan struct{}), waiting: make(chan struct{}, 1024)}
	store.SetSyncForTest(s, func(next func() error) func() error {
		return func() error {
			h.once.Do(func() {
				close(h.entered)
				<-h.release
			})
			if fail != nil {
				return fail
			}
			return next()
		}
	}, func() {
		select {
		case h.waiting <- struct{}{}:
		default:
		}
	})
	return h
}

// awaitWaiters returns once n callers have started to wait for the held
// sync, and fails the test when one of calls returns first.
func (h *heldSync) awaitWaiters(t *testing.T, n int, calls ...<-chan error) {
	t.Helper()
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(h.waiting)}}
	for _, ch := range calls {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
	}
	for range n {
		if i, v, _ := reflect.Select(cases); i > 0 {
			t.Fatalf("call %d returned (%v) instead of waiting for the held sync", i-1, v.Interface())
		}
	}
}

// awaitEntered returns once the held sync has started, and fails the test
// when call returns first.
func (h *heldSync) awaitEntered(t *testing.T, call <-chan error) {
	t.Helper()
	select {
	case <-h.entered:
	case err := <-call:
		t.Fatalf("the write returned (%v) before any sync of the log", err)
	}
}

// async runs f in a goroutine and returns where its error arrives.
func async(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

// notAnswered fails the test when any of calls has returned.
func notAnswered(t *testing.T, what string, calls ...<-chan error) {
	t.Helper()
	for i, ch := range calls {
		select {
		case err := <-ch:
			t.Fatalf("%s: call %d returned (%v) while the sync that covers it was held", what, i, err)
		default:
		}
	}
}

// countingObserver counts the status changes reported to it.
type countingObserver struct{ transitions atomic.Int64 }

func (o *countingObserver) Transitioned(store.ObservedTransition) { o.transitions.Add(1) }
func (o *countingObserver) RunEnded(store.ObservedRun)            {}

// TestWritesAreAnsweredAfterTheSyncThatCoversThem: a write returns only
// once a sync of the log that began after its commit has ended; until then
// nothing is woken or reported for it, although readers already see it
// (and WaitDurable waits for it). Writes that commit while a sync runs
// wait for the next one, and share it.
func TestWritesAreAnsweredAfterTheSyncThatCoversThem(t *testing.T) {
	t.Parallel()
	var woken atomic.Int64
	obs := &countingObserver{}
	s := storetest.Open(t, storetest.WithOnChange(func() { woken.Add(1) }), storetest.WithObserver(obs))
	storetest.Project(t, s, "p")
	ids := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "a", Title: "a"}, models.BatchTask{LocalID: "b", Title: "b"},
		models.BatchTask{LocalID: "c", Title: "c"})
	for _, id := range ids {
		storetest.Apply(t, s, id, storetest.ToCompleted[:3]...)
	}
	ctx := context.Background()
	complete := func(id string) <-chan error {
		return async(func() error {
			_, err := s.ApplyEvent(ctx, models.TransitionRequest{TaskID: id, Event: models.EventVerifyPassed})
			return err
		})
	}
	woken0, reported0 := woken.Load(), obs.transitions.Load()
	h := holdSync(t, s, nil)

	a := complete(ids["a"])
	h.awaitEntered(t, a) // a has committed and runs the sync, held
	if got, err := s.GetTask(ctx, ids["a"]); err != nil || got.Status != models.StatusCompleted {
		t.Fatalf("a reader does not see the commit whose sync is held: %s, %v", got.Status, err)
	}
	read := async(func() error { return s.WaitDurable(ctx) })
	h.awaitWaiters(t, 1, a, read)
	b, c := complete(ids["b"]), complete(ids["c"])
	h.awaitWaiters(t, 2, a, read, b, c) // b and c have committed and wait
	notAnswered(t, "held", a, b, c, read)
	if n := woken.Load() - woken0; n != 0 {
		t.Fatalf("%d wake-ups before the commits were durable", n)
	}
	if n := obs.transitions.Load() - reported0; n != 0 {
		t.Fatalf("%d status changes reported before they were durable", n)
	}

	syncs := s.Syncs()
	close(h.release)
	for name, ch := range map[string]<-chan error{"a": a, "b": b, "c": c, "WaitDurable": read} {
		if err := <-ch; err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if n := s.Syncs() - syncs; n != 1 {
		t.Fatalf("b and c, committed during a's sync, took %d more syncs, want 1 shared", n)
	}
	if n := woken.Load() - woken0; n != 3 {
		t.Fatalf("%d wake-ups after the commits were durable, want 3", n)
	}
	if n := obs.transitions.Load() - reported0; n != 3 {
		t.Fatalf("%d status changes reported, want 3", n)
	}
}

// TestASyncFailureFailsEveryWaiterAndLaterWrites: when a sync of the log
// fails, every write waiting for it gets the failure, the store claims no
// durability afterwards (later writes are refused before they begin,
// WaitDurable fails, the health check reports it), and reads go on.
func TestASyncFailureFailsEveryWaiterAndLaterWrites(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	ids := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "t", Title: "t"})
	ctx := context.Background()
	notify := func(key string) <-chan error {
		return async(func() error {
			return s.Notify(ctx, key, models.NewProgressNotice("p", models.ProgressNotice{TaskID: ids["t"], Message: key}))
		})
	}
	eio := errors.New("input/output error")
	h := holdSync(t, s, eio)
	a := notify("a")
	h.awaitEntered(t, a)
	b, c := notify("b"), notify("c")
	h.awaitWaiters(t, 2, a, b, c)
	notAnswered(t, "held", a, b, c)
	close(h.release)
	for name, ch := range map[string]<-chan error{"a": a, "b": b, "c": c} {
		err := <-ch
		if !errors.Is(err, eio) || models.ErrorCodeOf(err) != models.CodeUnavailable {
			t.Fatalf("%s: %v (code %s), want the sync's failure, unavailable", name, err, models.ErrorCodeOf(err))
		}
	}
	commits := s.Commits()
	if err := <-notify("d"); !errors.Is(err, eio) {
		t.Fatalf("a write after the failure: %v, want it refused with the failure", err)
	}
	if n := s.Commits() - commits; n != 0 {
		t.Fatalf("a write after the failure committed (%d commits)", n)
	}
	if err := s.WaitDurable(ctx); !errors.Is(err, eio) {
		t.Fatalf("WaitDurable after the failure: %v", err)
	}
	if err := s.WriteHealth(); !errors.Is(err, eio) {
		t.Fatalf("WriteHealth after the failure: %v", err)
	}
	if _, err := s.GetTask(ctx, ids["t"]); err != nil {
		t.Fatalf("a read after the failure: %v", err)
	}
}

// TestConcurrentWritersShareSyncs: eight writers at once take fewer syncs
// of the log than they make commits, and every write they were answered
// is there. The first sync is held until the seven others wait, so that
// sharing happens however the machine schedules them.
func TestConcurrentWritersShareSyncs(t *testing.T) {
	t.Parallel()
	const writers, each = 8, 20
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	ids := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "t", Title: "t"})
	h := holdSync(t, s, nil)
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-h.entered:
		case <-finished:
			return
		}
		for range writers - 1 {
			select {
			case <-h.waiting:
			case <-finished:
				return
			}
		}
		close(h.release)
	}()
	ctx := context.Background()
	commits, syncs := s.Commits(), s.Syncs()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				key := fmt.Sprintf("w%d:%d", w, i)
				if err := s.Notify(ctx, key, models.NewProgressNotice("p", models.ProgressNotice{TaskID: ids["t"], Message: key})); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c, n := s.Commits()-commits, s.Syncs()-syncs
	if c != writers*each || n == 0 || n >= c {
		t.Fatalf("%d commits took %d syncs, want %d commits and fewer syncs", c, n, writers*each)
	}
	t.Logf("%d commits, %d syncs", c, n)
	if got, err := store.CountForTest(s, "SELECT count(*) FROM outbox WHERE key LIKE 'w%'"); err != nil || got != writers*each {
		t.Fatalf("%d notices written, want %d (%v)", got, writers*each, err)
	}
}

// TestNoticesAreReadForDeliveryOnceDurable: the read the delivery of
// notices starts from returns a notice only once it is durable, and a
// reader that gives up while it waits gets its context's error.
func TestNoticesAreReadForDeliveryOnceDurable(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	ids := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "t", Title: "t"})
	ctx := context.Background()
	h := holdSync(t, s, nil)
	written := async(func() error {
		return s.Notify(ctx, "n", models.NewProgressNotice("p", models.ProgressNotice{TaskID: ids["t"], Message: "n"}))
	})
	h.awaitEntered(t, written)
	var pending []models.OutboxMessage
	read := async(func() (err error) {
		pending, err = s.PendingOutboxAfter(ctx, 0, 100)
		return err
	})
	h.awaitWaiters(t, 1, written, read)
	gone, cancel := context.WithCancel(ctx)
	given := async(func() error { return s.WaitDurable(gone) })
	h.awaitWaiters(t, 1, written, read, given)
	notAnswered(t, "held", written, read, given)
	cancel()
	if err := <-given; !errors.Is(err, context.Canceled) {
		t.Fatalf("a wait given up: %v, want context.Canceled", err)
	}
	notAnswered(t, "held", written, read)
	close(h.release)
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range pending {
		found = found || m.Key == "n"
	}
	if !found {
		t.Fatalf("the notice is not among those pending: %v", pending)
	}
}

// TestReadsThatFeedActionsReturnOnceDurable: each read whose rows the
// daemon acts on outside itself (see WaitDurable) returns only once what
// it may have seen is durable: here not while a write's sync is held.
func TestReadsThatFeedActionsReturnOnceDurable(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, c := range []struct {
		name string
		read func(ctx context.Context, s *store.Store) error
	}{
		{"PendingOutboxAfter", func(ctx context.Context, s *store.Store) error {
			_, err := s.PendingOutboxAfter(ctx, 0, 10)
			return err
		}},
		{"PendingWebhooks", func(ctx context.Context, s *store.Store) error {
			_, _, err := s.PendingWebhooks(ctx, now, 10)
			return err
		}},
		{"Verifications", func(ctx context.Context, s *store.Store) error {
			_, err := s.Verifications(ctx)
			return err
		}},
		{"DuePullRequests", func(ctx context.Context, s *store.Store) error {
			_, _, err := s.DuePullRequests(ctx, now, 10)
			return err
		}},
		{"OpenRuns", func(ctx context.Context, s *store.Store) error {
			_, err := s.OpenRuns(ctx)
			return err
		}},
		{"RunFilesDue", func(ctx context.Context, s *store.Store) error {
			_, err := s.RunFilesDue(ctx, now, 10)
			return err
		}},
		{"HookQuery", func(ctx context.Context, s *store.Store) error {
			_, _, err := s.HookQuery(ctx, "p", models.HookStep{Query: "failed_tasks"})
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := storetest.Open(t)
			storetest.Project(t, s, "p")
			ids := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "t", Title: "t"})
			ctx := context.Background()
			h := holdSync(t, s, nil)
			written := async(func() error {
				return s.Notify(ctx, "n", models.NewProgressNotice("p", models.ProgressNotice{TaskID: ids["t"], Message: "n"}))
			})
			h.awaitEntered(t, written)
			read := async(func() error { return c.read(ctx, s) })
			h.awaitWaiters(t, 1, written, read)
			notAnswered(t, "held", written, read)
			close(h.release)
			for _, ch := range []<-chan error{written, read} {
				if err := <-ch; err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// gatedObserver reports, once armed, that a transition is being reported
// (entered) and holds it there until gate is closed.
type gatedObserver struct {
	armed   atomic.Bool
	entered chan struct{}
	gate    chan struct{}
}

func (o *gatedObserver) Transitioned(store.ObservedTransition) {
	if o.armed.Load() {
		o.entered <- struct{}{}
		<-o.gate
	}
}
func (o *gatedObserver) RunEnded(store.ObservedRun) {}

// TestWaitDurableFindsTheCommitsReported: a reader that waited for
// durability finds what the commits it could have seen did already told
// to the observer, so a metrics scrape after a read counts every
// transition the read showed. The sync that covers a commit reports it
// before it is published.
func TestWaitDurableFindsTheCommitsReported(t *testing.T) {
	t.Parallel()
	obs := &gatedObserver{entered: make(chan struct{}, 1), gate: make(chan struct{})}
	s := storetest.Open(t, storetest.WithObserver(obs))
	storetest.Project(t, s, "p")
	id := storetest.Tasks(t, s, "p", models.BatchTask{LocalID: "a", Title: "a"})["a"]
	storetest.Apply(t, s, id, storetest.ToCompleted[:3]...)
	ctx := context.Background()
	obs.armed.Store(true)
	h := holdSync(t, s, nil)
	a := async(func() error {
		_, err := s.ApplyEvent(ctx, models.TransitionRequest{TaskID: id, Event: models.EventVerifyPassed})
		return err
	})
	h.awaitEntered(t, a) // committed, its sync held
	read := async(func() error { return s.WaitDurable(ctx) })
	h.awaitWaiters(t, 1, a, read)
	close(h.release)
	<-obs.entered // the commit is being reported
	if ended, covered := store.PublishedDurable(s); covered >= ended {
		t.Fatalf("all %d commits were published as durable before the last was reported", ended)
	}
	notAnswered(t, "reported", a, read)
	close(obs.gate)
	for name, ch := range map[string]<-chan error{"the write": a, "WaitDurable": read} {
		if err := <-ch; err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}
