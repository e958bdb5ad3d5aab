// Package retention is the pruner: it keeps the database and the run
// directory from growing for ever under a steady workload.
//
// Each pass (Pruner.Pass, run every Config.Interval by Pruner.Run on the
// daemon's one clock) applies the retention windows of the configuration:
//
//   - finished tasks last changed before the archive window move to the
//     archive (store.ArchiveTasks), where they stay readable; their run
//     directories (RunDir/<task>) are deleted once they have;
//   - the files of attempts that ended before the run-log window
//     (RunDir/<task>/<attempt>.{log,prompt,state}, and a review's
//     <attempt>.review-<run>.*) are deleted, and the run records it;
//   - delivered notices, finished hook runs and ended workflow runs older
//     than their windows are deleted, and so are tasks archived longer
//     than the archive's window.
//
// Every step works in bounded batches (Config.Batch rows), one short write
// transaction each, so the writer is released between batches and no
// pruning transaction holds it for more than a few milliseconds: the work
// of the daemon interleaves with a long backlog's pruning. A window of
// zero turns its step off. The token ledger is never pruned.
package retention
