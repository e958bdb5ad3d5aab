package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
)

// fleetRunner is one runner process of a fleet test.
type fleetRunner struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	log    *lockedBuffer
}

// startFleetRunner adds runner name to the daemon at addr and starts the
// built binary as that runner, with agents command agents running script
// and its own data directory under dir.
func startFleetRunner(t *testing.T, bin, addr, dir, name string, agents int, script, mark string) *fleetRunner {
	t.Helper()
	var added api.RunnerAdded
	if err := json.Unmarshal([]byte(mustCtl(t, addr, "--json", "runner", "add", name)), &added); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, name)
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(home, "token")
	if err := os.WriteFile(tokenFile, []byte(added.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "data_dir: %s\nlog:\n  level: info\nagents:\n", filepath.Join(home, "data"))
	for i := range agents {
		fmt.Fprintf(&cfg, "  - {name: a%d, type: command, command: %q, env: {DEMO_BIN: %q, DEMO_AGENT: %s-a%d, %s: %q}}\n",
			i, script, bin, name, i, crashMarkEnv, mark)
	}
	cfgPath := filepath.Join(home, "runner.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &fleetRunner{name: name, exited: make(chan struct{}), log: &lockedBuffer{addr: make(chan string, 1),
		assigned: make(chan struct{})}}
	r.cmd = exec.Command(bin, "runner", "--server", "http://"+addr, "--token-file", tokenFile, "--config", cfgPath,
		"--name", name)
	r.cmd.Env = append(os.Environ(), crashMarkEnv+"="+mark)
	r.cmd.Stderr = r.log
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = r.cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-r.exited:
		default:
			syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // clean-up
			<-r.exited
		}
	})
	return r
}

// TestRunnersRunADAG runs a DAG on a CLONE project with every agent on one
// of three runner processes, each with its own data directory and two
// agents: every task COMPLETED exactly once, its work merged into the
// origin exactly once, through git served by the daemon.
func TestRunnersRunADAG(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary and runs a daemon and three runners")
	}
	const tasks, runners, perRunner = 30, 3, 2
	bin := agentqueuedBinary(t)
	watch := progresstest.New(t, "the start of the test")
	dir := t.TempDir()
	script := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(script, []byte(crashAgentScript), 0o755); err != nil {
		t.Fatal(err)
	}
	origin := filepath.Join(dir, "origin.git")
	bareOrigin(t, origin)
	cfgPath := writeFile(t, dir, "daemon.yaml", "log:\n  level: info\norchestrator: {retry_backoff: 100ms, max_backoff: 1s, safety_tick: 500ms}\n")
	d := startCrashDaemon(t, bin, cfgPath, filepath.Join(dir, "daemon"), dir, watch)
	t.Cleanup(func() {
		select {
		case <-d.exited:
		default:
			syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // clean-up
			<-d.exited
		}
		if left := markedProcesses(dir); len(left) > 0 {
			killMarked(left)
		}
	})
	var fleet []*fleetRunner
	logs := func() string {
		var all strings.Builder
		fmt.Fprintf(&all, "--- daemon ---\n%s", d.log.String())
		for _, r := range fleet {
			fmt.Fprintf(&all, "--- runner %s ---\n%s", r.name, r.log.String())
		}
		return all.String()
	}
	failf := func(format string, args ...any) {
		t.Helper()
		t.Fatalf(format+"\n%s", append(args, logs())...)
	}
	for i := range runners {
		fleet = append(fleet, startFleetRunner(t, bin, d.addr, dir, fmt.Sprintf("r%d", i), perRunner, script, dir))
	}
	ctx := watch.Context()
	client, err := api.NewClient("http://"+d.addr, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CreateProject(ctx, models.ProjectSpec{ID: "fleet", MaxConcurrentAgents: runners * perRunner,
		Repo: &models.RepoConfig{SourceType: models.RepoClone, URL: origin}}.Project()); err != nil {
		failf("create project: %v", err)
	}
	results, err := client.CreateTasks(ctx, models.TaskBatch{ProjectID: "fleet", CreatedBy: "fleet-test",
		Tasks: crashDAG(rand.New(rand.NewPCG(20261207, 3)), tasks)})
	if err != nil || len(results) != tasks {
		failf("create tasks: %d results, %v", len(results), err)
	}
	ids := make([]string, len(results))
	for i, res := range results {
		ids[i] = res.TaskID
	}
	for {
		list, err := client.ListTasks(ctx, models.TaskFilter{ProjectID: "fleet", Limit: 1000})
		if err != nil {
			failf("list tasks: %v (%v)", err, watch.Err())
		}
		done := 0
		counts := map[models.TaskStatus]int{}
		for _, tk := range list {
			counts[tk.Status]++
			switch tk.Status {
			case models.StatusCompleted:
				done++
			case models.StatusBlocked:
				failf("task %s is BLOCKED: %s", tk.ID, tk.StatusReason)
			}
		}
		if done == tasks {
			break
		}
		watch.Observe(fmt.Sprintf("tasks by status %v", counts))
		select {
		case <-ctx.Done():
			failf("%d of %d tasks completed: %v", done, tasks, watch.Err())
		case <-d.exited:
			failf("the daemon exited: %v", d.err)
		case <-time.After(100 * time.Millisecond): // polling an external process
		}
	}
	// Every agent that worked is a runner's.
	byAgent := map[string]int{}
	for _, id := range ids {
		det, err := client.GetTask(ctx, id)
		if err != nil {
			failf("get task %s: %v", id, err)
		}
		completed := 0
		for _, e := range det.Events {
			if e.To == models.StatusCompleted {
				completed++
			}
		}
		if completed != 1 {
			t.Errorf("task %s has %d COMPLETED events", id, completed)
		}
		for _, r := range det.Runs {
			if !strings.HasPrefix(r.AgentID, "r") || !strings.Contains(r.AgentID, "/") {
				t.Errorf("task %s ran on %s, not on a runner's agent", id, r.AgentID)
			}
			byAgent[r.AgentID]++
		}
	}
	out, err := exec.Command("git", "--git-dir", origin, "log", "--format=%s", "main").Output()
	if err != nil {
		t.Fatalf("git log: %v", err)
	}
	merges := map[string]int{}
	for line := range strings.Lines(string(out)) {
		if rest, ok := strings.CutPrefix(line, "Merge "); ok {
			if id, _, ok := strings.Cut(rest, ":"); ok {
				merges[id]++
			}
		}
	}
	files, err := exec.Command("git", "--git-dir", origin, "ls-tree", "--name-only", "main").Output()
	if err != nil {
		t.Fatalf("git ls-tree: %v", err)
	}
	for _, id := range ids {
		if merges[id] != 1 {
			t.Errorf("task %s is merged into main %d times", id, merges[id])
		}
		if !bytes.Contains(files, []byte("result-"+id+".txt\n")) {
			t.Errorf("main lacks result-%s.txt", id)
		}
	}
	if t.Failed() || os.Getenv("AQ_TEST_LOG") != "" {
		t.Log(logs())
	}
	t.Logf("runs by agent: %v", byAgent)
}
