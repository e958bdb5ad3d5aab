package main

import (
	"context"
	"fmt"
	"io"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds ctl's runner commands (docs/runners.md, "The
// registry"): add, list, show, drain, resume and remove.

func (c *ctl) runnerAdd(ctx context.Context, args []string) error {
	fs := c.flagSet("runner add")
	var labels listFlag
	fs.Var(&labels, "label", "a `label` of the runner's machine, such as gpu or arm64 (comma-separated, repeatable)")
	capacity := fs.Int("capacity", 0, "the most runs it holds at once (`N`, 0 to 1000; 0: as many as it has agents)")
	pos, err := c.parse(fs, args, "NAME")
	if err != nil {
		return err
	}
	r, token, err := c.client.AddRunner(ctx, pos[0], labels, *capacity)
	if err != nil {
		return err
	}
	return c.emit(api.RunnerAdded{Runner: r, Token: token}, func(w io.Writer) { printRunnerAdded(w, r, token) })
}

func (c *ctl) runnerList(ctx context.Context, args []string) error {
	if _, err := c.parse(c.flagSet("runner list"), args); err != nil {
		return err
	}
	rs, err := c.client.ListRunners(ctx)
	if err != nil {
		return err
	}
	return c.emit(api.RunnerList{Runners: rs}, func(w io.Writer) { printRunners(w, rs) })
}

func (c *ctl) runnerShow(ctx context.Context, args []string) error {
	pos, err := c.parse(c.flagSet("runner show"), args, "NAME")
	if err != nil {
		return err
	}
	r, err := c.client.GetRunner(ctx, pos[0])
	if err != nil {
		return err
	}
	return c.emit(r, func(w io.Writer) { printRunner(w, r) })
}

// runnerStateCommand drains a runner (no new run; those it holds go on)
// or makes it ACTIVE again.
func runnerStateCommand(drain bool) func(*ctl, context.Context, []string) error {
	return func(c *ctl, ctx context.Context, args []string) error {
		name := "runner resume"
		if drain {
			name = "runner drain"
		}
		pos, err := c.parse(c.flagSet(name), args, "NAME")
		if err != nil {
			return err
		}
		set := c.client.ResumeRunner
		if drain {
			set = c.client.DrainRunner
		}
		r, err := set(ctx, pos[0])
		if err != nil {
			return err
		}
		return c.emit(r, func(w io.Writer) { printRunners(w, []models.Runner{r}) })
	}
}

func (c *ctl) runnerRemove(ctx context.Context, args []string) error {
	pos, err := c.parse(c.flagSet("runner remove"), args, "NAME")
	if err != nil {
		return err
	}
	if err := c.client.RemoveRunner(ctx, pos[0]); err != nil {
		return err
	}
	return c.emit(map[string]string{"removed": pos[0]}, func(w io.Writer) {
		fmt.Fprintf(w, "runner %s removed with its agents; its token no longer works\n", clean(pos[0]))
	})
}
