package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds ctl's task commands: add, list, show, result, edit,
// deps, delete, the admin events, cancel, approve, reject and diff.

// requiresApprovalHelp says what --requires-approval means (docs/semantics.md, "Approval").
const requiresApprovalHelp = "the task never lands without a person's decision: once verified it waits in " +
	"AWAITING_APPROVAL, for its pull request to be merged on GitHub (pr_mode when_required or always, GitHub " +
	"configured) or else unmerged on its branch for \"ctl task approve\" (see \"ctl task diff\") or \"ctl task reject\""

// taskFieldFlags are the task add flags that describe one task.
var taskFieldFlags = []string{"title", "description", "priority", "depends-on", "verification", "requires-approval",
	"test-command", "kind", "meta", "created-by", "max-retries", "expected-count", "timeout", "agent-type", "runner-label"}

func (c *ctl) taskAdd(ctx context.Context, args []string) error {
	fs := c.flagSet("task add")
	file := fs.String("file", "", "create a whole batch from a JSON `file` ({\"project_id\", \"tasks\": [...]} or an array of tasks)")
	project := fs.String("project", "", "project `id`")
	title := fs.String("title", "", "task `title`")
	description := fs.String("description", "", "task `description`")
	priority := fs.Int("priority", models.DefaultPriority, "`priority`; 0 is the most urgent")
	var dependsOn listFlag
	var testCommands repeatFlag
	fs.Var(&dependsOn, "depends-on", "`ids` of tasks this one depends on (comma-separated, repeatable)")
	verification := fs.String("verification", "", "verification `type`: AUTO_TEST, QA_AGENT or HUMAN")
	requiresApproval := fs.Bool("requires-approval", false, requiresApprovalHelp)
	fs.Var(&testCommands, "test-command", "a test `command` (repeatable)")
	kind := fs.String("kind", "", "task `kind`")
	meta := mapFlag{}
	fs.Var(meta, "meta", "metadata `key=value` (repeatable)")
	createdBy := fs.String("created-by", "", "`name` of the creator (default $USER, else the account's name)")
	maxRetries := fs.Int("max-retries", models.DefaultMaxRetries, "maximum `retries`")
	expected := fs.Int("expected-count", 0, "how many `items` the task will process (required under a Capacity rule)")
	timeout := fs.Duration("timeout", 0, "end a run of the task after this long (`duration`; the agent's max runtime still applies when smaller)")
	agentType := fs.String("agent-type", "", "run the task only on agents of this `type` ("+strings.Join(models.AgentTypes, ", ")+")")
	var runnerLabels repeatFlag
	fs.Var(&runnerLabels, "runner-label", "run the task only on agents of runners with this `label` (repeatable)")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	set := visited(fs)

	var b models.TaskBatch
	if *file != "" {
		for _, f := range taskFieldFlags {
			if set[f] {
				return usagef("ctl task add: --%s cannot be combined with --file", f)
			}
		}
		data, err := os.ReadFile(*file)
		if err != nil {
			return fmt.Errorf("read batch: %w", err)
		}
		if b, err = api.DecodeBatch(data); err != nil {
			return fmt.Errorf("read batch %s: %w", *file, err)
		}
		if b.ProjectID == "" {
			b.ProjectID = *project
		}
	} else {
		if *project == "" || *title == "" {
			return usagef("ctl task add: --project and --title are required (or --file)")
		}
		bt := models.BatchTask{
			Title: *title, Description: *description, VerificationType: models.VerificationType(strings.ToUpper(*verification)),
			RequiresApproval: *requiresApproval, Kind: *kind, TestCommands: testCommands, CreatedBy: *createdBy,
			ExpectedCount: *expected, Timeout: models.Duration(*timeout), AgentType: *agentType, RunnerLabels: runnerLabels,
		}
		if set["priority"] {
			bt.Priority = priority
		}
		if set["max-retries"] {
			bt.MaxRetries = maxRetries
		}
		if len(meta) > 0 {
			bt.Metadata = meta
		}
		for _, id := range dependsOn {
			bt.Dependencies = append(bt.Dependencies, models.BatchDependency{ID: id})
		}
		if bt.CreatedBy == "" {
			bt.CreatedBy = c.userName()
		}
		b = models.TaskBatch{ProjectID: *project, Tasks: []models.BatchTask{bt}}
	}
	results, err := c.client.CreateTasks(ctx, b)
	if err != nil {
		return err
	}
	return c.emit(api.BatchResponse{Results: results}, func(w io.Writer) { printBatchResults(w, results) })
}

