package main

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
)

// TestStagesStopInOrder: each stage's parts have returned before the next
// stage is told to stop, whether the daemon's context ends or a part of
// the last stage fails.
func TestStagesStopInOrder(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		failing bool // the last stage's part fails instead of ctx ending
	}{{"context ends", false}, {"a part fails", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var mu sync.Mutex
			var stopped []string
			part := func(name string) func(context.Context) error {
				return func(ctx context.Context) error {
					<-ctx.Done()
					mu.Lock()
					stopped = append(stopped, name)
					mu.Unlock()
					return nil
				}
			}
			s := newStages(ctx)
			front, work, back := s.next(), s.next(), s.next()
			front.run(s, part("api"))
			front.run(s, part("bot"))
			work.run(s, part("orchestrator"))
			fail := make(chan struct{})
			back.run(s, func(ctx context.Context) error {
				select {
				case <-fail:
					return boom
				case <-ctx.Done():
				}
				return part("lease")(ctx)
			})
			if tc.failing {
				close(fail)
			} else {
				cancel()
			}
			err := s.wait()
			if tc.failing != errors.Is(err, boom) {
				t.Fatalf("wait = %v, want the failure only when a part failed", err)
			}
			want := 3
			if !tc.failing {
				want = 4
			}
			if len(stopped) != want || !slices.Contains(stopped[:2], "api") || !slices.Contains(stopped[:2], "bot") ||
				stopped[2] != "orchestrator" {
				t.Fatalf("stopped in order %v, want api and bot, then orchestrator, then lease", stopped)
			}
		})
	}
}
