package gitserve_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentqueued/agentqueued/internal/gitserve"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// mount is where the tests mount the handler.
const mount = "/git/repo.git"

// seen is one request the server answered.
type seen struct {
	method, path, query string
	status              int
	contentEncoding     string
	chunked             bool
	gitProtocol         string
}

// server is a Handler on 127.0.0.1 whose Resolve grants what the test
// sets, recording each request.
type server struct {
	t    *testing.T
	srv  *httptest.Server
	url  string // the repository's URL
	logs *syncBuffer

	mu      sync.Mutex
	target  gitserve.Target
	err     error
	reqs    []seen
	handled chan seen // each request once its handler returned, when set
}

// serve starts a server granting target, with cfg's other settings.
func serve(t *testing.T, target gitserve.Target, cfg gitserve.Config) *server {
	t.Helper()
	s := &server{t: t, target: target, logs: &syncBuffer{}}
	cfg.Resolve = func(r *http.Request) (gitserve.Target, error) {
		if !strings.HasPrefix(r.URL.Path, mount+"/") {
			return gitserve.Target{}, gitserve.ErrNotFound
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.target, s.err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(s.logs, nil))
	}
	h, err := gitserve.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := seen{method: r.Method, path: strings.TrimPrefix(r.URL.Path, mount), query: r.URL.RawQuery,
			contentEncoding: r.Header.Get("Content-Encoding"), gitProtocol: r.Header.Get("Git-Protocol"),
			chunked: len(r.TransferEncoding) > 0 && r.TransferEncoding[0] == "chunked"}
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		rec.status = sw.status
		s.mu.Lock()
		s.reqs = append(s.reqs, rec)
		ch := s.handled
		s.mu.Unlock()
		if ch != nil {
			ch <- rec
		}
	}))
	t.Cleanup(s.srv.Close)
	s.url = s.srv.URL + mount
	return s
}

// grant changes what Resolve grants.
func (s *server) grant(target gitserve.Target, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.target, s.err = target, err
}

// requests returns the requests answered so far and forgets them.
func (s *server) requests() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reqs
	s.reqs = nil
	return r
}

// statusWriter records the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// syncBuffer is a bytes.Buffer safe for the handler's logger.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// client is the environment of a person's git: a home and a global
// configuration of its own, no system configuration, no proxy, no prompt.
type client struct {
	env []string
}

func newClient(t testing.TB) *client {
	t.Helper()
	home := t.TempDir()
	global := filepath.Join(home, "gitconfig")
	if err := os.WriteFile(global, []byte("[user]\n\tname = t\n\temail = t@t\n[init]\n\tdefaultBranch = main\n"+
		"[advice]\n\tdetachedHead = false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GIT_") || strings.HasSuffix(strings.ToLower(k), "_proxy") || k == "HOME" ||
			k == "XDG_CONFIG_HOME" {
			continue
		}
		env = append(env, kv)
	}
	return &client{env: append(env, "HOME="+home, "GIT_CONFIG_GLOBAL="+global, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0", "NO_PROXY=*")}
}

// run runs git in dir and returns its combined output.
func (c *client) run(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = c.env
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// git runs git in dir and fails the test when it fails.
func (c *client) git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := c.run(dir, args...)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// write writes a file of a work tree.
func write(t testing.TB, dir, name string, content []byte) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, content, 0o644); err != nil {
		t.Fatal(err)
	}
}

// origin makes a bare repository whose main has two commits, and returns
// its directory.
func origin(t testing.TB, c *client) string {
	t.Helper()
	work, bare := t.TempDir(), filepath.Join(t.TempDir(), "origin.git")
	c.git(t, work, "init", "-q")
	write(t, work, "README", []byte("hello\n"))
	c.git(t, work, "add", "README")
	c.git(t, work, "commit", "-q", "-m", "first")
	write(t, work, "src/a.txt", []byte("a\n"))
	c.git(t, work, "add", ".")
	c.git(t, work, "commit", "-q", "-m", "second")
	c.git(t, "", "clone", "-q", "--bare", work, bare)
	return bare
}

// refs returns every ref of a repository with its object.
func refs(t testing.TB, c *client, dir string) string {
	t.Helper()
	return c.git(t, dir, "for-each-ref", "--format=%(refname) %(objectname)")
}

// hasObject reports whether a repository holds an object.
func hasObject(c *client, dir, oid string) bool {
	_, err := c.run(dir, "cat-file", "-e", oid)
	return err == nil
}