func (c *ctl) taskList(ctx context.Context, args []string) error {
	fs := c.flagSet("task list")
	project := fs.String("project", "", "only tasks of project `id`")
	status := fs.String("status", "", "only tasks in these `statuses` (comma-separated; also Pending, Running, Unfinished, Finished)")
	limit := fs.Int("limit", 0, "at most `n` tasks")
	after := fs.String("after", "", "continue after task `id`")
	archived := fs.Bool("archived", false, "list archived tasks instead (in the order they were archived)")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	f := models.TaskFilter{ProjectID: *project, Limit: *limit, AfterID: *after, Archived: *archived}
	for part := range strings.SplitSeq(*status, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		set, err := models.ResolveStatusSet(part)
		if err != nil {
			return err
		}
		f.Statuses = append(f.Statuses, set...)
	}
	ts, err := c.client.ListTasks(ctx, f)
	if err != nil {
		return err
	}
	return c.emit(api.TaskList{Tasks: ts}, func(w io.Writer) { printTasks(w, ts) })
}

func (c *ctl) taskShow(ctx context.Context, args []string) error {
	pos, err := c.parse(c.flagSet("task show"), args, "ID")
	if err != nil {
		return err
	}
	d, err := c.client.GetTask(ctx, pos[0])
	if err != nil {
		return err
	}
	return c.emit(d, func(w io.Writer) { printTaskDetail(w, d) })
}

// taskResult prints what a task's last completed run reported: its
// summary, files changed and outputs (the Completion as JSON with --json).
func (c *ctl) taskResult(ctx context.Context, args []string) error {
	pos, err := c.parse(c.flagSet("task result"), args, "ID")
	if err != nil {
		return err
	}
	d, err := c.client.GetTask(ctx, pos[0])
	if err != nil {
		return err
	}
	if d.Result == nil {
		return models.Errorf(models.CodeNotFound, "task %s has no result yet (it is %s)", clean(d.Task.ID), d.Task.Status)
	}
	return c.emit(d.Result, func(w io.Writer) {
		fmt.Fprintf(w, "Task %s (%s): %s\n", clean(d.Task.ID), d.Task.Status, readable(d.Task.Title, 0))
		printResult(w, d.Result)
	})
}

