package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock"
	"github.com/agentqueued/agentqueued/internal/models"
)

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

const usage = `Usage:
  agentqueued [run] [--config FILE] [--data-dir DIR] [--listen ADDR] [--new-database] [--log-file FILE]
  agentqueued init [--config FILE] [--data-dir DIR] [--project ID] [--repo PATH] [--agent TYPE]... [--force] [--yes]
  agentqueued doctor [--config FILE] [--addr URL] [--token TOKEN] [--ca-file FILE]
  agentqueued ctl [--addr URL] [--token TOKEN] [--config FILE] [--ca-file FILE] [--json] COMMAND ...
  agentqueued land PROJECT [--addr URL] [--token TOKEN] [--config FILE] [--ca-file FILE] [--json]
  agentqueued agent COMMAND ...
  agentqueued mcp
  agentqueued runner --server URL --token-file FILE [--ca-file FILE] [--name NAME] [--config FILE]
  agentqueued demo [--keep] [--stall DURATION] [--timeout DURATION]
  agentqueued version
  agentqueued help

Commands:
  run      serve the daemon: the queue, the agents, the API (the default)
  init     write a configuration for the repository you are in
  doctor   check a configuration and the running daemon
  land     land now the work that waits for a linked checkout to be clean
  ctl      the daemon's command-line client (below)
  agent    report from inside an agent run (below)
  mcp      serve the agent commands as MCP tools on standard input and output
  runner   hold agents on this machine for a daemon elsewhere (docs/runners.md)
  demo     run a small DAG of tasks in a temporary repository
  version  print the version, the commit it was built from and the Go version
  help     print this text

Commands of ctl:
  status                                  projects, agents and their tasks, queue counts, what waits on you, budget
  desk [--project P]                      what waits on you, oldest first, each with the command that ends it
  stats [--project P]                     per project: tasks by status, completions per hour, mean wait and run time
  watch [--project P] [--interval D]      a live table of tasks moving
  project create|list|show|edit|archive|delete|land
  task add|list|show|edit|deps|delete|skip|stop|restart|cancel|approve|reject
  task diff|result ID | task logs ID [--attempt N] [-f]
  agent add|list|show|pause|resume|remove
  runner add NAME [--label L]... [--capacity N] | list | show|drain|resume|remove NAME
  question list | question answer ID ANSWER... [--by NAME]
  hook list [--project P] | show ID | create --file F [--project P] | edit ID --file F | enable|disable|delete ID
  hook fire ID [--event-file F] | runs ID [--status S] [--limit N] | run RUN_ID
  workflow list [--project P] | show NAME | add --file F [--project P] | delete NAME | run NAME [--actor A]
  workflow schedule NAME on|off
  run list [--workflow W] [--project P] [--status S] [--limit N] | show ID | tasks ID
  run cancel|retry ID [--actor A] | logs ID NAME [--attempt N]
  rule list | rule set --file F [--actor A]
  budget
  health

Commands of agent (inside an agent run; they read AQ_SOCKET, AQ_TASK_ID, AQ_RUN_TOKEN):
  heartbeat | progress [--succeeded N] [--failed N] [MESSAGE...] | ask QUESTION... | fail MESSAGE...
  complete [--summary TEXT | TEXT...] [--files a,b] [--outputs JSON] [--no-changes]
  usage --input N --output N [--cache-read N] [--cache-write N]
  rate-limited [--reset RFC3339 | --in DURATION] [--kind rate_limit|tokens] [--message TEXT]
  plan [--file batch.json] [--json]
  approve REASONS... | reject REASONS...   (a reviewer's verdict, in a review run)

Run "agentqueued ctl COMMAND VERB -h" or "agentqueued agent -h" for flags.
`

