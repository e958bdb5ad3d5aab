package main

// The "agent" subcommands: the agent RPC from the command line, for agents
// and the scripts they run. They read AQ_SOCKET, AQ_TASK_ID and
// AQ_RUN_TOKEN, which the daemon sets for each run:
//
//	agent heartbeat
//	agent progress [--succeeded N] [--failed N] [MESSAGE...]
//	agent ask [--default A] QUESTION...  prints the answer on stdout
//	agent complete [--summary TEXT | TEXT...] [--files a,b] [--outputs JSON] [--no-changes]
//	agent fail MESSAGE...
//	agent usage --input N --output N [--cache-read N] [--cache-write N]
//	agent rate-limited [--reset RFC3339 | --in DURATION] [--kind rate_limit|tokens] [--message TEXT]
//	agent plan [--file batch.json] [--json]
//	agent approve REASONS...         a reviewer's verdict: the reviewed task may land
//	agent reject REASONS...          a reviewer's verdict: the reviewed task must be redone
//
// A text argument that is exactly "-" is read from standard input, and so
// is the plan without --file. Errors print "error: <message>" and exit with
// status 1; usage errors and a missing AQ_* variable exit with status 2.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// maxStdinBytes caps what an agent command reads from standard input.
const maxStdinBytes = 32 << 20

const agentUsage = `Usage: agentqueued agent COMMAND [ARGS]

Report to agentqueued from inside an agent run (reads AQ_SOCKET, AQ_TASK_ID, AQ_RUN_TOKEN).

Commands:
  heartbeat                        tell the daemon you are alive during long silent work
  progress [--succeeded N] [--failed N] [MESSAGE...]
                                   report a step of the work, and the items processed so far
                                   (cumulative counts for this run; a message or a count is required)
  ask [--default ANSWER] QUESTION...
                                   ask the human and wait; prints the answer
  complete [--summary TEXT | TEXT...] [--files a,b] [--outputs JSON] [--no-changes]
                                   report the task done; --no-changes when it needed no change
                                   to the repository (without it, a run that changed nothing fails)
  fail MESSAGE...                  report the task cannot be done, and why
  usage --input N --output N [--cache-read N] [--cache-write N]
                                   report token use
  rate-limited [--reset RFC3339 | --in DURATION] [--kind rate_limit|tokens] [--message TEXT]
                                   report that the provider refuses work until a reset
  plan [--file batch.json] [--json]
                                   propose subtasks ({"tasks": [...]} or an array; stdin without --file)
  approve REASONS...               in a review run: the reviewed task may land, and why
  reject REASONS...                in a review run: the reviewed task must be redone, and what to change

A text argument that is exactly "-" is read from standard input.
`

// agentCmd is one invocation of an agent command.
type agentCmd struct {
	m    *Main
	name string
	fs   *flag.FlagSet
}

type agentHandler func(a *agentCmd, ctx context.Context, args []string) error

// agentCommands maps each agent command to its handler.
var agentCommands = map[string]agentHandler{
	"heartbeat":    (*agentCmd).heartbeat,
	"progress":     (*agentCmd).progress,
	"ask":          (*agentCmd).ask,
	"complete":     (*agentCmd).complete,
	"fail":         (*agentCmd).fail,
	"usage":        (*agentCmd).usage,
	"rate-limited": (*agentCmd).rateLimited,
	"plan":         (*agentCmd).plan,
	"approve":      (*agentCmd).approve,
	"reject":       (*agentCmd).reject,
}

// runAgent is the "agent" subcommand.
func (m *Main) runAgent(ctx context.Context, args []string) error {
	names := make([]string, 0, len(agentCommands))
	for name := range agentCommands {
		names = append(names, name)
	}
	slices.Sort(names)
	if len(args) == 0 {
		return usagef("agent: missing command (want one of %s)", strings.Join(names, ", "))
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(m.Stdout, agentUsage)
		return flag.ErrHelp
	}
	h, ok := agentCommands[args[0]]
	if !ok {
		return usagef("agent: unknown command %q (want one of %s)", args[0], strings.Join(names, ", "))
	}
	a := &agentCmd{m: m, name: "agent " + args[0], fs: newFlagSet("agentqueued agent " + args[0])}
	return h(a, ctx, args[1:])
}

// parse parses the command's flags and returns its positional arguments.
func (a *agentCmd) parse(args []string) ([]string, error) {
	return parseFlags(a.fs, args, a.m.Stdout)
}

// noArgs refuses positional arguments.
func (a *agentCmd) noArgs(pos []string) error {
	if len(pos) > 0 {
		return usagef("%s: unexpected argument %q", a.name, pos[0])
	}
	return nil
}

// client returns an RPC client configured by the AQ_* environment.
func (a *agentCmd) client() (*api.RPCClient, error) {
	return rpcClientFromEnv(a.m)
}

