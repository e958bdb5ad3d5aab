package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/config"
	"github.com/agentqueued/agentqueued/internal/models"
)

// Environment variables read by ctl.
const (
	envAddr  = "AGENTQUEUED_ADDR"
	envToken = "AGENTQUEUED_TOKEN"
)

// defaultActor is recorded for events sent by ctl when $USER is not set.
const defaultActor = "ctl"

// ctlOptions are the flags every ctl command accepts.
type ctlOptions struct {
	addr       string
	token      string
	configPath string
	json       bool
}

// register adds the options to fs, keeping values already parsed.
func (o *ctlOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.addr, "addr", o.addr, "API `URL` (default $"+envAddr+", the listen address of --config, or http://"+config.DefaultListen+")")
	fs.StringVar(&o.token, "token", o.token, "bearer `token` (default $"+envToken+" or api.token of --config; prefer those: a flag is visible to other users in the process list)")
	fs.StringVar(&o.configPath, "config", o.configPath, "configuration `file` to take listen and api.token from")
	fs.BoolVar(&o.json, "json", o.json, "print JSON instead of tables")
}

// ctl is one invocation of a ctl command.
type ctl struct {
	m      *Main
	opts   ctlOptions
	out    io.Writer
	client *api.Client
}

type ctlHandler func(c *ctl, ctx context.Context, args []string) error

// ctlCommands maps "group verb" to its handler.
var ctlCommands = map[string]ctlHandler{
	"project create":    (*ctl).projectCreate,
	"project list":      (*ctl).projectList,
	"project show":      (*ctl).projectShow,
	"project edit":      (*ctl).projectEdit,
	"project archive":   (*ctl).projectArchive,
	"project delete":    (*ctl).projectDelete,
	"project land":      (*ctl).projectLand,
	"task add":          (*ctl).taskAdd,
	"task list":         (*ctl).taskList,
	"task show":         (*ctl).taskShow,
	"task edit":         (*ctl).taskEdit,
	"task deps":         (*ctl).taskDeps,
	"task delete":       (*ctl).taskDelete,
	"task skip":         eventCommand(models.EventAdminSkip),
	"task stop":         eventCommand(models.EventAdminStop),
	"task restart":      eventCommand(models.EventAdminRestart),
	"task cancel":       (*ctl).taskCancel,
	"task approve":      decisionCommand(true),
	"task reject":       decisionCommand(false),
	"task diff":         (*ctl).taskDiff,
	"task result":       (*ctl).taskResult,
	"task logs":         (*ctl).taskLogs,
	"agent add":         (*ctl).agentAdd,
	"agent list":        (*ctl).agentList,
	"agent show":        (*ctl).agentShow,
	"agent pause":       agentPauseCommand(true),
	"agent resume":      agentPauseCommand(false),
	"agent remove":      (*ctl).agentRemove,
	"question list":     (*ctl).questionList,
	"question answer":   (*ctl).questionAnswer,
	"hook list":         (*ctl).hookList,
	"hook show":         (*ctl).hookShow,
	"hook create":       (*ctl).hookCreate,
	"hook edit":         (*ctl).hookEdit,
	"hook enable":       hookEnableCommand(true),
	"hook disable":      hookEnableCommand(false),
	"hook delete":       (*ctl).hookDelete,
	"hook fire":         (*ctl).hookFire,
	"hook runs":         (*ctl).hookRuns,
	"hook run":          (*ctl).hookRun,
	"workflow list":     (*ctl).workflowList,
	"workflow show":     (*ctl).workflowShow,
	"workflow add":      (*ctl).workflowAdd,
	"workflow delete":   (*ctl).workflowDelete,
	"workflow run":      (*ctl).workflowRun,
	"workflow schedule": (*ctl).workflowSchedule,
	"run list":          (*ctl).runList,
	"run show":          (*ctl).runShow,
	"run tasks":         (*ctl).runTasks,
	"run cancel":        runActionCommand(false),
	"run retry":         runActionCommand(true),
	"run logs":          (*ctl).runLogs,
	"budget":            (*ctl).budget,
	"status":            (*ctl).status,
	"watch":             (*ctl).watch,
	"rule list":         (*ctl).ruleList,
	"rule set":          (*ctl).ruleSet,
	"health":            (*ctl).health,
}

