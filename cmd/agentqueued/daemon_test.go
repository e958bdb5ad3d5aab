package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

func TestDaemonWithCtl(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := startDaemon(t, dir)
	addr := d.m.Addr()
	if !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
		t.Fatalf("Addr = %q, want the bound port", addr)
	}
	if _, err := os.Stat(filepath.Join(dir, "agentqueued.db")); err != nil {
		t.Errorf("database not under the data dir: %v", err)
	}
	if !strings.Contains(d.logs.String(), `msg="agentqueued listening" addr=`+addr) {
		t.Errorf("no listening log line with the address; logs:\n%s", d.logs)
	}

	if out := mustCtl(t, addr, "health"); !strings.HasPrefix(out, "ok ") {
		t.Errorf("health = %q", out)
	}
	origin := bareRepo(t)
	out := mustCtl(t, addr, "project", "create", "web", "--name", "Web site", "--max-agents", "3",
		"--repo-url", origin)
	if !regexp.MustCompile(`(?m)^Repo:\s+CLONE ` + regexp.QuoteMeta(origin) + ` \(main\)$`).MatchString(out) {
		t.Errorf("project create output:\n%s", out)
	}
	mustCtl(t, addr, "project", "create", "api")
	out = mustCtl(t, addr, "project", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID ") {
		t.Fatalf("project list:\n%s", out)
	}
	// Columns are aligned: STATUS starts at the same offset on every line.
	col := strings.Index(lines[0], "STATUS")
	for _, l := range lines[1:] {
		if len(l) <= col || l[col:col+6] != "ACTIVE" {
			t.Errorf("misaligned project list:\n%s", out)
		}
	}
	out = mustCtl(t, addr, "project", "edit", "web", "--status", "paused", "--budget", "500")
	if !regexp.MustCompile(`(?m)^Status:\s+PAUSED$`).MatchString(out) || !regexp.MustCompile(`(?m)^Budget:\s+500$`).MatchString(out) {
		t.Errorf("project edit output:\n%s", out)
	}
	// A negative --budget removes the limit (sent as "budget_limit": null).
	if out := mustCtl(t, addr, "project", "edit", "web", "--budget", "-1"); regexp.MustCompile(`(?m)^Budget:\s+500$`).MatchString(out) {
		t.Errorf("project edit --budget -1 kept the budget:\n%s", out)
	}
	mustCtl(t, addr, "project", "edit", "web", "--status", "ACTIVE")
	if out := mustCtl(t, addr, "project", "show", "web"); !regexp.MustCompile(`(?m)^Name:\s+Web site$`).MatchString(out) {
		t.Errorf("project show:\n%s", out)
	}

	// One task through flags, then a batch from a file that depends on it.
	out = mustCtl(t, addr, "task", "add", "--project", "web", "--title", "Design the schema", "--priority", "5",
		"--meta", "area=db", "--meta", "owner=ann", "--test-command", "go test ./...", "--test-command", "go vet ./...",
		"--kind", "design", "--verification", "human", "--requires-approval")
	first := taskIDs(t, out)
	if len(first) != 1 || !strings.Contains(out, "READY") {
		t.Fatalf("task add output:\n%s", out)
	}
	batch := writeFile(t, t.TempDir(), "batch.json", `{"project_id":"web","tasks":[
		{"id":"build","title":"Build it","dependencies":[{"id":"`+first[0]+`"}]},
		{"id":"ship","title":"Ship it","dependencies":[{"id":"build"}]}]}`)
	out = mustCtl(t, addr, "task", "add", "--file", batch)
	ids := taskIDs(t, out)
	if len(ids) != 2 || strings.Count(out, "DEFINED") != 2 {
		t.Fatalf("task add --file output:\n%s", out)
	}
	out = mustCtl(t, addr, "task", "add", "--project", "web", "--title", "Docs", "--depends-on", ids[0]+","+ids[1])
	docs := taskIDs(t, out)[0]

	out = mustCtl(t, addr, "task", "list", "--project", "web", "--status", "DEFINED")
	if got := taskIDs(t, out); strings.Join(got, ",") != strings.Join([]string{ids[0], ids[1], docs}, ",") {
		t.Errorf("task list --status DEFINED = %v\n%s", got, out)
	}
	if got := taskIDs(t, mustCtl(t, addr, "task", "list")); len(got) != 4 {
		t.Errorf("task list has %d tasks, want 4", len(got))
	}

	out = mustCtl(t, addr, "task", "show", first[0])
	for _, want := range []string{"Title:              Design the schema", "Metadata:           area=db, owner=ann",
		"Test commands:      go test ./...; go vet ./...", "Verification:       HUMAN", "Dependents (1):", ids[0]} {
		if !strings.Contains(out, want) {
			t.Errorf("task show lacks %q:\n%s", want, out)
		}
	}

	// An illegal admin event: exit 1, message on stderr, nothing changed.
	r := runCtl(t, addr, nil, "task", "skip", ids[0], "--reason", "not needed")
	if r.code != 1 || r.stderr != "error: Invalid transition: (DEFINED, ADMIN_SKIP)\n" {
		t.Errorf("task skip: exit %d, stderr %q", r.code, r.stderr)
	}
	out = mustCtl(t, addr, "task", "restart", ids[0], "--reason", "go ahead", "--actor", "ann")
	if out != ids[0]+": DEFINED -> READY\n" {
		t.Errorf("task restart output = %q", out)
	}
	out = mustCtl(t, addr, "task", "show", ids[0])
	if !regexp.MustCompile(`ADMIN_RESTART\s+DEFINED\s+READY\s+ann\s+go ahead`).MatchString(out) {
		t.Errorf("task show lacks the event:\n%s", out)
	}

	// Kept off this project: it would take its READY tasks.
	mustCtl(t, addr, "agent", "add", "claude-1", "--type", "claude", "--command", "/bin/true", "--project", "elsewhere")
	out = mustCtl(t, addr, "agent", "list")
	if !regexp.MustCompile(`(?m)^claude-1\s+claude-1\s+claude\s+IDLE`).MatchString(out) {
		t.Errorf("agent list:\n%s", out)
	}

	// --json prints the API's JSON, wherever the flag is given.
	var tl api.TaskList
	if err := json.Unmarshal([]byte(mustCtl(t, addr, "task", "list", "--json", "--project", "web")), &tl); err != nil || len(tl.Tasks) != 4 {
		t.Errorf("task list --json: %v, %d tasks", err, len(tl.Tasks))
	}
	var p models.Project
	if err := json.Unmarshal([]byte(mustCtl(t, addr, "--json", "project", "show", "web")), &p); err != nil || p.ID != "web" {
		t.Errorf("--json project show: %v, %+v", err, p)
	}
}

