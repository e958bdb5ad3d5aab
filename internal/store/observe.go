package store

import (
	"database/sql"
	"errors"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Observer is told what committed write transactions did, for metrics. Its
// methods are called after the commit, in the order of the changes, outside
// any transaction, never for a transaction rolled back. They must not block.
type Observer interface {
	// Transitioned reports one status change of a task.
	Transitioned(ObservedTransition)
	// RunEnded reports one run of an agent that ended.
	RunEnded(ObservedRun)
}

// ObservedTransition is one status change of a task, as committed.
type ObservedTransition struct {
	ProjectID string
	From, To  models.TaskStatus
	Event     models.TaskEvent
	// QueueWait, on a claim (ASSIGNED), is how long the task was READY
	// before it (since it last became READY); zero otherwise.
	QueueWait time.Duration
	// DependencyStart, on a start (AGENT_STARTED) of a task with
	// dependencies that became READY when they were met (DEPS_MET), is the
	// time from that moment to the start: how quickly finished work lets
	// its dependents run. Zero otherwise (a retry, a task without
	// dependencies).
	DependencyStart time.Duration
	// At is when the change committed, on the store's clock.
	At time.Time
}

// ObservedRun is a run that ended.
type ObservedRun struct {
	ProjectID string
	AgentID   string
	// Kind is models.RunWork or models.RunReview.
	Kind string
	// Outcome names how it ended ("completed", "failed", …).
	Outcome models.RunOutcome
}

// qLastReadyEntry is the event by which a task last became READY, when,
// and whether the task has dependencies.
const qLastReadyEntry = `SELECT event, created_at, EXISTS (SELECT 1 FROM task_dependencies WHERE downstream = ?1)
	FROM task_events WHERE task_id = ?1 AND to_status = 'READY' ORDER BY id DESC LIMIT 1`

// observed collects what one write transaction did, for Config.Observer.
type observed struct {
	transitions []ObservedTransition
	runs        []ObservedRun
}

// observing returns the collection of tx's observations, nil without an
// observer.
func (s *Store) observing(tx *sql.Tx) *observed {
	if s.obs == nil {
		return nil
	}
	v, _ := s.pending.LoadOrStore(tx, &observed{})
	return v.(*observed)
}

// report tells the observer what tx did, once it has committed.
func (s *Store) report(tx *sql.Tx) {
	if s.obs == nil {
		return
	}
	v, ok := s.pending.LoadAndDelete(tx)
	if !ok {
		return
	}
	o := v.(*observed)
	for _, t := range o.transitions {
		s.obs.Transitioned(t)
	}
	for _, r := range o.runs {
		s.obs.RunEnded(r)
	}
}

// observeTransition records a status change applied in x, with the
// waits it ends.
func (x *txn) observeTransition(cur models.Task, to models.TaskStatus, ev models.TaskEvent) error {
	o := x.s.observing(x.tx)
	if o == nil {
		return nil
	}
	t := ObservedTransition{ProjectID: cur.ProjectID, From: cur.Status, To: to, Event: ev, At: x.now}
	if ev == models.EventAssigned || ev == models.EventAgentStarted {
		var (
			entry   models.TaskEvent
			at      int64
			hasDeps bool
		)
		err := x.QueryRowContext(x.ctx, qLastReadyEntry, cur.ID).Scan(&entry, &at, &hasDeps)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			// Not known to have become READY: it has waited since its creation.
			if ev == models.EventAssigned {
				t.QueueWait = max(x.now.Sub(cur.CreatedAt), 0)
			}
		case err != nil:
			return err
		case ev == models.EventAssigned:
			t.QueueWait = max(x.now.Sub(fromNanos(at)), 0)
		case entry == models.EventDepsMet && hasDeps:
			t.DependencyStart = max(x.now.Sub(fromNanos(at)), 0)
		}
	}
	o.transitions = append(o.transitions, t)
	return nil
}

// observeRun records a run that ended in x.
func (x *txn) observeRun(r ObservedRun) {
	if o := x.s.observing(x.tx); o != nil {
		o.runs = append(o.runs, r)
	}
}