// rpcClientFromEnv returns an RPC client configured by m's AQ_* environment;
// a missing variable is a configuration error.
func rpcClientFromEnv(m *Main) (*api.RPCClient, error) {
	c, err := api.NewRPCClientFromEnv(func(k string) string {
		v, _ := m.Getenv(k)
		return v
	})
	if err != nil {
		return nil, &configError{err: err}
	}
	return c, nil
}

// text returns the text of positional arguments: the words joined by
// spaces, or standard input when the only argument is "-". what names the
// text in the usage error when there is none.
func (a *agentCmd) text(ctx context.Context, pos []string, what string) (string, error) {
	var s string
	if len(pos) == 1 && pos[0] == "-" {
		data, err := readStdin(ctx)
		if err != nil {
			return "", err
		}
		s = strings.TrimRight(string(data), "\r\n")
	} else {
		s = strings.Join(pos, " ")
	}
	if strings.TrimSpace(s) == "" {
		return "", usagef("%s: %s is required (as arguments, or \"-\" to read it from standard input)", a.name, what)
	}
	return s, nil
}

func (a *agentCmd) heartbeat(ctx context.Context, args []string) error {
	pos, err := a.parse(args)
	if err != nil {
		return err
	}
	if err := a.noArgs(pos); err != nil {
		return err
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.CloseIdleConnections()
	return c.Heartbeat(ctx)
}

// progress reports a step of the work: a message, counts of the items
// processed so far, or both.
func (a *agentCmd) progress(ctx context.Context, args []string) error {
	var p models.TaskProgress
	var ok, failed int
	a.fs.IntVar(&ok, "succeeded", 0, "items processed successfully so far in this run (cumulative)")
	a.fs.IntVar(&failed, "failed", 0, "items that failed so far in this run (cumulative)")
	pos, err := a.parse(args)
	if err != nil {
		return err
	}
	set := visited(a.fs)
	if set["succeeded"] {
		p.Succeeded = &ok
	}
	if set["failed"] {
		p.Failed = &failed
	}
	if !p.HasCounts() || len(pos) > 0 {
		if p.Message, err = a.text(ctx, pos, "MESSAGE"); err != nil {
			return err
		}
	}
	if err := p.Validate(); err != nil {
		return usagef("%s: %s", a.name, models.ErrorMessageOf(err))
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.CloseIdleConnections()
	return c.ReportProgress(ctx, p)
}

func (a *agentCmd) fail(ctx context.Context, args []string) error {
	return a.message(ctx, args, "MESSAGE", (*api.RPCClient).Fail)
}

// approve is a reviewer's verdict that the reviewed task may land.
func (a *agentCmd) approve(ctx context.Context, args []string) error {
	return a.message(ctx, args, "REASONS", (*api.RPCClient).Approve)
}

// reject is a reviewer's verdict that the reviewed task must be redone.
func (a *agentCmd) reject(ctx context.Context, args []string) error {
	return a.message(ctx, args, "REASONS", (*api.RPCClient).Reject)
}

// message runs a command whose arguments are one text (named label in errors).
func (a *agentCmd) message(ctx context.Context, args []string, label string, send func(*api.RPCClient, context.Context, string) error) error {
	pos, err := a.parse(args)
	if err != nil {
		return err
	}
	msg, err := a.text(ctx, pos, label)
	if err != nil {
		return err
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.CloseIdleConnections()
	return send(c, ctx, msg)
}

func (a *agentCmd) ask(ctx context.Context, args []string) error {
	def := a.fs.String("default", "", "the answer you would go on with should nobody answer before the question expires")
	return a.message(ctx, args, "QUESTION", func(c *api.RPCClient, ctx context.Context, question string) error {
		ask := models.Ask{Question: question}
		if *def != "" {
			ask.Default = def
		}
		answer, err := c.Ask(ctx, ask)
		if err != nil {
			return err
		}
		if !strings.HasSuffix(answer, "\n") {
			answer += "\n"
		}
		_, err = io.WriteString(a.m.Stdout, answer)
		return err
	})
}

func (a *agentCmd) complete(ctx context.Context, args []string) error {
	summary := a.fs.String("summary", "", "what was done (or give it as arguments; \"-\" reads standard input)")
	files := a.fs.String("files", "", "changed files, comma-separated")
	outputs := a.fs.String("outputs", "", "structured results for dependent tasks, a JSON object")
	noChanges := a.fs.Bool("no-changes", false, "the task needed no change to the repository (without it, a run that changed nothing fails)")
	pos, err := a.parse(args)
	if err != nil {
		return err
	}
	comp := models.Completion{NoChanges: *noChanges}
	switch {
	case len(pos) > 0 && *summary != "":
		return usagef("%s: give the summary either with --summary or as arguments, not both", a.name)
	case len(pos) > 0:
		if comp.Summary, err = a.text(ctx, pos, "the summary"); err != nil {
			return err
		}
	case *summary == "-":
		if comp.Summary, err = a.text(ctx, []string{"-"}, "the summary"); err != nil {
			return err
		}
	default:
		comp.Summary = *summary
	}
	for f := range strings.SplitSeq(*files, ",") {
		if f = strings.TrimSpace(f); f != "" {
			comp.FilesChanged = append(comp.FilesChanged, f)
		}
	}
	if *outputs != "" {
		if !json.Valid([]byte(*outputs)) {
			return usagef("%s: --outputs: not valid JSON", a.name)
		}
		comp.Outputs = json.RawMessage(*outputs)
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.CloseIdleConnections()
	return c.Complete(ctx, comp)
}

func (a *agentCmd) usage(ctx context.Context, args []string) error {
	var u api.UsageReport
	a.fs.Int64Var(&u.Input, "input", 0, "input `tokens` (required)")
	a.fs.Int64Var(&u.Output, "output", 0, "output `tokens` (required)")
	a.fs.Int64Var(&u.CacheRead, "cache-read", 0, "cache-read `tokens`")
	a.fs.Int64Var(&u.CacheWrite, "cache-write", 0, "cache-write `tokens`")
	pos, err := a.parse(args)
	if err != nil {
		return err
	}
	if err := a.noArgs(pos); err != nil {
		return err
	}
	set := visited(a.fs)
	if !set["input"] || !set["output"] {
		return usagef("%s: --input and --output are required", a.name)
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.CloseIdleConnections()
	return c.Usage(ctx, u)
}

func (a *agentCmd) rateLimited(ctx context.Context, args []string) error {
	reset := a.fs.String("reset", "", "when work may resume, an RFC 3339 `time`")
	in := a.fs.Duration("in", 0, "how long until work may resume (e.g. 15m)")
	var r models.RateLimit
	a.fs.StringVar(&r.Kind, "kind", "", "rate_limit (the default) or tokens")
	a.fs.StringVar(&r.Message, "message", "", "the provider's words")
	pos, err := a.parse(args)
	if err != nil {
		return err
	}
	if err := a.noArgs(pos); err != nil {
		return err
	}
	set := visited(a.fs)
	switch {
	case set["reset"] && set["in"]:
		return usagef("%s: give --reset or --in, not both", a.name)
	case set["reset"]:
		t, err := time.Parse(time.RFC3339, *reset)
		if err != nil {
			return usagef("%s: --reset: %q is not an RFC 3339 time (like 2026-03-01T12:00:00Z)", a.name, *reset)
		}
		r.ResetAt = &t
	case set["in"]:
		if *in <= 0 {
			return usagef("%s: --in: must be positive (got %s)", a.name, *in)
		}
		t := time.Now().Add(*in).UTC().Truncate(time.Second)
		r.ResetAt = &t
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.CloseIdleConnections()
	return c.RateLimited(ctx, r)
}

func (a *agentCmd) plan(ctx context.Context, args []string) error {
	file := a.fs.String("file", "", "the plan, a JSON `file` ({\"tasks\": [...]} or an array of tasks; default standard input)")
	asJSON := a.fs.Bool("json", false, "print the results as JSON")
	pos, err := a.parse(args)
	if err != nil {
		return err
	}
	if err := a.noArgs(pos); err != nil {
		return err
	}
	var data []byte
	source := "standard input"
	if *file == "" || *file == "-" {
		data, err = readStdin(ctx)
	} else {
		source = *file
		data, err = os.ReadFile(*file)
	}
	if err != nil {
		return fmt.Errorf("read plan: %w", err)
	}
	tasks, err := api.DecodePlan(data)
	if err != nil {
		return fmt.Errorf("read plan from %s: %w", source, err)
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.CloseIdleConnections()
	results, err := c.ProposePlan(ctx, tasks)
	if err != nil {
		return err
	}
	if *asJSON {
		out, err := json.MarshalIndent(api.BatchResponse{Results: results}, "", "  ")
		if err != nil {
			return fmt.Errorf("encode output: %w", err)
		}
		_, err = fmt.Fprintf(a.m.Stdout, "%s\n", out)
		return err
	}
	printBatchResults(a.m.Stdout, results)
	return nil
}

// stdinKey carries the standard input of the agent and mcp commands in a
// context; without it they read os.Stdin.
type stdinKey struct{}

// withStdin returns ctx carrying r as the standard input of the agent and
// mcp commands.
func withStdin(ctx context.Context, r io.Reader) context.Context {
	return context.WithValue(ctx, stdinKey{}, r)
}

// stdinOf returns the standard input carried by ctx, or os.Stdin.
func stdinOf(ctx context.Context) io.Reader {
	if r, ok := ctx.Value(stdinKey{}).(io.Reader); ok {
		return r
	}
	return os.Stdin
}

// readStdin reads all of standard input, at most maxStdinBytes.
func readStdin(ctx context.Context) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(stdinOf(ctx), maxStdinBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read standard input: %w", err)
	}
	if len(data) > maxStdinBytes {
		return nil, errors.New("read standard input: more than 32 MiB")
	}
	return data, nil
}
