//go:build unix

package proc

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
)

// Command returns exec.CommandContext(ctx, name, args...) set up to start
// as the leader of its own process group. When ctx ends, the whole group is
// killed with SIGKILL, not only the leader; callers set WaitDelay to bound
// how long output held open by a leftover child is waited for. A context
// that never ends (context.Background) never kills anything.
func Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return cmd
}

// KillGroup sends SIGKILL to every process of group pgid. A group that is
// already gone is not an error.
func KillGroup(pgid int) error {
	return signalGroup(pgid, syscall.SIGKILL)
}

// TermGroup sends SIGTERM to every process of group pgid. A group that is
// already gone is not an error.
func TermGroup(pgid int) error {
	return signalGroup(pgid, syscall.SIGTERM)
}

func signalGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 0 {
		return fmt.Errorf("kill process group %d: not a process group", pgid)
	}
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill process group %d: %w", pgid, err)
	}
	return nil
}

// Kill sends SIGKILL to the single process pid. A process that is already
// gone is not an error.
func Kill(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("kill process %d: not a process", pid)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill process %d: %w", pid, err)
	}
	return nil
}

// GroupExists reports whether the kernel knows a process of group pgid,
// alive or a zombie not yet reaped.
func GroupExists(pgid int) bool {
	if pgid <= 0 {
		return false
	}
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Exists reports whether the kernel knows process pid, alive or a zombie
// not yet reaped (one owned by another user counts).
func Exists(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
