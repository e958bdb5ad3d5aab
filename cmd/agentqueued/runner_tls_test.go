package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
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
)

// client returns an API client over https that trusts the test's CA.
func (d *tlsDaemon) client(t *testing.T) *api.Client {
	t.Helper()
	ca, err := os.ReadFile(d.caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots, err := api.TrustedRoots(ca)
	if err != nil {
		t.Fatal(err)
	}
	tr := api.NewTransport(roots)
	t.Cleanup(tr.CloseIdleConnections)
	c, err := api.NewClient(d.url, "", &http.Client{Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// addRunner adds runner name over https and writes its token to a file of
// dir (mode 0600), whose path it returns.
func (d *tlsDaemon) addRunner(t *testing.T, dir, name string) string {
	t.Helper()
	var added api.RunnerAdded
	if err := json.Unmarshal([]byte(d.mustCtl(t, "--json", "runner", "add", name)), &added); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, name+".token")
	if err := os.WriteFile(tokenFile, []byte(added.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return tokenFile
}

// startRunnerProcess starts the built binary as a runner with args and
// returns its log lines as they come and its end.
func startRunnerProcess(t *testing.T, bin string, args ...string) (*bufio.Scanner, <-chan error) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"runner"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its agents and git end with it
	// The runner's log through a pipe of our own: cmd.Wait, which
	// startProcess calls at once, would close a StderrPipe under us.
	stderr, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stderr.Close() })
	cmd.Stderr = w
	done := startProcess(t, cmd)
	w.Close()
	return bufio.NewScanner(stderr), done
}

// awaitLine reads lines until one holds want; it returns the lines read.
func awaitLine(t *testing.T, lines *bufio.Scanner, want string) []string {
	t.Helper()
	var read []string
	for lines.Scan() {
		read = append(read, lines.Text())
		if strings.Contains(lines.Text(), want) {
			return read
		}
	}
	t.Fatalf("the runner's log ended (%v) without %q:\n%s", lines.Err(), want, strings.Join(read, "\n"))
	return nil
}

// A runner process reaches a daemon served over TLS with a self-signed
// CA when given it with --ca-file; without it, it stops at once with a
// certificate error that says what to give, and plain http to the TLS
// port stops it too. A --ca-file it cannot use is an error naming it.
func TestRunnerProcessOverTLS(t *testing.T) {
	t.Parallel()
	bin := agentqueuedBinary(t)
	d := startTLSDaemon(t, "")
	dir := t.TempDir()
	tokenFile := d.addRunner(t, dir, "box")
	cfg := writeFile(t, dir, "runner.yaml", "data_dir: "+filepath.Join(dir, "runner")+`
agents:
  - {name: sh-1, type: command, command: /bin/true}
`)

	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"without the CA", []string{"--server", d.url}, []string{"certificate signed by unknown authority", "--ca-file"}},
		{"plain http", []string{"--server", "http://" + d.m.Addr(), "--ca-file", d.caFile},
			[]string{"serves https, not plain http"}},
		{"a missing CA file", []string{"--server", d.url, "--ca-file", filepath.Join(dir, "none.pem")},
			[]string{"--ca-file", "none.pem"}},
		{"a CA file without a certificate", []string{"--server", d.url, "--ca-file", cfg},
			[]string{"--ca-file " + cfg, "no PEM certificate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"runner", "--token-file", tokenFile, "--config", cfg}, tc.args...)
			out, err := exec.Command(bin, args...).CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
				t.Fatalf("the runner ended with %v:\n%s", err, out)
			}
			for _, want := range tc.want {
				if !bytes.Contains(out, []byte(want)) {
					t.Errorf("the runner's output does not say %q:\n%s", want, out)
				}
			}
		})
	}

	lines, done := startRunnerProcess(t, bin, "--server", d.url, "--ca-file", d.caFile, "--token-file", tokenFile,
		"--config", cfg, "--name", "box")
	awaitLine(t, lines, "connected to the daemon")
	var shown models.Runner
	if err := json.Unmarshal([]byte(d.mustCtl(t, "--json", "runner", "show", "box")), &shown); err != nil {
		t.Fatal(err)
	}
	if !shown.Connected || len(shown.Agents) != 1 {
		t.Fatalf("the runner over TLS as ctl shows it: %+v", shown)
	}
	if fi, err := os.Stat(filepath.Join(dir, "runner", "runner", "ca-bundle.pem")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the runner's bundle for git: %v %v", fi, err)
	}
	rest := make(chan string, 1)
	go func() {
		var b strings.Builder
		for lines.Scan() {
			b.WriteString(lines.Text() + "\n")
		}
		rest <- b.String()
	}()
	d.mustCtl(t, "runner", "remove", "box")
	err := <-done
	if log := <-rest; !strings.Contains(log, "this runner was removed") {
		t.Fatalf("the removed runner exited with %v:\n%s", err, log)
	}
}

