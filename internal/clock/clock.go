// Package clock is the daemon's one notion of time: a Clock reads the time
// and waits for a duration to pass. Every component that reads the time or
// waits on a timer takes a Clock in its configuration, nil meaning Real,
// so that tests move time by hand (internal/clock/clocktest) instead of
// waiting for it.
package clock

import "time"

// Clock reads the time and waits.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives the time once d has passed;
	// at once when d <= 0.
	After(d time.Duration) <-chan time.Time
}

// Real is the system clock.
type Real struct{}

// Now is time.Now.
func (Real) Now() time.Time { return time.Now() }

// After is time.After.
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Or returns c, or Real when c is nil.
func Or(c Clock) Clock {
	if c == nil {
		return Real{}
	}
	return c
}
