package fleet

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock"
)

// Defaults of a Hub.
const (
	// DefaultPollHold is the longest a runner's poll is held without an
	// answer: under the 60 s after which common reverse proxies close a
	// silent connection.
	DefaultPollHold = 25 * time.Second
	// DefaultSeenTimeout is how long after its last request a runner
	// without a poll outstanding still counts as connected: a poll's hold,
	// the runner's turnaround and a margin.
	DefaultSeenTimeout = 40 * time.Second
)

// Config configures a Hub; zero fields take the defaults.
type Config struct {
	// Clock reads the time and times the holds; nil is the real clock.
	Clock clock.Clock
	// PollHold is the longest a poll is held; DefaultPollHold.
	PollHold time.Duration
	// SeenTimeout is how long a runner counts as connected after its last
	// request when no poll of it is outstanding; DefaultSeenTimeout.
	SeenTimeout time.Duration
	// OnHold, when set, is called each time a poll of runner name begins
	// to be held (tests wait on it).
	OnHold func(name string)
}

// Hub is the daemon's view of its runners' connections: which runners are
// connected and since when, and their outstanding polls, which it holds
// until there is something for them or the hold ends. It keeps no state
// that must survive the daemon: what a runner is to do is in the
// database, and a poll answered empty is simply made again.
type Hub struct {
	cfg   Config
	clock clock.Clock

	mu    sync.Mutex
	conns map[string]*conn
}

// conn is one runner's connection state.
type conn struct {
	// wake receives a value when the runner has something to read; one
	// value stands for any number of wake-ups.
	wake chan struct{}
	// gone is closed when the runner is removed: its polls end at once.
	gone     chan struct{}
	polls    int
	lastSeen time.Time
	since    time.Time // when it connected, after being away
	version  string
	address  string
	// recorded is when the runner's presence was last written down
	// (Record).
	recorded time.Time
	// unresponsive is set when the runner let a run's lease expire: it
	// counts as away until its next request.
	unresponsive bool
	// given is what the runner was given since its last hello: the runs
	// offered to it and the runs it was told to end (see News).
	given map[given]struct{}
}

// given is one thing a poll's answer gave a runner: run id's offer, or
// (end) its order to end.
type given struct {
	run int64
	end bool
}

// New returns a Hub.
func New(cfg Config) *Hub {
	if cfg.PollHold <= 0 {
		cfg.PollHold = DefaultPollHold
	}
	if cfg.SeenTimeout <= 0 {
		cfg.SeenTimeout = DefaultSeenTimeout
	}
	return &Hub{cfg: cfg, clock: clock.Or(cfg.Clock), conns: map[string]*conn{}}
}

// PollHold is the longest a poll is held.
func (h *Hub) PollHold() time.Duration { return h.cfg.PollHold }

// conn returns name's connection state, made when missing; h.mu held.
func (h *Hub) connLocked(name string) *conn {
	c := h.conns[name]
	if c == nil {
		c = &conn{wake: make(chan struct{}, 1), gone: make(chan struct{})}
		h.conns[name] = c
	}
	return c
}

// Seen records a request of runner name from address, made with version.
func (h *Hub) Seen(name, version, address string) {
	now := h.clock.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.connLocked(name)
	if !h.connectedLocked(c, now) {
		c.since = now
	}
	c.lastSeen = now
	c.unresponsive = false
	if version != "" {
		c.version = version
	}
	if address != "" {
		c.address = address
	}
}

// connectedLocked reports whether c counts as connected at now: it made
// a request within SeenTimeout (a live runner polls again as soon as a
// poll is answered, so a held poll is no sign of life by itself) and has
// not let a lease expire since.
func (h *Hub) connectedLocked(c *conn, now time.Time) bool {
	return !c.unresponsive && !c.lastSeen.IsZero() && now.Sub(c.lastSeen) <= h.cfg.SeenTimeout
}

// Hello records runner name's hello: it starts afresh and holds nothing
// the daemon gave it before, so News gives it everything again.
func (h *Hub) Hello(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.connLocked(name).given = nil
}

