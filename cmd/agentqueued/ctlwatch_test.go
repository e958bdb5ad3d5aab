package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
)

// TestWatchCoalescesABurstOfChanges: ctl watch draws no view sooner than
// WatchMinRedraw after the last one; the changes made meanwhile are shown
// together in the next view, and leave no redraw owed behind them. Its
// clock is injected: time stands still and the test decides when the
// wait is over.
func TestWatchCoalescesABurstOfChanges(t *testing.T) {
	t.Parallel()
	d, err := startMain(t, nil, "run", "--data-dir", filepath.Join(t.TempDir(), "data"), "--listen", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, addr := d.watch.Context(), d.m.Addr()
	c, err := api.NewClient("http://"+addr, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateProject(ctx, models.ProjectSpec{ID: "web"}.Project()); err != nil {
		t.Fatal(err)
	}
	add := func(n int) {
		t.Helper()
		for i := range n {
			b := models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{{LocalID: "t", Title: fmt.Sprintf("Task %d", i)}}}
			if _, err := c.CreateTasks(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
	}

	wrote := make(chan struct{}, 1)
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	out := &syncBuffer{onWrite: func([]byte) {
		d.watch.Progress("ctl watch printed")
		select {
		case wrote <- struct{}{}:
		default:
		}
	}}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() {
		var stderr syncBuffer
		m := NewMain([]string{"ctl", "--addr", "http://" + addr, "watch", "--project", "web", "--interval", "5m"}, out, &stderr, envOf(nil))
		m.ctlClock = clk
		done <- m.Exec(wctx)
	}()
	defer func() {
		stop()
		<-done
	}()
	views := func() int { return strings.Count(out.String(), "agentqueued watch:") }
	// next waits for the watch to print views views in all or to wait
	// before its next one, whichever comes first; it answers whether it waits.
	next := func(what string, want int) bool {
		t.Helper()
		for views() < want {
			select {
			case <-wrote:
			case d := <-clk.Armed():
				if d != WatchMinRedraw {
					t.Fatalf("the watch waits %s before its next view, want %s", d, WatchMinRedraw)
				}
				return true
			case <-ctx.Done():
				t.Fatalf("waiting for %s: %v\n%s", what, d.watch.Err(), out.String())
			}
		}
		return false
	}
	next("the first view", 1)

	add(1)
	if !next("the wait after a change", 2) {
		t.Fatalf("the watch drew a view at once after a change, want it to wait %s:\n%s", WatchMinRedraw, out.String())
	}
	add(4) // the rest of the burst, while the watch waits
	clk.Advance(WatchMinRedraw)
	if next("the second view", 2) {
		t.Fatal("the watch waited again before drawing the burst")
	}
	for !strings.Contains(out.String(), "Unfinished tasks (5):") {
		if next("the whole burst in the second view", 3) || views() > 2 {
			t.Fatalf("the burst of five tasks was not shown in one view:\n%s", out.String())
		}
	}
	add(1) // one more change: the watch waits for it, with no redraw owed
	if !next("the wait after one more change", 3) {
		t.Fatalf("the watch drew a third view without waiting:\n%s", out.String())
	}
	if n := views(); n != 2 {
		t.Fatalf("the watch drew %d views for two rounds of changes, want 2:\n%s", n, out.String())
	}
}
