package main

import (
	"bytes"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// gitHTTP serves the bare repositories under a directory over smart HTTP
// (git http-backend behind net/http/cgi) on 127.0.0.1, pushes included. A
// test may stop the next request at the door (HoldNext) to act while a
// client of it is known to be mid-operation.
type gitHTTP struct {
	*httptest.Server
	mu   sync.Mutex
	hold *gitHold
}

// gitHold is one request stopped at the door: Entered is closed when it
// arrives; it is served once Proceed is called.
type gitHold struct {
	Entered chan struct{}
	proceed chan struct{}
	once    sync.Once
}

// Proceed lets the held request through (again: no effect).
func (h *gitHold) Proceed() { h.once.Do(func() { close(h.proceed) }) }

// newGitHTTP serves root's repositories until the test ends.
func newGitHTTP(t *testing.T, root string) *gitHTTP {
	t.Helper()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is needed")
	}
	backend := &cgi.Handler{Path: gitBin, Args: []string{"http-backend"}, Dir: root,
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + root}}
	g := &gitHTTP{}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		h := g.hold
		g.hold = nil
		g.mu.Unlock()
		if h != nil {
			close(h.Entered)
			<-h.proceed
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		g.mu.Lock()
		if g.hold != nil {
			g.hold.Proceed()
		}
		g.mu.Unlock()
		g.Close()
	})
	return g
}

// HoldNext stops the next request at the door until Proceed. The test
// must call Proceed (a clean-up does, for a test that failed first).
func (g *gitHTTP) HoldNext(t *testing.T) *gitHold {
	t.Helper()
	h := &gitHold{Entered: make(chan struct{}), proceed: make(chan struct{})}
	t.Cleanup(h.Proceed)
	g.mu.Lock()
	g.hold = h
	g.mu.Unlock()
	return h
}

// bareOrigin creates a bare repository at path with one commit on main
// that accepts pushes over HTTP.
func bareOrigin(t *testing.T, path string) {
	t.Helper()
	seed := t.TempDir()
	run := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=t",
			"GIT_AUTHOR_EMAIL=t@localhost", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@localhost")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
	}
	run(seed, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(seed, "README"), []byte("origin\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(seed, "add", "README")
	run(seed, "commit", "-q", "-m", "init")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	run(filepath.Dir(path), "clone", "-q", "--bare", seed, path)
	run(path, "config", "http.receivepack", "true")
}