func (c *ctl) taskEdit(ctx context.Context, args []string) error {
	fs := c.flagSet("task edit")
	title := fs.String("title", "", "new `title`")
	description := fs.String("description", "", "new `description`")
	priority := fs.Int("priority", 0, "new `priority`; 0 is the most urgent")
	var criteria, testCommands repeatFlag
	fs.Var(&criteria, "criterion", "an acceptance `criterion` (repeatable; replaces the list)")
	clearCriteria := fs.Bool("clear-criteria", false, "remove every acceptance criterion")
	fs.Var(&testCommands, "test-command", "a test `command` (repeatable; replaces the list)")
	clearTests := fs.Bool("clear-test-commands", false, "remove every test command")
	verification := fs.String("verification", "", "new verification `type`: AUTO_TEST, QA_AGENT or HUMAN")
	requiresApproval := fs.Bool("requires-approval", false, requiresApprovalHelp+" (--requires-approval=false to stop)")
	profile := fs.String("profile", "", "agent `profile` from the configuration; empty clears it")
	kind := fs.String("kind", "", "new task `kind`; empty clears it")
	meta := mapFlag{}
	fs.Var(meta, "meta", "metadata `key=value` (repeatable; replaces the metadata)")
	clearMeta := fs.Bool("clear-meta", false, "remove all metadata")
	expected := fs.Int("expected-count", 0, "how many `items` the task will process (required under a Capacity rule); 0 says none")
	timeout := fs.Duration("timeout", 0, "end a run of the task after this long (`duration`); 0 removes the task's own cap")
	agentType := fs.String("agent-type", "", "run the task only on agents of this `type` ("+strings.Join(models.AgentTypes, ", ")+
		"); empty lets any agent take it")
	var runnerLabels repeatFlag
	fs.Var(&runnerLabels, "runner-label", "run the task only on agents of runners with this `label` (repeatable; replaces the list)")
	clearLabels := fs.Bool("clear-runner-labels", false, "remove the task's own runner labels")
	pos, err := c.parse(fs, args, "ID")
	if err != nil {
		return err
	}
	set := visited(fs)
	if set["criterion"] && *clearCriteria {
		return usagef("ctl task edit: --criterion cannot be combined with --clear-criteria")
	}
	if set["test-command"] && *clearTests {
		return usagef("ctl task edit: --test-command cannot be combined with --clear-test-commands")
	}
	if set["meta"] && *clearMeta {
		return usagef("ctl task edit: --meta cannot be combined with --clear-meta")
	}
	if set["runner-label"] && *clearLabels {
		return usagef("ctl task edit: --runner-label cannot be combined with --clear-runner-labels")
	}
	var patch models.TaskPatch
	if set["title"] {
		patch.Title = title
	}
	if set["description"] {
		patch.Description = description
	}
	if set["priority"] {
		patch.Priority = priority
	}
	if set["criterion"] || *clearCriteria {
		list := []string(criteria)
		if list == nil {
			list = []string{}
		}
		patch.AcceptanceCriteria = &list
	}
	if set["test-command"] || *clearTests {
		list := []string(testCommands)
		if list == nil {
			list = []string{}
		}
		patch.TestCommands = &list
	}
	if set["verification"] {
		v := models.VerificationType(strings.ToUpper(*verification))
		patch.VerificationType = &v
	}
	if set["requires-approval"] {
		patch.RequiresApproval = requiresApproval
	}
	if set["profile"] {
		patch.Profile = profile
	}
	if set["kind"] {
		patch.Kind = kind
	}
	if set["meta"] || *clearMeta {
		m := map[string]string(meta)
		patch.Metadata = &m
	}
	if set["expected-count"] {
		patch.ExpectedCount = expected
	}
	if set["timeout"] {
		d := models.Duration(*timeout)
		patch.Timeout = &d
	}
	if set["agent-type"] {
		patch.AgentType = agentType
	}
	if set["runner-label"] || *clearLabels {
		list := []string(runnerLabels)
		if list == nil {
			list = []string{}
		}
		patch.RunnerLabels = &list
	}
	if len(patch.Fields()) == 0 {
		return usagef("ctl task edit: nothing to change (use --title, --description, --priority, --criterion, --clear-criteria, " +
			"--test-command, --clear-test-commands, --verification, --requires-approval, --profile, --kind, --meta, --clear-meta, " +
			"--expected-count, --timeout, --agent-type, --runner-label or --clear-runner-labels)")
	}
	t, err := c.client.EditTask(ctx, pos[0], patch)
	if err != nil {
		return err
	}
	return c.emit(t, func(w io.Writer) { printTask(w, t) })
}

// parseDependency reads a --add value: ID, or ID:soft for an edge that the
// upstream's end satisfies whether it succeeded or not.
func parseDependency(v string) (models.BatchDependency, error) {
	id, mode, soft := strings.Cut(v, ":")
	switch {
	case id == "":
		return models.BatchDependency{}, usagef("ctl task deps: --add %q: missing task id", v)
	case soft && mode != "soft":
		return models.BatchDependency{}, usagef("ctl task deps: --add %q: the only suffix is :soft (requires_success false)", v)
	case soft:
		no := false
		return models.BatchDependency{ID: id, RequiresSuccess: &no}, nil
	}
	return models.BatchDependency{ID: id}, nil
}

func (c *ctl) taskDeps(ctx context.Context, args []string) error {
	fs := c.flagSet("task deps")
	var add, remove listFlag
	fs.Var(&add, "add", "`ids` to depend on, each ID or ID:soft (soft: satisfied even when the upstream ends BLOCKED; comma-separated, repeatable)")
	fs.Var(&remove, "remove", "`ids` to stop depending on (comma-separated, repeatable)")
	pos, err := c.parse(fs, args, "ID")
	if err != nil {
		return err
	}
	if len(add) == 0 && len(remove) == 0 {
		return usagef("ctl task deps: nothing to change (use --add or --remove)")
	}
	var change models.DependencyChange
	for _, v := range add {
		d, err := parseDependency(v)
		if err != nil {
			return err
		}
		change.Add = append(change.Add, d)
	}
	change.Remove = remove
	res, err := c.client.ChangeDependencies(ctx, pos[0], change)
	if err != nil {
		return err
	}
	return c.emit(res, func(w io.Writer) { printDependencyResult(w, res) })
}

