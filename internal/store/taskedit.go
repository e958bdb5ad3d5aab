package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/statemachine"
)

// This file holds a person's changes to existing tasks that are not status
// changes: editing a task, changing its dependencies and deleting it.

// maxNamed caps the ids an error message lists.
const maxNamed = 10

// nameList joins ids for a message, at most maxNamed of them.
func nameList(ids []string) string {
	if len(ids) <= maxNamed {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:maxNamed], ", "), len(ids)-maxNamed)
}

// queryIDs returns the first column of q's rows.
func queryIDs(ctx context.Context, q queryer, query string, args ...any) ([]string, error) {
	return queryAll(ctx, q, func(row scanner) (string, error) {
		var id string
		return id, row.Scan(&id)
	}, query, args...)
}

// openRunOf returns the id of a run of the task that has not ended, or 0.
func openRunOf(ctx context.Context, q queryer, taskID string) (int64, error) {
	var id int64
	err := q.QueryRowContext(ctx, "SELECT id FROM task_runs WHERE task_id = ? AND ended_at IS NULL ORDER BY id LIMIT 1",
		taskID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return id, err
}

// checkEditable refuses to edit a task that is being worked on or has
// finished its work: ASSIGNED, IN_PROGRESS, WAITING_INPUT, VERIFYING,
// AWAITING_APPROVAL and COMPLETED, or any task with a run still open.
func checkEditable(ctx context.Context, q queryer, t models.Task) error {
	switch {
	case t.Status.Running():
		return models.Errorf(models.CodeConflict, "task %s is %s: a task that is being worked on cannot be edited", t.ID, t.Status)
	case t.Status == models.StatusCompleted:
		return models.Errorf(models.CodeConflict, "task %s is COMPLETED: a finished task cannot be edited", t.ID)
	}
	run, err := openRunOf(ctx, q, t.ID)
	if err != nil {
		return err
	}
	if run != 0 {
		return models.Errorf(models.CodeConflict, "task %s is %s but its run %d has not ended yet: try again when it has", t.ID, t.Status, run)
	}
	return nil
}

// EditTask applies a person's edit to a task that is not being worked on
// and has not completed (DEFINED, READY, PAUSED, FAILED or BLOCKED, with no
// run open), validating the result like a new task: the fields' checks,
// requires_approval's need of a repository, and, when kind or
// expected_count change, the Capacity rules of the rule set and the task's
// own. An edit of what routes the task (kind, metadata, expected_count,
// agent_type) clears its waiting reason, which the next scheduling round
// writes anew. The edit bumps updated_at; it is not a transition, so it
// writes no event row.
func (s *Store) EditTask(ctx context.Context, id string, patch models.TaskPatch) (models.Task, error) {
	var out models.Task
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		x := s.newTxn(ctx, tx)
		cur, err := getTask(ctx, x, id)
		if err != nil {
			return err
		}
		if err := checkEditable(ctx, x, cur); err != nil {
			return err
		}
		next, err := patch.Apply(cur)
		if err != nil {
			return err
		}
		if next.RequiresApproval && !cur.RequiresApproval {
			ok, err := projectHasRepo(ctx, x, cur.ProjectID)
			if err != nil {
				return err
			}
			if !ok {
				return noApprovalPath("task "+id, cur.ProjectID)
			}
		}
		if patch.Kind != nil || patch.ExpectedCount != nil {
			// The check creation makes (checkRules), on the edited task.
			rs, err := readRuleSet(ctx, x)
			if err != nil {
				return err
			}
			if err := models.CheckCapacityRules("rules", rs.Rules, next.ProjectID, next.Kind, next.ExpectedCount); err != nil {
				return err
			}
		}
		if patch.Routing() {
			next.WaitingCode, next.WaitingReason = "", ""
		}
		next.UpdatedAt = x.now
		res, err := x.ExecContext(ctx, `UPDATE tasks SET title = ?, description = ?, priority = ?,
			acceptance_criteria = ?, test_commands = ?, verification_type = ?, requires_approval = ?, profile = ?,
			kind = ?, metadata = ?, expected_count = ?, timeout_ns = ?, agent_type = ?, runner_labels = ?, waiting_code = ?, waiting_reason = ?,
			updated_at = ? WHERE id = ? AND status = ?`,
			next.Title, next.Description, next.Priority, encodeJSONColumn(next.AcceptanceCriteria, "[]"),
			encodeJSONColumn(next.TestCommands, "[]"), next.VerificationType, next.RequiresApproval, next.Profile,
			next.Kind, encodeJSONColumn(next.Metadata, "{}"), next.ExpectedCount, int64(next.Timeout), next.AgentType,
			encodeJSONColumn(next.RunnerLabels, "[]"), next.WaitingCode, next.WaitingReason, toNanos(x.now), id, cur.Status)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return models.Errorf(models.CodeConflict, "task %s changed concurrently; not edited", id)
		}
		out = next
		return nil
	})
	if err != nil {
		return models.Task{}, fmt.Errorf("edit task %s: %w", id, err)
	}
	s.changed() // a new priority may change what runs next
	return out, nil
}