// Main is the program: the daemon ("run") and the API client ("ctl").
// Tests construct it with their own arguments, writers and environment.
type Main struct {
	// Args are the command-line arguments without the program name.
	Args []string
	// Stdout receives command output.
	Stdout io.Writer
	// Stderr receives logs and error messages.
	Stderr io.Writer
	// Stdin answers init's question; default os.Stdin.
	Stdin io.Reader
	// Getenv looks up environment variables.
	Getenv func(string) (string, bool)
	// Hostname and PID identify the daemon in the database lease; defaults
	// os.Hostname and os.Getpid.
	Hostname func() (string, error)
	PID      int
	// Geteuid is the daemon's effective user id, for what cannot run as
	// root; default os.Geteuid.
	Geteuid func() int
	// OnHookRunEnd, when set, is called after each hook run has been
	// recorded as finished or skipped (for tests and metrics).
	OnHookRunEnd func(models.HookRun)
	// OnChange, when set, is called after every commit that changed a
	// task's status (for tests and metrics). It must not block.
	OnChange func()
	// Executable is the program each run gets as its agentqueued MCP
	// server (`<Executable> mcp`); empty means this program
	// (os.Executable). Tests running the daemon in-process set a built
	// binary.
	Executable string
	// Environ is the environment each run's is built from (scrubbed, plus
	// what an agent's pass_env names); nil means os.Environ(). Tests
	// running the daemon in-process set one of their own.
	Environ []string

	// dbWatchEvery, when set, replaces dbWatchInterval (for tests).
	dbWatchEvery time.Duration
	// ctlClock, when set, is ctl's clock (for tests): ctl watch's, and
	// the time ctl status and ctl desk measure ages from; default
	// clock.Real.
	ctlClock clock.Clock
	// retentionClock, when set, is the pruner's clock (for tests); default
	// clock.Real.
	retentionClock clock.Clock
	// deskClock, when set, is the desk notifier's clock (for tests);
	// default the real one.
	deskClock clock.Clock

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	closed bool
	runErr error
	ready  chan struct{}
	addr   string
	// metricsAddr is where metrics.listen bound, when set.
	metricsAddr string
	owner       string
	started     bool
}

// NewMain returns a Main for args with the given output and environment.
func NewMain(args []string, stdout, stderr io.Writer, getenv func(string) (string, bool)) *Main {
	if getenv == nil {
		getenv = os.LookupEnv
	}
	return &Main{Args: args, Stdout: stdout, Stderr: stderr, Getenv: getenv, Hostname: os.Hostname,
		PID: os.Getpid(), Geteuid: os.Geteuid, ready: make(chan struct{})}
}

// usageError is a command-line mistake: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// configError is an invalid configuration: exit status 2.
type configError struct{ err error }

func (e *configError) Error() string { return e.err.Error() }
func (e *configError) Unwrap() error { return e.err }

// ExitCode maps an error of Run to the process's exit status.
func ExitCode(err error) int {
	var (
		ue *usageError
		ce *configError
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue), errors.As(err, &ce):
		return exitUsage
	}
	return exitError
}

// Exec runs the program, prints "error: <message>" to Stderr on failure
// and returns the exit status.
func (m *Main) Exec(ctx context.Context) int {
	err := m.Run(ctx)
	if err != nil {
		fmt.Fprintf(m.Stderr, "error: %s\n", terminalText(err.Error()))
		var ue *usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(m.Stderr, "Run \"%s\" for usage.\n", helpCommand(m.Args))
		}
	}
	return ExitCode(err)
}

// helpCommand is the command that prints the help of what args ran: the
// ctl command's own flags when args name one, the agent commands, or the
// program's usage.
func helpCommand(args []string) string {
	if len(args) == 0 {
		return "agentqueued -h"
	}
	switch args[0] {
	case "ctl":
		var words []string
		for i := 1; i < len(args) && len(words) < 2; i++ {
			switch a := strings.TrimLeft(args[i], "-"); {
			case a == "addr" || a == "token" || a == "config":
				i++ // the option's value
			case !strings.HasPrefix(args[i], "-"):
				words = append(words, args[i])
			}
		}
		for n := len(words); n > 0; n-- {
			if _, ok := ctlCommands[strings.Join(words[:n], " ")]; ok {
				return "agentqueued ctl " + strings.Join(words[:n], " ") + " -h"
			}
		}
		return "agentqueued ctl -h"
	case "agent":
		return "agentqueued agent -h"
	case "run", "init", "doctor", "demo", "mcp", "runner":
		return "agentqueued " + args[0] + " -h"
	}
	return "agentqueued -h"
}

