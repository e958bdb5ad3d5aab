package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentqueued/agentqueued/internal/progresstest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if binaryPath != "" && binaryErr == nil {
			os.RemoveAll(filepath.Dir(binaryPath)) // the binary built for end-to-end tests
		}
		os.Exit(code) // a cleanup replaces goleak's own exit
	}))
}

// syncBuffer is a bytes.Buffer safe for concurrent writers. Each write
// is reported to onWrite, when set.
type syncBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	onWrite func(p []byte)
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.onWrite != nil {
		b.onWrite(p)
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// envOf returns a getenv over vars only, so tests never see the real environment.
func envOf(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

// daemon is a Main running "run" in the background.
type daemon struct {
	m    *Main
	logs *syncBuffer
	errc chan error
	// watch sees the daemon's progress: each committed status change and
	// each line it logs. Tests wait on its context rather than on a
	// wall-clock budget.
	watch *progresstest.Watchdog
	// stoppedWithError is set by tests that expect Run to fail on its own.
	stoppedWithError bool
}

// startMain starts Main with args and waits until it listens or fails.
// It returns the error of a failed start (nil when it listens).
func startMain(t *testing.T, env map[string]string, args ...string) (*daemon, error) {
	t.Helper()
	return startMainWith(t, func(m *Main) { m.Getenv = envOf(env) }, args...)
}

// startMainWith is startMain with a Main changed by set before it runs.
func startMainWith(t *testing.T, set func(*Main), args ...string) (*daemon, error) {
	t.Helper()
	d := &daemon{logs: &syncBuffer{}, errc: make(chan error, 1), watch: progresstest.New(t, "the daemon's start")}
	d.logs.onWrite = func(p []byte) { d.watch.Progress(fmt.Sprintf("the log line %q", bytes.TrimSpace(p))) }
	d.m = NewMain(args, &syncBuffer{}, d.logs, envOf(nil))
	set(d.m)
	onChange := d.m.OnChange
	d.m.OnChange = func() {
		d.watch.Progress("a committed status change")
		if onChange != nil {
			onChange()
		}
	}
	go func() { d.errc <- d.m.Run(context.Background()) }()
	select {
	case <-d.m.Ready():
		t.Cleanup(func() {
			if err := d.m.Close(); err != nil && !d.stoppedWithError {
				t.Errorf("Close: %v", err)
			}
		})
		return d, nil
	case err := <-d.errc:
		if err == nil {
			t.Fatalf("Run(%q) returned nil without listening", args)
		}
		return nil, err
	case <-d.watch.Done():
		t.Fatalf("Run(%q) did not listen: %v\n%s", args, d.watch.Err(), d.logs)
	}
	return nil, nil
}

// startDaemon starts a daemon on dataDir and a free port.
func startDaemon(t *testing.T, dataDir string, extra ...string) *daemon {
	t.Helper()
	args := append([]string{"run", "--data-dir", dataDir, "--listen", "127.0.0.1:0"}, extra...)
	d, err := startMain(t, nil, args...)
	if err != nil {
		t.Fatalf("start daemon: %v", err)
	}
	return d
}

// ctlResult is the outcome of one ctl invocation.
type ctlResult struct {
	stdout, stderr string
	code           int
}

// runCtl runs "agentqueued ctl --addr http://ADDR ARGS..." and captures its output.
func runCtl(t *testing.T, addr string, env map[string]string, args ...string) ctlResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	full := append([]string{"ctl", "--addr", "http://" + addr}, args...)
	code := NewMain(full, &stdout, &stderr, envOf(env)).Exec(context.Background())
	return ctlResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// mustCtl runs ctl and fails the test unless it succeeds.
func mustCtl(t *testing.T, addr string, args ...string) string {
	t.Helper()
	r := runCtl(t, addr, nil, args...)
	if r.code != 0 {
		t.Fatalf("ctl %s: exit %d, stderr: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// writeFile writes content into dir/name and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
