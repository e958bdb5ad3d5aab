// Package statemachine is the only authority on task status changes in
// agentqueued. It owns the transition table that says, for a task in a given
// status, which events are legal and which status each one leads to, and the
// validation of task dependency graphs.
//
// # Who decides
//
// A task is created DEFINED. From then on its status changes only through
// [TaskTransition]: the store reads the task, asks TaskTransition for the
// status the event leads to, and writes the change as a compare-and-set
// (UPDATE ... WHERE id = ? AND status = <the status it read>) together with
// the task_events row recording the event, in one transaction. If another
// writer changed the task in between, the update matches no row and nothing
// is applied. Nothing else decides legality: the scheduler, the agent
// runners, the API and the chat commands only propose events, and a pair
// that is not in the table fails with an [*InvalidTransitionError] whose
// message is "Invalid transition: (STATUS, EVENT)". [IsValidStatusTransition]
// answers the weaker question of whether any event links two statuses, and
// [Rows] returns a copy of the table for documentation and tests.
//
// # The table as a diagram
//
// Every row of the table except ADMIN_RESTART, RUN_STOPPED, ADMIN_CANCEL,
// DEPS_ADDED, TIMEOUT_FAILED, REPLY_REQUEUED and MAX_RETRIES from
// WAITING_INPUT is drawn below. Lines that
// merge into the bus on the left all lead to BLOCKED; lines that merge into
// the bus on the right all lead to READY. A "+" is a corner or a place
// where lines join; where a vertical line crosses a horizontal one without a
// "+", the two do not connect.
//
//	                                            +-------------------+
//	 +------------ UPSTREAM_REOPENED ---------->|                   |
//	 |                                          |      DEFINED      |
//	 |  +--------- UPSTREAM_FAILED -------------|                   |
//	 |  |                                       +-------------------+
//	 |  |                                                 | DEPS_MET
//	 |  |                                                 v
//	 ^  v                                       +-------------------+
//	 |  |                                       |                   |
//	 |  |                +------ RETRY -------->|       READY       |<----------------------------------+
//	 |  |                |                      |                   |                                   |
//	 |  |                |                      +-------------------+                                   |
//	 |  |                ^                                | ASSIGNED                                    ^
//	 |  |                |                                v                                             |
//	 |  |                |                      +-------------------+                                   |
//	 |  |                |                      |                   |                                   |
//	 |  +<---------------|------ TIMEOUT -------|     ASSIGNED      |----- EXECUTION_ERROR, RECOVERY ---+
//	 |  |                |                      |                   |                                   |
//	 |  |                |                      +-------------------+                                   |
//	 |  |                |                                | AGENT_STARTED                               ^
//	 |  |                |                                v                                             |
//	 ^  v                |                      +-------------------+                                   |
//	 |  |                |                      |                   |----- RETRY, RECOVERY -------------+
//	 |  |                |                      |                   | AGENT_QUESTION +---------------+  |
//	 |  |                |  TIMEOUT,            |                   |--------------->|               |  |
//	 |  |                |  ADMIN_STOP,         |    IN_PROGRESS    |                | WAITING_INPUT |  ^
//	 |  |                |  MAX_RETRIES         |                   |<---------------|               |  |
//	 |  +<---------------|----------------------|                   | HUMAN_REPLIED  +---------------+  |
//	 |  |                |                      +-------------------+                   |               |
//	 |  |                |                          |     |     |        INPUT_TIMEOUT  |  RESUME_TIMER |
//	 |  |                |                          |     |     |                       v               ^
//	 |  |                |                          |     |     |             +---------------+         |
//	 |  |                |                          |     |     |             |               |         |
//	 |  |                |          AGENT_FAILED    |     |     +------------>|    PAUSED     |---------+
//	 ^  v                |    +---------------------+     |    TOKENS_EXHAUSTED               |
//	 |  |                |    |                           |                   +---------------+
//	 |  |                |    |           AGENT_COMPLETED |
//	 |  |                |    |                           |
//	 |  |                |    v                           v
//	 |  |             +--------+                +-------------------+
//	 |  | MAX_RETRIES |        |  VERIFY_FAILED |                   |
//	 |  +<------------| FAILED |<---------------|     VERIFYING     |---------+
//	 |  |             |        |                |                   |         |
//	 |  |             +--------+                +-------------------+         |
//	 |  |                   |                             |                   |
//	 |  |                   | ADMIN_SKIP                  | PR_CREATED        |
//	 ^  v                   |                             v                   |
//	 |  |                   |                   +-------------------+         |
//	 |  |                   |                   |                   |         |
//	 |  +<------------------|----- PR_CLOSED ---| AWAITING_APPROVAL |         | VERIFY_PASSED
//	 |  |                   |                   |                   |         |
//	 |  |                   |                   +-------------------+         |
//	 |  |                   |                             |                   |
//	 |  |                   |                             | PR_MERGED,        |
//	 |  |                   |                             | HUMAN_APPROVED    |
//	 |  v                   |                             v                   |
//	+-----------+           |                   +-------------------+         |
//	|           |           |                   |                   |         |
//	|  BLOCKED  |-----------+--- ADMIN_SKIP --->|     COMPLETED     |<--------+
//	|           |                               |                   |
//	+-----------+                               +-------------------+
//
// ADMIN_RESTART returns every status but two to READY:
//
//	DEFINED ------------+
//	ASSIGNED -----------+
//	VERIFYING ----------+
//	AWAITING_APPROVAL --+
//	FAILED -------------+---- ADMIN_RESTART ----> READY
//	PAUSED -------------+
//	WAITING_INPUT ------+
//	BLOCKED ------------+
//	COMPLETED ----------+
//
// RUN_STOPPED takes every unfinished status to BLOCKED:
//
//	DEFINED ------------+
//	READY --------------+
//	ASSIGNED -----------+
//	IN_PROGRESS --------+
//	WAITING_INPUT ------+---- RUN_STOPPED ----> BLOCKED
//	PAUSED -------------+
//	VERIFYING ----------+
//	AWAITING_APPROVAL --+
//	FAILED -------------+
//
// ADMIN_CANCEL, a person's cancel, does the same from the same nine statuses:
//
//	DEFINED ------------+
//	READY --------------+
//	ASSIGNED -----------+
//	IN_PROGRESS --------+
//	WAITING_INPUT ------+---- ADMIN_CANCEL ----> BLOCKED
//	PAUSED -------------+
//	VERIFYING ----------+
//	AWAITING_APPROVAL --+
//	FAILED -------------+
//
// DEPS_ADDED takes a READY task back to wait for a dependency a person
// added:
//
//	READY ---- DEPS_ADDED ----> DEFINED
//
// TIMEOUT_FAILED fails a run that a time limit ended, from either status a
// run can be in, and a task whose question expired unanswered when its
// project's on_expiry is fail:
//
//	ASSIGNED -----------+
//	IN_PROGRESS --------+---- TIMEOUT_FAILED ----> FAILED
//	WAITING_INPUT ------+
//
// A task waits in WAITING_INPUT for as long as its question is open,
// whether or not the run that asked is still alive. Two more rows end that
// wait:
//
//	WAITING_INPUT ---- REPLY_REQUEUED ----> READY     (answered; its run had ended)
//	WAITING_INPUT ---- MAX_RETRIES -------> BLOCKED   (expired; no retry left)
//
// READY has no ADMIN_RESTART row because it is already where a restart
// leads. IN_PROGRESS is the only other status without one, on purpose: a
// running agent is never restarted under its own feet. Stop it first
// (IN_PROGRESS --ADMIN_STOP--> BLOCKED), then restart it from BLOCKED.
//
// # The table as a list
//
// The 36 rows of the Agent Queue specification, grouped as the
// specification groups them, then the extensions (66 rows in all):
//
//	Core lifecycle
//	  DEFINED            --DEPS_MET-->          READY
//	  READY              --ASSIGNED-->          ASSIGNED
//	  ASSIGNED           --AGENT_STARTED-->     IN_PROGRESS
//	  IN_PROGRESS        --AGENT_COMPLETED-->   VERIFYING
//	  VERIFYING          --VERIFY_PASSED-->     COMPLETED
//	  VERIFYING          --PR_CREATED-->        AWAITING_APPROVAL
//	  AWAITING_APPROVAL  --PR_MERGED-->         COMPLETED
//
//	Failure and retry
//	  IN_PROGRESS        --AGENT_FAILED-->      FAILED
//	  VERIFYING          --VERIFY_FAILED-->     FAILED
//	  FAILED             --RETRY-->             READY
//	  FAILED             --MAX_RETRIES-->       BLOCKED
//
//	Pause and resume
//	  IN_PROGRESS        --TOKENS_EXHAUSTED-->  PAUSED
//	  IN_PROGRESS        --AGENT_QUESTION-->    WAITING_INPUT
//	  WAITING_INPUT      --HUMAN_REPLIED-->     IN_PROGRESS
//	  WAITING_INPUT      --INPUT_TIMEOUT-->     PAUSED
//	  PAUSED             --RESUME_TIMER-->      READY
//
//	Shortcuts from IN_PROGRESS
//	  IN_PROGRESS        --MAX_RETRIES-->       BLOCKED
//	  IN_PROGRESS        --RETRY-->             READY
//
//	Administrative
//	  BLOCKED            --ADMIN_SKIP-->        COMPLETED
//	  FAILED             --ADMIN_SKIP-->        COMPLETED
//	  IN_PROGRESS        --ADMIN_STOP-->        BLOCKED
//	  BLOCKED, FAILED, COMPLETED, PAUSED, DEFINED, ASSIGNED,
//	  AWAITING_APPROVAL, VERIFYING, WAITING_INPUT
//	                     --ADMIN_RESTART-->     READY        (nine rows)
//
//	PR lifecycle
//	  AWAITING_APPROVAL  --PR_CLOSED-->         BLOCKED
//
//	Errors and timeouts
//	  IN_PROGRESS        --TIMEOUT-->           BLOCKED
//	  ASSIGNED           --TIMEOUT-->           BLOCKED
//	  ASSIGNED           --EXECUTION_ERROR-->   READY
//
//	Daemon recovery
//	  IN_PROGRESS        --RECOVERY-->          READY
//	  ASSIGNED           --RECOVERY-->          READY
//
//	Extensions
//	  AWAITING_APPROVAL  --HUMAN_APPROVED-->    COMPLETED
//	  DEFINED            --UPSTREAM_FAILED-->   BLOCKED
//	  BLOCKED            --UPSTREAM_REOPENED--> DEFINED
//	  VERIFYING          --HUMAN_APPROVED-->    COMPLETED
//	  VERIFYING          --APPROVAL_REQUESTED--> AWAITING_APPROVAL
//	  VERIFYING          --PR_UNAVAILABLE-->    BLOCKED
//	  every unfinished status (nine)
//	                     --RUN_STOPPED-->       BLOCKED
//	  every unfinished status (nine)
//	                     --ADMIN_CANCEL-->      BLOCKED
//	  READY              --DEPS_ADDED-->        DEFINED
//	  ASSIGNED, IN_PROGRESS, WAITING_INPUT
//	                     --TIMEOUT_FAILED-->    FAILED       (three rows)
//	  WAITING_INPUT      --REPLY_REQUEUED-->    READY
//	  WAITING_INPUT      --MAX_RETRIES-->       BLOCKED
//
// # Extensions
//
// The specification's events do not cover ten situations, so the table
// adds one event for each (and a second row for HUMAN_APPROVED); the
// specification's MAX_RETRIES gets a row from WAITING_INPUT too (a
// question that expired when no retry was left):
//
//   - HUMAN_APPROVED (AWAITING_APPROVAL → COMPLETED): a person approves the
//     work without a pull request being merged, for a task that has no PR
//     or for the approval of a plan. From VERIFYING it is a person's
//     approval of a task whose verification type is HUMAN: the branch is
//     merged and the task completes (a rejection is VERIFY_FAILED with the
//     person's feedback).
//   - APPROVAL_REQUESTED (VERIFYING → AWAITING_APPROVAL): the task
//     requires approval and gets no pull request (pr_mode never, no
//     GitHub): its work waits unmerged, HUMAN_APPROVED merges it and
//     completes the task, a rejection returns it by ADMIN_RESTART; or the
//     task's agent proposed a plan and the project requires plans to be
//     approved: the task's own work is merged, and HUMAN_APPROVED completes
//     it and creates the plan's subtasks in the same transaction.
//   - PR_UNAVAILABLE (VERIFYING → BLOCKED): the task must land through a
//     pull request (its project's pr_mode is always) and none can be
//     opened, for example because no GitHub is configured; the reason says
//     what is missing. A task that requires approval is never blocked so:
//     it waits for a person by APPROVAL_REQUESTED instead.
//   - UPSTREAM_FAILED (DEFINED → BLOCKED): a dependency that requires
//     success is BLOCKED, so the task can never become READY. The task is
//     blocked in turn, and the root cause (the task whose failure started
//     the cascade) is recorded with it.
//   - UPSTREAM_REOPENED (BLOCKED → DEFINED): the upstream that blocked the
//     task was restarted or skipped. The task goes back to DEFINED and its
//     dependencies are evaluated again.
//   - RUN_STOPPED (any unfinished status → BLOCKED): the task belongs to a
//     workflow run that will not go on — a person cancelled the run (reason
//     "cancelled"), or the step could not fan out over an upstream's output
//     (the reason says why). A running agent is stopped as by ADMIN_STOP;
//     retrying the run restarts the task.
//   - ADMIN_CANCEL (any unfinished status → BLOCKED): a person cancels the
//     task. ADMIN_STOP exists only from IN_PROGRESS, deleting is refused
//     while a task has dependents and ADMIN_SKIP completes the task (which
//     satisfies its dependents), so none of them withdraws queued work.
//     The reason is "cancelled by <actor>", with the person's reason after
//     a colon. Like RUN_STOPPED it ends the task's run if it has one (the
//     agent process is stopped as by ADMIN_STOP, a verification or pull
//     request tracking ends, an open question is closed); dependents that
//     require success are blocked by the cascade naming the cancelled task
//     as the root cause, and the others proceed, the cancel counting as a
//     failure. ADMIN_RESTART runs the task again.
//   - DEPS_ADDED (READY → DEFINED): a person added a dependency to a READY
//     task that is not met yet (its upstream has not finished, or is
//     BLOCKED and success is required). The task waits in DEFINED like any
//     other task with an unmet dependency: DEPS_MET makes it READY again,
//     UPSTREAM_FAILED blocks it. No other status returns to DEFINED this
//     way: PAUSED, FAILED and BLOCKED tasks take only dependencies that
//     are already met.
//   - TIMEOUT_FAILED (ASSIGNED, IN_PROGRESS → FAILED): a time limit ended
//     the run — it did not start in time, was quiet past its idle or
//     heartbeat timeout, or ran past max_runtime (or its task's timeout).
//     The specification's TIMEOUT blocks the task at once; the daemon
//     applies TIMEOUT_FAILED instead, so a timeout is retried with backoff
//     like AGENT_FAILED while retries remain and becomes MAX_RETRIES →
//     BLOCKED after the last. TIMEOUT stays in the table for callers that
//     mean to block. From WAITING_INPUT it is a question that expired
//     unanswered in a project whose on_expiry is fail.
//   - REPLY_REQUEUED (WAITING_INPUT → READY): a person answered the
//     task's question after the run that asked had ended (the daemon
//     restarted, the agent's CLI gave up on the call). The task keeps
//     waiting in WAITING_INPUT without a run, holding no agent and no
//     slot, until the answer comes; then it runs again at once, its session
//     resumed where the CLI keeps one, with the answer in its prompt.
//     HUMAN_REPLIED stays the answer to a question whose run still waits.
//     MAX_RETRIES from WAITING_INPUT blocks a task whose question expired
//     when the task had no retry left (every expiry uses one).
//
// # Dependency graphs
//
// [ValidateDAG] checks that a dependency graph (task id → ids it depends
// on) has no cycle; the nodes are the keys and every id that appears as a
// value. It runs a three-colour depth-first search (white: not seen, grey:
// on the current path, black: finished) with an explicit stack, so a chain
// of any depth cannot overflow the goroutine stack. Nodes are visited in
// sorted order, and each node's dependencies in the order given, so the
// result is deterministic: the first edge found that points back to a grey
// node is reported as a [*CyclicDependencyError] whose message is
// "from -> to" (from depends on to, which is already on the path), for
// example "c -> a" for a -> b -> c -> a. A CyclicDependencyError with no
// edge reads "Cyclic dependency detected".
//
// [ValidateDAGWithNewEdge] answers whether adding one edge keeps a graph
// acyclic, before the edge is stored; a task depending on itself is refused
// at once. Neither function modifies the graph it is given.
package statemachine
