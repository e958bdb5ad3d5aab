package main

import (
	"context"
	"sync"

	"golang.org/x/sync/errgroup"
)

// stages runs the daemon's long-running parts in stages that stop in
// order: when the context given to newStages ends, or any part fails, the
// first stage's parts are told to stop and awaited, then the second's, and
// so on. The daemon runs what takes work in (the API, Discord, hooks and
// workflow schedules) first, what does the work (the orchestrator) next,
// and what the work needs until it ends (the agents' RPC, the lease)
// last, so that no new work arrives while runs end and the lease is held
// until every writer has stopped.
type stages struct {
	g      *errgroup.Group
	failed context.Context // ends with the daemon's context or a part's failure
	base   context.Context // the daemon's context without its cancellation
	list   []*stage
}

// stage is one group of parts that stop together.
type stage struct {
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// newStages returns stages whose parts stop when ctx ends.
func newStages(ctx context.Context) *stages {
	g, failed := errgroup.WithContext(ctx)
	return &stages{g: g, failed: failed, base: context.WithoutCancel(ctx)}
}

// next opens the next stage: the parts added to it after this call stop
// after those of the stages opened before it.
func (s *stages) next() *stage {
	ctx, stop := context.WithCancel(s.base)
	st := &stage{ctx: ctx, stop: stop}
	s.list = append(s.list, st)
	return st
}

// run runs f(ctx) in the stage; ctx ends when the stage is stopped. An
// error from f stops every stage, in order.
func (st *stage) run(s *stages, f func(ctx context.Context) error) {
	st.wg.Add(1)
	s.g.Go(func() error {
		defer st.wg.Done()
		return f(st.ctx)
	})
}

// wait waits for the daemon's context to end or a part to fail, stops the
// stages in order, and returns the first failure.
func (s *stages) wait() error {
	s.g.Go(func() error {
		<-s.failed.Done()
		for _, st := range s.list {
			st.stop()
			st.wg.Wait()
		}
		return nil
	})
	return s.g.Wait()
}