// waitsForDependencies reports whether a task can take a dependency that is
// not satisfied yet: a DEFINED task waits for its dependencies, a READY one
// returns to DEFINED to wait (DEPS_ADDED), and one blocked by the cascade
// returns to DEFINED when repaired. No row of the transition table returns
// any other status to DEFINED.
func waitsForDependencies(t models.Task) bool {
	return t.Status == models.StatusDefined || t.Status == models.StatusReady ||
		(t.Status == models.StatusBlocked && t.CascadeRootID != "")
}

// ChangeDependencies removes and adds a task's dependency edges in one
// transaction, then settles the task as the dependency rules would:
//
//   - A task that has started or finished (ASSIGNED, IN_PROGRESS,
//     WAITING_INPUT, VERIFYING, AWAITING_APPROVAL, COMPLETED) keeps its
//     dependencies: they are the context its work ran with.
//   - A DEFINED task takes any change and is evaluated at once: DEPS_MET →
//     READY when no unmet edge is left (the promotion a completion makes,
//     with its event row), UPSTREAM_FAILED → BLOCKED, with the cascade,
//     when a new edge requires a BLOCKED upstream.
//   - A task blocked by the cascade takes any change; when no BROKEN edge
//     is left it gets UPSTREAM_REOPENED → DEFINED and is evaluated, with
//     its own cascade-blocked dependents, as when its root is repaired.
//   - A READY task takes any change: a new edge that is not satisfied
//     returns it to DEFINED (DEPS_ADDED, with its event row), where it is
//     evaluated as a DEFINED task is — it waits, or is blocked by the
//     cascade when the new upstream is BLOCKED and success is required.
//   - PAUSED, FAILED and self-BLOCKED tasks will run without going back to
//     DEFINED, so they only take upstreams that already satisfy the new
//     edge (COMPLETED, or BLOCKED when success is not required); removing
//     edges never changes their status.
//
// A new edge is resolved from its upstream's status as at creation.
// Unknown upstreams and edges that do not exist are not_found; a change
// that closes a cycle is refused, naming it. Re-adding an edge with the same
// requires_success changes nothing.
func (s *Store) ChangeDependencies(ctx context.Context, id string, c models.DependencyChange) (models.DependencyResult, error) {
	if err := c.Validate(); err != nil {
		return models.DependencyResult{}, fmt.Errorf("change dependencies of task %s: %w", id, err)
	}
	var out models.DependencyResult
	var changed bool
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		x := s.newTxn(ctx, tx)
		cur, err := getTask(ctx, x, id)
		if err != nil {
			return err
		}
		if cur.Status.Running() || cur.Status == models.StatusCompleted {
			return models.Errorf(models.CodeConflict,
				"task %s is %s: the dependencies of a task that has started or finished cannot change", id, cur.Status)
		}
		edges, err := listEdges(ctx, x, "downstream", id)
		if err != nil {
			return err
		}
		existing := make(map[string]models.Dependency, len(edges))
		for _, e := range edges {
			existing[e.Upstream] = e
		}
		removing := make(map[string]bool, len(c.Remove))
		for i, up := range c.Remove {
			if _, ok := existing[up]; !ok {
				return models.Errorf(models.CodeNotFound, "remove[%d]: task %s does not depend on %s", i, id, up)
			}
			removing[up] = true
		}
		var add []models.BatchDependency
		var unmet []string // new upstreams that do not satisfy their edge yet
		for i, d := range c.Add {
			if d.ID == id {
				return models.Errorf(models.CodeInvalid, "add[%d]: a task cannot depend on itself (%s -> %s)", i, id, id)
			}
			var up models.TaskStatus
			err := x.QueryRowContext(ctx, qTaskStatus, d.ID).Scan(&up)
			if errors.Is(err, sql.ErrNoRows) {
				return models.Errorf(models.CodeNotFound, "add[%d]: task %q not found", i, d.ID)
			}
			if err != nil {
				return err
			}
			if e, ok := existing[d.ID]; ok && !removing[d.ID] {
				if e.RequiresSuccess == d.Required() {
					continue // already there: nothing to do
				}
				removing[d.ID] = true // a new requires_success: the edge is replaced
			}
			satisfied := up == models.StatusCompleted || (up == models.StatusBlocked && !d.Required())
			if !satisfied && !waitsForDependencies(cur) {
				return models.Errorf(models.CodeConflict,
					"add[%d]: task %s is %s and upstream %s is %s: only a DEFINED or READY task can wait for a new dependency "+
						"(no transition returns a %s task to DEFINED); it can only take upstreams that are COMPLETED "+
						"(or BLOCKED, with requires_success false)", i, id, cur.Status, d.ID, up, cur.Status)
			}
			if !satisfied {
				unmet = append(unmet, d.ID)
			}
			add = append(add, d)
		}
		for _, up := range slices.Sorted(maps.Keys(removing)) {
			if _, err := x.ExecContext(ctx, "DELETE FROM task_dependencies WHERE downstream = ? AND upstream = ?", id, up); err != nil {
				return err
			}
		}
		added := make([]newEdge, len(add))
		for i, d := range add {
			added[i] = newEdge{down: id, up: d.ID, required: d.Required()}
			out.Added = append(out.Added, d.ID)
		}
		if err := x.insertEdges(added); err != nil {
			return err
		}
		for _, up := range c.Remove {
			if !slices.Contains(out.Added, up) {
				out.Removed = append(out.Removed, up)
			}
		}
		if len(add) == 0 && len(removing) == 0 {
			out.Task, out.Dependencies = cur, edges
			return nil
		}
		changed = true
		if len(add) > 0 {
			if err := x.checkCycleThrough(id); err != nil {
				return err
			}
		}
		// Settle the task with the follow-up an upstream's change would
		// give it: evaluation when DEFINED, a reopen check when blocked by
		// the cascade.
		follow := change{taskID: id, followUp: true}
		switch {
		case cur.Status == models.StatusReady && len(unmet) > 0:
			// Back to DEFINED through the table; the move itself brings
			// the evaluation a DEFINED task gets.
			follow = change{taskID: id, event: models.EventDepsAdded, expectFrom: models.StatusReady,
				reason: "waits for its new dependencies: " + strings.Join(unmet, ", ")}
		case cur.Status == models.StatusDefined:
			follow.event = evalEvent
		case waitsForDependencies(cur):
			follow.event, follow.reason = reopenEvent, "its dependencies changed and no BLOCKED upstream is left"
		}
		if follow.event != "" {
			if _, err := x.run(follow); err != nil {
				return fmt.Errorf("settle task %s: %w", id, err)
			}
		}
		if err := x.noticeBlockedChain("dependencies"); err != nil {
			return err
		}
		if out.Task, err = getTask(ctx, x, id); err != nil {
			return err
		}
		if out.Dependencies, err = listEdges(ctx, x, "downstream", id); err != nil {
			return err
		}
		out.Promoted, out.Blocked, out.Reopened = x.promoted, x.blocked, x.reopened
		return nil
	})
	if err != nil {
		return models.DependencyResult{}, fmt.Errorf("change dependencies of task %s: %w", id, err)
	}
	if changed {
		s.changed()
	}
	return out, nil
}

