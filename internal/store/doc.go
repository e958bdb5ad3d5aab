// Package store keeps agentqueued's durable state in SQLite and holds all of
// its SQL.
//
// The database runs in WAL mode, foreign keys on, with IMMEDIATE write
// transactions through a single writer connection; reads use a separate
// read-only pool. Migrations are embedded, ordered by their number, and each
// is applied in a transaction with its schema_migrations row.
//
// Writes are durable when answered, by group commit (durable.go): each
// transaction is as before — BEGIN IMMEDIATE, the lease's fence checked,
// its statements, COMMIT — but the writer commits with synchronous=NORMAL
// (the frames written to the write-ahead log, no fsync) and gives the
// connection back at once; the method returns after an fsync of the log
// that began after its COMMIT. The first committer that finds no sync
// running runs one, covering every commit ended so far; the others wait
// for it, and for the next when it began before their commit. No
// goroutine runs the syncs: a waiting writer does. With POWERSAFE_OVERWRITE
// (the unix default) this writes and syncs what synchronous=FULL did
// (durable.go cites SQLite's source); in BenchmarkDurableEvents eight
// concurrent writers take one sync per three or four commits. The observer, OnChange and OnStateChange hear
// of a commit only once it is durable. A failed sync is final: every
// waiter gets it, later writes are refused, WriteHealth reports it. A
// reader can see a commit up to one sync before it is durable; the reads
// that feed actions outside the daemon (PendingOutboxAfter, OpenRuns,
// Verifications, DuePullRequests, PendingWebhooks, RunFilesDue, HookQuery)
// return only once what they read is durable (WaitDurable), and
// docs/architecture.md ("Durability") says why the others need not.
//
// Statements are prepared once and kept (stmtcache.go): per database handle,
// bounded, closed on Close; a write transaction uses the writer's copies
// through Tx.StmtContext, and a statement it meets first is prepared for the
// cache once the writer connection is free. SQLite prepares a statement
// again at each use when its plan may depend on a bound value (a LIMIT ?,
// comparisons it weighs against an index), because the driver rebinds every
// parameter at each use: hot statements whose plan is the same whatever the
// value write such parameters +? (the value, not weighed by the planner).
// TestStatementsAreParsedOnce checks that a task's life compiles nothing
// after the first.
//
// Every status change goes through ApplyEvent: the statemachine decides
// whether (status, event) is legal, the task row is updated with
// UPDATE … WHERE id = ? AND status = ? (a lost race is a conflict, never a
// blind write), the event row is appended to task_events, and the effects
// that belong to the change are written in the same transaction:
//
//   - Dependency facts. Each edge (downstream depends on upstream) carries
//     requires_success and a resolution: PENDING, SATISFIED or BROKEN.
//     When the upstream COMPLETES its edges become SATISFIED. When it
//     becomes BLOCKED, requires_success=false edges become SATISFIED (the
//     upstream finished either way) and requires_success=true edges become
//     BROKEN. A decided edge records how its upstream ended
//     (upstream_outcome: SUCCESS, SKIPPED, FAILED or CANCELLED, see
//     models.EdgeOutcomeOf) and the upstream's work attempt that decided it.
//     An edge is decided once per run of its upstream: a repeated event
//     never decides it again.
//   - Promotion. A DEFINED task whose edges are all SATISFIED gets DEPS_MET →
//     READY in the same transaction. A batch's new task whose edges are
//     all satisfied from the start is inserted READY, with the event and
//     status reason its promotion gives; a batch evaluates only the new
//     tasks its graph says will change, in its order (batch.go).
//   - Cascade. A DEFINED task with a BROKEN edge gets UPSTREAM_FAILED →
//     BLOCKED, transitively, with cascade_root_id naming the task whose
//     failure started the chain and a reason naming it.
//   - Reopen. When a COMPLETED or BLOCKED task runs again (ADMIN_RESTART,
//     UPSTREAM_REOPENED), its BROKEN edges and its decisions toward
//     dependents that have not started return to PENDING; a skip
//     (ADMIN_SKIP) satisfies them. Every cascade-blocked dependent with no
//     BROKEN edge left gets UPSTREAM_REOPENED → DEFINED and is re-evaluated,
//     transitively: one admin action repairs a whole chain. One still
//     blocked through another upstream is re-labelled with that root cause.
//   - Outbox. Notable changes write an outbox row keyed by their event, to be
//     delivered after commit. Every statement on the outbox table is in
//     outbox.go; a notice's kind and payload are models.Notice's.
//
// A repeated event — the same event arriving again after it was applied — is
// answered as a duplicate and changes nothing.
//
// Config.Observer, when set, is told each status change and each run end
// once its transaction has committed (never for one rolled back), with the
// wait the change ends: a claim's time READY, a dependent's time from its
// dependencies being met to its start (observe.go). The metrics read the
// store at scrape time through named one-statement reads (metrics.go).
//
// A person's other changes are not transitions but settle the same way:
// ChangeDependencies rewrites a task's edges and then runs the follow-ups
// above (promotion, cascade, reopen) in its transaction, a READY task given
// an edge that is not satisfied first returning to DEFINED (DEPS_ADDED); EditTask changes a
// task that is not being worked on; DeleteTask deletes a task with its rows
// (edges, events, runs, questions, results, feedback, plans), keeping the
// append-only token ledger; RemoveAgent deletes an idle agent, its runs
// keeping its id. docs/semantics.md has the rules.
//
// Hooks keep their runs in hook_runs, one per (hook, firing key): ClaimHookRun
// checks the key, the cooldown (from the hook's last run that was not
// skipped), the project's budget and the cap on running runs, and records
// the run, in one transaction. Task lifecycle events are read from the
// outbox after a named cursor (event_cursors); HookQuery holds the named
// read-only queries of hooks' db_query steps. docs/hooks.md has the rules.
//
// Workflow runs (workflow.go) keep their definition, their inputs (checked
// and completed with their defaults when the run starts) and a row per step
// whose tasks exist. Every change to a run's task marks its run; when the
// outermost application of the transaction engine ends, still inside the
// transaction, each marked run gets the tasks of the steps that came due
// (their upstream steps done) and its status settled. Cancel stops a run's
// idle tasks in its transaction; retry restarts its failed and blocked
// tasks, upstream first, in one. docs/workflows.md has the rules.
package store
