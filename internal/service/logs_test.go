package service

import (
	"sync"
	"testing"
)

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestChangeFeedKeepsStateAndOutputApart: a run's output wakes only the
// followers of its task's log, never the waiters for a change of state
// (ctl watch, /changes); a change of state wakes those waiters.
func TestChangeFeedKeepsStateAndOutputApart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		act       func(f *Feed)
		wantSeq   uint64
		wantState bool
		wantA     bool
		wantWakes map[string]int
	}{
		{name: "another task's output", act: func(f *Feed) {
			for range 50 {
				f.Output("b")
			}
		}, wantWakes: map[string]int{"b": 1}},
		{name: "the task's output", act: func(f *Feed) { f.Output("a") }, wantA: true, wantWakes: map[string]int{"a": 2}},
		{name: "a change of state", act: func(f *Feed) { f.Notify() }, wantSeq: 1, wantState: true, wantWakes: map[string]int{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := NewFeed()
			var mu sync.Mutex
			wakes := map[string]int{}
			f.onWake = func(id string) { mu.Lock(); wakes[id]++; mu.Unlock() }
			seq, state := f.Changed()
			a1, done1 := f.LogChanged("a")
			defer done1()
			a2, done2 := f.LogChanged("a")
			defer done2()
			_, doneB := f.LogChanged("b")
			defer doneB()
			tt.act(f)
			if got, _ := f.Changed(); got-seq != tt.wantSeq {
				t.Errorf("changes of state: %d, want %d", got-seq, tt.wantSeq)
			}
			if closed(state) != tt.wantState {
				t.Errorf("a waiter for a change of state woken: %v, want %v", closed(state), tt.wantState)
			}
			if closed(a1) != tt.wantA || closed(a2) != tt.wantA {
				t.Errorf("the followers of a woken: %v %v, want %v", closed(a1), closed(a2), tt.wantA)
			}
			mu.Lock()
			defer mu.Unlock()
			for id, n := range tt.wantWakes {
				if wakes[id] != n {
					t.Errorf("followers of %s woken %d times, want %d", id, wakes[id], n)
				}
			}
			for id, n := range wakes {
				if _, ok := tt.wantWakes[id]; !ok {
					t.Errorf("followers of %s woken %d times, want 0", id, n)
				}
			}
		})
	}
}

// TestChangeFeedForgetsLeftWaits: a follower that stops waiting leaves no
// entry behind.
func TestChangeFeedForgetsLeftWaits(t *testing.T) {
	t.Parallel()
	f := NewFeed()
	_, done1 := f.LogChanged("a")
	_, done2 := f.LogChanged("a")
	done1()
	done1() // twice is harmless
	if len(f.logs) != 1 {
		t.Fatalf("%d tasks waited on after one of two followers left, want 1", len(f.logs))
	}
	done2()
	if len(f.logs) != 0 {
		t.Fatalf("%d tasks waited on after every follower left, want 0", len(f.logs))
	}
}