func (c *ctl) taskDelete(ctx context.Context, args []string) error {
	pos, err := c.parse(c.flagSet("task delete"), args, "ID")
	if err != nil {
		return err
	}
	if err := c.client.DeleteTask(ctx, pos[0]); err != nil {
		return err
	}
	return c.emit(map[string]string{"deleted": pos[0]}, func(w io.Writer) { fmt.Fprintf(w, "task %s deleted\n", clean(pos[0])) })
}

// eventCommand returns the handler of "task skip|stop|restart".
func eventCommand(event models.TaskEvent) ctlHandler {
	return func(c *ctl, ctx context.Context, args []string) error {
		verb := strings.ToLower(strings.TrimPrefix(string(event), "ADMIN_"))
		fs := c.flagSet("task " + verb)
		reason := fs.String("reason", "", "`reason` recorded with the change")
		actor := fs.String("actor", "", "`name` recorded as the actor (default $USER, else the account's name, else "+defaultActor+")")
		pos, err := c.parse(fs, args, "ID")
		if err != nil {
			return err
		}
		if *actor == "" {
			*actor = c.userName()
		}
		if *actor == "" {
			*actor = defaultActor
		}
		res, err := c.client.SendEvent(ctx, pos[0], api.EventRequest{Event: event, Reason: *reason, Actor: *actor})
		if err != nil {
			return err
		}
		return c.emit(res, func(w io.Writer) { printTransition(w, res) })
	}
}

// taskCancel cancels a task in any unfinished status: its run ends and it
// becomes BLOCKED; dependents requiring its success are blocked, the others
// proceed.
func (c *ctl) taskCancel(ctx context.Context, args []string) error {
	fs := c.flagSet("task cancel")
	reason := fs.String("reason", "", "`text` saying why, recorded after \"cancelled by <actor>: \"")
	actor := fs.String("actor", "", "`name` recorded as who cancelled (default $USER, else the account's name, else "+defaultActor+")")
	pos, err := c.parse(fs, args, "ID")
	if err != nil {
		return err
	}
	if *actor == "" {
		*actor = c.userName()
	}
	if *actor == "" {
		*actor = defaultActor
	}
	res, err := c.client.CancelTask(ctx, pos[0], api.CancelRequest{Reason: *reason, Actor: *actor})
	if err != nil {
		return err
	}
	return c.emit(res, func(w io.Writer) { printTransition(w, res) })
}

// decisionCommand returns the handler of "task approve|reject": a person's
// decision on a task waiting for one (HUMAN verification, or a plan).
func decisionCommand(approve bool) ctlHandler {
	return func(c *ctl, ctx context.Context, args []string) error {
		verb := "reject"
		if approve {
			verb = "approve"
		}
		fs := c.flagSet("task " + verb)
		feedback := fs.String("feedback", "", "`text` for the task's next attempt (required to reject)")
		actor := fs.String("actor", "", "`name` recorded as the person deciding (default $USER, else the account's name, else "+defaultActor+")")
		pos, err := c.parse(fs, args, "ID")
		if err != nil {
			return err
		}
		if !approve && strings.TrimSpace(*feedback) == "" {
			return usagef("task reject: --feedback is required: say what must change")
		}
		if *actor == "" {
			*actor = c.userName()
		}
		if *actor == "" {
			*actor = defaultActor
		}
		var res models.TransitionResult
		if approve {
			res, err = c.client.ApproveTask(ctx, pos[0], *actor, *feedback)
		} else {
			res, err = c.client.RejectTask(ctx, pos[0], *actor, *feedback)
		}
		if err != nil {
			return err
		}
		return c.emit(res, func(w io.Writer) { printTransition(w, res) })
	}
}

// taskDiff prints the change a task's branch makes against its project's
// default branch: what approving the task would merge, or, once the task
// landed, what its landing merged.
func (c *ctl) taskDiff(ctx context.Context, args []string) error {
	pos, err := c.parse(c.flagSet("task diff"), args, "ID")
	if err != nil {
		return err
	}
	diff, err := c.client.TaskDiff(ctx, pos[0])
	if err != nil {
		return err
	}
	d := api.TaskDiff{TaskID: pos[0], Diff: diff}
	return c.emit(d, func(w io.Writer) {
		if d.Diff == "" {
			fmt.Fprintf(w, "Task %s changes nothing.\n", d.TaskID)
			return
		}
		fmt.Fprint(w, d.Diff)
		if !strings.HasSuffix(d.Diff, "\n") {
			fmt.Fprintln(w)
		}
	})
}
