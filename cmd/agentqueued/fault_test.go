package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/http/httptrace"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// faultAgentScript is the agents' program in the fault tests: like
// crashAgentScript it commits a file named after its task and reports
// completion, and first it records in $FAULT_RAN that it ran, and whether
// any process of another run of its agent in this test (another run token
// with the same DEMO_AGENT and test mark) was still alive then: a run of a
// killed daemon that goes on in the checkout the new run was given.
const faultAgentScript = `#!/bin/sh
set -eu
others=$(grep -lzx "CRASH_TEST_DIR=$CRASH_TEST_DIR" /proc/[0-9]*/environ 2>/dev/null |
  xargs -r grep -lzx "DEMO_AGENT=$DEMO_AGENT" 2>/dev/null |
  xargs -r grep -Lzx "AQ_RUN_TOKEN=$AQ_RUN_TOKEN" 2>/dev/null || true)
for e in $others; do
  p=${e#/proc/}; p=${p%/environ}
  what=$(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null || true)
  task=$(tr '\0' '\n' < "$e" 2>/dev/null | grep '^AQ_TASK_ID=' || true)
  state=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f1-3 || true)
  [ -n "$what$task" ] && echo "overlap $AQ_TASK_ID $AQ_ATTEMPT $DEMO_AGENT: pid $p ($task, state $state): $what" >> "$FAULT_RAN"
done
echo "run $AQ_TASK_ID $AQ_ATTEMPT $DEMO_AGENT" >> "$FAULT_RAN"
cat > /dev/null
echo "$AQ_TASK_ID attempt $AQ_ATTEMPT by $DEMO_AGENT" > "result-$AQ_TASK_ID.txt"
git add "result-$AQ_TASK_ID.txt"
git -c user.name="$DEMO_AGENT" -c user.email=agent@localhost -c commit.gpgsign=false \
  commit -q -m "Result of $AQ_TASK_ID"
"$DEMO_BIN" agent complete --summary "wrote result-$AQ_TASK_ID.txt"
`

// faultRig is the real binary run on one data directory through several
// lives, each ended by the test.
type faultRig struct {
	t                                  *testing.T
	bin, dir, dataDir, cfgPath, ranLog string
	watch                              *progresstest.Watchdog
	lives                              []*crashDaemon
}

// newFaultRig writes the agents' program and a configuration of n command
// agents, and ends every process of the test when it ends.
func newFaultRig(t *testing.T, agents int) *faultRig {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary and kills it again and again")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is needed")
	}
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("the test watches the daemon's children in /proc")
	}
	f := &faultRig{t: t, bin: agentqueuedBinary(t), dir: t.TempDir()}
	f.watch = progresstest.New(t, "the start of the test")
	f.dataDir = filepath.Join(f.dir, "data")
	f.ranLog = filepath.Join(f.dir, "ran.log")
	f.cfgPath = filepath.Join(f.dir, "agentqueued.yaml")
	script := filepath.Join(f.dir, "fault-agent.sh")
	if err := os.WriteFile(script, []byte(faultAgentScript), 0o755); err != nil {
		t.Fatal(err)
	}
	var cfg strings.Builder
	cfg.WriteString("log:\n  level: info\nagents:\n")
	for i := range agents {
		fmt.Fprintf(&cfg, "  - {name: a%d, type: command, command: %q, env: {DEMO_BIN: %q, DEMO_AGENT: a%d, FAULT_RAN: %q, %s: %q}}\n",
			i, script, f.bin, i, f.ranLog, crashMarkEnv, f.dir)
	}
	cfg.WriteString("orchestrator: {retry_backoff: 100ms, max_backoff: 1s, stop_grace: 1s, start_timeout: 30s, safety_tick: 500ms}\n")
	if err := os.WriteFile(f.cfgPath, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, d := range f.lives {
			select {
			case <-d.exited:
			default:
				syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // clean-up after a failure
				<-d.exited
			}
		}
		if left := markedProcesses(f.dir); len(left) > 0 {
			killMarked(left)
		}
		if t.Failed() || os.Getenv("AQ_TEST_LOG") != "" {
			t.Log(f.logs())
		}
	})
	return f
}

