package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
)

// envAgentScript writes its environment to $ENV_OUT, changes a file and
// completes.
const envAgentScript = `#!/bin/sh
set -eu
env > "$ENV_OUT"
echo done > done.txt
"$AQ_BIN" agent complete --summary "wrote its environment"
`

// TestRunEnvironmentIsDocumented runs a command agent under the built
// daemon, started with every variable the scrubbed environment may keep
// and one it must not, and checks what the run got against the docs:
// docs/agents.md names each variable of the daemon's that reached the
// run and lists exactly the AQ_* variables the run got, and the package
// docs that list the AQ_* variables name them all.
func TestRunEnvironmentIsDocumented(t *testing.T) {
	t.Parallel()
	bin := agentqueuedBinary(t)
	dir := t.TempDir()
	repo := userRepo(t)
	out := filepath.Join(dir, "env.out")
	script := writeFile(t, dir, "agent.sh", envAgentScript)
	cfg := writeFile(t, dir, "config.yaml", `data_dir: `+filepath.Join(dir, "data")+`
listen: 127.0.0.1:0
projects:
  - id: web
    repo: {path: `+repo+`}
agents:
  - name: worker
    type: command
    command: /bin/sh
    args: ["`+script+`"]
    env: {ENV_OUT: "`+out+`"}
`)
	path, _ := os.LookupEnv("PATH")
	watch := progresstest.New(t, "the daemon's start")
	daemon := exec.Command(bin, "run", "--config", cfg)
	daemon.Env = []string{"PATH=" + path, "HOME=" + dir, "USER=ann", "LOGNAME=ann", "SHELL=/bin/sh", "TERM=dumb",
		"TZ=UTC", "TMPDIR=" + os.TempDir(), "LANG=C", "LC_ALL=C", "SECRET_PROBE=leaked"}
	log := &lockedBuffer{addr: make(chan string, 1), assigned: make(chan struct{})}
	daemon.Stdout, daemon.Stderr = io.Discard, io.MultiWriter(log, &progressWriter{watch: watch})
	daemon.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stopped := startProcess(t, daemon)
	var addr string
	select {
	case addr = <-log.addr:
	case err := <-stopped:
		t.Fatalf("the daemon stopped before it listened: %v\n%s", err, log)
	case <-watch.Done():
		t.Fatalf("the daemon did not listen: %v\n%s", watch.Err(), log)
	}
	c, err := api.NewClient("http://"+addr, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := watch.Context()
	rs, err := c.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{{Title: "Show the environment"}}})
	if err != nil {
		t.Fatal(err)
	}
	id := rs[0].TaskID
	var seq uint64
	for {
		d, err := c.GetTask(ctx, id)
		if err != nil {
			t.Fatalf("task %s: %v\n%s", id, err, log)
		}
		if d.Task.Status == models.StatusCompleted {
			break
		}
		if d.Task.Status.Terminal() {
			t.Fatalf("task %s is %s: %s\n%s", id, d.Task.Status, d.Task.StatusReason, log)
		}
		ch, err := c.WaitForChange(ctx, seq, 0)
		if err != nil {
			t.Fatalf("waiting for task %s (%s): %v\n%s", id, d.Task.Status, err, log)
		}
		if ch.Seq != seq {
			watch.Progress("a change of the daemon's")
		}
		seq = ch.Seq
	}
	if err := daemon.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := <-stopped; err != nil {
		t.Errorf("the daemon after ^C: %v\n%s", err, log)
	}

	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var got, aq []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if name, _, ok := strings.Cut(line, "="); ok && regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`).MatchString(name) {
			got = append(got, name)
			if strings.HasPrefix(name, "AQ_") {
				aq = append(aq, name)
			}
		}
	}
	if slices.Contains(got, "SECRET_PROBE") {
		t.Errorf("a variable of the daemon's that no list names reached the run: %v", got)
	}

	agentsDoc := readRepoFile(t, "docs/agents.md")
	_, section, _ := strings.Cut(agentsDoc, "\n## The environment of a run\n")
	section, _, _ = strings.Cut(section, "\n## ")
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(AQ_[A-Z_]+)` \\| (.*)").FindAllStringSubmatch(section, -1) {
		if strings.HasPrefix(m[2], "a task of") {
			continue // the run context of a workflow run's task (TestWorkflowRunContext)
		}
		documented = append(documented, m[1])
	}
	slices.Sort(aq)
	slices.Sort(documented)
	if !slices.Equal(aq, documented) {
		t.Errorf("a run got %v; docs/agents.md lists %v", aq, documented)
	}
	for _, name := range got {
		if strings.HasPrefix(name, "AQ_") || name == "ENV_OUT" || name == "PWD" || name == "SHLVL" || name == "_" {
			continue // the run's, the agent's own, and what sh sets
		}
		doc := name
		if strings.HasPrefix(name, "LC_") {
			doc = "LC_*"
		}
		if !strings.Contains(section, "`"+doc+"`") {
			t.Errorf("%s of the daemon's environment reached the run; docs/agents.md does not name it", name)
		}
	}
	for _, file := range []string{"internal/orchestrator/doc.go", "internal/agent/doc.go"} {
		text := readRepoFile(t, file)
		for _, name := range aq {
			if !strings.Contains(text, name) {
				t.Errorf("%s does not name %s, which each run gets", file, name)
			}
		}
	}
}

// readRepoFile reads a file of the repository by its path from the top.
func readRepoFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
