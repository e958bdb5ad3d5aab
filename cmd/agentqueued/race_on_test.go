//go:build race

package main

// raceEnabled reports whether the tests run with the race detector; a
// binary built for them uses it too, sharing the build cache.
const raceEnabled = true
