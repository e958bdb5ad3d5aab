package main

import "runtime/debug"

// DefaultGCPercent is the garbage collector's target (GOGC) the daemon
// runs with when the environment sets none. The daemon's live heap is
// small (about a megabyte with an empty queue), so at Go's default of 100
// the collector ran every few trivial tasks, a few per cent of the
// daemon's CPU; at 400 it runs a quarter as often, for a heap of some
// 16 MB instead of 4.
const DefaultGCPercent = 400

// gcPercent returns the collector's target to set, and false when the
// environment's GOGC governs it (set, even to "off").
func gcPercent(getenv func(string) (string, bool)) (int, bool) {
	if _, ok := getenv("GOGC"); ok {
		return 0, false
	}
	return DefaultGCPercent, true
}

// tuneGC applies gcPercent.
func tuneGC(getenv func(string) (string, bool)) {
	if p, ok := gcPercent(getenv); ok {
		debug.SetGCPercent(p)
	}
}