// A task runs on a runner's agent over TLS end to end: the runner checks
// the project out from the daemon's git over https (trusting the CA by
// its bundle for git), its agent reports through the relay, the task
// branch is pushed back over https and landed in the origin.
func TestRunnerRunsATaskOverTLS(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary and runs a daemon and a runner")
	}
	bin := agentqueuedBinary(t)
	d := startTLSDaemon(t, "orchestrator: {safety_tick: 500ms}\n")
	dir := t.TempDir()
	origin := filepath.Join(dir, "origin.git")
	bareOrigin(t, origin)
	script := writeFile(t, dir, "agent.sh", fleetAgentScript)
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	c := d.client(t)
	watch := progresstest.New(t, "the start of the test")
	ctx := watch.Context()
	if _, err := c.CreateProject(ctx, models.ProjectSpec{ID: "fleet",
		Repo: &models.RepoConfig{SourceType: models.RepoClone, URL: origin}}.Project()); err != nil {
		t.Fatalf("create project: %v", err)
	}
	tokenFile := d.addRunner(t, dir, "box")
	cfg := writeFile(t, dir, "runner.yaml", fmt.Sprintf("data_dir: %s\nagents:\n  - {name: a0, type: command, command: %q, "+
		"env: {DEMO_BIN: %q, DEMO_AGENT: box-a0}}\n", filepath.Join(dir, "runner"), script, bin))
	lines, _ := startRunnerProcess(t, bin, "--server", d.url, "--ca-file", d.caFile, "--token-file", tokenFile,
		"--config", cfg, "--name", "box")
	awaitLine(t, lines, "connected to the daemon")
	var log syncBuffer
	go func() {
		for lines.Scan() {
			log.Write([]byte(lines.Text() + "\n"))
			watch.Progress("a line of the runner's log")
		}
	}()

	res, err := c.CreateTasks(ctx, models.TaskBatch{ProjectID: "fleet", CreatedBy: "tls-test",
		Tasks: []models.BatchTask{{Title: "Write a result"}}})
	if err != nil {
		t.Fatalf("create task: %v", err)
	}
	id := res[0].TaskID
	for {
		det, err := c.GetTask(ctx, id)
		if err != nil {
			t.Fatalf("get task: %v\n%s", err, log.String())
		}
		tk := det.Task
		if tk.Status == models.StatusCompleted {
			if len(det.Runs) == 0 || det.Runs[len(det.Runs)-1].AgentID != "box/a0" {
				t.Errorf("the task's runs: %+v", det.Runs)
			}
			break
		}
		if tk.Status == models.StatusBlocked {
			t.Fatalf("task %s is %s: %s\nrunner:\n%s\ndaemon:\n%s", id, tk.Status, tk.StatusReason, log.String(), d.logs)
		}
		watch.Observe("task " + string(tk.Status))
		select {
		case <-ctx.Done():
			t.Fatalf("the task did not complete: %v\nrunner:\n%s\ndaemon:\n%s", watch.Err(), log.String(), d.logs)
		case <-time.After(100 * time.Millisecond): // polling the daemon's answer
		}
	}
	out, err := exec.Command("git", "--git-dir", origin, "show", "main:result-"+id+".txt").Output()
	if err != nil || !strings.Contains(string(out), "by box-a0") {
		t.Errorf("the task's result in the origin: %q %v", out, err)
	}
}
