// Package runner is the runner's side of agentqueued's runners
// (docs/runners.md): a process on another machine that holds agents and
// connects out to the daemon. It says hello with its agents, then keeps
// one long poll outstanding, and comes back with a growing, jittered wait
// when it loses the daemon; a refusal of its token or its configuration
// ends it with the daemon's reason. The daemon's side is internal/fleet
// (connections and held polls) and internal/api (the endpoints).
package runner
