package agent_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentqueued/agentqueued/internal/agent"
)

// TestEndedRunReadsNoProcessTable: when a run's process ends, the daemon
// checks that nothing of its group is left with one kill(-pgid, 0), not by
// reading every process of the host from /proc (which made a trivial
// task's cost grow with the host's process count). Not parallel: other
// tests may read the table meanwhile.
func TestEndedRunReadsNoProcessTable(t *testing.T) {
	before := agent.ProcScansForTest()
	for _, body := range []string{"echo", "echo", "echo"} {
		p, err := agent.Start(agent.Spec{Argv: []string{script(t, body)}, Dir: t.TempDir(),
			LogPath: filepath.Join(t.TempDir(), "run.log"), Env: agent.Environment(os.Environ(), nil, nil)})
		if err != nil {
			t.Fatal(err)
		}
		wait(t, p)
	}
	if n := agent.ProcScansForTest() - before; n != 0 {
		t.Fatalf("ending three runs read the process table %d times, want 0", n)
	}
}

// TestGroupLiveness checks the answer for a group with a live process, a
// group whose processes have all ended and been reaped, and a group whose
// only process is a zombie nobody has reaped yet (not alive).
func TestGroupLiveness(t *testing.T) {
	t.Parallel()
	leader := exec.Command("sleep", "300")
	leader.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := leader.Process.Pid
	// A member of the leader's group that this test starts (and so is its
	// parent) and does not reap: once it has exited it is a zombie.
	member := exec.Command("true")
	member.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
	if err := member.Start(); err != nil {
		leader.Process.Kill()
		leader.Wait()
		t.Fatal(err)
	}
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, member.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	if !agent.GroupAliveForTest(pgid) {
		t.Fatal("a group with a sleeping process is not alive")
	}
	if err := agent.KillGroup(pgid); err != nil {
		t.Fatal(err)
	}
	leader.Wait() //nolint:errcheck // killed
	if agent.GroupAliveForTest(pgid) {
		t.Fatal("a group holding only a zombie is alive")
	}
	member.Wait() //nolint:errcheck // reaped now
	if agent.GroupAliveForTest(pgid) {
		t.Fatal("an empty group is alive")
	}
}