// checkCycleThrough validates the graph upstream of taskID as stored now:
// the edges were acyclic before taskID's changed, so any cycle runs through
// taskID. The error names the whole cycle.
func (x *txn) checkCycleThrough(taskID string) error {
	graph := map[string][]string{}
	if err := x.loadUpstreamClosure([]string{taskID}, graph); err != nil {
		return err
	}
	err := statemachine.ValidateDAG(graph)
	var cyc *statemachine.CyclicDependencyError
	if !errors.As(err, &cyc) {
		return err
	}
	path := cyclePath(graph, cyc.From, cyc.To)
	// Start from the task being changed: that is where the person looks.
	if i := slices.Index(path[:len(path)-1], taskID); i > 0 {
		path = append(append([]string{}, path[i:len(path)-1]...), path[:i+1]...)
	}
	return models.WrapError(models.CodeInvalid, err, "dependency cycle: %s (each task would depend on the next)",
		strings.Join(path, " -> "))
}

// cyclePath returns the cycle closed by the back edge from -> to: from,
// then the shortest path of dependencies from to back to from, ending with
// from again.
func cyclePath(graph map[string][]string, from, to string) []string {
	prev := map[string]string{to: ""}
	queue := []string{to}
	for len(queue) > 0 && from != to {
		n := queue[0]
		queue = queue[1:]
		if n == from {
			break
		}
		for _, up := range graph[n] {
			if _, seen := prev[up]; !seen {
				prev[up] = n
				queue = append(queue, up)
			}
		}
	}
	var back []string // from, ..., to
	for n := from; n != ""; n = prev[n] {
		back = append(back, n)
		if n == to {
			break
		}
	}
	slices.Reverse(back) // to, ..., from
	return append([]string{from}, back...)
}

