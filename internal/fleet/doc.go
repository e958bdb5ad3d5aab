// Package fleet is the daemon's side of its runners' connections: which
// runners are connected, since when and from where, and their long polls,
// held until the daemon has something for them or the hold ends.
//
// A runner (docs/runners.md) connects out to the daemon and keeps one poll
// outstanding; the daemon answers it at once when it has work for one of
// the runner's agents, else with nothing when the hold ends (25 s by
// default, under the 60 s after which common reverse proxies close a
// silent connection). The hub holds no state that must outlive the
// daemon: what a runner is to do is read from the database each time a
// poll is answered, and the hub only says when to read it (Wake). The API
// serves the requests (internal/api); the orchestrator wakes runners.
package fleet