// agentPauseCommand pauses (no new task) or resumes an agent.
func agentPauseCommand(paused bool) func(*ctl, context.Context, []string) error {
	return func(c *ctl, ctx context.Context, args []string) error {
		name := "agent resume"
		if paused {
			name = "agent pause"
		}
		pos, err := c.parse(c.flagSet(name), args, "ID")
		if err != nil {
			return err
		}
		a, err := c.client.SetAgentPaused(ctx, pos[0], paused)
		if err != nil {
			return err
		}
		a = a.Redacted()
		return c.emit(a, func(w io.Writer) { printAgents(w, []models.Agent{a}) })
	}
}

func (c *ctl) questionList(ctx context.Context, args []string) error {
	if _, err := c.parse(c.flagSet("question list"), args); err != nil {
		return err
	}
	qs, err := c.client.OpenQuestions(ctx)
	if err != nil {
		return err
	}
	return c.emit(api.QuestionList{Questions: qs}, func(w io.Writer) { printQuestions(w, qs) })
}

func (c *ctl) questionAnswer(ctx context.Context, args []string) error {
	fs := c.flagSet("question answer")
	by := fs.String("by", "ctl", "who answers")
	pos, err := parseFlags(fs, args, c.out)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usagef("question answer: want ID ANSWER..., got %d argument(s)", len(pos))
	}
	id, err := strconv.ParseInt(pos[0], 10, 64)
	if err != nil {
		return usagef("question answer: %q is not a question id", pos[0])
	}
	if err := c.connect(); err != nil {
		return err
	}
	q, err := c.client.AnswerQuestion(ctx, id, strings.Join(pos[1:], " "), *by)
	if err != nil {
		return err
	}
	return c.emit(q, func(w io.Writer) { fmt.Fprintf(w, "question %d of task %s answered\n", q.ID, q.TaskID) })
}

// runCtl is the "ctl" subcommand.
func (m *Main) runCtl(ctx context.Context, args []string) error {
	c := &ctl{m: m, out: m.Stdout}
	fs := newFlagSet("agentqueued ctl")
	c.opts.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(m.Stdout, usage)
			return err
		}
		return usagef("ctl: %v", err)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return usagef("ctl: missing command")
	}
	key, rest := rest[0], rest[1:]
	if _, ok := ctlCommands[key]; !ok {
		if len(rest) == 0 {
			return usagef("ctl %s: missing or unknown command", key)
		}
		key, rest = key+" "+rest[0], rest[1:]
	}
	h, ok := ctlCommands[key]
	if !ok {
		return usagef("ctl: unknown command %q", key)
	}
	defer func() {
		if c.client != nil {
			c.client.CloseIdleConnections()
		}
	}()
	return h(c, ctx, rest)
}

// flagSet returns a flag set for a command with the common options.
func (c *ctl) flagSet(name string) *flag.FlagSet {
	fs := newFlagSet("agentqueued ctl " + name)
	c.opts.register(fs)
	return fs
}

// parse parses a command's arguments and checks the number of positional
// arguments, naming them in the usage error.
func (c *ctl) parse(fs *flag.FlagSet, args []string, positional ...string) ([]string, error) {
	pos, err := parseFlags(fs, args, c.out)
	if err != nil {
		return nil, err
	}
	if len(pos) != len(positional) {
		want := "no arguments"
		if len(positional) > 0 {
			want = strings.Join(positional, " ")
		}
		return nil, usagef("%s: want %s, got %d argument(s)", strings.TrimPrefix(fs.Name(), "agentqueued "), want, len(pos))
	}
	return pos, c.connect()
}

