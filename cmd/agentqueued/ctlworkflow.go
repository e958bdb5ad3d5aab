package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/workflow"
)

// This file holds ctl's workflow commands and those of workflow runs.

func (c *ctl) workflowList(ctx context.Context, args []string) error {
	fs := c.flagSet("workflow list")
	project := fs.String("project", "", "only workflows of project `id`")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	ws, err := c.client.ListWorkflows(ctx, *project)
	if err != nil {
		return err
	}
	return c.emit(api.WorkflowList{Workflows: ws}, func(w io.Writer) { printWorkflows(w, ws) })
}

func (c *ctl) workflowShow(ctx context.Context, args []string) error {
	pos, err := c.parse(c.flagSet("workflow show"), args, "NAME")
	if err != nil {
		return err
	}
	wf, err := c.client.GetWorkflow(ctx, pos[0])
	if err != nil {
		return err
	}
	return c.emit(wf, func(w io.Writer) { printWorkflow(w, wf) })
}

func (c *ctl) workflowAdd(ctx context.Context, args []string) error {
	fs := c.flagSet("workflow add")
	file := fs.String("file", "", "the workflow document, a YAML or JSON `file` (sent as is; a workflow of its name is replaced)")
	project := fs.String("project", "", "the workflow's project `id`, in place of the document's project (only that key is changed)")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	if *file == "" {
		return usagef("ctl workflow add: --file is required")
	}
	doc, err := os.ReadFile(*file)
	if err != nil {
		return fmt.Errorf("read workflow: %w", err)
	}
	if *project != "" {
		if doc, err = workflow.SetProject(doc, *project); err != nil {
			return fmt.Errorf("%s: %w", *file, err)
		}
	}
	wf, created, err := c.client.SaveWorkflow(ctx, doc)
	if err != nil {
		return inFile(err, *file)
	}
	verb := "replaced"
	if created {
		verb = "created"
	}
	return c.emit(wf, func(w io.Writer) {
		fmt.Fprintf(w, "workflow %s %s\n\n", clean(wf.Name), verb)
		printWorkflow(w, wf)
	})
}

// inFile names the file instead of the request in the lines of an invalid
// document's error ("request:8:18: ..." becomes "FILE:8:18: ...").
func inFile(err error, file string) error {
	var me *models.Error
	if !errors.As(err, &me) || me.Code != models.CodeInvalid {
		return err
	}
	lines := strings.Split(me.Message, "\n")
	changed := false
	for i, l := range lines {
		if rest, ok := strings.CutPrefix(l, api.WorkflowDocumentName+":"); ok {
			lines[i], changed = file+":"+rest, true
		}
	}
	if !changed {
		return err
	}
	return &models.Error{Code: me.Code, Message: strings.Join(lines, "\n"), Err: me.Err}
}

func (c *ctl) workflowDelete(ctx context.Context, args []string) error {
	pos, err := c.parse(c.flagSet("workflow delete"), args, "NAME")
	if err != nil {
		return err
	}
	if err := c.client.DeleteWorkflow(ctx, pos[0]); err != nil {
		return err
	}
	return c.emit(map[string]string{"deleted": pos[0]}, func(w io.Writer) {
		fmt.Fprintf(w, "workflow %s deleted (its runs stay)\n", clean(pos[0]))
	})
}

func (c *ctl) workflowRun(ctx context.Context, args []string) error {
	fs := c.flagSet("workflow run")
	actor := fs.String("actor", "", "`name` recorded as who started the run (default $USER, else the account's name, else "+defaultActor+")")
	inputs := mapFlag{}
	fs.Var(inputs, "input", "a value for one of the workflow's inputs, `name=value` (repeatable; the defaults fill the rest)")
	pos, err := c.parse(fs, args, "NAME")
	if err != nil {
		return err
	}
	run, err := c.client.StartRunWith(ctx, pos[0], c.actorOf(*actor), inputs)
	if err != nil {
		return err
	}
	return c.emit(run, func(w io.Writer) {
		fmt.Fprintf(w, "workflow %s: run %s started\n\n", clean(run.Workflow), clean(run.ID))
		printWorkflowRun(w, run)
	})
}

