// Package throttle slows the guessing of secrets: it counts the wrong
// credentials (API bearer tokens, dashboard logins) each source sends and
// refuses to check any more from a source over its budget, and from every
// source that has failed lately once all sources together are over a
// larger one.
//
// Each source has a token bucket of SourceBurst failures refilled at
// SourceRate a second; all sources share one of GlobalBurst refilled at
// GlobalRate. Begin takes one failure's worth from both before a
// credential is checked and Attempt.Succeeded gives it back, so that
// concurrent requests cannot all pass a nearly empty bucket before any of
// them has failed. While a source is over budget every credential from it,
// right or wrong, is refused unchecked: answering a right one differently
// would tell a guesser which guess was right at whatever speed it sends
// them, and the throttle would slow nothing. A source with no failures of
// its own in the bucket's window is never refused because of the global
// budget: a flood from other addresses cannot keep the owner out. While
// the global budget is spent, such a source's first wrong guess empties
// its own bucket, so that fresh addresses get one guess each.
//
// Failures are logged summarised: at most one warning per source per
// LogInterval, counting the failures and refusals since the last one.
package throttle

import (
	"log/slog"
	"math"
	"net/netip"
	"sync"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock"
)

// Defaults of Config.
const (
	DefaultSourceRate  = 2.0
	DefaultSourceBurst = 10
	DefaultGlobalRate  = 20.0
	DefaultGlobalBurst = 100
	DefaultLogInterval = time.Minute
	DefaultMaxSources  = 10000
)

// Config configures a Limiter; zero fields take the defaults.
type Config struct {
	// Clock reads the time; nil is the system clock.
	Clock clock.Clock
	// Logger receives the summarised warnings; nil discards them.
	Logger *slog.Logger
	// SourceRate is the failures a second one source regains; SourceBurst
	// the most it may spend at once.
	SourceRate  float64
	SourceBurst int
	// GlobalRate and GlobalBurst are the same for all sources together.
	GlobalRate  float64
	GlobalBurst int
	// LogInterval is the least time between two warnings about one source.
	LogInterval time.Duration
	// MaxSources caps the sources remembered at once.
	MaxSources int
}

// Limiter counts failures by source. It is safe for concurrent use; one
// Limiter may guard several endpoints so that they share the budgets.
type Limiter struct {
	cfg   Config
	clock clock.Clock
	log   *slog.Logger

	mu        sync.Mutex
	global    bucket
	sources   map[string]*source
	lastSweep time.Time
}

// bucket is a token bucket: tokens at updated.
type bucket struct {
	tokens  float64
	updated time.Time
}

// refill adds what rate gives between b.updated and now, up to burst.
func (b *bucket) refill(now time.Time, rate, burst float64) {
	if d := now.Sub(b.updated).Seconds(); d > 0 {
		b.tokens = math.Min(burst, b.tokens+d*rate)
	}
	b.updated = now
}

// wait returns how long until b holds one token.
func (b *bucket) wait(rate float64) time.Duration {
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) / rate * float64(time.Second))
}

// source is one source's bucket and log summary.
type source struct {
	bucket
	failed, refused int
	lastLog         time.Time
}

// New returns a Limiter; fields of cfg left zero take the defaults.
func New(cfg Config) *Limiter {
	if cfg.SourceRate <= 0 {
		cfg.SourceRate = DefaultSourceRate
	}
	if cfg.SourceBurst <= 0 {
		cfg.SourceBurst = DefaultSourceBurst
	}
	if cfg.GlobalRate <= 0 {
		cfg.GlobalRate = DefaultGlobalRate
	}
	if cfg.GlobalBurst <= 0 {
		cfg.GlobalBurst = DefaultGlobalBurst
	}
	if cfg.LogInterval <= 0 {
		cfg.LogInterval = DefaultLogInterval
	}
	if cfg.MaxSources <= 0 {
		cfg.MaxSources = DefaultMaxSources
	}
	l := &Limiter{cfg: cfg, clock: clock.Or(cfg.Clock), log: cfg.Logger, sources: map[string]*source{}}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	now := l.clock.Now()
	l.global = bucket{tokens: float64(cfg.GlobalBurst), updated: now}
	l.lastSweep = now
	return l
}

// Attempt is one credential check Begin allowed: call Succeeded or Failed
// once it is known.
type Attempt struct {
	l          *Limiter
	key        string
	fromSource float64
	fromGlobal float64
	done       bool
}