// connect builds the API client from the flags, environment and config.
func (c *ctl) connect() error {
	getenv := c.m.Getenv
	var cfg *config.Config
	if c.opts.configPath != "" {
		loaded, err := config.Load(c.opts.configPath, getenv)
		if err != nil {
			return &configError{err: err}
		}
		cfg = &loaded
	}
	addr := c.opts.addr
	if addr == "" {
		addr, _ = getenv(envAddr)
	}
	if addr == "" && cfg != nil {
		addr = dialAddr(cfg.Listen)
	}
	if addr == "" {
		addr = config.DefaultListen
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	token := c.opts.token
	if token == "" {
		token, _ = getenv(envToken)
	}
	if token == "" && cfg != nil {
		token = cfg.API.Token
	}
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: api.DefaultClientTimeout}
	client, err := api.NewClient(addr, token, hc)
	if err != nil {
		return usagef("--addr: %v", err)
	}
	c.client = client
	return nil
}

// dialAddr turns a listen address into one to connect to.
func dialAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return ""
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// visited returns the names of the flags set on the command line.
func visited(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// emit prints v as JSON with --json, else calls human.
func (c *ctl) emit(v any, human func(w io.Writer)) error {
	if c.opts.json {
		data, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Errorf("encode output: %w", err)
		}
		_, err = fmt.Fprintf(c.out, "%s\n", data)
		return err
	}
	human(c.out)
	return nil
}

// readStrict decodes a JSON file into v, refusing unknown fields and
// trailing data.
func readStrict(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: unexpected data after the JSON value", path)
	}
	return nil
}

func (c *ctl) projectCreate(ctx context.Context, args []string) error {
	fs := c.flagSet("project create")
	file := fs.String("file", "", "read the whole project from a JSON `file`")
	name := fs.String("name", "", "display `name` (default the id)")
	weight := fs.Float64("credit-weight", 0, "scheduling `weight` (default 1)")
	maxAgents := fs.Int("max-agents", 0, "maximum concurrent `agents` (default 2)")
	budget := fs.Int64("budget", 0, "token budget `limit` (default unlimited)")
	repoSource := fs.String("repo-source", "", "repository source: clone, link or init (default: clone with --repo-url, link with --repo-path)")
	repoURL := fs.String("repo-url", "", "repository `URL` to clone")
	repoPath := fs.String("repo-path", "", "absolute `path` of an existing repository to link")
	branch := fs.String("branch", "", "default `branch` (default main)")

	pos, err := parseFlags(fs, args, c.out)
	if err != nil {
		return err
	}
	var p models.ProjectSpec
	set := visited(fs)
	if *file != "" {
		if len(pos) > 0 {
			return usagef("ctl project create: --file takes no ID argument")
		}
		for _, f := range []string{"name", "credit-weight", "max-agents", "budget", "repo-source", "repo-url", "repo-path", "branch"} {
			if set[f] {
				return usagef("ctl project create: --%s cannot be combined with --file", f)
			}
		}
		if err := readStrict(*file, &p); err != nil {
			return fmt.Errorf("read project: %w", err)
		}
	} else {
		if len(pos) != 1 {
			return usagef("ctl project create: want ID, got %d argument(s)", len(pos))
		}
		p = models.ProjectSpec{ID: pos[0], Name: *name, CreditWeight: *weight, MaxConcurrentAgents: *maxAgents}
		if set["budget"] {
			p.BudgetLimit = budget
		}
		if *repoSource != "" || *repoURL != "" || *repoPath != "" || *branch != "" {
			src := models.RepoSourceType(strings.ToUpper(*repoSource))
			if src == "" {
				src = models.RepoClone
				if *repoPath != "" {
					src = models.RepoLink
				}
			}
			p.Repo = &models.RepoConfig{SourceType: src, URL: *repoURL, SourcePath: *repoPath, DefaultBranch: *branch}
		}
	}
	if err := c.connect(); err != nil {
		return err
	}
	created, err := c.client.CreateProject(ctx, p)
	if err != nil {
		return err
	}
	return c.emit(created, func(w io.Writer) { printProject(w, created) })
}

func (c *ctl) projectList(ctx context.Context, args []string) error {
	if _, err := c.parse(c.flagSet("project list"), args); err != nil {
		return err
	}
	ps, err := c.client.ListProjects(ctx)
	if err != nil {
		return err
	}
	return c.emit(api.ProjectList{Projects: ps}, func(w io.Writer) { printProjects(w, ps) })
}

