package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/proc"
)

//go:embed demo-agent.sh
var demoAgentScript []byte

// demoPoll is how often the demo looks at the tasks to print their moves.
const demoPoll = 100 * time.Millisecond

// demoStall is how long the demo waits by default for a task to move
// before it gives up.
const demoStall = 2 * time.Minute

// runDemo is the "demo" subcommand: a temporary git repository and project,
// two command agents running demo-agent.sh, and a small DAG (fan-out,
// fan-in, one requires_success=false edge) run to completion by a daemon in
// this process. It exits 0 when every task is COMPLETED and its commit is on
// the repository's main branch.
func (m *Main) runDemo(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("agentqueued demo", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	keep := fs.Bool("keep", false, "keep the temporary directory (its path is printed)")
	stall := fs.Duration("stall", demoStall, "give up when no task has moved for this long")
	timeout := fs.Duration("timeout", 0, "give up after this long in all (0: no limit)")
	if err := fs.Parse(args); err != nil {
		return usagef("demo: %v", err)
	}
	if *stall <= 0 || *timeout < 0 {
		return usagef("demo: --stall must be positive and --timeout not negative")
	}
	if _, err := exec.LookPath("git"); err != nil {
		return errors.New("demo: git is needed and was not found on PATH")
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	dir, err := os.MkdirTemp("", "aq-demo")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if *keep {
		fmt.Fprintf(m.Stdout, "demo directory: %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	script := filepath.Join(dir, "demo-agent.sh")
	if err := os.WriteFile(script, demoAgentScript, 0o755); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	origin := filepath.Join(dir, "origin.git")
	cfgPath := filepath.Join(dir, "agentqueued.yaml")
	cfgText := fmt.Sprintf(`log:
  level: warn
agents:
  - {name: ada, type: command, command: %[1]q, env: {DEMO_BIN: %[2]q, DEMO_AGENT: ada}}
  - {name: grace, type: command, command: %[1]q, env: {DEMO_BIN: %[2]q, DEMO_AGENT: grace}}
orchestrator:
  retry_backoff: 1s
`, script, self)
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		return fmt.Errorf("demo: %w", err)
	}

	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	// The demo waits as long as its tasks keep moving: a slow machine
	// takes longer, a stuck daemon is given up after the stall.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stalled := fmt.Errorf("no task moved for %s", *stall)
	watchdog := time.AfterFunc(*stall, func() { cancel(stalled) })
	defer watchdog.Stop()
	daemon := NewMain([]string{"run", "--config", cfgPath, "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0"},
		io.Discard, m.Stderr, m.Getenv)
	errc := make(chan error, 1)
	go func() { errc <- daemon.Run(ctx) }()
	defer func() {
		if err := daemon.Close(); err != nil {
			fmt.Fprintf(m.Stderr, "demo: daemon: %v\n", err)
		}
	}()
	select {
	case <-daemon.Ready():
	case err := <-errc:
		return fmt.Errorf("demo: the daemon did not start: %w", err)
	case <-ctx.Done():
		return fmt.Errorf("demo: the daemon did not start: %v", context.Cause(ctx))
	}
	client, err := api.NewClient("http://"+daemon.Addr(), "", nil)
	if err != nil {
		return err
	}
	if _, err := client.CreateProject(ctx, models.ProjectSpec{ID: "demo", Name: "Demo", MaxConcurrentAgents: 2,
		Repo: &models.RepoConfig{SourceType: models.RepoInit, SourcePath: origin}}.Project()); err != nil {
		return fmt.Errorf("demo: create project: %w", err)
	}
	soft := false
	dep := func(ids ...string) []models.BatchDependency {
		var out []models.BatchDependency
		for _, id := range ids {
			out = append(out, models.BatchDependency{ID: id})
		}
		return out
	}
	batch := models.TaskBatch{ProjectID: "demo", CreatedBy: "demo", Tasks: []models.BatchTask{
		{LocalID: "design", Title: "Design the feature"},
		{LocalID: "backend", Title: "Build the backend", Dependencies: dep("design")},
		{LocalID: "frontend", Title: "Build the frontend", Dependencies: dep("design")},
		{LocalID: "docs", Title: "Write the docs", Dependencies: []models.BatchDependency{{ID: "design", RequiresSuccess: &soft}}},
		{LocalID: "release", Title: "Release it", Dependencies: dep("backend", "frontend", "docs")},
	}}
	results, err := client.CreateTasks(ctx, batch)
	if err != nil {
		return fmt.Errorf("demo: create tasks: %w", err)
	}
	names := map[string]string{}
	seen := map[string]models.TaskStatus{}
	for _, r := range results {
		names[r.TaskID], seen[r.TaskID] = r.LocalID, r.Status
		fmt.Fprintf(m.Stdout, "%-9s %-22s %s\n", r.LocalID, r.TaskID, r.Status)
	}

	for {
		tasks, err := client.ListTasks(ctx, models.TaskFilter{ProjectID: "demo"})
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		done := 0
		for _, t := range tasks {
			if seen[t.ID] != t.Status {
				fmt.Fprintf(m.Stdout, "%-9s %-22s %s\n", names[t.ID], t.ID, t.Status)
				seen[t.ID] = t.Status
				watchdog.Reset(*stall)
			}
			switch t.Status {
			case models.StatusCompleted:
				done++
			case models.StatusBlocked:
				return fmt.Errorf("demo: task %s (%s) is BLOCKED: %s", names[t.ID], t.ID, t.StatusReason)
			}
		}
		if done == len(results) {
			break
		}
		select {
		case <-ctx.Done():
			switch cause := context.Cause(ctx); {
			case cause == stalled:
				return fmt.Errorf("demo: no task moved for %s (%d of %d tasks completed)", *stall, done, len(results))
			case errors.Is(cause, context.DeadlineExceeded):
				return fmt.Errorf("demo: not finished in %s (%d of %d tasks completed)", *timeout, done, len(results))
			default:
				return fmt.Errorf("demo: stopped: %v (%d of %d tasks completed)", cause, done, len(results))
			}
		case err := <-errc:
			return fmt.Errorf("demo: the daemon stopped: %v", err)
		case <-time.After(demoPoll):
		}
	}
	logCmd := proc.Command(ctx, "git", "--git-dir", origin, "log", "--format=%s", "main")
	logCmd.WaitDelay = time.Second
	out, err := logCmd.Output()
	if err != nil {
		return fmt.Errorf("demo: read the repository: %w", err)
	}
	log := string(out)
	for id, local := range names {
		if !strings.Contains(log, "Merge "+id+":") {
			return fmt.Errorf("demo: the work of %s (%s) is not merged into main", local, id)
		}
	}
	fmt.Fprintf(m.Stdout, "all %d tasks completed; their commits are merged into main:\n%s", len(results), log)
	return nil
}