func (c *ctl) workflowSchedule(ctx context.Context, args []string) error {
	pos, err := c.parse(c.flagSet("workflow schedule"), args, "NAME", "on|off")
	if err != nil {
		return err
	}
	var enabled bool
	switch strings.ToLower(pos[1]) {
	case "on":
		enabled = true
	case "off":
	default:
		return usagef("ctl workflow schedule: want on or off, got %q", pos[1])
	}
	wf, err := c.client.SetWorkflowSchedule(ctx, pos[0], enabled)
	if err != nil {
		return err
	}
	return c.emit(wf, func(w io.Writer) { printWorkflows(w, []models.Workflow{wf}) })
}

func (c *ctl) runList(ctx context.Context, args []string) error {
	fs := c.flagSet("run list")
	workflow := fs.String("workflow", "", "only runs of workflow `name`")
	project := fs.String("project", "", "only runs of project `id`")
	status := fs.String("status", "", "only runs in `status`: pending, running, success, failed or cancelled")
	limit := fs.Int("limit", 0, "at most `n` runs (newest first)")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	if *limit < 0 {
		return usagef("ctl run list: --limit must not be negative")
	}
	runs, err := c.client.ListWorkflowRuns(ctx, models.RunFilter{Workflow: *workflow, ProjectID: *project,
		Status: models.WorkflowRunStatus(strings.ToLower(*status)), Limit: *limit})
	if err != nil {
		return err
	}
	return c.emit(api.WorkflowRunList{Runs: runs}, func(w io.Writer) { printWorkflowRuns(w, runs) })
}

func (c *ctl) runShow(ctx context.Context, args []string) error {
	pos, err := c.parse(c.flagSet("run show"), args, "ID")
	if err != nil {
		return err
	}
	run, err := c.client.GetWorkflowRun(ctx, pos[0])
	if err != nil {
		return err
	}
	return c.emit(run, func(w io.Writer) { printWorkflowRun(w, run) })
}

func (c *ctl) runTasks(ctx context.Context, args []string) error {
	pos, err := c.parse(c.flagSet("run tasks"), args, "ID")
	if err != nil {
		return err
	}
	ts, err := c.client.RunTasks(ctx, pos[0])
	if err != nil {
		return err
	}
	return c.emit(api.RunTaskList{Tasks: ts}, func(w io.Writer) { printRunTasks(w, ts) })
}

// runActionCommand returns the handler of "run cancel|retry".
func runActionCommand(retry bool) ctlHandler {
	return func(c *ctl, ctx context.Context, args []string) error {
		verb := "cancel"
		if retry {
			verb = "retry"
		}
		fs := c.flagSet("run " + verb)
		actor := fs.String("actor", "", "`name` recorded as who acts (default $USER, else the account's name, else "+defaultActor+")")
		pos, err := c.parse(fs, args, "ID")
		if err != nil {
			return err
		}
		var run models.WorkflowRun
		if retry {
			run, err = c.client.RetryRun(ctx, pos[0], c.actorOf(*actor))
		} else {
			run, err = c.client.CancelRun(ctx, pos[0], c.actorOf(*actor))
		}
		if err != nil {
			return err
		}
		return c.emit(run, func(w io.Writer) {
			fmt.Fprintf(w, "run %s: %s (tasks: %s)\n", clean(run.ID), clean(string(run.Status)), clean(taskCounts(run.Tasks)))
		})
	}
}

func (c *ctl) runLogs(ctx context.Context, args []string) error {
	fs := c.flagSet("run logs")
	attempt := fs.Int("attempt", 0, "only attempt `n` (from 1; default every attempt)")
	pos, err := c.parse(fs, args, "ID", "NAME")
	if err != nil {
		return err
	}
	if *attempt < 0 {
		return usagef("ctl run logs: --attempt must not be negative")
	}
	logs, err := c.client.RunTaskLogs(ctx, pos[0], pos[1], *attempt)
	if err != nil {
		return err
	}
	return c.emit(logs, func(w io.Writer) { printTaskLogs(w, pos[1], logs) })
}