// taskIDs returns the first column of a table's rows.
func taskIDs(t *testing.T, table string) []string {
	t.Helper()
	var ids []string
	for i, l := range strings.Split(strings.TrimSpace(table), "\n") {
		if i == 0 {
			continue
		}
		ids = append(ids, strings.Fields(l)[0])
	}
	return ids
}

func TestCtlErrors(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, t.TempDir())
	addr := d.m.Addr()
	mustCtl(t, addr, "project", "create", "web")

	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"missing project", []string{"project", "show", "nope"}, 1, `error: project "nope" not found`},
		{"duplicate project", []string{"project", "create", "web"}, 1, `error: project "web" already exists`},
		{"task in missing project", []string{"task", "add", "--project", "nope", "--title", "x"}, 1, `error: tasks[0]: project "nope" not found`},
		{"unknown status", []string{"task", "list", "--status", "READY,DONE"}, 1, `error: status "DONE"`},
		{"bad agent type", []string{"agent", "add", "a1", "--type", "robot"}, 1, "error: agent_type: must be one of"},
		{"missing title", []string{"task", "add", "--project", "web"}, 2, "error: ctl task add: --project and --title are required"},
		{"unknown command", []string{"project", "frobnicate", "web"}, 2, `error: ctl: unknown command "project frobnicate"`},
		{"unknown flag", []string{"task", "list", "--colour"}, 2, "flag provided but not defined: -colour"},
		{"missing id", []string{"task", "show"}, 2, "want ID, got 0 argument(s)"},
		{"nothing to edit", []string{"project", "edit", "web"}, 2, "nothing to change"},
		{"bad meta", []string{"task", "add", "--project", "web", "--title", "x", "--meta", "novalue"}, 2, `"novalue" is not key=value`},
		{"reject without feedback", []string{"task", "reject", "some-task"}, 2, "--feedback is required"},
		{"approve a missing task", []string{"task", "approve", "no-such"}, 1, `task "no-such" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runCtl(t, addr, nil, tt.args...)
			if r.code != tt.code || !strings.HasPrefix(r.stderr, "error: ") || !strings.Contains(r.stderr, tt.stderr) {
				t.Errorf("ctl %v: exit %d, stderr %q; want exit %d and %q", tt.args, r.code, r.stderr, tt.code, tt.stderr)
			}
			if r.stdout != "" {
				t.Errorf("ctl %v printed to stdout: %q", tt.args, r.stdout)
			}
		})
	}
	if ids := taskIDs(t, mustCtl(t, addr, "task", "list")); len(ids) != 0 {
		t.Errorf("failed commands created tasks %v", ids)
	}
}

func TestCtlAddFileErrors(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, t.TempDir())
	addr := d.m.Addr()
	mustCtl(t, addr, "project", "create", "web")
	dir := t.TempDir()
	cycle := writeFile(t, dir, "cycle.json", `[{"project_id":"web","id":"a","title":"A","dependencies":[{"id":"b"}]},
		{"project_id":"web","id":"b","title":"B","dependencies":[{"id":"a"}]}]`)
	typo := writeFile(t, dir, "typo.json", `{"project_id":"web","tasks":[{"titel":"A"}]}`)

	r := runCtl(t, addr, nil, "task", "add", "--file", cycle)
	if r.code != 1 || !strings.Contains(r.stderr, "error: dependency cycle") {
		t.Errorf("cycle: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runCtl(t, addr, nil, "task", "add", "--file", typo)
	if r.code != 1 || !strings.Contains(r.stderr, `unknown field "titel"`) {
		t.Errorf("typo: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runCtl(t, addr, nil, "task", "add", "--file", typo, "--title", "x")
	if r.code != 2 || !strings.Contains(r.stderr, "--title cannot be combined with --file") {
		t.Errorf("--file with --title: exit %d, stderr %q", r.code, r.stderr)
	}
	if ids := taskIDs(t, mustCtl(t, addr, "task", "list")); len(ids) != 0 {
		t.Errorf("failed batches created tasks %v", ids)
	}
}

func TestSecondDaemonRefusedUntilFirstCloses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := startDaemon(t, dir)
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}

	_, err = startMain(t, nil, "run", "--data-dir", dir, "--listen", "127.0.0.1:0")
	if err == nil {
		t.Fatal("a second daemon started on the same data dir")
	}
	for _, want := range []string{"owner " + first.m.LeaseOwner(), "host " + host, "pid " + strconv.Itoa(os.Getpid())} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("second daemon error %q does not name %q", err, want)
		}
	}
	if ExitCode(err) != 1 {
		t.Errorf("exit code = %d, want 1", ExitCode(err))
	}

	// The first daemon still serves.
	mustCtl(t, first.m.Addr(), "health")
	if err := first.m.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-first.errc; err != nil {
		t.Errorf("Run after Close = %v", err)
	}
	if !strings.Contains(first.logs.String(), "lease released") {
		t.Errorf("no lease release logged:\n%s", first.logs)
	}

	third := startDaemon(t, dir)
	mustCtl(t, third.m.Addr(), "health")
}

func TestTakesOverLeaseOfCrashedDaemon(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	// A process that has exited stands in for a crashed daemon.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	deadPID := cmd.Process.Pid

	st := storetest.OpenAt(t, filepath.Join(dir, "agentqueued.db"))
	if err := st.AcquireLease(context.Background(), models.LeaseHolder{Owner: "crashed", Hostname: host, PID: deadPID}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	d := startDaemon(t, dir)
	mustCtl(t, d.m.Addr(), "health")
}

func TestLeaseOfLiveDaemonElsewhereIsRespected(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := storetest.OpenAt(t, filepath.Join(dir, "agentqueued.db"))
	holder := models.LeaseHolder{Owner: "other-host-daemon", Hostname: "elsewhere.example", PID: 1}
	if err := st.AcquireLease(context.Background(), holder, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := startMain(t, nil, "run", "--data-dir", dir, "--listen", "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), "owner other-host-daemon, host elsewhere.example, pid 1") {
		t.Errorf("start with a foreign lease: %v", err)
	}
}

func TestBadConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name    string
		content string
		args    []string
		want    string
	}{
		{"bad level", "log:\n  level: loud\n", nil, "config: log.level: must be one of debug, info, warn, error"},
		{"unknown key", "lisen: 127.0.0.1:0\n", nil, `line 1: unknown key "lisen"`},
		{"bad ttl", "lease:\n  ttl: forever\n", nil, `lease.ttl: "forever" is not a duration`},
		{"missing env", "api:\n  token: ${AQ_TEST_TOKEN}\n", nil, "api.token: environment variable AQ_TEST_TOKEN is not set"},
		{"bad listen flag", "", []string{"--listen", "nowhere"}, `config: listen: "nowhere" is not host:port`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, t.TempDir(), "agentqueued.yaml", tt.content)
			args := append([]string{"run", "--config", path, "--data-dir", filepath.Join(dir, tt.name)}, tt.args...)
			var stderr syncBuffer
			code := NewMain(args, &syncBuffer{}, &stderr, envOf(nil)).Exec(context.Background())
			if code != 2 {
				t.Errorf("exit code = %d, want 2", code)
			}
			if got := stderr.String(); !strings.HasPrefix(got, "error: ") || !strings.Contains(got, tt.want) {
				t.Errorf("stderr = %q, want it to contain %q", got, tt.want)
			}
			if _, err := os.Stat(filepath.Join(dir, tt.name)); !os.IsNotExist(err) {
				t.Errorf("a bad config still created the data dir (stat: %v)", err)
			}
		})
	}
}

func TestConfigFileAndOverrides(t *testing.T) {
	t.Parallel()
	fileDir, flagDir := t.TempDir(), t.TempDir()
	path := writeFile(t, t.TempDir(), "agentqueued.yaml", `
data_dir: `+fileDir+`
listen: 127.0.0.1:0
api:
  token: ${AQ_TOKEN}
log:
  format: json
  level: debug
lease:
  ttl: 3s
`)
	env := map[string]string{"AQ_TOKEN": "hunter2"}
	d, err := startMain(t, env, "run", "--config", path, "--data-dir", flagDir)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	if _, err := os.Stat(filepath.Join(flagDir, "agentqueued.db")); err != nil {
		t.Errorf("--data-dir did not override data_dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(fileDir, "agentqueued.db")); !os.IsNotExist(err) {
		t.Errorf("database created under the file's data_dir (stat: %v)", err)
	}
	addr := d.m.Addr()

	r := runCtl(t, addr, nil, "project", "list")
	if r.code != 1 || r.stderr != "error: missing bearer token (Authorization: Bearer <token>)\n" {
		t.Errorf("without token: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runCtl(t, addr, nil, "--token", "wrong", "project", "list")
	if r.code != 1 || r.stderr != "error: invalid bearer token\n" {
		t.Errorf("wrong token: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runCtl(t, addr, map[string]string{"AGENTQUEUED_TOKEN": "hunter2"}, "project", "list"); r.code != 0 {
		t.Errorf("token from env: exit %d, stderr %q", r.code, r.stderr)
	}
	// --config gives ctl the token (the address still comes from --addr, as listen is port 0).
	if r := runCtl(t, addr, env, "--config", path, "project", "list"); r.code != 0 {
		t.Errorf("token from --config: exit %d, stderr %q", r.code, r.stderr)
	}

	if err := d.m.Close(); err != nil {
		t.Fatal(err)
	}
	logs := d.logs.String()
	var first map[string]any
	if err := json.Unmarshal([]byte(strings.SplitN(logs, "\n", 2)[0]), &first); err != nil {
		t.Errorf("log.format json not applied: %v\n%s", err, logs)
	}
	if !strings.Contains(logs, `"msg":"agentqueued listening","component"`) && !strings.Contains(logs, `"msg":"agentqueued listening"`) {
		t.Errorf("no listening line:\n%s", logs)
	}
	if !strings.Contains(logs, `"level":"DEBUG"`) {
		t.Errorf("log.level debug not applied:\n%s", logs)
	}
	if strings.Contains(logs, "hunter2") {
		t.Errorf("the token appears in the logs")
	}
}

func TestDefaultsWithoutConfig(t *testing.T) {
	t.Parallel()
	xdg := t.TempDir()
	d, err := startMain(t, map[string]string{"XDG_DATA_HOME": xdg}, "--listen", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("start with defaults: %v", err)
	}
	if _, err := os.Stat(filepath.Join(xdg, "agentqueued", "agentqueued.db")); err != nil {
		t.Errorf("database not in the default data dir: %v", err)
	}
	mustCtl(t, d.m.Addr(), "health")
}

func TestUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		code int
		out  string // in stdout (code 0) or stderr
	}{
		{[]string{"help"}, 0, "Usage:"},
		{[]string{"frobnicate"}, 2, `error: unknown command "frobnicate"`},
		{[]string{"run", "extra"}, 2, `error: run: unexpected argument "extra"`},
		{[]string{"run", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"ctl"}, 2, "error: ctl: missing command"},
		{[]string{"ctl", "task", "add", "-h"}, 0, "-depends-on"},
		{[]string{"ctl", "--addr", "ftp://x", "health"}, 2, "is not an http(s) URL"},
		{[]string{"demo", "--stall", "0s"}, 2, "error: demo: --stall must be positive"},
		{[]string{"demo", "--timeout", "-1s"}, 2, "--timeout not negative"},
	}
	for _, tt := range tests {
		var stdout, stderr syncBuffer
		code := NewMain(tt.args, &stdout, &stderr, envOf(nil)).Exec(context.Background())
		got := stderr.String()
		if tt.code == 0 {
			got = stdout.String()
		}
		if code != tt.code || !strings.Contains(got, tt.out) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d with %q", tt.args, code, stdout.String(), stderr.String(), tt.code, tt.out)
		}
	}
}

func TestCloseBeforeRun(t *testing.T) {
	t.Parallel()
	m := NewMain([]string{"run"}, &syncBuffer{}, &syncBuffer{}, envOf(nil))
	if err := m.Close(); err != nil {
		t.Errorf("Close before Run = %v", err)
	}
	if err := m.Run(context.Background()); err == nil {
		t.Error("Run after Close succeeded")
	}
}

func TestDialAddr(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"127.0.0.1:7700": "http://127.0.0.1:7700",
		"0.0.0.0:80":     "http://127.0.0.1:80",
		":7700":          "http://127.0.0.1:7700",
		"[::]:7700":      "http://[::1]:7700",
		"example.com:1":  "http://example.com:1",
		"bad":            "",
	} {
		if got := dialAddr(in, false); got != want {
			t.Errorf("dialAddr(%q) = %q, want %q", in, got, want)
		}
	}
	if got, want := dialAddr("0.0.0.0:7700", true), "https://127.0.0.1:7700"; got != want {
		t.Errorf("dialAddr over TLS = %q, want %q", got, want)
	}
}

func TestDaemonStopsWhenLeaseIsLost(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeFile(t, t.TempDir(), "agentqueued.yaml", "lease:\n  ttl: 1s\n")
	d, err := startMain(t, nil, "run", "--config", path, "--data-dir", dir, "--listen", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d.stoppedWithError = true
	// Another owner takes the database over behind the daemon's back.
	st := storetest.OpenAt(t, filepath.Join(dir, "agentqueued.db"))
	if err := st.ReleaseLease(context.Background(), d.m.LeaseOwner()); err != nil {
		t.Fatal(err)
	}
	if err := st.AcquireLease(context.Background(), models.LeaseHolder{Owner: "usurper", Hostname: "elsewhere", PID: 1}, time.Hour); err != nil {
		t.Fatal(err)
	}
	err = <-d.errc
	if err == nil || !strings.Contains(err.Error(), "lost the database lease") {
		t.Errorf("Run = %v, want a lost-lease error", err)
	}
	// The lease stays with its new owner.
	h, err := st.LeaseHolder(context.Background())
	if err != nil || h.Owner != "usurper" {
		t.Errorf("lease holder = %+v, %v", h, err)
	}
}

func TestTasksNamingUnknownProfilesAreRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeFile(t, dir, "aq.yaml", "profiles:\n  careful:\n    model: opus\n")
	d := startDaemon(t, filepath.Join(dir, "data"), "--config", cfg)
	client, err := api.NewClient("http://"+d.m.Addr(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := client.CreateProject(ctx, models.ProjectSpec{ID: "web"}.Project()); err != nil {
		t.Fatal(err)
	}
	_, err = client.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{{Title: "x", Profile: "reckless"}}})
	if models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), `no profile "reckless" is configured`) {
		t.Fatalf("unknown profile: %v", err)
	}
	if _, err := client.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{{Title: "x", Profile: "careful"}}}); err != nil {
		t.Fatalf("known profile: %v", err)
	}
	_, err = client.CreateProject(ctx, models.ProjectSpec{ID: "api", Settings: models.ProjectSettings{QAProfile: "reckless"}}.Project())
	if models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), "settings.qa_profile") {
		t.Fatalf("a project naming an unknown profile: %v", err)
	}
	if _, err := client.UpdateProject(ctx, "web", models.ProjectPatch{Settings: &models.ProjectSettings{DefaultProfile: "careful",
		RequirePlanApproval: true}}); err != nil {
		t.Fatalf("settings with a known profile: %v", err)
	}
}
