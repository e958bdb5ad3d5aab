// Package repo gives each agent its own git checkout of a project's
// repository and delivers finished work to the default branch.
//
// An agent's checkout lives at <checkout base>/<agent>/<repo> and is reused
// across tasks. Before each task it is fetched, its origin is checked
// against the project's repo (a checkout of another repository is refused),
// and the task branch aq/<task-id>-<slug> is checked out: the existing
// branch when an earlier attempt left one, else a new one from the default
// branch. Uncommitted changes left by a killed run are discarded (reset and
// clean); committed work on the task branch is kept for the retry.
//
// Sources: CLONE clones the URL (a local bare repository path works too);
// LINK clones the local repository at source_path, never touching the
// user's own checkout; INIT creates a bare origin repository with one empty
// commit (at source_path, or under the checkout base).
//
// Delivery (the fast path, without verification): the agent's uncommitted
// changes are committed on the task branch, the branch is merged with
// --no-ff into the default branch fetched from origin, and the result is
// pushed. A branch already contained in the default branch is not merged
// again, so delivery can be repeated after a crash. Pushing into a LINK
// repository's checked-out branch is refused by git; such projects need the
// verification and merge workflow.
package repo
