//go:build unix

package proc_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/proc"
	"github.com/agentqueued/agentqueued/internal/progresstest"
)

// startFamily starts sh as a group leader that starts a long sleep in the
// background and prints its pid. It returns the command, the grandchild's
// pid and the read end of the output pipe, which reaches EOF only when
// every process holding it (the leader and the grandchild) has ended.
func startFamily(t *testing.T, ctx context.Context) (cmd interface{ Wait() error }, leader, grandchild int, out *os.File) {
	t.Helper()
	c := proc.Command(ctx, "/bin/sh", "-c", "sleep 1000 & echo $!; wait")
	c.WaitDelay = time.Nanosecond // the leftover grandchild must not hold Wait up
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c.Stdout = w
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatalf("read the grandchild's pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("grandchild pid %q: %v", line, err)
	}
	return c, c.Process.Pid, pid, r
}

// waitEOF reads out until every writer has closed it, which for a killed
// process group is the sign that all of it has ended.
func waitEOF(t *testing.T, out *os.File) {
	t.Helper()
	done := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, out); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("read output: %v", err)
		}
	case <-progresstest.Context(t).Done():
		out.Close()
		t.Fatal("a process of the group still holds its output open: the group was not ended")
	}
}

func TestGroupEnds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		end  func(t *testing.T, cancel context.CancelFunc, leader int)
	}{
		{"context ends", func(t *testing.T, cancel context.CancelFunc, _ int) { cancel() }},
		{"KillGroup", func(t *testing.T, _ context.CancelFunc, leader int) {
			if err := proc.KillGroup(leader); err != nil {
				t.Fatal(err)
			}
		}},
		{"TermGroup", func(t *testing.T, _ context.CancelFunc, leader int) {
			if err := proc.TermGroup(leader); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cmd, leader, grandchild, out := startFamily(t, ctx)
			defer out.Close()
			if !proc.GroupExists(leader) || !proc.Exists(grandchild) {
				t.Fatalf("before the end: group %d exists %v, grandchild %d exists %v",
					leader, proc.GroupExists(leader), grandchild, proc.Exists(grandchild))
			}
			tt.end(t, cancel, leader)
			cmd.Wait() //nolint:errcheck // killed
			waitEOF(t, out)
		})
	}
}

func TestGoneIsNotAnError(t *testing.T) {
	t.Parallel()
	cmd := proc.Command(context.Background(), "/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	for name, err := range map[string]error{"KillGroup": proc.KillGroup(pid), "TermGroup": proc.TermGroup(pid)} {
		if err != nil {
			t.Errorf("%s of an ended group: %v", name, err)
		}
	}
	if proc.GroupExists(pid) {
		t.Errorf("GroupExists(%d) after the group ended and was reaped", pid)
	}
}

func TestNotAGroup(t *testing.T) {
	t.Parallel()
	for _, pgid := range []int{0, -1} {
		if err := proc.KillGroup(pgid); err == nil || !strings.Contains(err.Error(), "not a process group") {
			t.Errorf("KillGroup(%d) = %v, want an error saying it is not a process group", pgid, err)
		}
		if proc.GroupExists(pgid) || proc.Exists(pgid) {
			t.Errorf("GroupExists/Exists(%d) = true", pgid)
		}
	}
}
