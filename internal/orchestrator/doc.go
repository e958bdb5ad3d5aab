// Package orchestrator drives agentqueued's tick: it promotes tasks whose
// dependencies are met, schedules READY tasks onto idle agents, dispatches
// each assignment, supervises the agent runs, verifies their work and
// recovers whatever was in flight when the daemon stopped. It declares the
// small interfaces it consumes (store, workspaces, agent runner, notifier,
// pull-request tracker); cmd/agentqueued wires the concrete types in.
// Verification and landing (checks, reviews, approvals, merges, pull
// requests) are internal/landing's: the orchestrator drives its Lander and
// runs the reviewer agents it asks for.
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
// Slots. A running task holds a slot when an agent or a process of the
// daemon works for it: ASSIGNED, IN_PROGRESS and WAITING_INPUT tasks (the
// agent's process waits with the question), a task with an open run (its
// own or a reviewer's), and a VERIFYING task while its checks run or its
// work is merged. A task that waits for a person or a pull request —
// AWAITING_APPROVAL, VERIFYING for a person's decision or for its reviewer
// to become free — is marked Waiting in the snapshot and holds none: it
// counts neither against max_concurrent_agents (ProjectState.Running counts
// slots) nor against a workflow step's cap, nor against a rule, unless the
// rule's matcher names its status itself (`AWAITING_APPROVAL`, not the
// group `Running`).
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
// snapshot that hold a slot and whose status is in the matcher's status
// set (see Slots for waiting tasks), plus every task
// assigned earlier in this round whatever the set says (it is about to
// run). A Concurrency rule allows the candidate when the counted tasks plus
// the candidate number at most max_concurrency; a Capacity rule when their
// remaining work (expected_count − success_count − failure_count, floored at
// 0) plus the candidate's is at most max_capacity. A candidate starts only
// when every rule that applies to it allows it. Waiting work (READY,
// DEFINED, PAUSED, FAILED tasks) never counts: a rule limits what runs, so
// a backlog cannot block itself. A rule that fails validation refuses every
// candidate it applies to. A task's own rules (a batch entry's, scoped to
// its project) apply to that task only, and count like a rule of the set
// the running and assigned tasks of the matcher's kind (the candidate's
// kind when it names none), whether they carry the rule or not. The rules
// of the set are read each round ([Config.CurrentRules]). Rules only tighten as a round goes on, so a
// candidate refused once is not looked at again in the round, and one
// refused candidate never holds back the rest of its project.
//
// Workflow steps. A task of a workflow run carries its run, its step and
// the step's concurrency: at most that many of the step's tasks of the run
// run at once (0, or a negative value, means no cap). A candidate with a
// cap counts the tasks with the same run and step name, whatever their
// project and whatever their own cap: the snapshot's running tasks that
// hold a slot plus the tasks assigned earlier in this round. It
// starts only when that count plus itself is at most its cap; another run
// of the same step, or another step of the same run, is not counted. A
// step already at or over its cap starts nothing until enough of its
// tasks end. Like a rule, the cap only tightens as a round goes on: a
// candidate it refuses is not looked at again in the round and never holds
// back the rest of its project. A task outside a workflow run has an empty
// run and step and no cap.
//
// Order inside a project. The lowest priority value goes first. A task's
// age is its place in the order of submission (TaskInfo.SubmissionSeq, the
// store's submission_seq): tasks created together, a batch's entries or a
// workflow fan-out's tasks, are as old as the order they were given in. At
// priority 0 (critical) tasks go first in, first out: oldest first, whoever
// created them. At any other priority the creators take
// turns: the next task is the oldest one of the creator with the fewest
// tasks running in the project (the snapshot's running tasks plus this
// round's assignments), ties going to the creator whose oldest task is
// older. Only candidates the rules and their step's cap allow are
// considered.
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
//
// Waiting reasons. [Decide] is Schedule with, for every READY task of the
// snapshot it did not assign and for every project, why it waits (a
// models.Waiting* code and a sentence): the project is paused or over its
// budget, its slots are full, no idle agent serves it, a rule or a step
// refused the task, its not_before is ahead, or other work went first.
//
// # Reading the READY tasks
//
// A round reads READY tasks only for the projects that could take work
// (Decide on the snapshot without READY tasks gives them no reason to
// wait), a page ([Config.ReadyPerProject]) per project in start order,
// leaving out in SQL the tasks whose not_before is ahead and the groups
// [Exclusions] finds at a rule's or a step's limit — the set's rules and
// the tasks' own rules, whose distinct sets the store lists from an index
// without reading the tasks ([Snapshot.OwnRules]). While a project could
// still take work after its page (every task of it assigned or refused)
// and more remain, the next page is read and the scheduler runs again on
// what is left, so no backlog hides a task that can start. The round then
// writes the waiting reasons (see docs/semantics.md, "Scheduling"): per
// group for the tasks it did not look at one by one, per task for the
// others, only where a reason changed.
//
// # The loop
//
// [Orchestrator.Run] first recovers, then runs a round on every wake-up
// ([Orchestrator.Wake]: the store calls it after every commit that may have
// made work ready — a task created, promoted, answered, an agent freed), on
// the next due timer, and at the latest after the safety tick. Promotion
// happens in the completing transaction, so an upstream's completion wakes
// the loop and its dependent's process starts without waiting for a tick.
// A round:
//
//  1. applies timers: PAUSED tasks whose resume_after has come get
//     RESUME_TIMER; questions unanswered for InputTimeout get INPUT_TIMEOUT
//     (the task PAUSED for as long again, the run ended; a later answer is
//     kept and put in the next run's prompt); FAILED tasks get RETRY after
//     RetryBackoff·2^retries (at most MaxBackoff), or MAX_RETRIES → BLOCKED
//     once max_retries are used;
//  2. schedules and dispatches (claim, then a goroutine per run);
//  3. supervises runs: a run whose workspace is not prepared within
//     PrepareTimeout of its claim ends with EXECUTION_ERROR → READY
//     ("prepare workspace: did not finish within …", the project cooling
//     down as after any failed preparation); a run not started within
//     StartTimeout of its workspace being ready, quiet (no output, no
//     report) for its idle timeout, or older than its max runtime (the
//     agent's, else Config.MaxRuntime; the task's own timeout when that is
//     smaller) is stopped with TIMEOUT → BLOCKED and the reason;
//
// and arms one timer for the earliest of those deadlines. The clock is
// injected (Config.Clock); deadlines are absolute, so time
// passing during a round never delays them.
//
// Wake-ups coalesce: any number of them while the loop waits cost one round,
// and any number during a round exactly one more; one whose change committed
// before a round began is covered by that round and costs none. A run whose
// process has started does not wake the loop for a round (nothing a round
// reads changed): it asks the loop only to arm its timer for the run's
// deadlines.
//
// # A run
//
// A claimed run prepares the agent's workspace (its own checkout on the
// task branch), renders the prompt (task, acceptance criteria, tests, the
// previous attempt's failure, answers to earlier questions) into stdin and
// a file, and starts the adapter's command in its own process group with a
// scrubbed environment plus the daemon's variables the agent's pass_env
// names (one warning a run names those the daemon lacks, which are
// skipped), the agent's env, and the run's AQ_SOCKET, AQ_TASK_ID,
// AQ_RUN_TOKEN, AQ_PROJECT_ID, AQ_ATTEMPT, AQ_RUN_KIND and AQ_PROMPT_FILE,
// and AQ_BIN (Config.Executable, the daemon's own binary), and for a work
// run of a task of a workflow run its place (models.RunPlace: AQ_RUN_ID,
// AQ_WORKFLOW, AQ_STEP, AQ_PARALLEL_INDEX, AQ_PARALLEL_COUNT, AQ_ITEM, those
// that apply; also the prompt's "Run context"); docs/agents.md says what
// each holds.
// The prompt offers `<AQ_BIN> agent …` in a shell only when the adapter
// says its CLI can run it (agent.ShellFallback), and names the run's MCP
// servers and agentqueued's MCP tools only when the adapter gives its CLI
// the servers (agent.PassesMCPServers: claude and codex); an agent that
// can do neither (aider) is told that a run changing no file fails. The
// adapter learns
// the input timeout plus ToolTimeoutMargin as the limit of one call of
// agentqueued's MCP tools (a blocking ask). The process start is recorded
// as AGENT_STARTED. Reasons
// and run errors never keep a URL's credentials (models.RedactURL). When it
// ends, what it reported decides the outcome: a rate limit → PAUSED until
// the reported reset (no retry used), and the agent rests until then (the
// rest is stored on the agent, loaded into the cooldowns when Run starts
// and refused by claims, so it outlives a restart; resuming the agent
// ends it); a failure report (the stream's failed result, including a
// result listing tool calls the CLI denied) → AGENT_FAILED; a
// completion report or exit status 0 → AGENT_COMPLETED; otherwise
// AGENT_FAILED with the exit status and the tail of stderr (kept for the
// next attempt's prompt). The files a completed run changed are what its
// branch changes; in a project with a repository a run that changed
// nothing fails its verification unless its agent completed with
// no_changes or proposed a plan (docs/semantics.md, "Run outcomes"), and
// the landing reason says "merged into" only after a merge of changes. An
// ask the agent's CLI abandoned (its call cancelled) leaves its question
// open, pauses the task for it and ends the run; the answer resumes the
// task at once. What the CLI showed of itself (version, MCP servers not
// connected at start, cost, denied tools) is recorded on the run, and a
// version below the known-good one is logged as a warning. A completed task's branch is delivered (merged
// into the default branch and pushed) and VERIFY_PASSED completes it; a
// delivery that fails is VERIFY_FAILED. A delivery into a LINK repository
// whose checked-out default branch has local changes waits instead: the
// verification's phase becomes landing, the task keeps its status with
// waiting_code "landing" and a reason naming the files and `agentqueued
// land PROJECT`, its dependents wait, and [Orchestrator.Land] retries the
// project's waiting landings (docs/semantics.md, "Landing in a linked
// repository"). A task that requires approval is
// not merged before a person decides: it goes to its pull request, or,
// without one, waits unmerged in AWAITING_APPROVAL (APPROVAL_REQUESTED)
// until [Orchestrator.Approve] merges it (HUMAN_APPROVED) or
// [Orchestrator.Reject] returns it to its agent (ADMIN_RESTART) with the
// feedback; the decision is recorded on its verification first, so that
// one of two decisions wins and a restart carries it out. A failure before the process
// started is EXECUTION_ERROR → READY for another agent; when the agent
// itself is at fault (its type, command or process) it goes to ERROR (it
// takes no task until a person resumes it), and when its workspace could
// not be prepared (an error, or PrepareTimeout) the project cools down, so
// a broken command or checkout cannot spin.
//
// # Agents and people
//
// The orchestrator serves the agent RPC (it implements the RPC service of
// internal/api): a run's token authorises calls for its own task only; ask
// blocks while the task is WAITING_INPUT; complete, fail and rate_limited
// are recorded and applied at the run's end (a second complete changes
// nothing); usage goes to the token ledger; propose_plan creates subtasks
// as one batch. People's admin events go through [Orchestrator.ApplyAdminEvent],
// which ends the task's run when the event took the task away from it, and
// answers through [Orchestrator.AnswerQuestion], which hands the answer to
// the waiting agent.
//
// # No agent the database does not know
//
// An agent's process is started held (agent.Spec.Hold): it exists, with
// its pid and process group, but runs only a minimal gate — /bin/sh
// reading one line from a pipe whose write end only the daemon holds —
// until the run's pid is committed (StartRun, with AGENT_STARTED). Then
// the daemon releases it and the gate replaces itself with the agent's
// command (exec: the same pid, the same group, the environment, standard
// input, arguments and log as without the gate). When the daemon dies
// before that — killed while a locked database made the record wait —
// the pipe closes, the gate reads end of file and exits with status 111
// without ever running the agent; when the record fails, the held process
// is stopped. So every agent that runs has its pid in the database, and
// recovery finds it. This was chosen over recording a marker before exec
// and searching /proc for it afterwards: the gate needs no search, and an
// agent cannot escape it by changing its environment. A reviewer's run is
// started the same way.
//
// # Recovery and shutdown
//
// On start, every run left open is closed and its task returned to READY
// by RECOVERY; agents holding a task without an open run are freed;
// ASSIGNED or IN_PROGRESS tasks without a run are requeued; VERIFYING
// tasks are delivered again (delivery is idempotent) and passed. A process
// that survived a crash cannot be re-attached (its output pipes died with
// the daemon), so it is ended and the task runs again: when the run's
// recorded process, or any live process of its process group (the leader
// may have exited and left children behind), carries the run's
// AQ_TASK_ID, the whole group is killed, and the run is closed — freeing
// its agent and checkout for the next run — only once none of it is alive
// (a process finishing a system call could otherwise still write into the
// checkout). A group still alive after LeftoverWait keeps its run open,
// its agent taken and its task held, and is looked at again in every
// round until it has gone. A run without a recorded pid never ran its
// agent (see above). On shutdown, runs are stopped (TERM, grace, KILL) and
// their tasks requeued by RECOVERY.
//
// # A deposed daemon
//
// A pid read from the database may be another daemon's run: one that took
// the database over while this one was paused past its lease. Each run
// records the lease generation it was claimed under; a leftover claimed
// under a newer generation than this daemon's is never signalled, and
// any other is signalled only after the store confirmed the lease
// (Store.ConfirmLease) immediately before. A round dispatches nothing
// while the lease is not confirmed (it is tried again FencedRetry later),
// a checkout the fence refuses to prepare or seal ends its run by
// RECOVERY, and a round that finds the lease lost makes Run stand down
// with the lease's error: the runs this daemon started are stopped, their
// ends refused, and the new owner closes them as leftovers.
package orchestrator
