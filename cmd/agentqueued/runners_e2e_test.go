package main

import (
	"bytes"
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
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
	"github.com/agentqueued/agentqueued/internal/tlstest"
)

// fleetRunner is one runner process of a fleet test.
type fleetRunner struct {
	name   string
	args   []string
	mark   string
	cmd    *exec.Cmd
	exited chan struct{}
	log    *lockedBuffer
}

// start starts the runner's process (again).
func (r *fleetRunner) start(t *testing.T) {
	t.Helper()
	r.exited = make(chan struct{})
	r.cmd = exec.Command(r.args[0], r.args[1:]...)
	r.cmd.Env = append(os.Environ(), crashMarkEnv+"="+r.mark)
	r.cmd.Stderr = r.log
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd, exited := r.cmd, r.exited
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
}

// startFleetRunner adds runner name to the daemon and starts the built
// binary as that runner, with agents command agents running script (with
// env added to each agent's environment) and its own data directory under
// e.dir; on host host of e.net, when the test has one.
func (e *fleetEnv) startFleetRunner(name string, host, agents int, script string, env map[string]string) *fleetRunner {
	t := e.t
	t.Helper()
	var added api.RunnerAdded
	if err := json.Unmarshal([]byte(e.mustCtl("--json", "runner", "add", name)), &added); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(e.dir, name)
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
		fmt.Fprintf(&cfg, "  - {name: a%d, type: command, command: %q, env: {DEMO_BIN: %q, DEMO_AGENT: %s-a%d, %s: %q",
			i, script, e.bin, name, i, crashMarkEnv, e.dir)
		for k, v := range env {
			fmt.Fprintf(&cfg, ", %s: %q", k, v)
		}
		cfg.WriteString("}}\n")
	}
	cfgPath := filepath.Join(home, "runner.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &fleetRunner{name: name, log: &lockedBuffer{addr: make(chan string, 1), assigned: make(chan struct{})}}
	r.args = []string{e.bin, "runner", "--server", e.url, "--token-file", tokenFile, "--config", cfgPath, "--name", name}
	if e.net != nil {
		r.args = e.net.command(host, append(r.args, "--ca-file", e.caFile)...)
	}
	r.mark = e.dir
	r.start(t)
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

// fleetAgentScript is the runners' agents' program: crashAgentScript,
// first waiting for a line from the FIFO $HOLD when it is set.
const fleetAgentScript = `#!/bin/sh
set -eu
cat > /dev/null
if [ -n "${HOLD:-}" ]; then read -r _ < "$HOLD"; fi
if [ -n "${GO_FILE:-}" ]; then while [ ! -e "$GO_FILE" ]; do sleep 0.1; done; fi
echo "$AQ_TASK_ID attempt $AQ_ATTEMPT by $DEMO_AGENT" > "result-$AQ_TASK_ID.txt"
git add "result-$AQ_TASK_ID.txt"
git -c user.name="$DEMO_AGENT" -c user.email=agent@localhost -c commit.gpgsign=false \
  commit -q -m "Result of $AQ_TASK_ID"
"$DEMO_BIN" agent complete --summary "wrote result-$AQ_TASK_ID.txt"
`

// fleetEnv is a daemon (the built binary) on a CLONE project "fleet",
// with runner processes added by runner. Where the machine allows it
// (newHostNet), each runner runs on a host of its own: a network
// namespace reaching the daemon, which listens on the test's bridge over
// TLS with a token, only by its own address; otherwise (not with CI=true)
// the daemon and the runners share 127.0.0.1.
type fleetEnv struct {
	t       *testing.T
	cfgPath string
	listen  string
	url     string // the daemon's base URL
	caFile  string // the authority of the daemon's certificate, with net
	token   string // api.token, with net
	net     *hostNet
	bin     string
	dir     string
	script  string
	origin  string
	d       *crashDaemon
	fleet   []*fleetRunner
	watch   *progresstest.Watchdog
	client  *api.Client
}

// fleetNet returns the test's network of hosts, or nil when the machine
// has none to give (then the test fails with CI=true).
func fleetNet(t *testing.T) *hostNet {
	t.Helper()
	n, err := newHostNet(t)
	if err == nil {
		return n
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("the runners need hosts of their own: network namespaces with veth pairs and a bridge "+
			"(root, ip from iproute2, ip netns add): %v", err)
	}
	t.Logf("the runners share 127.0.0.1 with the daemon: no network namespaces here (%v)", err)
	return nil
}

// newFleetEnv starts the daemon with daemonYAML as its configuration and
// creates the project.
func newFleetEnv(t *testing.T, daemonYAML string) *fleetEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary and runs a daemon and runners")
	}
	e := &fleetEnv{t: t, bin: agentqueuedBinary(t), dir: t.TempDir(), watch: progresstest.New(t, "the start of the test")}
	// The network first: its clean-up runs last, once every process of
	// the test is ended.
	e.net = fleetNet(t)
	e.script = filepath.Join(e.dir, "agent.sh")
	if err := os.WriteFile(e.script, []byte(fleetAgentScript), 0o755); err != nil {
		t.Fatal(err)
	}
	e.origin = filepath.Join(e.dir, "origin.git")
	bareOrigin(t, e.origin)
	host, scheme := "127.0.0.1", "http"
	daemonYAML = "log:\n  level: info\n" + daemonYAML
	if e.net != nil {
		// Beyond loopback the daemon serves only over TLS, with a token.
		host, scheme = e.net.gateway(), "https"
		ca := tlstest.NewCA(t, "fleet test CA")
		e.caFile = ca.WriteCA(t, e.dir)
		cert, key := ca.Issue(t, host, "127.0.0.1").Write(t, e.dir)
		secret := make([]byte, 32)
		cryptorand.Read(secret)
		e.token = hex.EncodeToString(secret)
		daemonYAML += fmt.Sprintf("api:\n  token: %s\n  tls_cert: %s\n  tls_key: %s\n", e.token, cert, key)
	}
	e.cfgPath = writeFile(t, e.dir, "daemon.yaml", daemonYAML)
	// A fixed port: runners find a restarted daemon where it was.
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	e.listen = ln.Addr().String()
	ln.Close()
	e.d = startCrashDaemonAt(t, e.bin, e.cfgPath, filepath.Join(e.dir, "daemon"), e.dir, e.listen, e.watch)
	t.Cleanup(func() {
		select {
		case <-e.d.exited:
		default:
			syscall.Kill(-e.d.cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // clean-up
			<-e.d.exited
		}
		if left := markedProcesses(e.dir); len(left) > 0 {
			killMarked(left)
		}
	})
	e.url = scheme + "://" + e.d.addr
	var hc *http.Client
	if e.caFile != "" {
		ca, err := os.ReadFile(e.caFile)
		if err != nil {
			t.Fatal(err)
		}
		roots, err := api.TrustedRoots(ca)
		if err != nil {
			t.Fatal(err)
		}
		tr := api.NewTransport(roots)
		t.Cleanup(tr.CloseIdleConnections)
		hc = &http.Client{Transport: tr}
	}
	if e.client, err = api.NewClient(e.url, e.token, hc); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CreateProject(e.watch.Context(), models.ProjectSpec{ID: "fleet", MaxConcurrentAgents: 16,
		Repo: &models.RepoConfig{SourceType: models.RepoClone, URL: e.origin}}.Project()); err != nil {
		e.fatalf("create project: %v", err)
	}
	return e
}

