package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
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

func TestDemoRunsToCompletion(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := agentqueuedBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "demo", "--timeout", "2m")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
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