func (c *ctl) projectShow(ctx context.Context, args []string) error {
	pos, err := c.parse(c.flagSet("project show"), args, "ID")
	if err != nil {
		return err
	}
	p, err := c.client.GetProject(ctx, pos[0])
	if err != nil {
		return err
	}
	return c.emit(p, func(w io.Writer) { printProject(w, p) })
}

// requiresApprovalHelp says what --requires-approval means (docs/semantics.md, "Approval").
const requiresApprovalHelp = "the task never lands without a person's decision: once verified it waits in " +
	"AWAITING_APPROVAL, for its pull request to be merged on GitHub (pr_mode when_required or always, GitHub " +
	"configured) or else unmerged on its branch for \"ctl task approve\" (see \"ctl task diff\") or \"ctl task reject\""

// taskFieldFlags are the task add flags that describe one task.
var taskFieldFlags = []string{"title", "description", "priority", "depends-on", "verification", "requires-approval",
	"test-command", "kind", "meta", "created-by", "max-retries", "expected-count"}

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
	createdBy := fs.String("created-by", "", "`name` of the creator (default $USER)")
	maxRetries := fs.Int("max-retries", models.DefaultMaxRetries, "maximum `retries`")
	expected := fs.Int("expected-count", 0, "how many `items` the task will process (required under a Capacity rule)")
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
			ExpectedCount: *expected,
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
			bt.CreatedBy, _ = c.m.Getenv("USER")
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
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	f := models.TaskFilter{ProjectID: *project, Limit: *limit, AfterID: *after}
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
	if len(patch.Fields()) == 0 {
		return usagef("ctl task edit: nothing to change (use --title, --description, --priority, --criterion, --clear-criteria, " +
			"--test-command, --clear-test-commands, --verification, --requires-approval or --profile)")
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
		actor := fs.String("actor", "", "`name` recorded as the actor (default $USER, else "+defaultActor+")")
		pos, err := c.parse(fs, args, "ID")
		if err != nil {
			return err
		}
		if *actor == "" {
			*actor, _ = c.m.Getenv("USER")
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
	actor := fs.String("actor", "", "`name` recorded as who cancelled (default $USER, else "+defaultActor+")")
	pos, err := c.parse(fs, args, "ID")
	if err != nil {
		return err
	}
	if *actor == "" {
		*actor, _ = c.m.Getenv("USER")
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
		actor := fs.String("actor", "", "`name` recorded as the person deciding (default $USER, else "+defaultActor+")")
		pos, err := c.parse(fs, args, "ID")
		if err != nil {
			return err
		}
		if !approve && strings.TrimSpace(*feedback) == "" {
			return usagef("task reject: --feedback is required: say what must change")
		}
		if *actor == "" {
			*actor, _ = c.m.Getenv("USER")
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
// default branch: what approving the task would merge.
func (c *ctl) taskDiff(ctx context.Context, args []string) error {
	pos, err := c.parse(c.flagSet("task diff"), args, "ID")
	if err != nil {
		return err
	}
	d, err := c.client.TaskDiff(ctx, pos[0])
	if err != nil {
		return err
	}
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

func (c *ctl) agentAdd(ctx context.Context, args []string) error {
	fs := c.flagSet("agent add")
	typ := fs.String("type", "", "agent `type`: "+strings.Join(models.AgentTypes, ", "))
	name := fs.String("name", "", "display `name` (default the id)")
	command := fs.String("command", "", "the `executable` to run (required for type command)")
	var projects listFlag
	var argv repeatFlag
	fs.Var(&argv, "arg", "an `argument` of the command (repeatable)")
	fs.Var(&projects, "project", "`ids` of the only projects it works on (comma-separated, repeatable)")
	env := mapFlag{}
	fs.Var(env, "env", "an environment variable `NAME=value` for its runs (repeatable; the value is on this "+
		"command line, where other users can read it: pass keys with --pass-env)")
	var passEnv listFlag
	fs.Var(&passEnv, "pass-env", "`names` of the daemon's environment variables its runs get, such as a "+
		"provider's API key (comma-separated, repeatable)")
	maxRuntime := fs.Duration("max-runtime", 0, "wall-clock cap of one run (`duration`; 0: the daemon's default)")
	idle := fs.Duration("idle-timeout", 0, "end a run quiet for this long (`duration`; 0: the daemon's default)")
	pos, err := c.parse(fs, args, "ID")
	if err != nil {
		return err
	}
	reg := models.AgentRegistration{ID: pos[0], Name: *name, AgentType: *typ, AgentSettings: models.AgentSettings{
		Command: *command, Args: argv, Projects: projects, PassEnv: passEnv, MaxRuntime: models.Duration(*maxRuntime),
		IdleTimeout: models.Duration(*idle)}}
	if len(env) > 0 {
		reg.Env = env
	}
	a, err := c.client.RegisterAgent(ctx, reg)
	if err != nil {
		return err
	}
	a = a.Redacted()
	return c.emit(a, func(w io.Writer) { printAgents(w, []models.Agent{a}) })
}

func (c *ctl) agentList(ctx context.Context, args []string) error {
	if _, err := c.parse(c.flagSet("agent list"), args); err != nil {
		return err
	}
	as, err := c.client.ListAgents(ctx)
	if err != nil {
		return err
	}
	for i := range as {
		as[i] = as[i].Redacted() // an older daemon answered env values in clear
	}
	return c.emit(api.AgentList{Agents: as}, func(w io.Writer) { printAgents(w, as) })
}

// agentShow prints one agent with its settings: env names with masked
// values, the names pass_env gives, the profile.
func (c *ctl) agentShow(ctx context.Context, args []string) error {
	pos, err := c.parse(c.flagSet("agent show"), args, "ID")
	if err != nil {
		return err
	}
	as, err := c.client.ListAgents(ctx)
	if err != nil {
		return err
	}
	for _, a := range as {
		if a.ID == pos[0] {
			a = a.Redacted()
			return c.emit(a, func(w io.Writer) { printAgent(w, a) })
		}
	}
	return models.Errorf(models.CodeNotFound, "agent %q not found", pos[0])
}

func (c *ctl) agentRemove(ctx context.Context, args []string) error {
	pos, err := c.parse(c.flagSet("agent remove"), args, "ID")
	if err != nil {
		return err
	}
	if err := c.client.RemoveAgent(ctx, pos[0]); err != nil {
		return err
	}
	return c.emit(map[string]string{"removed": pos[0]}, func(w io.Writer) {
		fmt.Fprintf(w, "agent %s removed (an agent of the configuration file is registered again when the daemon starts)\n", clean(pos[0]))
	})
}

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
	actor := fs.String("actor", "", "`name` recorded as who fired it (default $USER, else "+defaultActor+")")
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
		req.Actor, _ = c.m.Getenv("USER")
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

// actorOf returns the --actor value, else $USER, else defaultActor.
func (c *ctl) actorOf(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if user, _ := c.m.Getenv("USER"); user != "" {
		return user
	}
	return defaultActor
}

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
	actor := fs.String("actor", "", "`name` recorded as who started the run (default $USER, else "+defaultActor+")")
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
		Status: strings.ToLower(*status), Limit: *limit})
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
		actor := fs.String("actor", "", "`name` recorded as who acts (default $USER, else "+defaultActor+")")
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
			fmt.Fprintf(w, "run %s: %s (tasks: %s)\n", clean(run.ID), clean(run.Status), clean(taskCounts(run.Tasks)))
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
	return c.emit(o, func(w io.Writer) { printStatus(w, o) })
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

// listFlag collects comma-separated, repeatable values.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for part := range strings.SplitSeq(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*l = append(*l, part)
		}
	}
	return nil
}

// repeatFlag collects repeatable values taken whole (commas included).
type repeatFlag []string

func (r *repeatFlag) String() string { return strings.Join(*r, " ") }

func (r *repeatFlag) Set(v string) error {
	*r = append(*r, v)
	return nil
}

// mapFlag collects repeatable key=value pairs.
type mapFlag map[string]string

func (m mapFlag) String() string {
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

func (m mapFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not key=value", v)
	}
	m[k] = val
	return nil
}

// itoa formats an optional integer, "-" when absent.
func itoa(p *int64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatInt(*p, 10)
}