// noticeBlockedChain writes one chain.broken notice for the tasks the
// transaction's follow-ups blocked, if any, keyed by origin, the first
// blocked task and the time.
func (x *txn) noticeBlockedChain(origin string) error {
	if len(x.blocked) == 0 {
		return nil
	}
	first, err := getTask(x.ctx, x, x.blocked[0])
	if err != nil {
		return err
	}
	n := models.TransitionNotice{TaskID: first.ID, ProjectID: first.ProjectID, Title: first.Title, From: models.StatusDefined,
		To: models.StatusBlocked, Event: models.EventUpstreamFailed, Reason: first.StatusReason, Blocked: x.blocked}
	key := fmt.Sprintf("chain_broken:%s:%s:%d", origin, first.ID, toNanos(x.now))
	return x.s.enqueue(x.ctx, x.tx, key, models.NewChainBrokenNotice(n))
}

// DeleteTask deletes a task with everything that belongs to it: its
// dependency edges, events, runs, questions, results, verification,
// feedback and plans. The token ledger keeps its rows: usage stays
// counted. It is refused while the task is ASSIGNED, IN_PROGRESS,
// WAITING_INPUT or VERIFYING, has a run open or an agent holding it, while
// other tasks depend on it, and while it is the parent of subtasks: each
// message names what is in the way. A task.deleted notice is written to the
// outbox.
func (s *Store) DeleteTask(ctx context.Context, id string) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		x := s.newTxn(ctx, tx)
		t, err := getTask(ctx, x, id)
		if err != nil {
			return err
		}
		switch t.Status {
		case models.StatusAssigned, models.StatusInProgress, models.StatusWaitingInput, models.StatusVerifying:
			return models.Errorf(models.CodeConflict, "task %s is %s: a task that is being worked on cannot be deleted", id, t.Status)
		}
		run, err := openRunOf(ctx, x, id)
		if err != nil {
			return err
		}
		if run != 0 {
			return models.Errorf(models.CodeConflict, "task %s still has run %d open: try again when it has ended", id, run)
		}
		holders, err := queryIDs(ctx, x, "SELECT id FROM agents WHERE current_task_id = ? ORDER BY id", id)
		if err != nil {
			return err
		}
		if len(holders) > 0 {
			return models.Errorf(models.CodeConflict, "task %s is held by agent %s: try again when it is free", id, nameList(holders))
		}
		dependents, err := queryIDs(ctx, x, "SELECT downstream FROM task_dependencies WHERE upstream = ? ORDER BY downstream", id)
		if err != nil {
			return err
		}
		if len(dependents) > 0 {
			return models.Errorf(models.CodeConflict, "task %s has dependents (%s): remove their dependency on it, or delete them, first, or cancel it instead",
				id, nameList(dependents))
		}
		children, err := queryIDs(ctx, x, "SELECT id FROM tasks WHERE parent_task_id = ? ORDER BY id", id)
		if err != nil {
			return err
		}
		if len(children) > 0 {
			return models.Errorf(models.CodeConflict, "task %s is the parent of subtasks (%s): delete them first", id, nameList(children))
		}
		if err := x.forgetUsage(id, t.ProjectID); err != nil {
			return err
		}
		res, err := x.ExecContext(ctx, "DELETE FROM tasks WHERE id = ? AND status = ?", id, t.Status)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return models.Errorf(models.CodeConflict, "task %s changed concurrently; not deleted", id)
		}
		return s.enqueue(ctx, tx, fmt.Sprintf("task_deleted:%s:%d", id, toNanos(x.now)),
			models.NewTaskDeletedNotice(models.TaskDeletedNotice{TaskID: id, ProjectID: t.ProjectID, Title: t.Title, Status: t.Status}))
	})
	if err != nil {
		return fmt.Errorf("delete task %s: %w", id, err)
	}
	s.changed()
	return nil
}
