package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// BenchmarkDurableEvents measures durable agent reports: each operation is
// one progress notice written through Store.Notify, the call an agent's
// progress report ends with, answered once it is on disk. It runs with one
// reporter and with eight at once, on a database in the test's temporary
// directory (on the disk, not tmpfs, where a sync is free), and reports
// events/s and the syncs of the log per event. The disk=13ms cases add
// 13 ms to each sync of the log, as a slow disk takes: the sharing of
// syncs, not this disk, then sets the rate.
func BenchmarkDurableEvents(b *testing.B) {
	for _, slow := range []time.Duration{0, 13 * time.Millisecond} {
		disk := "this"
		if slow > 0 {
			disk = slow.String()
		}
		for _, reporters := range []int{1, 8} {
			b.Run(fmt.Sprintf("disk=%s/reporters=%d", disk, reporters), func(b *testing.B) {
				s := storetest.Open(b)
				storetest.Project(b, s, "p")
				ids := storetest.Tasks(b, s, "p", models.BatchTask{LocalID: "t", Title: "t"})
				if slow > 0 {
					store.SetSyncForTest(s, func(next func() error) func() error {
						return func() error {
							time.Sleep(slow) // the disk's latency, not a synchronisation
							return next()
						}
					}, nil)
				}
				reportEvents(b, s, ids["t"], reporters)
			})
		}
	}
}

// reportEvents has reporters write b.N progress notices of task taskID
// through s at once, and reports events/s and syncs/event.
func reportEvents(b *testing.B, s *store.Store, taskID string, reporters int) {
	ctx := context.Background()
	var next atomic.Int64
	var failed atomic.Pointer[error]
	syncs := s.Syncs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for r := range reporters {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				n := models.NewProgressNotice("p", models.ProgressNotice{TaskID: taskID, RunID: int64(r + 1),
					Message: fmt.Sprintf("step %d", i)})
				if err := s.Notify(ctx, fmt.Sprintf("progress:%d:%d", r, i), n); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(s.Syncs()-syncs)/float64(b.N), "syncs/event")
}

// BenchmarkFsync measures this disk's fsync as a commit meets it: a page
// appended to a file in the test's temporary directory, then fsync.
func BenchmarkFsync(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "sync"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	page := make([]byte, 4096)
	b.ResetTimer()
	for range b.N {
		if _, err := f.Write(page); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}
