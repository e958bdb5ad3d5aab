// Package clocktest is the fake clock of the tests: a clock.Clock whose
// time moves only when the test moves it, and whose timers fire only then.
//
// New makes a clock that stands still at a given time; NewFollowing one
// whose Now follows the real clock, shifted by what the test adds, for
// components whose reads of the time may pass while their timers must
// wait for the test. A test that must know a component is waiting before
// it moves the clock reads Armed (every After, in order) or calls
// WaitTimer.
package clocktest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock"
)

// armedBuffer is how many After calls Armed holds unread; later ones are
// not announced.
const armedBuffer = 1000

// Fake is a clock.Clock moved by Set and Advance. It is safe for
// concurrent use.
type Fake struct {
	mu        sync.Mutex
	now       time.Time     // standing clock: the time
	following bool          // Now is the real time plus offset
	offset    time.Duration // following clock: the shift
	timers    []timer
	armed     chan time.Duration
	changed   chan struct{} // closed at the next After that starts a timer
}

type timer struct {
	d  time.Duration
	at time.Time
	ch chan time.Time
}

var _ clock.Clock = (*Fake)(nil)

// New returns a clock standing at at.
func New(at time.Time) *Fake {
	return &Fake{now: at, armed: make(chan time.Duration, armedBuffer), changed: make(chan struct{})}
}

// NewFollowing returns a clock whose Now is the real time shifted by what
// Set and Advance add; its timers still fire only when Set or Advance
// reach them.
func NewFollowing() *Fake {
	c := New(time.Time{})
	c.following = true
	return c
}

// Now returns the clock's time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nowLocked()
}

func (c *Fake) nowLocked() time.Time {
	if c.following {
		return time.Now().Add(c.offset)
	}
	return c.now
}

// After returns a channel that receives the clock's time once Set or
// Advance has moved it by d; at once when d <= 0. Every call is announced
// on Armed.
func (c *Fake) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	now := c.nowLocked()
	if d <= 0 {
		ch <- now
	} else {
		c.timers = append(c.timers, timer{d: d, at: now.Add(d), ch: ch})
		close(c.changed)
		c.changed = make(chan struct{})
	}
	select {
	case c.armed <- d:
	default:
	}
	return ch
}

// Set moves the clock to t and fires the timers it reaches.
func (c *Fake) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.following {
		c.offset = time.Until(t)
	} else {
		c.now = t
	}
	c.fireLocked()
}

// Advance moves the clock by d and fires the timers it reaches.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.following {
		c.offset += d
	} else {
		c.now = c.now.Add(d)
	}
	c.fireLocked()
}

func (c *Fake) fireLocked() {
	now := c.nowLocked()
	kept := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(now) {
			kept = append(kept, t)
			continue
		}
		t.ch <- now
	}
	c.timers = kept
}

// Armed receives the duration of every After call, in order (the first
// 1000 not read yet).
func (c *Fake) Armed() <-chan time.Duration { return c.armed }

// WaitTimer waits until a timer of d is waiting: After(d) was called and
// the clock has not reached it yet.
func (c *Fake) WaitTimer(ctx context.Context, d time.Duration) error {
	for {
		c.mu.Lock()
		waiting := slices.ContainsFunc(c.timers, func(t timer) bool { return t.d == d })
		changed := c.changed
		c.mu.Unlock()
		if waiting {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("no timer of %s started: %w", d, ctx.Err())
		}
	}
}
