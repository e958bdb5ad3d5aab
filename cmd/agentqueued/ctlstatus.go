package main

import (
	"context"
	"fmt"
	"io"

	"github.com/agentqueued/agentqueued/internal/clock"
)

// This file holds ctl's reports of the daemon: the budget, the status
// overview, the desk and the health check.

func (c *ctl) budget(ctx context.Context, args []string) error {
	if _, err := c.parse(c.flagSet("budget"), args); err != nil {
		return err
	}
	b, err := c.client.Budget(ctx)
	if err != nil {
		return err
	}
	return c.emit(b, func(w io.Writer) { printBudget(w, b) })
}

// status prints the daemon's overview: projects and their queues, agents
// and what each is doing, what waits on a person, the budget.
func (c *ctl) status(ctx context.Context, args []string) error {
	if _, err := c.parse(c.flagSet("status"), args); err != nil {
		return err
	}
	o, err := c.client.Status(ctx)
	if err != nil {
		return err
	}
	now := clock.Or(c.m.ctlClock).Now()
	return c.emit(o, func(w io.Writer) { printStatus(w, now, o) })
}

// desk prints what waits on a person, of every project or of one, each
// item with the command that ends its wait.
func (c *ctl) desk(ctx context.Context, args []string) error {
	fs := c.flagSet("desk")
	project := fs.String("project", "", "only the items of project `P`")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	d, err := c.client.Desk(ctx, *project)
	if err != nil {
		return err
	}
	now := clock.Or(c.m.ctlClock).Now()
	return c.emit(d, func(w io.Writer) { printDesk(w, now, d.Items, d.Truncated) })
}

func (c *ctl) health(ctx context.Context, args []string) error {
	if _, err := c.parse(c.flagSet("health"), args); err != nil {
		return err
	}
	h, err := c.client.Health(ctx)
	if err != nil {
		return err
	}
	return c.emit(h, func(w io.Writer) { fmt.Fprintf(w, "%s %s\n", h.Status, c.client.BaseURL()) })
}