// News returns, of the runs offered to runner name (offers) and those it
// must end (ends), those it has not been given since its last hello, and
// counts them as given. What is not listed any more is forgotten. An
// offer stays offered until the runner's first heartbeat or report about
// it, which may come after its next poll: without News each poll in
// between is answered at once with the same offer, and a runner preparing
// a checkout spins through polls. A runner that lost an answer on the way
// sees its request fail and says hello again, which gives it all again.
func (h *Hub) News(name string, offers, ends []int64) (newOffers, newEnds []int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.connLocked(name)
	if len(offers) == 0 && len(ends) == 0 {
		c.given = nil
		return nil, nil
	}
	now := make(map[given]struct{}, len(offers)+len(ends))
	pick := func(ids []int64, end bool) []int64 {
		var out []int64
		for _, id := range ids {
			g := given{run: id, end: end}
			if _, ok := c.given[g]; !ok {
				out = append(out, id)
			}
			now[g] = struct{}{}
		}
		return out
	}
	newOffers, newEnds = pick(offers, false), pick(ends, true)
	c.given = now
	return newOffers, newEnds
}

// Unresponsive records that runner name let a run's lease expire: it
// counts as away, and is given no run, until its next request.
func (h *Hub) Unresponsive(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c := h.conns[name]; c != nil {
		c.unresponsive = true
	}
}

// Connected reports whether runner name is connected now: a poll of it
// is held, or it made a request within SeenTimeout.
func (h *Hub) Connected(name string) bool {
	now := h.clock.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.conns[name]
	return c != nil && h.connectedLocked(c, now)
}

// Wake tells runner name that it has something to read: its outstanding
// poll is answered now, or its next one at once.
func (h *Hub) Wake(name string) {
	h.mu.Lock()
	c := h.connLocked(name)
	h.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Record reports whether runner name's presence is due to be written down
// (it was not in the last every), and if so counts it as written now: a
// runner that polls for days still shows when it was last seen, without a
// write for each poll. It returns the version and address the runner last
// came with.
func (h *Hub) Record(name string, every time.Duration) (due bool, version, address string) {
	now := h.clock.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.connLocked(name)
	if !c.recorded.IsZero() && now.Sub(c.recorded) < every {
		return false, "", ""
	}
	c.recorded = now
	return true, c.version, c.address
}

// WaitResult says why a Wait ended.
type WaitResult int

// The ends of a Wait.
const (
	// Woken: the runner has something to read.
	Woken WaitResult = iota
	// Held: the hold ended with nothing for the runner.
	Held
	// Removed: the runner was removed while it waited.
	Removed
	// Ended: ctx ended (the runner went away, or the daemon stops).
	Ended
)

// Wait holds a poll of runner name until it is woken, the hold ends, the
// runner is removed or ctx ends. A wake-up that came while no poll was
// outstanding ends the next Wait at once.
func (h *Hub) Wait(ctx context.Context, name string) WaitResult {
	h.mu.Lock()
	c := h.connLocked(name)
	c.polls++
	c.lastSeen = h.clock.Now()
	c.unresponsive = false
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		c.polls--
		h.mu.Unlock()
	}()
	// What is there already answers without arming the hold's timer.
	select {
	case <-c.gone:
		return Removed
	case <-c.wake:
		return Woken
	default:
	}
	hold := h.clock.After(h.cfg.PollHold)
	if h.cfg.OnHold != nil {
		h.cfg.OnHold(name)
	}
	select {
	case <-c.wake:
		return Woken
	case <-c.gone:
		return Removed
	case <-ctx.Done():
		return Ended
	case <-hold:
		return Held
	}
}

// Remove ends runner name's outstanding polls and forgets it: a removed
// runner's next request is refused by its token.
func (h *Hub) Remove(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c := h.conns[name]; c != nil {
		close(c.gone)
		delete(h.conns, name)
	}
}

// Status is a runner's connection as the hub sees it.
type Status struct {
	Name      string
	Connected bool
	// Since is when it connected (zero when it is not connected).
	Since time.Time
	// LastSeen is its last request (zero when never seen since the
	// daemon started).
	LastSeen time.Time
	// Polling reports a poll outstanding.
	Polling bool
	Version string
	Address string
}

// Statuses returns the connection of every runner seen since the daemon
// started, by name.
func (h *Hub) Statuses() []Status {
	now := h.clock.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Status, 0, len(h.conns))
	for name, c := range h.conns {
		st := Status{Name: name, Connected: h.connectedLocked(c, now), LastSeen: c.lastSeen, Polling: c.polls > 0,
			Version: c.version, Address: c.address}
		if st.Connected {
			st.Since = c.since
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b Status) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}
