package models

import (
	"errors"
	"time"
)

// LeaseHolder identifies the daemon that holds a database's lease.
type LeaseHolder struct {
	Owner     string    `json:"owner"`
	Hostname  string    `json:"hostname"`
	PID       int       `json:"pid"`
	ExpiresAt time.Time `json:"expires_at"`
}

// ErrLeaseLost is the error of a write or an act refused because this
// daemon's lease on its database has been taken over by another daemon
// or released: the daemon is deposed and must stand down.
var ErrLeaseLost = Errorf(CodeConflict, "this daemon no longer holds the database lease; its writes and acts are refused")

// ErrLeaseExpiring is the error of an act outside the database (a signal,
// a checkout's cleanup, a git write) refused because this daemon's lease
// has too little time left for the act to be sure to happen before it can
// expire: renewals have failed. Acts resume once a renewal succeeds.
var ErrLeaseExpiring = Errorf(CodeUnavailable, "this daemon's database lease is about to expire without a renewal; "+
	"it acts outside the database again once the lease is renewed")

// Fenced reports whether err is a write or an act refused by the lease's
// fence (ErrLeaseLost or ErrLeaseExpiring): not a failure of what was
// attempted, which must not be taken for one (a failed verification, a
// damaged repository), but a sign to leave it for later or to another
// daemon.
func Fenced(err error) bool {
	return errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrLeaseExpiring)
}

// TokenUsage is one append-only entry of the token ledger.
type TokenUsage struct {
	ProjectID  string    `json:"project_id"`
	TaskID     string    `json:"task_id,omitempty"`
	AgentID    string    `json:"agent_id,omitempty"`
	HookRunID  string    `json:"hook_run_id,omitempty"`
	Input      int64     `json:"input_tokens"`
	Output     int64     `json:"output_tokens"`
	CacheRead  int64     `json:"cache_read_tokens"`
	CacheWrite int64     `json:"cache_write_tokens"`
	CreatedAt  time.Time `json:"created_at"`
}

// Total is the number of tokens the entry counts against budgets.
func (u TokenUsage) Total() int64 { return u.Input + u.Output + u.CacheRead + u.CacheWrite }

// OutboxMessage is a notification written in a state change's transaction
// and delivered after commit, de-duplicated by Key.
type OutboxMessage struct {
	ID        int64      `json:"id"`
	Key       string     `json:"key"`
	Kind      NoticeKind `json:"kind"`
	ProjectID string     `json:"project_id,omitempty"`
	TaskID    string     `json:"task_id,omitempty"`
	Payload   string     `json:"payload"`
	Attempts  int        `json:"attempts"`
	// PartsDone counts the messages of a notice made of several that were
	// delivered before an interruption.
	PartsDone int       `json:"parts_done"`
	CreatedAt time.Time `json:"created_at"`
}

// ChatThread is the chat thread that carries one task's progress, questions
// and result.
type ChatThread struct {
	TaskID    string    `json:"task_id"`
	ChannelID string    `json:"channel_id"`
	ThreadID  string    `json:"thread_id"`
	CreatedAt time.Time `json:"created_at"`
}