// start starts a life of the daemon on the rig's data.
func (f *faultRig) start() *crashDaemon {
	f.t.Helper()
	d := startCrashDaemon(f.t, f.bin, f.cfgPath, f.dataDir, f.dir, f.watch)
	f.lives = append(f.lives, d)
	return d
}

// logs are every life's log.
func (f *faultRig) logs() string {
	var all strings.Builder
	for i, d := range f.lives {
		fmt.Fprintf(&all, "--- daemon life %d ---\n%s", i+1, d.log.String())
	}
	if b, err := os.ReadFile(f.ranLog); err == nil {
		fmt.Fprintf(&all, "--- %s ---\n%s", filepath.Base(f.ranLog), b)
	}
	return all.String()
}

// client is an API client of life d.
func (f *faultRig) client(d *crashDaemon) *api.Client {
	f.t.Helper()
	c, err := api.NewClient("http://"+d.addr, "", nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// ran returns the lines of the agents' record.
func (f *faultRig) ran() []string {
	f.t.Helper()
	b, err := os.ReadFile(f.ranLog)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// waitAllCompleted waits, through life d, until every task of the
// projects is COMPLETED, and returns them.
func (f *faultRig) waitAllCompleted(d *crashDaemon, projects ...string) []models.Task {
	f.t.Helper()
	client := f.client(d)
	defer client.CloseIdleConnections()
	ctx := f.watch.Context()
	for {
		var all []models.Task
		counts := map[models.TaskStatus]int{}
		for _, p := range projects {
			tasks, err := client.ListTasks(ctx, models.TaskFilter{ProjectID: p})
			if err != nil {
				f.t.Fatalf("list tasks: %v (%v)", err, f.watch.Err())
			}
			all = append(all, tasks...)
		}
		for _, tk := range all {
			counts[tk.Status]++
			if tk.Status == models.StatusBlocked {
				f.t.Fatalf("task %s is BLOCKED: %s", tk.ID, tk.StatusReason)
			}
		}
		if counts[models.StatusCompleted] == len(all) {
			return all
		}
		f.watch.Observe(fmt.Sprintf("tasks by status %v", counts))
		f.checkAgents(ctx, client)
		f.checkStarts(d)
		select {
		case <-ctx.Done():
			f.t.Fatalf("%d of %d tasks completed: %v", counts[models.StatusCompleted], len(all), f.watch.Err())
		case <-d.exited:
			f.t.Fatalf("the daemon exited: %v", d.err)
		case <-time.After(100 * time.Millisecond): // polling an external process
		}
	}
}

// maxStartFailures is how many runs may fail to start in one life of the
// daemon before the test gives up: a few are expected after a kill (the
// project cools down and tries again), a loop of them is a repository the
// daemon cannot repair.
const maxStartFailures = 25

// checkStarts fails at once when life d keeps failing to start runs.
func (f *faultRig) checkStarts(d *crashDaemon) {
	f.t.Helper()
	log := d.log.String()
	if n := strings.Count(log, `msg="run did not start`); n > maxStartFailures {
		last := log[strings.LastIndex(log, `msg="run did not start`):]
		last, _, _ = strings.Cut(last, "\n")
		f.t.Fatalf("daemon life %d failed to start %d runs; the last one: %s", len(f.lives), n, last)
	}
}

// checkAgents fails at once when an agent was set aside (ERROR): it takes
// no more work, and waiting for it would only end in a stall.
func (f *faultRig) checkAgents(ctx context.Context, client *api.Client) {
	f.t.Helper()
	agents, err := client.ListAgents(ctx)
	if err != nil {
		f.t.Fatalf("list agents: %v (%v)", err, f.watch.Err())
	}
	for _, a := range agents {
		if a.State == models.AgentError {
			f.t.Fatalf("agent %s is in ERROR", a.ID)
		}
	}
}

// shutdown stops life d with SIGTERM and waits for it.
func (f *faultRig) shutdown(d *crashDaemon) {
	f.t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		f.t.Fatal(err)
	}
	select {
	case <-d.exited:
		if d.err != nil {
			f.t.Fatalf("the daemon's shutdown: %v", d.err)
		}
	case <-time.After(progresstest.Stall()):
		f.t.Fatal("the daemon did not stop on SIGTERM")
	}
}

// checkNothingLeft checks that no process of the test is alive. The
// process table is polled for processes already on their way out.
func (f *faultRig) checkNothingLeft() {
	f.t.Helper()
	left := markedProcesses(f.dir)
	for grace := time.Now().Add(progresstest.Stall()); len(left) > 0 && time.Now().Before(grace); left = markedProcesses(f.dir) {
		<-time.After(50 * time.Millisecond) // polling the process table
	}
	if len(left) > 0 {
		killMarked(left)
		f.t.Errorf("processes left behind after the shutdown (killed now): %v", left)
	}
}

// checkStore checks the database after the last shutdown: every task of
// ids COMPLETED exactly once, no run open, every agent idle.
func (f *faultRig) checkStore(ids []string) {
	f.t.Helper()
	ctx := context.Background()
	st := storetest.OpenAt(f.t, filepath.Join(f.dataDir, "agentqueued.db"))
	defer st.Close() // the rig restarts the daemon over this file
	for _, id := range ids {
		det, err := st.GetTaskDetail(ctx, id)
		if err != nil {
			f.t.Fatal(err)
		}
		completed := 0
		for _, e := range det.Events {
			if e.To == models.StatusCompleted {
				completed++
			}
		}
		if det.Task.Status != models.StatusCompleted || completed != 1 {
			f.t.Errorf("task %s is %s with %d COMPLETED events", id, det.Task.Status, completed)
		}
	}
	if open, err := st.OpenRuns(ctx); err != nil || len(open) != 0 {
		f.t.Errorf("open runs after the shutdown: %+v %v", open, err)
	}
	agents, err := st.ListAgents(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, a := range agents {
		if a.State != models.AgentIdle || a.PID != nil || a.CurrentTaskID != nil {
			f.t.Errorf("agent %s after the shutdown: %s, pid %v, task %v", a.ID, a.State, a.PID, a.CurrentTaskID)
		}
	}
}

// checkMerges checks that the origin's main merges each task of ids
// exactly once, each merge bringing exactly the task's own file, and
// nothing else.
func (f *faultRig) checkMerges(origin string, ids []string) {
	f.t.Helper()
	out, err := exec.Command("git", "--git-dir", origin, "log", "--first-parent", "--format=%H %s", "main").Output()
	if err != nil {
		f.t.Fatalf("git log: %v", err)
	}
	merges := map[string]int{}
	for line := range strings.Lines(string(out)) {
		hash, subject, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest, ok := strings.CutPrefix(subject, "Merge ")
		if !ok {
			continue
		}
		id, _, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		merges[id]++
		files, err := exec.Command("git", "--git-dir", origin, "diff-tree", "--no-commit-id", "--name-only", "-r", hash+"^1", hash).Output()
		if err != nil {
			f.t.Fatalf("git diff-tree %s: %v", hash, err)
		}
		if got := strings.TrimSpace(string(files)); got != "result-"+id+".txt" {
			f.t.Errorf("the merge of task %s (%s) changes %q, not only its own file", id, hash[:12], got)
		}
	}
	for _, id := range ids {
		if merges[id] != 1 {
			f.t.Errorf("task %s is merged into main %d times", id, merges[id])
		}
		delete(merges, id)
	}
	if len(merges) > 0 {
		f.t.Errorf("merges of unknown tasks: %v", merges)
	}
}

// checkFsck runs git fsck in the origin and in every repository the
// daemon keeps under its data directory, and returns how many it checked.
func (f *faultRig) checkFsck(origins ...string) int {
	f.t.Helper()
	repos := slices.Clone(origins)
	err := filepath.WalkDir(f.dataDir, func(path string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() {
			return nil // a worktree's .git file among them: its repository is checked where it lives
		}
		if e.Name() == ".git" || isBareRepo(path) {
			repos = append(repos, path)
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	if len(repos) <= len(origins) {
		f.t.Errorf("no repository of the daemon found under %s", f.dataDir)
	}
	for _, r := range repos {
		out, err := exec.Command("git", "--git-dir", r, "fsck", "--no-progress", "--no-dangling").CombinedOutput()
		if err != nil {
			f.t.Errorf("git fsck of %s: %v\n%s", r, err, out)
		}
	}
	return len(repos)
}

// isBareRepo reports whether dir looks like a bare repository.
func isBareRepo(dir string) bool {
	for _, name := range []string{"HEAD", "objects", "refs"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return false
		}
	}
	return true
}

// holdWriteLock takes the database's write lock from a connection of its
// own (BEGIN IMMEDIATE) and returns its release. While it is held, no
// write of the daemon commits: a database locked under load.
func holdWriteLock(t *testing.T, path string) (release func()) {
	t.Helper()
	q := url.Values{}
	q.Set("_busy_timeout", strconv.Itoa(int(progresstest.Stall()/time.Millisecond)))
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite3", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(progresstest.Context(t), nil)
	if err != nil {
		db.Close()
		t.Fatalf("take the database's write lock: %v", err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			tx.Rollback() //nolint:errcheck // nothing was written
			db.Close()
		})
	}
	t.Cleanup(release)
	return release
}

// children returns the pids of pid's children.
func children(pid int) []int {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(s); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// procEnvHas reports whether process pid's environment holds an entry
// starting with prefix.
func procEnvHas(pid int, prefix string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return false
	}
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		if bytes.HasPrefix(kv, []byte(prefix)) {
			return true
		}
	}
	return false
}

// faultSign classifies a child of the daemon: "spawn" for an agent's
// process (it carries AQ_TASK_ID); "fetch" for a git fetch or the
// upload-pack serving one; the steps of a merge, run in an integration
// repository (a directory under integ): "merge-tree" and "commit-tree";
// and "publish", the update-ref that moves the origin's branch (in
// origin). what describes it.
func faultSign(pid int, integ, origin string) (kind, what string) {
	if procEnvHas(pid, "AQ_TASK_ID=") {
		return "spawn", fmt.Sprintf("agent process %d", pid)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return "", ""
	}
	cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	switch filepath.Base(args[0]) {
	case "git-upload-pack", "git-receive-pack":
		return "fetch", filepath.Base(args[0])
	}
	for _, a := range args[1:] {
		switch {
		case a == "fetch" || a == "upload-pack" || a == "clone":
			return "fetch", "git " + a
		case (a == "merge-tree" || a == "commit-tree") && strings.HasPrefix(cwd, integ+"/"):
			return a, "git " + a
		case a == "update-ref" && cwd == origin:
			return "publish", "git update-ref in the origin"
		}
	}
	return "", ""
}

// TestFaultAgentSpawnedBeforeItsRecord kills the daemon between an agent's
// spawn and the record of its pid: the database is locked (as under load)
// so that the record waits, the daemon is killed once the agent's process
// exists, and restarted. No process of the killed daemon may run the
// agent's work or survive, and the task must complete exactly once with
// only its own file; so must the task run after it on the same checkout.
func TestFaultAgentSpawnedBeforeItsRecord(t *testing.T) {
	t.Parallel()
	f := newFaultRig(t, 1)
	srv := filepath.Join(f.dir, "srv")
	origin := filepath.Join(srv, "origin.git")
	bareOrigin(t, origin)
	gs := newGitHTTP(t, srv)
	ctx := f.watch.Context()

	d := f.start()
	client := f.client(d)
	if _, err := client.CreateProject(ctx, models.ProjectSpec{ID: "spawn", MaxConcurrentAgents: 1,
		Repo: &models.RepoConfig{SourceType: models.RepoClone, URL: gs.URL + "/origin.git"}}.Project()); err != nil {
		t.Fatalf("create project: %v", err)
	}
	// The claim commits before the checkout is prepared: the first request
	// to the origin after the tasks exist comes from a claimed run.
	hold := gs.HoldNext(t)
	res, err := client.CreateTasks(ctx, models.TaskBatch{ProjectID: "spawn", CreatedBy: "fault-test", Tasks: []models.BatchTask{
		{LocalID: "x", Title: "task x"},
		{LocalID: "y", Title: "task y", Dependencies: []models.BatchDependency{{ID: "x"}}},
	}})
	if err != nil || len(res) != 2 {
		t.Fatalf("create tasks: %+v %v", res, err)
	}
	client.CloseIdleConnections()
	x, y := res[0].TaskID, res[1].TaskID
	select {
	case <-hold.Entered:
		f.watch.Progress("the run of task " + x + " reads the origin")
	case <-d.exited:
		t.Fatalf("the daemon exited: %v", d.err)
	case <-f.watch.Done():
		t.Fatalf("no run of task %s read the origin: %v", x, f.watch.Err())
	}
	release := holdWriteLock(t, filepath.Join(f.dataDir, "agentqueued.db"))
	hold.Proceed()

	// The daemon spawns the agent and waits to record it.
	var spawned int
	for spawned == 0 {
		for _, c := range children(d.cmd.Process.Pid) {
			if procEnvHas(c, "AQ_TASK_ID="+x) {
				spawned = c
			}
		}
		if spawned != 0 {
			break
		}
		if strings.Contains(d.log.String(), `msg="run did not start`) {
			t.Fatalf("the run of task %s did not start", x)
		}
		select {
		case <-d.exited:
			t.Fatalf("the daemon exited: %v", d.err)
		case <-f.watch.Done():
			t.Fatalf("no agent process of task %s appeared: %v", x, f.watch.Err())
		case <-time.After(5 * time.Millisecond): // polling the daemon's children
		}
	}
	d.kill(t)
	release()
	f.watch.Progress(fmt.Sprintf("the daemon killed with agent process %d spawned and not recorded", spawned))

	// Whatever the killed daemon started for task x ends by itself, having
	// done nothing.
	for {
		var left []int
		for pid := range markedProcesses(f.dir) {
			if procEnvHas(pid, "AQ_TASK_ID="+x) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			break
		}
		f.watch.Observe(fmt.Sprintf("processes of task %s left by the killed daemon: %v", x, left))
		select {
		case <-f.watch.Done():
			t.Fatalf("processes of task %s outlive the killed daemon: %v (%v)", x, left, f.watch.Err())
		case <-time.After(20 * time.Millisecond): // polling the process table
		}
	}
	if ran := f.ran(); slices.Contains(ran, "run "+x+" 1 a0") {
		t.Fatalf("the agent of task %s, spawned by a daemon killed before it recorded the spawn, ran its work anyway: %q", x, ran)
	}

	d = f.start()
	tasks := f.waitAllCompleted(d, "spawn")
	f.shutdown(d)
	if len(tasks) != 2 {
		t.Fatalf("tasks %+v", tasks)
	}
	f.checkStore([]string{x, y})
	// The killed life's run of x was never recorded as started: the kill
	// fell between the spawn and the record.
	st := storetest.OpenAt(t, filepath.Join(f.dataDir, "agentqueued.db"))
	first, err := st.GetRun(context.Background(), 1)
	st.Close()
	if err != nil || first.TaskID != x || first.PID != nil {
		t.Errorf("the first run: %+v %v; want task %s's, without a pid", first, err, x)
	}
	f.checkMerges(origin, []string{x, y})
	for _, line := range f.ran() {
		if strings.HasPrefix(line, "overlap ") {
			t.Errorf("%s", line)
		}
	}
	f.checkFsck(origin)
	f.checkNothingLeft()
}

// faultPlan is the order of the fault test's kills (see faultSign): during
// an agent's spawn, a git fetch, each step of a merge, and a batch create.
var faultPlan = []string{"spawn", "fetch", "merge-tree", "batch", "commit-tree", "publish", "spawn", "fetch", "batch",
	"publish", "merge-tree", "commit-tree", "fetch", "spawn", "batch", "publish"}

const (
	faultAgents       = 3
	faultFirstTasks   = 30
	faultBatchTasks   = 12
	faultTopUpTasks   = 6
	faultSignInterval = time.Millisecond
)

// faultBatch is a batch sent while the daemon was killed.
type faultBatch struct {
	prefix   string
	n        int
	answered bool
}

// TestFaultInjection kills the real daemon (SIGKILL) again and again in
// the middle of git fetches, merges, agents' spawns and batch creates,
// each seen as it happens (a git command or an agent's process among the
// daemon's children, a batch request written and not answered), and
// restarts it on the same data each time. Then every task must be
// COMPLETED exactly once and merged exactly once with only its own file,
// every batch must exist whole or not at all, no agent may have worked in
// a checkout while a run of an earlier life still did, no process of the
// test may be left, and git fsck must find the origin and every
// repository of the daemon sound. AQ_FAULT_SEED replays other task
// graphs.
func TestFaultInjection(t *testing.T) {
	t.Parallel()
	f := newFaultRig(t, faultAgents)
	started := time.Now()
	seed := uint64(20261125)
	if v := os.Getenv("AQ_FAULT_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("AQ_FAULT_SEED: %v", err)
		}
	}
	r := rand.New(rand.NewPCG(seed, 11))
	origin := filepath.Join(f.dir, "origin.git")
	ctx := f.watch.Context()

	var ids []string // the tasks that must complete
	var batches []faultBatch
	create := func(client *api.Client, prefix string, n int) {
		t.Helper()
		res, err := client.CreateTasks(ctx, faultTaskBatch(r, prefix, n))
		if err != nil || len(res) != n {
			t.Fatalf("create tasks %q: %d results, %v", prefix, len(res), err)
		}
		for _, x := range res {
			ids = append(ids, x.TaskID)
		}
	}

	d := f.start()
	client := f.client(d)
	if _, err := client.CreateProject(ctx, models.ProjectSpec{ID: "fault", MaxConcurrentAgents: faultAgents,
		Repo: &models.RepoConfig{SourceType: models.RepoInit, SourcePath: origin}}.Project()); err != nil {
		t.Fatalf("create project: %v", err)
	}
	create(client, "first", faultFirstTasks)
	client.CloseIdleConnections()

	var kills []string
	topUps := 0
	for i, kind := range faultPlan {
		if i > 0 {
			d = f.start()
		}
		client := f.client(d)
		switch kind {
		case "batch":
			b := faultBatch{prefix: fmt.Sprintf("batch %d", i), n: faultBatchTasks}
			var how string
			b.answered, how = f.killDuringBatch(d, client, faultTaskBatch(r, b.prefix, b.n), len(batches)%3)
			batches = append(batches, b)
			kills = append(kills, "batch create ("+how+")")
		default:
			what := f.waitSign(d, kind, origin, func() {
				topUps++
				create(client, fmt.Sprintf("top-up %d", topUps), faultTopUpTasks)
			})
			d.kill(t)
			kills = append(kills, kind+" ("+what+")")
		}
		client.CloseIdleConnections()
		f.watch.Progress(fmt.Sprintf("kill %d of %d: %s", i+1, len(faultPlan), kills[len(kills)-1]))
	}

	// The last life runs everything to completion.
	d = f.start()
	tasks := f.waitAllCompleted(d, "fault")
	f.shutdown(d)

	// Each batch is whole or absent; a batch that was answered is whole.
	byPrefix := map[string]int{}
	for _, tk := range tasks {
		if prefix, _, ok := strings.Cut(tk.Title, ": "); ok {
			byPrefix[prefix]++
		}
	}
	lost := 0
	for _, b := range batches {
		switch got := byPrefix[b.prefix]; {
		case got == b.n:
			for _, tk := range tasks {
				if strings.HasPrefix(tk.Title, b.prefix+": ") {
					ids = append(ids, tk.ID)
				}
			}
		case got == 0 && !b.answered:
			lost++
		default:
			t.Errorf("%s: %d of its %d tasks exist (answered: %v)", b.prefix, got, b.n, b.answered)
		}
	}
	if len(tasks) != len(ids) {
		t.Errorf("%d tasks exist, %d expected", len(tasks), len(ids))
	}
	f.checkStore(ids)
	f.checkMerges(origin, ids)
	for _, line := range f.ran() {
		if strings.HasPrefix(line, "overlap ") {
			t.Errorf("an agent ran while a run of an earlier life still worked for it: %s", line)
		}
	}
	repos := f.checkFsck(origin)
	f.checkNothingLeft()
	t.Logf("seed %d: %d tasks (%d batches lost to a kill, %d top-ups); kills: %s; %d repositories fsck'd; %s", seed,
		len(ids), lost, topUps, strings.Join(kills, ", "), repos, time.Since(started).Round(time.Millisecond))
}

// faultTaskBatch is a random DAG of n tasks titled "<prefix>: <i>".
func faultTaskBatch(r *rand.Rand, prefix string, n int) models.TaskBatch {
	tasks := crashDAG(r, n)
	for i := range tasks {
		tasks[i].Title = fmt.Sprintf("%s: %d", prefix, i)
	}
	return models.TaskBatch{ProjectID: "fault", CreatedBy: "fault-test", Tasks: tasks}
}

// waitSign waits until a child of life d shows the sign kind (see
// faultSign) and returns what it was. When no task is left to run, it
// calls topUp to make more work.
func (f *faultRig) waitSign(d *crashDaemon, kind, origin string, topUp func()) string {
	f.t.Helper()
	integ := filepath.Join(f.dataDir, "workspaces", "integration")
	client := f.client(d)
	defer client.CloseIdleConnections()
	ctx := f.watch.Context()
	next := time.Now()
	for {
		for _, c := range children(d.cmd.Process.Pid) {
			if k, what := faultSign(c, integ, origin); k == kind {
				return what
			}
		}
		if now := time.Now(); !now.Before(next) {
			next = now.Add(200 * time.Millisecond)
			tasks, err := client.ListTasks(ctx, models.TaskFilter{ProjectID: "fault"})
			if err != nil {
				f.t.Fatalf("list tasks: %v (%v)", err, f.watch.Err())
			}
			counts := map[models.TaskStatus]int{}
			for _, tk := range tasks {
				counts[tk.Status]++
			}
			f.watch.Observe(fmt.Sprintf("waiting for a %s; tasks by status %v", kind, counts))
			f.checkAgents(ctx, client)
			f.checkStarts(d)
			if counts[models.StatusCompleted] == len(tasks) {
				topUp()
			}
		}
		select {
		case <-d.exited:
			f.t.Fatalf("daemon life %d exited by itself: %v", len(f.lives), d.err)
		case <-f.watch.Done():
			f.t.Fatalf("no %s seen: %v", kind, f.watch.Err())
		case <-time.After(faultSignInterval): // polling the daemon's children
		}
	}
}

// killDuringBatch sends batch b to life d and kills the daemon while the
// request is in flight, at one of three moments (by when): as soon as the
// request is written (0), once the database has moved after that (1), or
// once the daemon has logged the batch's creation (2), before or as it
// answers. It reports whether the answer came first, and how the kill went.
func (f *faultRig) killDuringBatch(d *crashDaemon, client *api.Client, b models.TaskBatch, when int) (bool, string) {
	f.t.Helper()
	wrote := make(chan struct{})
	var once sync.Once
	ctx := httptrace.WithClientTrace(f.watch.Context(), &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { once.Do(func() { close(wrote) }) }})
	created := d.log.await(`msg="tasks created"`)
	answer := make(chan error, 1)
	wal := filepath.Join(f.dataDir, "agentqueued.db-wal")
	before, _ := os.Stat(wal)
	go func() {
		_, err := client.CreateTasks(ctx, b)
		answer <- err
	}()
	answered := false
	select {
	case <-wrote:
	case err := <-answer:
		f.t.Fatalf("the batch was not sent: %v", err)
	case <-d.exited:
		f.t.Fatalf("daemon life %d exited by itself: %v", len(f.lives), d.err)
	case <-f.watch.Done():
		f.t.Fatalf("the batch was not sent: %v", f.watch.Err())
	}
	how := "as the request was written"
	moved := func() bool {
		st, err := os.Stat(wal)
		return err == nil && (before == nil || st.Size() != before.Size() || !st.ModTime().Equal(before.ModTime()))
	}
wait:
	for when > 0 {
		how = "once the database moved"
		if when == 1 && moved() {
			break
		}
		poll := time.After(100 * time.Microsecond) // polling the database file
		if when == 2 {
			how, poll = "once the creation was logged", nil
		}
		select {
		case <-created:
			if when == 2 {
				break wait
			}
			created = nil
		case err := <-answer:
			answered, how = err == nil, "after the answer"
			answer <- err
			break wait
		case <-poll:
		case <-f.watch.Done():
			f.t.Fatalf("the batch got no answer: %v", f.watch.Err())
		}
	}
	d.kill(f.t)
	if err := <-answer; err == nil {
		answered = true
	}
	return answered, how
}