// ctlArgs are ctl's arguments reaching the daemon, and its environment.
func (e *fleetEnv) ctlArgs(args ...string) ([]string, map[string]string) {
	full := []string{"ctl", "--addr", e.url}
	if e.caFile != "" {
		full = append(full, "--ca-file", e.caFile)
	}
	env := map[string]string{}
	if e.token != "" {
		env[envToken] = e.token
	}
	return append(full, args...), env
}

// mustCtl runs ctl against the daemon and fails the test unless it
// succeeds.
func (e *fleetEnv) mustCtl(args ...string) string {
	e.t.Helper()
	full, env := e.ctlArgs(args...)
	var stdout, stderr bytes.Buffer
	if code := NewMain(full, &stdout, &stderr, envOf(env)).Exec(context.Background()); code != 0 {
		e.fatalf("ctl %s: exit %d, stderr: %s", strings.Join(args, " "), code, stderr.String())
	}
	return stdout.String()
}

// runner starts a runner process with agents agents.
func (e *fleetEnv) runner(name string, agents int, env map[string]string) *fleetRunner {
	return e.runnerWith(name, agents, e.script, env)
}

// runnerWith starts a runner process whose agents run script, on the
// next host.
func (e *fleetEnv) runnerWith(name string, agents int, script string, env map[string]string) *fleetRunner {
	r := e.startFleetRunner(name, len(e.fleet), agents, script, env)
	e.fleet = append(e.fleet, r)
	return r
}

