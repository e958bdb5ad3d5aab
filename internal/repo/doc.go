// Package repo gives each agent its own git checkout of a project's
// repository, and verifies and merges the work done there.
//
// # Checkouts
//
// An agent has one checkout per repo, CheckoutPath: <checkout_base_path, or
// BaseDir/checkouts>/<agent>/<repo id>, reused across tasks. A project
// without a repo gets a plain scratch directory; every other method is a
// no-op for it (Stage returns the directory, Deliver reports Merged with the
// note "no repository").
//
//   - CLONE (a URL, or a local bare repository's path) is cloned once with
//     `git clone`. INIT first creates a daemon-owned bare origin with one
//     empty commit (at source_path, else BaseDir/origins/<repo id>.git),
//     then is a CLONE of it. Each Prepare fetches the origin (go-git) and
//     starts from origin/<default>; the clone's own <default> follows it.
//   - LINK (a local repository the user owns): the checkout is a `git
//     worktree add` of the user's repository. It shares the user's refs
//     (task and rescue branches appear there) and never touches the user's
//     own working tree, except that Deliver advances a clean tree that has
//     the default branch checked out. The default branch is the user's
//     <default>: every task branch starts from it, so work waiting to land
//     (see Deliver) is not in it yet, and the daemon holds the dependents
//     of such work back.
//   - LINK with in_place: the checkout is the user's repository directory
//     itself. Prepare refuses (CodeConflict) while its working tree has
//     uncommitted or untracked changes or an operation in progress (they are
//     the user's: never touched), and while another workspace of it has
//     not been Released: one run at a time. Nothing there is reset,
//     cleaned or rescued, and the tree is left on the task branch.
//
// Before use a checkout's origin is checked: a clone's `origin` remote must
// be the project's URL or path (compared without a trailing slash or .git
// suffix, local paths absolute with links resolved), a worktree's common git
// directory the user's repository's. A mismatch is a CodeConflict error that
// names the checkout, what it points at and what the project wants.
//
// # Prepare
//
// Under the checkout's lock, Prepare removes the lock files a killed git
// leaves (index.lock, HEAD.lock, …; in a worktree only its own, never the
// user's). A checkout found dirty (uncommitted or untracked changes, a
// merge, rebase, cherry-pick, revert or am in progress, left by a killed
// run) is never discarded silently: the operation is quit with its files
// kept, everything is committed on a new branch
// aq-rescue/<old branch without "aq/">-<UTC yyyymmddThhmmss> (returned in
// Workspace.Rescued), and the checkout is then reset and cleaned (ignored
// files too).
//
// The task branch is aq/<task-id>-<slug> (BranchName). A new one starts at
// the default branch's commit (Workspace.Base). An existing one (a retry) is
// checked out — in a CLONE/INIT checkout it is first taken from the
// integration repository when that holds a newer version, as when the last
// attempt ran on another agent and was staged; a LINK task branch checked
// out in another agent's worktree is detached there — and brought up to date
// with the default branch: `git rebase`; when the rebase conflicts it is
// aborted and `git merge --no-ff <default>` is started instead and left
// uncommitted, its conflicted files listed in Workspace.Conflicts (sorted)
// for the agent to resolve.
//
// # Seal
//
// After the agent exits, Seal requires the checkout to be on the task
// branch and refuses (CodeConflict, naming the files) while unmerged index
// entries remain or a file of Workspace.Conflicts still has a conflict
// marker line ("<<<<<<< ", ">>>>>>> ", or a line "======="). It commits
// everything left uncommitted ("<title> (<task id>)"), which concludes a
// merge in progress, and returns the files the branch changes relative to
// its merge base with the default branch.
//
// # Stage, Deliver, Cleanup
//
// Each repo has a daemon-owned bare integration repository,
// BaseDir/integration/<repo id>.git. Stage fetches into it the origin's
// default branch (the CLONE url, the INIT origin, the LINK repository) and
// the task branch (from the agent's checkout; for LINK from the user's
// repository), merges them without a working tree (`git merge-tree
// --write-tree`; a conflict is a *models.ConflictError), commits the merge
// ("Merge <task id>: <title>", `git commit-tree`) as refs/aq/staged/<task>,
// and checks it out detached at BaseDir/verify/<task> (recreated). It
// returns that directory, `git diff <default>...<branch>` (cut at 200 KiB
// with a marker line) and the changed files. A branch without changes
// stages the default branch itself.
//
// Deliver fetches again; a task branch the default branch already contains
// is Merged (Deliver may be repeated after a crash). Otherwise it merges as
// Stage does (reusing the staged commit when the default branch has not
// moved) and moves the origin's default branch only from the commit it
// merged into, a compare-and-swap: when the branch moved meanwhile it merges
// again on the new tip, up to 3 times. A local origin (INIT, LINK, a CLONE
// path) is updated without a push: the merge's objects are fetched into it
// from the integration repository and the branch is moved with `git
// update-ref <new> <old>`, so none of its hooks run. A remote origin is
// pushed to with go-git, requiring the remote branch to still be at the
// old commit. A LINK repository whose default branch is checked out in one
// of its working trees (or being rebased there; a registered tree whose
// directory is gone does not count) is advanced with that tree,
// as `git pull --ff-only` would: the tree must be on the branch at the
// commit merged into, with no operation in progress and no change to a
// tracked file in the index or the tree (untracked files do not count);
// then `git merge --ff-only <merge>` runs in it, which moves the branch,
// the index and the files together and refuses to overwrite anything of
// the user's (an untracked file in the way among them). When the tree has
// local changes, is checked out in several trees, or git refuses, nothing
// of the user's is touched: Deliver returns Merged false and
// Delivery.Waiting saying why (naming up to five changed files), and the
// task branch stays; Deliver is repeated once the user committed or
// stashed. A local CLONE origin with its default branch checked out is a
// CodeConflict error: it should be bare.
//
// Cleanup removes the verification worktree and refs/aq/staged/<task>; when
// the task was merged it also deletes the task branch in the integration
// repository, in the checkout (a daemon checkout left clean on it is
// detached first, with refs/aq/detached naming that commit so that go-git
// can still fetch from the checkout — another task's branch waiting for
// approval lives there; the user's in_place tree keeps it) when the delivered
// default branch contains it, and for LINK in the user's repository when
// its default branch contains it. What is already gone is no error.
//
// # Removing what is no longer needed
//
// RemoveCheckout removes a removed agent's worktree of a LINK repository
// (`git worktree remove`) unless it has uncommitted or untracked changes;
// RemoveTaskBranch deletes a deleted task's branch from a LINK repository
// when the user's default branch contains it or has the same files, and
// not while it is checked out in the user's tree or in a daemon worktree
// with changes (one left clean is detached first). What either keeps, it
// returns with the reason; a clone (CLONE, INIT) is never removed.
//
// # Tools and safety
//
// go-git reads configuration, remotes, refs and commits, computes changed
// files, and fetches (for a local source it runs git-upload-pack, which
// executes nothing a repository's configuration names). The git command
// line does what go-git lacks or does differently from git: clone,
// worktrees, status, add and commit of working trees, rebase, merge,
// merge-tree, commit-tree, update-ref, reset and clean. Every git command
// runs through one runner: hooks and fsmonitor off, no user or system
// configuration, a fixed identity, a scrubbed environment, a timeout, its
// own process group. Text a person or an agent wrote (a task's title in a
// commit or merge message) reaches git on its standard input (`-F -`),
// never as an argument, where it could read as an option or exceed the
// system's limit on one argument's length.
//
// Credentials never travel in a URL. A GitHub token (Config.Credentials)
// goes in an http.extraHeader given through git's environment, or go-git's
// basic auth; other hosts authenticate with SSH keys or a git credential
// helper. A project whose repo.url carries credentials (only an older
// daemon stored one: validation refuses them now) is refused by Prepare,
// Stage, Diff, PushBranch, Deliver, Cleanup, HookCheckout and GitHub's
// RepoOf before anything runs, with a CodeInvalid error that names the
// project, shows the URL redacted (https://***@host/…) and says what to do.
// Errors that quote a URL or git's output (gitError, fetch, push, clone)
// pass through models.RedactURL, as does a checkout's origin an older
// daemon left with credentials. Config.CAFile (a runner's, whose daemon
// may have a certificate of its own authority) is given to git as
// http.sslCAInfo and to go-git's fetches and pushes as a bundle added to
// the system's authorities.
//
// # Crashes and repairs
//
// The daemon may be killed at any point; what it writes into its git
// repositories is whole or absent. go-git's fetch writes references and
// packs through a storage that writes each to a temporary file, synced, and
// renames it into place: a pack's index first, then the pack (go-git finds
// packs by their .pack, git by their .idx, and each ignores the other
// half alone). go-git's own writer wrote the index in place and kept one
// that existed, so a kill left an empty pack-<hash>.idx that broke every
// later read of the repository ("EOF"). The git command line writes
// atomically by itself; a killed command leaves lock files, which Prepare
// removes.
//
// When an operation fails (other than a refusal: a models.Error or a
// merge conflict), the packs of the repositories it used are checked: each
// index is read whole (its checksum verified), each pack's header and
// trailer compared with its index. A damaged pack is mended as its
// repository's owner allows, the repair is logged (a warning naming the
// repository and the problem, with the repo, project, task and agent),
// and the operation is run again, once:
//
//   - A whole pack with a missing or damaged index gets a new index, in
//     every daemon-owned repository; an unreadable index without a pack is
//     removed.
//   - A pack that is itself damaged (cut short, corrupt) is moved to
//     aq-damaged-packs in the git directory, and then: the integration
//     repository is rebuilt, keeping every reference whose history is
//     whole (staged merges, task branches) and its verification worktrees;
//     what it lost is fetched again when needed (the default branch from
//     the origin, a task branch from its checkout; a staged merge is merged
//     again). An agent's clone, before a run (Prepare), is set aside as
//     <checkout>.damaged-<UTC time>, its objects fetched again from the
//     origin and the integration repository, its uncommitted work rescued
//     there as Prepare does (Workspace.Rescued names the branch), and it is
//     cloned again with its branches carried over; the copy set aside is
//     removed when all of it was carried over, and otherwise kept and
//     named in the log. An agent's clone a run may be using (Seal, Stage,
//     Deliver, Cleanup) is refilled in place from the origin and the
//     integration repository; unless that makes it whole it is marked
//     (aq-damaged in its git directory) and cloned again by its next
//     Prepare. A hook checkout is removed and cloned again.
//   - An INIT origin, the only copy of the project's delivered work, and
//     the user's repositories (LINK, a CLONE path) are never rebuilt: the
//     error (CodeConflict) names the repository, the damage and the command
//     that repairs it (`git index-pack` for a whole pack); the user's
//     repository is not changed at all.
//
// # Concurrency
//
// A per-checkout lock serialises Prepare, Seal and Cleanup of one checkout
// (an in_place repository is one checkout for all agents); a per-repo lock
// serialises Stage, Deliver and every use of the integration repository; a
// per-origin lock creates an INIT origin once. Locks are taken checkout
// first, then repo. A repair after a failed Prepare runs under both; one
// after Stage, Deliver, Diff, PushBranch or Cleanup under the repo lock;
// one after Seal under the checkout lock. Agents on one project work
// concurrently in their own checkouts.
//
// # The lease's fence
//
// Another daemon may take the database over from this one (paused past
// its lease) and use the same checkouts and repositories. With
// Config.Fence set (the daemon sets the store's ConfirmLease), every
// operation that may change a repository or a checkout asks it once its
// locks are held, and again before each git command that writes (any but
// a read such as status, diff, log or rev-parse), each fetch and push, the
// replacement of a cloned checkout, the removal of a verification
// checkout, a repair, and a pull request opened or merged or a remote
// branch deleted through GitHub's API. A refusal is returned as is
// (models.Fenced tells it), never taken for damage: nothing is repaired,
// reset or removed.
package repo
