// Package proc starts commands in their own process group and ends the
// group as a whole.
//
// A command the daemon runs (an agent, a hook's command step, git, a CLI
// asked its version) may start children of its own. Each runs as the
// leader of a new process group, so that ending it ends everything it
// started: Command arranges this for a command with a context, and
// KillGroup, TermGroup and GroupExists act on a group by its id (the
// leader's pid).
//
// Process groups are a unix notion. Elsewhere the package compiles, but a
// command from Command fails to start, the calls that signal return
// ErrUnsupported ("process groups need a unix system"), GroupExists reports
// false and Exists reports true (a process that may be alive is taken for
// alive).
package proc

import "errors"

// ErrUnsupported is returned on systems without process groups.
var ErrUnsupported = errors.New("process groups need a unix system")
