// Package runner is the runner's side of agentqueued's runners
// (docs/runners.md): a process on another machine that holds agents and
// connects out to the daemon. It says hello with its agents, then keeps
// one long poll outstanding, and comes back with a growing, jittered wait
// when it loses the daemon; a refusal of its token or its configuration
// ends it with the daemon's reason, and so does a daemon certificate it
// does not trust. It trusts the system's certificate authorities and those
// of Config.CABundle (--ca-file), in its own requests and in its git,
// which is given both in one file (WriteCABundle). Its agents run
// detached under shims (agent.StartDetached), and its journal keeps what
// its next life needs to take them up after it was killed (resume). The
// daemon's side is internal/fleet
// (connections and held polls) and internal/api (the endpoints).
package runner
