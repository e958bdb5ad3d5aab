// Package orchestrator drives agentqueued's tick: it promotes tasks whose
// dependencies are met, schedules READY tasks onto idle agents, dispatches
// each assignment, supervises the agent runs, verifies their work and
// recovers whatever was in flight when the daemon stopped. It declares the
// small interfaces it consumes (store, workspaces, agent runner, notifier,
// pull-request tracker); cmd/agentqueued wires the concrete types in.
//
// # The scheduler
//
// Scheduling is a pure function, [Schedule]: it reads a [Snapshot] — the
// projects with their usage in the rolling window, READY and running tasks,
// idle agents, rules and budgets, and the time — and returns [Assignment]s.
// It performs no I/O, reads no clock and iterates no map without sorting;
// the order of the snapshot's slices never changes the result. The store
// fills the snapshot in one read transaction; dispatch then claims each
// assignment atomically (task READY → ASSIGNED by compare-and-set, agent
// IDLE → STARTING), and an assignment that loses a race is simply not
// started: the next round sees the new state.
//
// A snapshot names each project, READY task and agent once. An ID that
// appears more than once is ignored entirely, since neither entry can be
// trusted over the other; running tasks are all counted.
//
// # The policy
//
// Budgets. When a global budget is set and the tokens used in the window
// have reached it, nothing is assigned.
//
// Eligible projects. A project takes part when it is ACTIVE (PAUSED and
// ARCHIVED projects are skipped), its token use has not reached its
// budget_limit, and its running tasks plus the assignments already made to
// it in this round are fewer than its max_concurrent_agents. A zero or
// negative max_concurrent_agents admits nothing; a credit weight that is not
// positive counts as the default weight 1.
//
// Candidates. A project's candidates are its READY tasks whose not_before is
// unset or not after the snapshot's Now. Tasks in any other status, and
// tasks of projects missing from the snapshot, are ignored.
//
// Rules. A rule applies to a candidate when it is global or scoped to the
// candidate's project, and its matcher names no kind or the candidate's
// kind. It counts the tasks of its group: tasks of the candidate's kind with
// metadata equal to the candidate's on every matcher field (a missing key
// equals only a missing key), from every project for a global rule and from
// its own project for a scoped one. Counted are the running tasks of the
// snapshot whose status is in the matcher's status set, plus every task
// assigned earlier in this round whatever the set says (it is about to
// run). A Concurrency rule allows the candidate when the counted tasks plus
// the candidate number at most max_concurrency; a Capacity rule when their
// remaining work (expected_count − success_count − failure_count, floored at
// 0) plus the candidate's is at most max_capacity. A candidate starts only
// when every rule that applies to it allows it. Waiting work (READY,
// DEFINED, PAUSED, FAILED tasks) never counts: a rule limits what runs, so
// a backlog cannot block itself. A rule that fails validation refuses every
// candidate it applies to. Rules only tighten as a round goes on, so a
// candidate refused once is not looked at again in the round, and one
// refused candidate never holds back the rest of its project.
//
// Order inside a project. The lowest priority value goes first. At priority
// 0 (critical) tasks go first in, first out: oldest first, by created_at
// then ID, whoever created them. At any other priority the creators take
// turns: the next task is the oldest one of the creator with the fewest
// tasks running in the project (the snapshot's running tasks plus this
// round's assignments), ties going to the creator whose oldest task is
// older. Only candidates the rules allow are considered.
//
// Minimum-task guarantee. First, every eligible project with a candidate and
// no task completed in the window gets one assignment, whatever its share.
// These projects are served in the order of their oldest allowed candidate
// when the round starts (then by project ID); a project is passed over when
// it is full or no idle agent may work on it.
//
// Fair share. Then, until no idle agent or no startable candidate remains,
// the scheduler picks the eligible project with the smallest share —
// (agent-seconds used in the window + assignments this round × Quantum) /
// credit_weight — among those with an allowed candidate and an idle agent
// allowed to work on them. Ties go to the larger credit weight (whose share
// grows less with one more assignment), then to the project whose oldest
// allowed candidate is older, then to the smaller project ID. That project's
// next candidate goes to the first idle agent, in ID order, that may work on
// it (an agent with no project list may work on any). Each assignment adds
// Quantum ([DefaultQuantum], 10 minutes, unless configured) to its project's
// usage for the rest of the round, so shares move within a round: five idle
// agents and two projects weighted 3:1 with no usage split 4:1, not 5:0.
// Over many rounds, agent time follows the weights.
//
// Each agent and each task appear at most once in the result, in the order
// chosen, with a Reason starting "minimum-task guarantee" or "fair share".
package orchestrator
