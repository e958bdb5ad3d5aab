// Package landing verifies the work of a VERIFYING task and lands it: the
// checks of AUTO_TEST, the review of QA_AGENT, a person's decision of
// HUMAN, the merge into the default branch, the pull request, approval
// without a pull request, and a landing that waits for a linked
// repository's checkout (docs/semantics.md says what each does).
//
// The orchestrator drives it. It creates one [Lander] with [New], giving
// it the store ([Store]: only what landing uses), the workspaces
// ([Workspaces]: stage, deliver, clean up), the GitHub side
// ([PullRequests], optional) and itself as the [Host]: the loop to wake,
// the runs under way, the agents that rest, and the start of a reviewer's
// run. Then:
//
//   - a work run that ends in VERIFYING calls [Lander.Verify] for its task
//     (and a restart [Lander.Advance] for each VERIFYING task): the one
//     entry point that carries a task's verification as far as it goes
//     without waiting, from the phase recorded on its verification;
//   - each round calls [Lander.DispatchReviews] (before scheduling, so
//     that a review gets the next free slot) and [Lander.Resume];
//   - a reviewer's run reports its end through [Lander.ReviewFailed] or
//     [Lander.ReviewApproved];
//   - an admin event that takes a task away calls [Lander.Cancel];
//     shutdown calls [Lander.Shutdown] and [Lander.Wait].
//
// People act through [Lander.Approve], [Lander.Reject] and [Lander.Land];
// GitHub through [Lander.WatchPullRequests] and [Lander.PokePullRequest].
// [Lander.WatchLandings] lands a waiting landing by itself once the
// linked working tree that held it is clean.
//
// # Phases
//
// A task's verification records its phase (models.VerificationPhase) and
// a note (models.VerificationNote) before each step that may be cut
// short, so that a restart resumes it: checks, review (waiting for or
// running a reviewer; the note says why it waits), human (waiting for a
// person), deliver (the note's event — VERIFY_PASSED or HUMAN_APPROVED —
// and reason complete the task once merged), approval (AWAITING_APPROVAL
// without a pull request), approved and rejected (a person's decision,
// the note's actor and text, not yet carried out) and landing (the merge
// waits for a linked repository; the note is the one of the phase it
// came from). A decision is taken once: the phase moves by
// compare-and-set (SwitchVerification, SwitchApproval), so that of two
// people deciding at once one wins.
//
// One goroutine verifies a task at a time; another that starts meanwhile
// waits for it. Its context ends at shutdown, or when an admin event takes
// the task away; the store is written without it, so that what was
// decided is recorded. A verification overtaken by a later attempt
// decides nothing. A caller that waits for a verification to answer a
// person (Approve, Reject, Land) reads the task while that verification
// still holds it, never as a later one has it halfway.
package landing
