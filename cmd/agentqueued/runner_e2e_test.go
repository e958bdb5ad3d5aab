package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// The built binary as a runner: it connects to a daemon with its token,
// its agents appear as RUNNER/NAME, and removing the runner stops it with
// the daemon's reason.
func TestRunnerProcessConnects(t *testing.T) {
	t.Parallel()
	bin := agentqueuedBinary(t)
	dir := t.TempDir()
	d := startDaemon(t, filepath.Join(dir, "daemon"))
	addr := d.m.Addr()

	var added api.RunnerAdded
	if err := json.Unmarshal([]byte(mustCtl(t, addr, "--json", "runner", "add", "box")), &added); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(added.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, dir, "runner.yaml", "data_dir: "+filepath.Join(dir, "runner")+`
agents:
  - {name: sh-1, type: command, command: /bin/true}
  - {name: sh-2, type: command, command: /bin/true}
`)

	// A token file others may read is refused before anything is sent.
	loose := filepath.Join(dir, "loose")
	if err := os.WriteFile(loose, []byte(added.Token), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "runner", "--server", "http://"+addr, "--token-file", loose, "--config", cfg).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "readable by others") {
		t.Fatalf("a runner with a loose token file: %v\n%s", err, out)
	}

	cmd := exec.Command(bin, "runner", "--server", "http://"+addr, "--token-file", tokenFile, "--config", cfg, "--name", "box")
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
	lines := bufio.NewScanner(stderr)
	var logged []string
	for lines.Scan() && !strings.Contains(lines.Text(), "connected to the daemon") {
		logged = append(logged, lines.Text())
	}
	if lines.Err() != nil {
		t.Fatalf("the runner's log ended before it connected: %v\n%s", lines.Err(), strings.Join(logged, "\n"))
	}
	var shown models.Runner
	if err := json.Unmarshal([]byte(mustCtl(t, addr, "--json", "runner", "show", "box")), &shown); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(shown.Agents, []string{"box/sh-1", "box/sh-2"}) || shown.LastSeenAt == nil || shown.Version == "" ||
		!shown.Connected {
		t.Fatalf("the connected runner as ctl shows it: %+v", shown)
	}
	if list := mustCtl(t, addr, "runner", "list"); !strings.Contains(list, "CONNECTED") || !strings.Contains(list, " yes") {
		t.Fatalf("ctl runner list does not show the runner connected:\n%s", list)
	}
	agents := mustCtl(t, addr, "agent", "list")
	if !strings.Contains(agents, "box/sh-1") || !strings.Contains(agents, "box/sh-2") {
		t.Fatalf("ctl agent list lacks the runner's agents:\n%s", agents)
	}

	// Removed, the runner stops with the reason; its agents are gone.
	rest, read := new(strings.Builder), make(chan struct{})
	go func() {
		defer close(read)
		for lines.Scan() {
			rest.WriteString(lines.Text() + "\n")
		}
	}()
	mustCtl(t, addr, "runner", "remove", "box")
	err = <-done
	<-read
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 || !strings.Contains(rest.String(), "this runner was removed") {
		t.Fatalf("the removed runner exited with %v:\n%s", err, rest)
	}
	if agents := mustCtl(t, addr, "agent", "list"); strings.Contains(agents, "box/") {
		t.Fatalf("the removed runner's agents are listed:\n%s", agents)
	}
}