// logs are the daemon's and the runners' logs.
func (e *fleetEnv) logs() string {
	var all strings.Builder
	fmt.Fprintf(&all, "--- daemon ---\n%s", e.d.log.String())
	for _, r := range e.fleet {
		fmt.Fprintf(&all, "--- runner %s ---\n%s", r.name, r.log.String())
	}
	return all.String()
}

func (e *fleetEnv) fatalf(format string, args ...any) {
	e.t.Helper()
	e.t.Fatalf(format+"\n%s", append(args, e.logs())...)
}

// await polls the project's tasks until done says they are as wanted; a
// BLOCKED task fails the test.
func (e *fleetEnv) await(what string, done func([]models.Task) bool) []models.Task {
	e.t.Helper()
	ctx := e.watch.Context()
	for {
		list, err := e.client.ListTasks(ctx, models.TaskFilter{ProjectID: "fleet", Limit: 1000})
		if err != nil {
			e.fatalf("list tasks: %v (%v)", err, e.watch.Err())
		}
		counts := map[models.TaskStatus]int{}
		for _, tk := range list {
			counts[tk.Status]++
			if tk.Status == models.StatusBlocked {
				e.fatalf("task %s is BLOCKED: %s", tk.ID, tk.StatusReason)
			}
		}
		if done(list) {
			return list
		}
		e.watch.Observe(fmt.Sprintf("tasks by status %v", counts))
		select {
		case <-ctx.Done():
			e.fatalf("waiting for %s: %v", what, e.watch.Err())
		case <-e.d.exited:
			e.fatalf("the daemon exited: %v", e.d.err)
		case <-time.After(100 * time.Millisecond): // polling an external process
		}
	}
}

// allCompleted reports whether every task of list is COMPLETED.
func allCompleted(list []models.Task) bool {
	for _, tk := range list {
		if tk.Status != models.StatusCompleted {
			return false
		}
	}
	return len(list) > 0
}

// checkOnce checks that each task of ids completed exactly once and its
// work is merged into the origin's main exactly once; it returns the
// tasks' details.
func (e *fleetEnv) checkOnce(ids []string) map[string]models.TaskDetail {
	e.t.Helper()
	t := e.t
	details := map[string]models.TaskDetail{}
	for _, id := range ids {
		det, err := e.client.GetTask(e.watch.Context(), id)
		if err != nil {
			e.fatalf("get task %s: %v", id, err)
		}
		details[id] = det
		completed := 0
		for _, ev := range det.Events {
			if ev.To == models.StatusCompleted {
				completed++
			}
		}
		if completed != 1 {
			t.Errorf("task %s has %d COMPLETED events", id, completed)
		}
	}
	out, err := exec.Command("git", "--git-dir", e.origin, "log", "--format=%s", "main").Output()
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
	files, err := exec.Command("git", "--git-dir", e.origin, "ls-tree", "--name-only", "main").Output()
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
	return details
}

// TestRunnersRunADAG runs a DAG on a CLONE project with every agent on one
// of three runner processes, each with its own data directory, host
// (network namespace, where the machine has them) and two agents: the
// daemon sees each runner from its host's address, and every task
// COMPLETED exactly once, its work merged into the origin exactly once,
// through git served by the daemon.
func TestRunnersRunADAG(t *testing.T) {
	t.Parallel()
	const tasks, runners, perRunner = 30, 3, 2
	e := newFleetEnv(t, "orchestrator: {retry_backoff: 100ms, max_backoff: 1s, safety_tick: 500ms}\n")
	for i := range runners {
		e.runner(fmt.Sprintf("r%d", i), perRunner, nil)
	}
	results, err := e.client.CreateTasks(e.watch.Context(), models.TaskBatch{ProjectID: "fleet", CreatedBy: "fleet-test",
		Tasks: crashDAG(rand.New(rand.NewPCG(20261207, 3)), tasks)})
	if err != nil || len(results) != tasks {
		e.fatalf("create tasks: %d results, %v", len(results), err)
	}
	ids := make([]string, len(results))
	for i, res := range results {
		ids[i] = res.TaskID
	}
	e.await("every task completed", allCompleted)
	// The daemon saw each runner from its own host.
	var from []string
	for i := range runners {
		name, want := fmt.Sprintf("r%d", i), "127.0.0.1"
		if e.net != nil {
			want = e.net.addr(i)
		}
		var shown models.Runner
		if err := json.Unmarshal([]byte(e.mustCtl("--json", "runner", "show", name)), &shown); err != nil {
			t.Fatal(err)
		}
		if host, _, err := net.SplitHostPort(shown.Address); err != nil || host != want {
			t.Errorf("runner %s connected from %q, want %s:PORT", name, shown.Address, want)
		}
		from = append(from, name+" from "+shown.Address)
	}
	byAgent := map[string]int{}
	for id, det := range e.checkOnce(ids) {
		for _, r := range det.Runs {
			if !strings.HasPrefix(r.AgentID, "r") || !strings.Contains(r.AgentID, "/") {
				t.Errorf("task %s ran on %s, not on a runner's agent", id, r.AgentID)
			}
			byAgent[r.AgentID]++
		}
	}
	if t.Failed() || os.Getenv("AQ_TEST_LOG") != "" {
		t.Log(e.logs())
	}
	t.Logf("runs by agent: %v; the daemon at %s saw %s", byAgent, e.url, strings.Join(from, ", "))
}

