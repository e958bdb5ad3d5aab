package agent_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/progresstest"
)

// starterEnv makes the test binary a starter (see heldStarter): its value
// is the file the held program would write.
const starterEnv = "AGENT_TEST_STARTER_MARK"

// heldStarter starts a held process whose program would write the file
// mark, prints the process's pid and exits without releasing it: a daemon
// that dies between a spawn and its record.
func heldStarter(mark string) int {
	p, err := agent.Start(agent.Spec{Argv: []string{"/bin/sh", "-c", `echo ran > "$1"`, "sh", mark}, Dir: filepath.Dir(mark),
		Env: []string{"PATH=" + os.Getenv("PATH")}, LogPath: mark + ".log", Hold: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(p.PID())
	return 0
}

// waitGone waits until process pid has ended, polling the process table
// (the process is not the test's child).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	ctx := progresstest.Context(t)
	for agent.Alive(pid) {
		select {
		case <-ctx.Done():
			t.Fatalf("process %d is still alive", pid)
		case <-time.After(10 * time.Millisecond): // polling another process's state
		}
	}
}

func TestHeldProcessRunsItsProgramOnlyOnRelease(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The program reports its pid, arguments, standard input, the
	// environment it was executed with and its directory.
	prog := filepath.Join(dir, "report")
	body := "#!/bin/sh\necho \"$$\"; echo \"args:$1|$2\"; read -r line; echo \"prompt:$line\"\n" +
		"tr '\\000' '\\n' < /proc/$$/environ; echo; pwd; echo oops >&2; exit 5\n"
	if err := os.WriteFile(prog, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"AQ_TASK_ID=bold-orbit", "HOME=/nowhere", "PATH=" + os.Getenv("PATH")}
	var lines []string
	p, err := agent.Start(agent.Spec{Argv: []string{prog, "a b", "c"}, Dir: dir, Env: env, Stdin: "fix it\n",
		LogPath: filepath.Join(dir, "run.log"), Hold: true, OnLine: func(b []byte) { lines = append(lines, string(b)) }})
	if err != nil {
		t.Fatal(err)
	}
	pid := p.PID()
	if err := p.Release(); err != nil {
		t.Fatal(err)
	}
	if err := p.Release(); err != nil { // a second release changes nothing
		t.Fatal(err)
	}
	r := wait(t, p)
	if r.ExitCode != 5 || r.Stopped || !strings.Contains(r.StderrTail, "oops") {
		t.Fatalf("result %+v", r)
	}
	want := append([]string{strconv.Itoa(pid), "args:a b|c", "prompt:fix it"}, env...)
	want = append(want, "", dir)
	if len(lines) == len(want) {
		slices.Sort(lines[3 : 3+len(env)]) // the gate keeps the variables, not their order
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("the released program printed\n%q\nwant (its pid the recorded one, the environment exactly the Spec's)\n%q", lines, want)
	}
}

func TestHeldProcessStoppedNeverRunsItsProgram(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mark := filepath.Join(dir, "ran")
	p, err := agent.Start(agent.Spec{Argv: []string{"/bin/sh", "-c", `echo ran > "$1"`, "sh", mark}, Dir: dir,
		Env: []string{"PATH=" + os.Getenv("PATH")}, LogPath: filepath.Join(dir, "run.log"), Hold: true})
	if err != nil {
		t.Fatal(err)
	}
	r := p.Stop(time.Second)
	if !r.Stopped || r.ExitCode == 0 {
		t.Fatalf("result %+v", r)
	}
	if _, err := os.Stat(mark); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a held process that was stopped ran its program (%v)", err)
	}
	if err := p.Release(); err != nil {
		t.Fatalf("release after the end: %v", err)
	}
}

// TestHeldProcessNeverRunsWhenItsStarterDies starts a held process from
// another process that then exits without releasing it, as a daemon
// killed between a spawn and its record: the program never runs and
// nothing is left.
func TestHeldProcessNeverRunsWhenItsStarterDies(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mark := filepath.Join(dir, "ran")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), starterEnv+"="+mark)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("starter: %v\n%s", err, stderr.String())
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("starter printed %q", out)
	}
	waitGone(t, pid)
	if _, err := os.Stat(mark); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the program of a held process ran after its starter died (%v)", err)
	}
}

func TestHeldStartFailsBeforeAnyProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "-bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"runnable", "-bin/runnable"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\nexit 7\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		argv0   string
		wantErr bool
	}{
		{"missing path", filepath.Join(dir, "missing"), true},
		{"not executable", plain, true},
		{"a directory", dir, true},
		{"not on PATH", "no-such-agent-cli-here", true},
		{"relative to the directory", "./runnable", false},
		{"a path like an option", "-bin/runnable", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := agent.Start(agent.Spec{Argv: []string{tc.argv0}, Dir: dir, LogPath: filepath.Join(t.TempDir(), "l"),
				Env: []string{"PATH=" + os.Getenv("PATH")}, Hold: true})
			if tc.wantErr {
				if err == nil {
					p.Stop(time.Second)
					t.Fatalf("%s started", tc.argv0)
				}
				if !strings.Contains(err.Error(), tc.argv0) {
					t.Fatalf("the error does not name the command: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Release(); err != nil {
				t.Fatal(err)
			}
			if r := wait(t, p); r.ExitCode != 7 {
				t.Fatalf("result %+v", r)
			}
		})
	}
}

// leftover starts what a killed daemon leaves of a run of task: a process
// group (env AQ_TASK_ID=task) whose leader has exited and whose child
// lives on. It returns the group id and the child's pid.
func leftover(t *testing.T, task string) (pgid, child int) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "AQ_TASK_ID=" + task}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	child, err = strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("leftover printed %q", out)
	}
	t.Cleanup(func() { syscall.Kill(child, syscall.SIGKILL) }) //nolint:errcheck // usually gone
	return cmd.Process.Pid, child
}

func TestEndLeftover(t *testing.T) {
	t.Parallel()
	t.Run("the leader is gone, a child lives on", func(t *testing.T) {
		t.Parallel()
		pgid, child := leftover(t, "bold-orbit")
		found, err := agent.EndLeftover(pgid, "bold-orbit", progresstest.Stall(), nil)
		if err != nil || !found {
			t.Fatalf("EndLeftover: found %v, %v", found, err)
		}
		if agent.Alive(child) {
			t.Fatalf("child %d of the run's group is alive after EndLeftover returned", child)
		}
	})
	t.Run("the leader lives", func(t *testing.T) {
		t.Parallel()
		cmd := exec.Command("sleep", "300")
		cmd.Env = []string{"AQ_TASK_ID=bold-orbit"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		found, err := agent.EndLeftover(cmd.Process.Pid, "bold-orbit", progresstest.Stall(), nil)
		if err != nil || !found {
			cmd.Process.Kill()
			t.Fatalf("EndLeftover: found %v, %v", found, err)
		}
		select {
		case <-exited:
		case <-progresstest.Context(t).Done():
			t.Fatal("the leader was not killed")
		}
	})
	t.Run("another task's group is not touched", func(t *testing.T) {
		t.Parallel()
		pgid, child := leftover(t, "other-task")
		found, err := agent.EndLeftover(pgid, "bold-orbit", progresstest.Stall(), nil)
		if err != nil || found {
			t.Fatalf("EndLeftover: found %v, %v", found, err)
		}
		if !agent.Alive(child) {
			t.Fatal("a process of another task was killed")
		}
	})
	t.Run("the fence refuses: nothing is signalled", func(t *testing.T) {
		t.Parallel()
		pgid, child := leftover(t, "bold-orbit")
		deposed := errors.New("deposed")
		asked := 0
		found, err := agent.EndLeftover(pgid, "bold-orbit", progresstest.Stall(), func() error { asked++; return deposed })
		if !errors.Is(err, deposed) || !found || asked != 1 {
			t.Fatalf("EndLeftover: found %v, %v after %d fence checks; want the fence's error after one", found, err, asked)
		}
		if !agent.Alive(child) {
			t.Fatal("the group was signalled although the fence refused")
		}
	})
	t.Run("nothing left", func(t *testing.T) {
		t.Parallel()
		for _, pgid := range []int{0, -1} {
			if found, err := agent.EndLeftover(pgid, "bold-orbit", time.Second, nil); found || err != nil {
				t.Fatalf("EndLeftover(%d): %v %v", pgid, found, err)
			}
		}
	})
}
