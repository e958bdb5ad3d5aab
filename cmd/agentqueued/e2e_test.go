package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentqueued/agentqueued/internal/progresstest"
)

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// agentqueuedBinary builds the real binary once for tests that run it as a
// separate process (agents call it, crash tests kill it).
func agentqueuedBinary(t *testing.T) string {
	t.Helper()
	binaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "aq-bin")
		if err != nil {
			binaryErr = err
			return
		}
		binaryPath = filepath.Join(dir, "agentqueued")
		args := []string{"build", "-o", binaryPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
		if err != nil {
			binaryErr = err
			binaryPath = string(out)
		}
	})
	if binaryErr != nil {
		t.Fatalf("build agentqueued: %v\n%s", binaryErr, binaryPath)
	}
	return binaryPath
}

// progressWriter collects a process's output and reports each write as
// progress.
type progressWriter struct {
	watch *progresstest.Watchdog
	mu    sync.Mutex
	buf   bytes.Buffer
}

func (w *progressWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.watch.Progress(fmt.Sprintf("output %q", bytes.TrimSpace(p)))
	return w.buf.Write(p)
}

func (w *progressWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func TestDemoRunsToCompletion(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := agentqueuedBinary(t)
	// The demo prints each move of its tasks: each line is progress.
	watch := progresstest.New(t, "the demo's start")
	cmd := exec.CommandContext(watch.Context(), bin, "demo", "--stall", progresstest.Stall().String())
	out := &progressWriter{watch: watch}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		t.Fatalf("demo: %v (%v)\n%s", err, watch.Err(), out.String())
	}
	got := out.String()
	if !strings.Contains(got, "all 5 tasks completed; their commits are merged into main") {
		t.Fatalf("demo output:\n%s", got)
	}
	for _, step := range []string{"design", "backend", "frontend", "docs", "release"} {
		if !strings.Contains(got, step) {
			t.Errorf("demo output lacks %s", step)
		}
	}
}
