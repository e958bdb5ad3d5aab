package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds ctl's hook commands: list, show, create, edit, enable,
// disable, delete, fire, and the hook runs.

func (c *ctl) hookList(ctx context.Context, args []string) error {
	fs := c.flagSet("hook list")
	project := fs.String("project", "", "only hooks of project `id`")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	hs, err := c.client.ListHooks(ctx, *project)
	if err != nil {
		return err
	}
	return c.emit(api.HookList{Hooks: hs}, func(w io.Writer) { printHooks(w, hs) })
}

func (c *ctl) hookShow(ctx context.Context, args []string) error {
	pos, err := c.parse(c.flagSet("hook show"), args, "ID")
	if err != nil {
		return err
	}
	h, err := c.client.GetHook(ctx, pos[0])
	if err != nil {
		return err
	}
	return c.emit(h, func(w io.Writer) { printHook(w, h) })
}

func (c *ctl) hookCreate(ctx context.Context, args []string) error {
	fs := c.flagSet("hook create")
	file := fs.String("file", "", "read the hook from a JSON `file` (id, project_id, name, trigger, context_steps, prompt_template, ...)")
	project := fs.String("project", "", "the hook's project `id`, in place of the file's project_id")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	if *file == "" {
		return usagef("ctl hook create: --file is required")
	}
	var spec models.HookSpec
	if err := readStrict(*file, &spec); err != nil {
		return fmt.Errorf("read hook: %w", err)
	}
	if *project != "" {
		spec.ProjectID = *project
	}
	if spec.ProjectID == "" {
		return usagef("ctl hook create: %s names no project_id: give --project ID", *file)
	}
	h, err := c.client.CreateHook(ctx, spec)
	if err != nil {
		return err
	}
	return c.emit(h, func(w io.Writer) { printHook(w, h) })
}

func (c *ctl) hookEdit(ctx context.Context, args []string) error {
	fs := c.flagSet("hook edit")
	file := fs.String("file", "", "read the changes from a JSON `file` (name, enabled, trigger, context_steps, prompt_template, ...)")
	pos, err := c.parse(fs, args, "ID")
	if err != nil {
		return err
	}
	if *file == "" {
		return usagef("ctl hook edit: --file is required")
	}
	var patch models.HookPatch
	if err := readStrict(*file, &patch); err != nil {
		return fmt.Errorf("read hook changes: %w", err)
	}
	h, err := c.client.UpdateHook(ctx, pos[0], patch)
	if err != nil {
		return err
	}
	return c.emit(h, func(w io.Writer) { printHook(w, h) })
}

// hookEnableCommand returns the handler of "hook enable|disable".
func hookEnableCommand(enabled bool) ctlHandler {
	return func(c *ctl, ctx context.Context, args []string) error {
		name := "hook disable"
		if enabled {
			name = "hook enable"
		}
		pos, err := c.parse(c.flagSet(name), args, "ID")
		if err != nil {
			return err
		}
		h, err := c.client.UpdateHook(ctx, pos[0], models.HookPatch{Enabled: &enabled})
		if err != nil {
			return err
		}
		return c.emit(h, func(w io.Writer) { printHooks(w, []models.Hook{h}) })
	}
}

func (c *ctl) hookDelete(ctx context.Context, args []string) error {
	pos, err := c.parse(c.flagSet("hook delete"), args, "ID")
	if err != nil {
		return err
	}
	if err := c.client.DeleteHook(ctx, pos[0]); err != nil {
		return err
	}
	return c.emit(map[string]string{"deleted": pos[0]}, func(w io.Writer) {
		fmt.Fprintf(w, "hook %s deleted with its runs\n", clean(pos[0]))
	})
}

func (c *ctl) hookFire(ctx context.Context, args []string) error {
	fs := c.flagSet("hook fire")
	eventFile := fs.String("event-file", "", "run with the event of a JSON `file` (type, task_id, title, ...), to try an event hook")
	actor := fs.String("actor", "", "`name` recorded as who fired it (default $USER, else the account's name, else "+defaultActor+")")
	pos, err := c.parse(fs, args, "ID")
	if err != nil {
		return err
	}
	var req api.FireRequest
	if *eventFile != "" {
		var ev models.HookEvent
		if err := readStrict(*eventFile, &ev); err != nil {
			return fmt.Errorf("read event: %w", err)
		}
		req.Event = &ev
	}
	req.Actor = *actor
	if req.Actor == "" {
		req.Actor = c.userName()
	}
	if req.Actor == "" {
		req.Actor = defaultActor
	}
	run, err := c.client.FireHook(ctx, pos[0], req)
	if err != nil {
		return err
	}
	return c.emit(run, func(w io.Writer) {
		fmt.Fprintf(w, "hook %s fired: run %s %s\n", clean(run.HookID), clean(run.ID), clean(string(run.Status)))
		if run.SkippedReason != nil {
			fmt.Fprintf(w, "skipped: %s\n", clean(*run.SkippedReason))
		}
	})
}

func (c *ctl) hookRuns(ctx context.Context, args []string) error {
	fs := c.flagSet("hook runs")
	status := fs.String("status", "", "only runs in `status`: running, completed, failed or skipped")
	limit := fs.Int("limit", 0, "at most `n` runs (newest first)")
	pos, err := c.parse(fs, args, "ID")
	if err != nil {
		return err
	}
	if *limit < 0 {
		return usagef("ctl hook runs: --limit must not be negative")
	}
	runs, err := c.client.HookRuns(ctx, pos[0], strings.ToLower(*status), *limit)
	if err != nil {
		return err
	}
	return c.emit(api.HookRunList{Runs: runs}, func(w io.Writer) { printHookRuns(w, runs) })
}

func (c *ctl) hookRun(ctx context.Context, args []string) error {
	pos, err := c.parse(c.flagSet("hook run"), args, "RUN_ID")
	if err != nil {
		return err
	}
	run, err := c.client.GetHookRun(ctx, pos[0])
	if err != nil {
		return err
	}
	return c.emit(run, func(w io.Writer) { printHookRun(w, run) })
}
