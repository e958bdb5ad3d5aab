// Package hooks runs hooks: automations that fire on a schedule (periodic
// or cron), on a task lifecycle event of their project, or by hand; gather
// context in steps (files, git history, named read-only queries, allowed
// HTTP hosts and allowed commands); and may send a prompt to an
// OpenAI-compatible model whose tools can only create tasks, post to the
// project's channel and leave feedback on tasks.
//
// # Firing exactly once
//
// Every firing has a key: a schedule's is its scheduled time, an event's
// is the event's sequence number and type, a manual fire's is its instant.
// The store records at most one run per (hook, key), in the transaction
// that also checks the cooldown, the project's budget and the cap on runs
// running at once, so two passes racing each other (two ticks, a restart
// in the middle of a pass) fire a key once. A schedule's next time is
// derived from the last key it fired, so a restart neither repeats nor
// loses one; after downtime a schedule fires once for its latest missed
// time, its trigger_reason counting the others. A firing that finds the
// cap reached is not recorded and waits for a free place: a schedule stays
// due, an event stays unread. Events are read from the store's outbox of
// task notices after a persisted cursor.
//
// # A run
//
// The steps run in order, each result kept. A step whose skip_llm_if holds
// ends the run as skipped before any LLM call. The prompt is rendered from
// the template; a placeholder that names nothing the run has fails it. The
// model is called with the three tools until it answers without tool
// calls. max_tokens_per_run caps the tokens of all calls of a run, each
// counted from the endpoint's usage and booked in the token ledger against
// the project as it comes; a project over its budget_limit has its hooks
// skipped. Rate limits (429) and server failures are retried with
// back-off, honouring Retry-After, a bounded number of times.
//
// A tool call whose arguments do not hold is refused, and the model is
// told why ("error: title: …"): a title is one line of printable text of
// at most models.MaxTitleLen characters, a kind one line of at most
// models.MaxKindLen and a dedupe_key one line of at most
// models.MaxMetadataLen; a description or feedback is text (line breaks
// and tabs allowed, no other control character) of at most 8,000
// characters, a message of at most 4,000.
//
// Runs that a stop of the daemon left running are closed as failed when
// the engine starts.
package hooks