// Begin asks to check a credential from remoteAddr (a request's
// RemoteAddr). When the source, or the sources together, are over budget
// it returns nil and how long to wait before trying again (at least a
// second): refuse the request without checking the credential.
func (l *Limiter) Begin(remoteAddr string) (*Attempt, time.Duration) {
	key := Source(remoteAddr)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	l.sweep(now)
	sburst, gburst := float64(l.cfg.SourceBurst), float64(l.cfg.GlobalBurst)
	l.global.refill(now, l.cfg.GlobalRate, gburst)
	s := l.sources[key]
	if s == nil {
		s = &source{bucket: bucket{tokens: sburst, updated: now}}
		l.sources[key] = s
	}
	s.refill(now, l.cfg.SourceRate, sburst)
	if s.tokens < 1 {
		return nil, l.refuse(key, s, now, s.wait(l.cfg.SourceRate))
	}
	a := &Attempt{l: l, key: key}
	switch {
	case l.global.tokens >= 1:
		a.fromSource, a.fromGlobal = 1, 1
	case s.tokens >= sburst:
		// A source with no failures of its own: one guess, its whole budget.
		a.fromSource = s.tokens
	default:
		return nil, l.refuse(key, s, now, max(l.global.wait(l.cfg.GlobalRate), s.wait(l.cfg.SourceRate)))
	}
	s.tokens -= a.fromSource
	l.global.tokens -= a.fromGlobal
	return a, 0
}

// refuse counts a refusal for s and returns wait rounded up to a second.
func (l *Limiter) refuse(key string, s *source, now time.Time, wait time.Duration) time.Duration {
	s.refused++
	l.maybeLog(key, s, now)
	return time.Duration(max(1, math.Ceil(wait.Seconds()))) * time.Second
}

// Succeeded records that the credential was right: what Begin took is
// given back.
func (a *Attempt) Succeeded() {
	l := a.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if a.done {
		return
	}
	a.done = true
	now := l.clock.Now()
	l.global.refill(now, l.cfg.GlobalRate, float64(l.cfg.GlobalBurst))
	l.global.tokens = math.Min(float64(l.cfg.GlobalBurst), l.global.tokens+a.fromGlobal)
	if s := l.sources[a.key]; s != nil {
		s.refill(now, l.cfg.SourceRate, float64(l.cfg.SourceBurst))
		s.tokens = math.Min(float64(l.cfg.SourceBurst), s.tokens+a.fromSource)
	}
}

// Failed records that the credential was wrong: what Begin took stays
// spent, and the failure is counted for the source's next warning.
func (a *Attempt) Failed() {
	l := a.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if a.done {
		return
	}
	a.done = true
	s := l.sources[a.key]
	if s == nil { // swept meanwhile: remember it again, spent
		now := l.clock.Now()
		s = &source{bucket: bucket{tokens: float64(l.cfg.SourceBurst) - a.fromSource, updated: now}}
		l.sources[a.key] = s
	}
	s.failed++
	l.maybeLog(a.key, s, l.clock.Now())
}

// maybeLog writes the warning about s when LogInterval has passed since
// the last one.
func (l *Limiter) maybeLog(key string, s *source, now time.Time) {
	if !s.lastLog.IsZero() && now.Sub(s.lastLog) < l.cfg.LogInterval {
		return
	}
	l.flush(key, s, now)
}

// flush writes the warning about s's counts, if any, and resets them.
func (l *Limiter) flush(key string, s *source, now time.Time) {
	if s.failed == 0 && s.refused == 0 {
		return
	}
	l.log.Warn("authentication failures", "source", key, "failed", s.failed, "refused", s.refused,
		"throttled", s.tokens < 1)
	s.failed, s.refused, s.lastLog = 0, 0, now
}

// sweep forgets, at most once per LogInterval or when too many are
// remembered, the sources whose bucket is full again, after writing what
// is left of their summary.
func (l *Limiter) sweep(now time.Time) {
	if now.Sub(l.lastSweep) < l.cfg.LogInterval && len(l.sources) < l.cfg.MaxSources {
		return
	}
	l.lastSweep = now
	burst := float64(l.cfg.SourceBurst)
	for key, s := range l.sources {
		s.refill(now, l.cfg.SourceRate, burst)
		if s.tokens >= burst {
			l.flush(key, s, now)
			delete(l.sources, key)
		}
	}
	// Still too many: forget any; the global budget still holds them.
	for key, s := range l.sources {
		if len(l.sources) < l.cfg.MaxSources {
			break
		}
		l.flush(key, s, now)
		delete(l.sources, key)
	}
}

// Source returns the key a request's RemoteAddr is counted under: its IP
// address, an IPv6 one's /64 (one host's or one site's usual share), or
// remoteAddr itself when it holds no address.
func Source(remoteAddr string) string {
	ap, err := netip.ParseAddrPort(remoteAddr)
	var ip netip.Addr
	if err == nil {
		ip = ap.Addr()
	} else if ip, err = netip.ParseAddr(remoteAddr); err != nil {
		return remoteAddr
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}
