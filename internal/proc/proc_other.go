//go:build !unix

package proc

import (
	"context"
	"fmt"
	"os/exec"
)

// Command returns exec.CommandContext(ctx, name, args...) that fails to
// start with ErrUnsupported: without process groups, what the command
// started could not be ended with it.
func Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Err = fmt.Errorf("start %s: %w", name, ErrUnsupported)
	return cmd
}

// KillGroup returns ErrUnsupported.
func KillGroup(pgid int) error { return fmt.Errorf("kill process group %d: %w", pgid, ErrUnsupported) }

// TermGroup returns ErrUnsupported.
func TermGroup(pgid int) error { return fmt.Errorf("kill process group %d: %w", pgid, ErrUnsupported) }

// Kill returns ErrUnsupported.
func Kill(pid int) error { return fmt.Errorf("kill process %d: %w", pid, ErrUnsupported) }

// GroupExists reports false: there are no process groups.
func GroupExists(pgid int) bool { return false }

// Exists reports true: without signal 0 nothing can be confirmed, and a
// process that may be alive must be treated as alive (the database lease
// of a daemon on this host is not taken over on a guess).
func Exists(pid int) bool { return true }
