// Package retention is the pruner: it keeps the database and the run
// directory from growing for ever under a steady workload.
//
// Each pass (Pruner.Pass, run every Config.Interval by Pruner.Run on the
// daemon's one clock) applies the retention windows of the configuration:
//
//   - finished tasks last changed before the archive window move to the
//     archive (store.ReadArchiveBatch, store.WriteArchiveBatch), where
//     they stay readable; their run directories (RunDir/<task>) are
//     deleted once they have;
//   - the files of attempts that ended before the run-log window
//     (RunDir/<task>/<attempt>.{log,prompt,state}, and a review's
//     <attempt>.review-<run>.*) are deleted, and the run records it;
//   - delivered notices, finished hook runs and ended workflow runs older
//     than their windows are deleted, and so are tasks archived longer
//     than the archive's window.
//
// Every step works in bounded batches (Config.Batch tasks to archive,
// RowsPerTask times as many rows to delete), one short write transaction
// each, so the writer is released between batches and no pruning
// transaction holds it for more than a few milliseconds. A batch of tasks
// to archive is read and encoded without the writer
// (store.ReadArchiveBatch); its write (store.WriteArchiveBatch) only
// checks, inserts and deletes, and commits without waiting for the disk
// (a batch lost in a power cut is archived again). After each write the
// pruner copies the write-ahead log into the database file off the writer
// (a passive checkpoint) and pauses, so that it holds the writer at most
// Config.Duty of the time: the daemon's own writes rarely wait behind it
// while a long backlog drains. A window of zero turns its step off. The
// token ledger is never pruned. Files are deleted only after the store
// confirmed the daemon's lease (Store.ConfirmLease): a daemon another has
// taken the database over from deletes nothing.
package retention