// Run runs the subcommand named by Args. For "run" it serves until ctx is
// cancelled or Close is called; Ready is closed once the API listens.
func (m *Main) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.closed || m.started {
		m.mu.Unlock()
		return errors.New("main: Run called after Close or twice")
	}
	m.started = true
	ctx, m.cancel = context.WithCancel(ctx)
	m.done = make(chan struct{})
	m.mu.Unlock()

	err := m.dispatch(ctx)
	if errors.Is(err, flag.ErrHelp) {
		err = nil
	}

	m.mu.Lock()
	m.runErr = err
	m.cancel()
	close(m.done)
	m.mu.Unlock()
	return err
}

func (m *Main) dispatch(ctx context.Context) error {
	args := m.Args
	cmd := "run"
	if len(args) > 0 && (!strings.HasPrefix(args[0], "-") || isHelpFlag(args[0])) {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "run":
		return m.runDaemon(ctx, args)
	case "ctl":
		return m.runCtl(ctx, args)
	case "agent":
		return m.runAgent(ctx, args)
	case "mcp":
		return m.runMCP(ctx, args)
	case "runner":
		return m.runRunner(ctx, args)
	case "demo":
		return m.runDemo(ctx, args)
	case "init":
		return m.runInit(ctx, args)
	case "doctor":
		return m.runDoctor(ctx, args)
	case "version", "--version":
		return m.runVersion(args)
	case "land":
		// `agentqueued land PROJECT` is `agentqueued ctl project land PROJECT`.
		return m.runCtl(ctx, append([]string{"project", "land"}, args...))
	case "help", "-h", "-help", "--help":
		fmt.Fprint(m.Stdout, usage)
		return nil
	}
	return usagef("unknown command %q (want run, init, doctor, land, ctl, agent, mcp, runner, demo, version or help)", cmd)
}

// isHelpFlag reports whether arg asks for help.
func isHelpFlag(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// Close stops a running daemon, waits for Run to return and returns its
// error. It is safe to call more than once and before Run.
func (m *Main) Close() error {
	m.mu.Lock()
	m.closed = true
	cancel, done := m.cancel, m.done
	m.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	<-done
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runErr
}

// Ready is closed once the daemon's API listens; Addr then reports where.
func (m *Main) Ready() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.readyLocked()
}

// readyLocked returns the ready channel, creating it for a Main built
// without NewMain; m.mu must be held.
func (m *Main) readyLocked() chan struct{} {
	if m.ready == nil {
		m.ready = make(chan struct{})
	}
	return m.ready
}

// Addr returns the host:port the daemon's API is bound to, or "" before Ready.
func (m *Main) Addr() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.addr
}

// MetricsAddr returns the host:port the metrics listener (metrics.listen)
// is bound to, or "" before Ready or without one.
func (m *Main) MetricsAddr() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.metricsAddr
}

// LeaseOwner returns the owner id under which the daemon holds the
// database lease, or "" before it holds it.
func (m *Main) LeaseOwner() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.owner
}

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlags parses args with flags and positional arguments interleaved
// and returns the positional ones. -h prints the flags to w and returns
// flag.ErrHelp.
func parseFlags(fs *flag.FlagSet, args []string, w io.Writer) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprintf(w, "Usage of %s:\n", fs.Name())
				fs.SetOutput(w)
				fs.PrintDefaults()
				return nil, err
			}
			return nil, usagef("%s: %v", fs.Name(), err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