// fleetLease is the daemon configuration of the lease tests: a short lease.
const fleetLease = "orchestrator: {retry_backoff: 100ms, max_backoff: 1s, safety_tick: 500ms, runner_lease: 3s, runner_heartbeat: 500ms}\n"

// holdFIFO makes a FIFO an agent blocks on until the test writes a line.
func holdFIFO(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startedOn waits until the task runs on agent and returns it.
func (e *fleetEnv) startedOn(id, agentID string) {
	e.t.Helper()
	e.await("task "+id+" in progress on "+agentID, func(list []models.Task) bool {
		for _, tk := range list {
			if tk.ID == id && tk.Status == models.StatusInProgress && tk.AssignedAgentID != nil && *tk.AssignedAgentID == agentID {
				return true
			}
		}
		return false
	})
}

// A runner killed with SIGKILL mid-run loses its run when its lease
// expires: the task goes back to READY by RECOVERY, no retry used, and
// another runner completes it, once.
func TestRunnerKilledMidRunLosesItsRun(t *testing.T) {
	t.Parallel()
	e := newFleetEnv(t, fleetLease)
	hold := holdFIFO(t, e.dir, "hold")
	r0 := e.runner("r0", 1, map[string]string{"HOLD": hold})
	res, err := e.client.CreateTasks(e.watch.Context(), models.TaskBatch{ProjectID: "fleet", CreatedBy: "fleet-test",
		Tasks: []models.BatchTask{{Title: "survive a runner"}}})
	if err != nil {
		e.fatalf("create task: %v", err)
	}
	id := res[0].TaskID
	e.startedOn(id, "r0/a0")
	if err := r0.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-r0.exited
	killed := time.Now()
	e.runner("r1", 1, nil)
	e.await("the task completed on r1", allCompleted)
	took := time.Since(killed)
	det := e.checkOnce([]string{id})[id]
	var recovered, retried bool
	for _, ev := range det.Events {
		recovered = recovered || ev.Event == models.EventRecovery
		retried = retried || ev.Event == models.EventRetry
	}
	if !recovered || retried || det.Task.RetryCount != 0 {
		t.Errorf("events after the runner's death: recovery %v, retry %v, retries %d", recovered, retried, det.Task.RetryCount)
	}
	if n := len(det.Runs); n != 2 || det.Runs[0].AgentID != "r0/a0" || det.Runs[0].Outcome == models.RunOutcomeCompleted ||
		det.Runs[1].AgentID != "r1/a0" || det.Runs[1].Outcome != models.RunOutcomeCompleted {
		t.Errorf("runs: %+v", det.Runs)
	}
	if t.Failed() || os.Getenv("AQ_TEST_LOG") != "" {
		t.Log(e.logs())
	}
	t.Logf("completed on another runner %s after the kill (lease 3 s)", took.Round(time.Millisecond))
}

// A runner cut off past its lease (stopped with SIGSTOP) loses its run to
// another runner; when it comes back its agent's late completion is
// refused and the agent is ended.
func TestRunnerCutOffHasItsLateWorkRefused(t *testing.T) {
	t.Parallel()
	e := newFleetEnv(t, fleetLease)
	hold := holdFIFO(t, e.dir, "hold")
	r0 := e.runner("r0", 1, map[string]string{"HOLD": hold})
	res, err := e.client.CreateTasks(e.watch.Context(), models.TaskBatch{ProjectID: "fleet", CreatedBy: "fleet-test",
		Tasks: []models.BatchTask{{Title: "outlive a partition"}}})
	if err != nil {
		e.fatalf("create task: %v", err)
	}
	id := res[0].TaskID
	e.startedOn(id, "r0/a0")
	if err := syscall.Kill(r0.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	e.runner("r1", 1, nil)
	e.await("the task completed on r1", allCompleted)
	// The cut-off runner's agent finishes its work now, and its runner
	// comes back.
	ended := r0.log.await(`msg="run ended"`)
	f, err := os.OpenFile(hold, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("go\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := syscall.Kill(r0.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-e.watch.Done():
		e.fatalf("the runner back from its partition: %v", e.watch.Err())
	}
	// Its heartbeat's answer or its report's refusal ended the agent.
	if l := r0.log.String(); !strings.Contains(l, "the daemon ends a run") && !strings.Contains(l, "the daemon no longer has the run") {
		t.Errorf("the runner back from its partition was not told its run is gone:\n%s", l)
	}
	det := e.checkOnce([]string{id})[id]
	if n := len(det.Runs); n != 2 || det.Runs[1].AgentID != "r1/a0" || det.Runs[1].Outcome != models.RunOutcomeCompleted {
		t.Errorf("runs: %+v", det.Runs)
	}
	if t.Failed() || os.Getenv("AQ_TEST_LOG") != "" {
		t.Log(e.logs())
	}
}

// askingAgentScript prints, reports progress, asks a question and paints
// with the answer.
const askingAgentScript = `#!/bin/sh
set -eu
cat > /dev/null
echo "starting $AQ_TASK_ID"
"$DEMO_BIN" agent progress "half way"
colour=$("$DEMO_BIN" agent ask "Which colour?")
echo "got $colour"
echo "$colour" > "result-$AQ_TASK_ID.txt"
git add "result-$AQ_TASK_ID.txt"
git -c user.name=agent -c user.email=agent@localhost -c commit.gpgsign=false commit -q -m "Paint"
"$DEMO_BIN" agent complete --summary "painted it $colour"
`

// A remote agent's question, relayed by its runner, is answered through
// the API and the answer reaches the agent; its output, and its progress
// in order with it, is followed live with ctl task logs -f.
func TestRemoteAgentAsksAndIsFollowed(t *testing.T) {
	t.Parallel()
	e := newFleetEnv(t, "orchestrator: {safety_tick: 500ms}\n")
	script := writeFile(t, e.dir, "ask.sh", askingAgentScript)
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	e.runnerWith("r0", 1, script, nil)
	ctx := e.watch.Context()
	res, err := e.client.CreateTasks(ctx, models.TaskBatch{ProjectID: "fleet", CreatedBy: "fleet-test",
		Tasks: []models.BatchTask{{Title: "Paint it"}}})
	if err != nil {
		e.fatalf("create task: %v", err)
	}
	id := res[0].TaskID
	wrote := make(chan struct{}, 1)
	followArgs, followEnv := e.ctlArgs("task", "logs", id, "-f")
	follow := startMainArgs(ctx, followEnv, func() {
		e.watch.Progress("ctl printed")
		select {
		case wrote <- struct{}{}:
		default:
		}
	}, followArgs...)
	for want := "starting " + id + "\n[progress] half way\n"; !strings.Contains(follow.out.String(), want); {
		select {
		case <-wrote:
		case r := <-follow.done:
			e.fatalf("ctl task logs -f ended (exit %d) before the run's output:\n%s\n%s", r.code, r.stdout, r.stderr)
		case <-ctx.Done():
			e.fatalf("waiting for the output: %v\n%s", e.watch.Err(), follow.out.String())
		}
	}
	var q models.Question
	for q.ID == 0 {
		qs, err := e.client.OpenQuestions(ctx)
		if err != nil {
			e.fatalf("questions: %v", err)
		}
		for _, x := range qs {
			if x.TaskID == id {
				q = x
			}
		}
		if q.ID == 0 {
			select {
			case <-ctx.Done():
				e.fatalf("no question: %v", e.watch.Err())
			case <-time.After(100 * time.Millisecond): // polling an external process
			}
		}
	}
	if q.Text != "Which colour?" {
		t.Errorf("question %+v", q)
	}
	if _, err := e.client.AnswerQuestion(ctx, q.ID, "teal", "tester"); err != nil {
		e.fatalf("answer: %v", err)
	}
	var done ctlResult
	select {
	case done = <-follow.done:
	case <-ctx.Done():
		e.fatalf("ctl task logs -f did not end with the run: %v\n%s", e.watch.Err(), follow.out.String())
	}
	if done.code != 0 || !strings.HasSuffix(done.stdout, "got teal\n") {
		t.Errorf("ctl task logs -f: exit %d\n%s\nstderr: %s", done.code, done.stdout, done.stderr)
	}
	e.await("the task completed", allCompleted)
	e.checkOnce([]string{id})
	out, err := exec.Command("git", "--git-dir", e.origin, "show", "main:result-"+id+".txt").Output()
	if err != nil || string(out) != "teal\n" {
		t.Errorf("the painted file in the origin: %q %v", out, err)
	}
	if t.Failed() || os.Getenv("AQ_TEST_LOG") != "" {
		t.Log(e.logs())
	}
}

// A daemon killed with SIGKILL while runners work loses no run: the
// runners keep their agents working, keep their reports, and deliver them
// to the restarted daemon, which takes the runs up where they were;
// nothing is applied twice.
func TestDaemonKilledWhileRunnersWork(t *testing.T) {
	t.Parallel()
	e := newFleetEnv(t, fleetLease)
	goFile := filepath.Join(e.dir, "go")
	e.runner("r0", 2, map[string]string{"GO_FILE": goFile})
	e.runner("r1", 2, map[string]string{"GO_FILE": goFile})
	var batch []models.BatchTask
	for i := range 4 {
		batch = append(batch, models.BatchTask{LocalID: fmt.Sprintf("root%d", i), Title: fmt.Sprintf("root %d", i)},
			models.BatchTask{Title: fmt.Sprintf("after %d", i), Dependencies: []models.BatchDependency{{ID: fmt.Sprintf("root%d", i)}}})
	}
	res, err := e.client.CreateTasks(e.watch.Context(), models.TaskBatch{ProjectID: "fleet", CreatedBy: "fleet-test", Tasks: batch})
	if err != nil {
		e.fatalf("create tasks: %v", err)
	}
	ids := make([]string, len(res))
	for i, r := range res {
		ids[i] = r.TaskID
	}
	e.await("four runs in progress", func(list []models.Task) bool {
		n := 0
		for _, tk := range list {
			if tk.Status == models.StatusInProgress {
				n++
			}
		}
		return n == 4
	})
	e.d.kill(t)
	e.client.CloseIdleConnections()
	// The agents finish while the daemon is away; their runners keep
	// what they report.
	undelivered := e.fleet[0].log.await("report not delivered")
	if err := os.WriteFile(goFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-undelivered:
	case <-e.watch.Done():
		e.fatalf("no report waited for the daemon: %v", e.watch.Err())
	}
	first := e.d
	e.d = startCrashDaemonAt(t, e.bin, e.cfgPath, filepath.Join(e.dir, "daemon"), e.dir, e.listen, e.watch)
	e.await("every task completed", allCompleted)
	details := e.checkOnce(ids)
	for _, id := range ids {
		det := details[id]
		for _, ev := range det.Events {
			if ev.Event == models.EventRecovery {
				t.Errorf("task %s was recovered: its run was lost (%s)", id, ev.Reason)
			}
		}
		if len(det.Runs) != 1 || det.Runs[0].Outcome != models.RunOutcomeCompleted {
			t.Errorf("task %s: runs %+v", id, det.Runs)
		}
	}
	if n := strings.Count(e.d.log.String(), "took up a run its runner works on"); n != 4 {
		t.Errorf("the restarted daemon took up %d runs, want 4", n)
	}
	if t.Failed() || os.Getenv("AQ_TEST_LOG") != "" {
		t.Logf("--- the killed daemon ---\n%s", first.log.String())
		t.Log(e.logs())
	}
}

// runsOf counts the runs of task id.
func (e *fleetEnv) runsOf(id string) int {
	det, err := e.client.GetTask(e.watch.Context(), id)
	if err != nil {
		e.fatalf("get task %s: %v", id, err)
	}
	return len(det.Runs)
}
