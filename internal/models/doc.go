// Package models holds agentqueued's domain data: the enums and entities of
// the Agent Queue specification (projects, repos, tasks, agents, hooks), the
// dependency-edge facts and audit records built on them, the request shapes
// shared by every surface (API, chat, hooks), and their validation.
//
// The package performs no I/O and imports no other internal package; every
// other package may import it.
package models
