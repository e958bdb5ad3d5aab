package gitserve_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/gitserve"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/proc"
	"github.com/agentqueued/agentqueued/internal/progresstest"
)

const taskBranch = "refs/heads/aq/T-1-fix"

// pushTarget grants fetching and pushing the task branch of dir.
func pushTarget(dir string) gitserve.Target {
	return gitserve.Target{Dir: dir, Read: true, Push: []string{taskBranch}}
}

func TestCloneOverProtocolVersions0And2(t *testing.T) {
	c := newClient(t)
	bare := origin(t, c)
	s := serve(t, gitserve.Target{Dir: bare, Read: true}, gitserve.Config{})
	for _, v := range []string{"0", "2"} {
		t.Run("v"+v, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "clone")
			c.git(t, "", "-c", "protocol.version="+v, "clone", "-q", s.url, dst)
			if got, want := c.git(t, dst, "rev-parse", "HEAD"), c.git(t, bare, "rev-parse", "main"); got != want {
				t.Fatalf("clone's HEAD = %s, want %s", got, want)
			}
			if got := c.git(t, dst, "show", "HEAD:src/a.txt"); got != "a" {
				t.Fatalf("src/a.txt = %q", got)
			}
			want := map[string]string{"0": "", "2": "version=2"}[v]
			for _, r := range s.requests() {
				if r.status != http.StatusOK {
					t.Errorf("%s %s?%s answered %d", r.method, r.path, r.query, r.status)
				}
				if r.gitProtocol != want {
					t.Errorf("%s %s sent Git-Protocol %q, want %q", r.method, r.path, r.gitProtocol, want)
				}
			}
		})
	}
}

func TestAdvertisement(t *testing.T) {
	c := newClient(t)
	bare := origin(t, c)
	s := serve(t, pushTarget(bare), gitserve.Config{})
	main := c.git(t, bare, "rev-parse", "main")
	cases := []struct {
		name, service, protocol string
		wantStart               string
		v0                      bool // refs advertised in version 0
	}{
		{"upload-pack v0", "git-upload-pack", "", "001e# service=git-upload-pack\n0000", true},
		{"upload-pack v2", "git-upload-pack", "version=2", "000eversion 2\n", false},
		{"upload-pack v1", "git-upload-pack", "version=1", "001e# service=git-upload-pack\n0000000eversion 1\n", true},
		{"upload-pack, a Git-Protocol that is not key=value", "git-upload-pack", "version=2;x", "001e# service=git-upload-pack\n0000", true},
		{"upload-pack, a Git-Protocol with a key alone", "git-upload-pack", "version=2:x", "001e# service=git-upload-pack\n0000", true},
		{"receive-pack v0", "git-receive-pack", "", "001f# service=git-receive-pack\n0000", true},
		{"receive-pack asked for v2 speaks v0", "git-receive-pack", "version=2", "001f# service=git-receive-pack\n0000", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", s.url+"/info/refs?service="+tc.service, nil)
			if tc.protocol != "" {
				req.Header.Set("Git-Protocol", tc.protocol)
			}
			resp, body := do(t, req)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if got, want := resp.Header.Get("Content-Type"), "application/x-"+tc.service+"-advertisement"; got != want {
				t.Errorf("Content-Type %q, want %q", got, want)
			}
			if got := resp.Header.Get("Cache-Control"); !strings.Contains(got, "no-cache") {
				t.Errorf("Cache-Control %q", got)
			}
			if !strings.HasPrefix(body, tc.wantStart) {
				t.Errorf("body starts %q, want %q", body[:min(len(body), 80)], tc.wantStart)
			}
			if got := strings.Contains(body, main+" refs/heads/main"); got != tc.v0 || strings.Contains(body, "version 2") == tc.v0 {
				t.Errorf("body %q, want refs advertised in version 0: %v", body, tc.v0)
			}
			if !strings.HasSuffix(body, "0000") {
				t.Errorf("body ends %q, want a flush", body[max(0, len(body)-20):])
			}
		})
	}
}

// do sends req and returns its answer and body.
func do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// manyBranches makes a repository with n branches, each with a commit of
// its own, so that a fetch of them all negotiates more than 1 kB.
func manyBranches(t *testing.T, c *client, n int) (work, bare string) {
	t.Helper()
	work, bare = t.TempDir(), filepath.Join(t.TempDir(), "origin.git")
	c.git(t, work, "init", "-q")
	write(t, work, "README", []byte("hello\n"))
	c.git(t, work, "add", ".")
	c.git(t, work, "commit", "-q", "-m", "first")
	for i := range n {
		c.git(t, work, "checkout", "-q", "-b", fmt.Sprintf("b%02d", i), "main")
		write(t, work, "f", []byte(fmt.Sprint(i)))
		c.git(t, work, "add", ".")
		c.git(t, work, "commit", "-q", "-m", fmt.Sprint(i))
	}
	c.git(t, "", "clone", "-q", "--mirror", work, bare)
	return work, bare
}

func TestFetchNegotiationIsSentGzipped(t *testing.T) {
	c := newClient(t)
	work, bare := manyBranches(t, c, 40)
	s := serve(t, gitserve.Target{Dir: bare, Read: true}, gitserve.Config{})
	for _, v := range []string{"0", "2"} {
		t.Run("v"+v, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "clone")
			c.git(t, "", "-c", "protocol.version="+v, "clone", "-q", s.url, dst)
			s.requests()
			// Every branch moves: the fetch wants 40 commits and has 41.
			for i := range 40 {
				b := fmt.Sprintf("b%02d", i)
				c.git(t, work, "checkout", "-q", b)
				write(t, work, "g"+v, []byte(b))
				c.git(t, work, "add", ".")
				c.git(t, work, "commit", "-q", "-m", b+" again")
			}
			c.git(t, bare, "fetch", "-q", work, "+refs/heads/*:refs/heads/*")
			c.git(t, dst, "-c", "protocol.version="+v, "fetch", "-q", "origin")
			for i := range 40 {
				b := fmt.Sprintf("b%02d", i)
				if got, want := c.git(t, dst, "rev-parse", "origin/"+b), c.git(t, bare, "rev-parse", b); got != want {
					t.Fatalf("origin/%s = %s, want %s", b, got, want)
				}
			}
			gzipped := 0
			for _, r := range s.requests() {
				if r.status != 200 {
					t.Errorf("%s %s answered %d", r.method, r.path, r.status)
				}
				if r.path == "/git-upload-pack" && r.contentEncoding == "gzip" {
					gzipped++
				}
			}
			if gzipped == 0 {
				t.Fatal("no gzipped negotiation reached the handler")
			}
		})
	}
}

func TestGzippedBodies(t *testing.T) {
	c := newClient(t)
	bare := origin(t, c)
	s := serve(t, gitserve.Target{Dir: bare, Read: true}, gitserve.Config{})
	lsRefs := "0014command=ls-refs\n0001" + "0000"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	io.WriteString(zw, lsRefs)
	zw.Close()

	req, _ := http.NewRequest("POST", s.url+"/git-upload-pack", bytes.NewReader(gz.Bytes()))
	req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
	req.Header.Set("Content-Encoding", "gzip")
	req.Header.Set("Git-Protocol", "version=2")
	resp, body := do(t, req)
	if resp.StatusCode != 200 || !strings.Contains(body, c.git(t, bare, "rev-parse", "main")+" refs/heads/main") {
		t.Fatalf("gzipped ls-refs: %d %q", resp.StatusCode, body)
	}
	if got := resp.Header.Get("Content-Type"); got != "application/x-git-upload-pack-result" {
		t.Errorf("Content-Type %q", got)
	}

	req, _ = http.NewRequest("POST", s.url+"/git-upload-pack", strings.NewReader("not gzip at all"))
	req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
	req.Header.Set("Content-Encoding", "gzip")
	if resp, body := do(t, req); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a body that is not gzip: %d %q", resp.StatusCode, body)
	}
}

// checkout clones the served repository and makes a task branch there.
func checkout(t *testing.T, c *client, url string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "runner")
	c.git(t, "", "clone", "-q", url, dst)
	c.git(t, dst, "checkout", "-q", "-b", strings.TrimPrefix(taskBranch, "refs/heads/"))
	return dst
}

// commit commits a file of content in the work tree at dir and returns the
// commit.
func commit(t *testing.T, c *client, dir, name string, content []byte) string {
	t.Helper()
	write(t, dir, name, content)
	c.git(t, dir, "add", ".")
	c.git(t, dir, "commit", "-q", "-m", "add "+name)
	return c.git(t, dir, "rev-parse", "HEAD")
}

func TestPushOfTheGrantedBranch(t *testing.T) {
	c := newClient(t)
	bare := origin(t, c)
	s := serve(t, pushTarget(bare), gitserve.Config{})
	work := checkout(t, c, s.url)

	small := commit(t, c, work, "small.txt", []byte("small\n"))
	c.git(t, work, "push", "-q", "origin", "HEAD:"+taskBranch)
	if got := c.git(t, bare, "rev-parse", taskBranch); got != small {
		t.Fatalf("after a small push the branch is %s, want %s", got, small)
	}
	for _, r := range s.requests() {
		if r.status != 200 {
			t.Errorf("%s %s answered %d", r.method, r.path, r.status)
		}
	}

	// 9 MiB that do not compress: the pack is POSTed chunked.
	big := make([]byte, 9<<20)
	rand.Read(big)
	large := commit(t, c, work, "large.bin", big)
	c.git(t, work, "push", "-q", "origin", "HEAD:"+taskBranch)
	if got := c.git(t, bare, "rev-parse", taskBranch); got != large {
		t.Fatalf("after a large push the branch is %s, want %s", got, large)
	}
	chunked := false
	for _, r := range s.requests() {
		if r.status != 200 {
			t.Errorf("%s %s answered %d", r.method, r.path, r.status)
		}
		chunked = chunked || (r.path == "/git-receive-pack" && r.chunked)
	}
	if !chunked {
		t.Fatal("the large push was not sent chunked")
	}

	// A forced update of the granted branch is allowed.
	c.git(t, work, "reset", "-q", "--hard", "HEAD~2")
	forced := commit(t, c, work, "other.txt", []byte("other\n"))
	c.git(t, work, "push", "-q", "--force", "origin", "HEAD:"+taskBranch)
	if got := c.git(t, bare, "rev-parse", taskBranch); got != forced {
		t.Fatalf("after a forced push the branch is %s, want %s", got, forced)
	}
}

func TestPushesThatAreRefused(t *testing.T) {
	c := newClient(t)
	bare := origin(t, c)
	s := serve(t, pushTarget(bare), gitserve.Config{})
	work := checkout(t, c, s.url)
	// The task branch exists, so that its deletion can be tried.
	c.git(t, work, "push", "-q", "origin", "HEAD:"+taskBranch)
	s.requests()
	head := commit(t, c, work, "new.txt", []byte("new\n"))
	c.git(t, work, "tag", "v1")
	before := refs(t, c, bare)

	cases := []struct {
		name string
		args []string
	}{
		{"another branch", []string{"HEAD:refs/heads/main"}},
		{"a new branch", []string{"HEAD:refs/heads/aq/T-2-other"}},
		{"a ref outside refs/heads", []string{"HEAD:refs/notes/x"}},
		{"a tag", []string{"refs/tags/v1"}},
		{"a deletion of the granted branch", []string{":" + taskBranch}},
		{"the granted branch with another", []string{"HEAD:" + taskBranch, "HEAD:refs/heads/main"}},
		{"a large push of another branch", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.args == nil {
				big := make([]byte, 3<<20)
				rand.Read(big)
				commit(t, c, work, "big.bin", big)
				head = c.git(t, work, "rev-parse", "HEAD")
				tc.args = []string{"HEAD:refs/heads/main"}
			}
			out, err := c.run(work, append([]string{"push", "--force", "origin"}, tc.args...)...)
			if err == nil {
				t.Fatalf("push %v succeeded:\n%s", tc.args, out)
			}
			if got := refs(t, c, bare); got != before {
				t.Fatalf("refs changed:\n%s\nwant\n%s", got, before)
			}
			if hasObject(c, bare, head) {
				t.Fatalf("the pushed commit %s reached the repository", head)
			}
			refused := false
			for _, r := range s.requests() {
				refused = refused || (r.path == "/git-receive-pack" && r.status == http.StatusForbidden)
			}
			if !refused {
				t.Fatalf("no push answered 403; git said:\n%s", out)
			}
		})
	}
}

func TestPermissions(t *testing.T) {
	c := newClient(t)
	bare := origin(t, c)
	s := serve(t, gitserve.Target{Dir: bare, Read: true}, gitserve.Config{})
	work := checkout(t, c, s.url)
	commit(t, c, work, "x.txt", []byte("x\n"))
	before := refs(t, c, bare)
	s.requests()

	t.Run("push without a granted branch", func(t *testing.T) {
		out, err := c.run(work, "push", "origin", "HEAD:"+taskBranch)
		if err == nil {
			t.Fatalf("push succeeded:\n%s", out)
		}
		if got := refs(t, c, bare); got != before {
			t.Fatalf("refs changed:\n%s", got)
		}
		if r := s.requests(); len(r) != 1 || r[0].status != http.StatusForbidden || r[0].query != "service=git-receive-pack" {
			t.Fatalf("requests %+v, want one 403 advertisement", r)
		}
		if !strings.Contains(out, "pushing is not allowed") {
			t.Errorf("git did not show the reason:\n%s", out)
		}
		// The exchange itself is refused too, not only its advertisement.
		req, _ := http.NewRequest("POST", s.url+"/git-receive-pack", strings.NewReader("0000"))
		req.Header.Set("Content-Type", "application/x-git-receive-pack-request")
		if resp, body := do(t, req); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("POST git-receive-pack: %d %q", resp.StatusCode, body)
		}
	})

	t.Run("fetch without read", func(t *testing.T) {
		s.grant(gitserve.Target{Dir: bare, Push: []string{taskBranch}}, nil)
		out, err := c.run("", "clone", s.url, filepath.Join(t.TempDir(), "c"))
		if err == nil {
			t.Fatalf("clone succeeded:\n%s", out)
		}
		if !strings.Contains(out, "fetching is not allowed") {
			t.Errorf("git did not show the reason:\n%s", out)
		}
		req, _ := http.NewRequest("POST", s.url+"/git-upload-pack", strings.NewReader("0000"))
		req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
		if resp, body := do(t, req); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("POST git-upload-pack: %d %q", resp.StatusCode, body)
		}
	})
}

func TestResolveErrorsAnswerAsTheySay(t *testing.T) {
	c := newClient(t)
	bare := origin(t, c)
	s := serve(t, gitserve.Target{}, gitserve.Config{})
	cases := []struct {
		err      error
		status   int
		body     string
		wwwAuth  bool
		loggable bool
	}{
		{gitserve.ErrUnauthorized, 401, "authentication required", true, false},
		{fmt.Errorf("token of run 3: %w", gitserve.ErrUnauthorized), 401, "authentication required", true, false},
		{gitserve.ErrForbidden, 403, "forbidden", false, false},
		{gitserve.ErrNotFound, 404, "repository not found", false, false},
		{models.Errorf(models.CodeNotFound, "run 7 not found"), 404, "run 7 not found", false, false},
		{models.Errorf(models.CodeUnauthorized, "lease lost"), 401, "lease lost", true, false},
		{models.Errorf(models.CodeConflict, "run 7 has ended"), 409, "run 7 has ended", false, false},
		{fmt.Errorf("open %s: permission denied", bare), 500, "internal error", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.err.Error(), func(t *testing.T) {
			s.grant(gitserve.Target{}, tc.err)
			for _, path := range []string{"/info/refs?service=git-upload-pack", "/info/refs?service=git-receive-pack"} {
				req, _ := http.NewRequest("GET", s.url+path, nil)
				resp, body := do(t, req)
				if resp.StatusCode != tc.status || strings.TrimSpace(body) != tc.body {
					t.Fatalf("GET %s: %d %q, want %d %q", path, resp.StatusCode, body, tc.status, tc.body)
				}
				if got := resp.Header.Get("WWW-Authenticate") != ""; got != tc.wwwAuth {
					t.Errorf("WWW-Authenticate %q", resp.Header.Get("WWW-Authenticate"))
				}
			}
			if tc.loggable && !strings.Contains(s.logs.String(), bare) {
				t.Errorf("the error is not in the log:\n%s", s.logs.String())
			}
		})
	}
	t.Run("git clone shows the message", func(t *testing.T) {
		s.grant(gitserve.Target{}, models.Errorf(models.CodeConflict, "run 7 has ended"))
		out, err := c.run("", "clone", s.url, filepath.Join(t.TempDir(), "c"))
		if err == nil || !strings.Contains(out, "run 7 has ended") {
			t.Fatalf("clone: %v\n%s", err, out)
		}
	})
}

func TestRoutes(t *testing.T) {
	c := newClient(t)
	bare := origin(t, c)
	s := serve(t, pushTarget(bare), gitserve.Config{})
	cases := []struct {
		method, path, contentType, encoding string
		status                              int
	}{
		{"GET", "/info/refs", "", "", 404},
		{"GET", "/info/refs?service=git-upload-archive", "", "", 404},
		{"GET", "/HEAD", "", "", 404},
		{"GET", "/objects/info/packs", "", "", 404},
		{"GET", "/objects/pack/x.pack", "", "", 404},
		{"GET", "", "", "", 404},
		{"GET", "/git-upload-pack/x", "", "", 404},
		{"POST", "/info/refs?service=git-upload-pack", "", "", 405},
		{"GET", "/git-upload-pack", "", "", 405},
		{"PUT", "/git-receive-pack", "", "", 405},
		{"POST", "/git-upload-pack", "application/x-git-receive-pack-request", "", 415},
		{"POST", "/git-receive-pack", "text/plain", "", 415},
		{"POST", "/git-upload-pack", "application/x-git-upload-pack-request", "br", 415},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest(tc.method, s.url+tc.path, strings.NewReader("0000"))
		if tc.contentType != "" {
			req.Header.Set("Content-Type", tc.contentType)
		}
		if tc.encoding != "" {
			req.Header.Set("Content-Encoding", tc.encoding)
		}
		resp, body := do(t, req)
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: %d %q, want %d", tc.method, tc.path, resp.StatusCode, body, tc.status)
		}
	}
	// A path outside the mount is Resolve's to refuse.
	resp, _ := do(t, must(http.NewRequest("GET", s.srv.URL+"/other.git/info/refs?service=git-upload-pack", nil)))
	if resp.StatusCode != 404 {
		t.Errorf("another mount: %d", resp.StatusCode)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// pkt frames s as a pkt-line.
func pkt(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }

func TestMalformedPushBodies(t *testing.T) {
	c := newClient(t)
	bare := origin(t, c)
	s := serve(t, pushTarget(bare), gitserve.Config{})
	before := refs(t, c, bare)
	zero, main := strings.Repeat("0", 40), c.git(t, bare, "rev-parse", "main")
	good := pkt(zero + " " + main + " " + taskBranch + "\x00report-status\n")
	cases := map[string]string{
		"empty":                      "",
		"not hex":                    "zzzz",
		"a length under 4":           "0003",
		"a delimiter":                "0001",
		"a truncated line":           good[:30],
		"no flush":                   good,
		"a command of two fields":    pkt(zero+" "+taskBranch+"\n") + "0000",
		"an object name not hex":     pkt(strings.Repeat("g", 40)+" "+main+" "+taskBranch+"\n") + "0000",
		"object names of two sizes":  pkt(zero+" "+main+strings.Repeat("0", 24)+" "+taskBranch+"\n") + "0000",
		"a signed push":              pkt("push-cert\x00report-status\n") + pkt("certificate version 0.1\n") + "0000",
		"a line over 65520 bytes":    "fff5" + strings.Repeat("a", 0xfff5-4) + "0000",
		"an upper case object name":  pkt(zero+" "+strings.ToUpper(main)+" "+taskBranch+"\n") + "0000",
		"a command without a ref":    pkt(zero+" "+main+" \n") + "0000",
		"shallow after the commands": good + pkt("shallow "+main+"\n") + "0000",
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", s.url+"/git-receive-pack", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/x-git-receive-pack-request")
			resp, answer := do(t, req)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("%d %q, want 400", resp.StatusCode, answer)
			}
			if got := refs(t, c, bare); got != before {
				t.Fatalf("refs changed:\n%s", got)
			}
		})
	}
}

func TestBodyLimits(t *testing.T) {
	c := newClient(t)
	bare := origin(t, c)
	s := serve(t, pushTarget(bare), gitserve.Config{MaxPushBody: 256 << 10, MaxFetchBody: 512})

	t.Run("push", func(t *testing.T) {
		work := checkout(t, c, s.url)
		before := refs(t, c, bare)
		s.requests()
		big := make([]byte, 2<<20)
		rand.Read(big)
		head := commit(t, c, work, "big.bin", big)
		out, err := c.run(work, "push", "origin", "HEAD:"+taskBranch)
		if err == nil {
			t.Fatalf("push succeeded:\n%s", out)
		}
		if got := refs(t, c, bare); got != before {
			t.Fatalf("refs changed:\n%s", got)
		}
		if hasObject(c, bare, head) {
			t.Fatal("the pushed commit reached the repository")
		}
		tooLarge := false
		for _, r := range s.requests() {
			tooLarge = tooLarge || (r.path == "/git-receive-pack" && r.status == http.StatusRequestEntityTooLarge)
		}
		if !tooLarge {
			t.Fatalf("no push answered 413; git said:\n%s", out)
		}
	})

	t.Run("fetch", func(t *testing.T) {
		body := "0014command=ls-refs\n0001" + strings.Repeat(pkt("ref-prefix refs/heads/\n"), 30) + "0000"
		for _, gz := range []bool{false, true} {
			var b bytes.Buffer
			if gz {
				zw := gzip.NewWriter(&b)
				io.WriteString(zw, body)
				zw.Close()
			} else {
				b.WriteString(body)
			}
			req, _ := http.NewRequest("POST", s.url+"/git-upload-pack", &b)
			req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
			req.Header.Set("Git-Protocol", "version=2")
			if gz {
				req.Header.Set("Content-Encoding", "gzip")
			}
			if resp, answer := do(t, req); resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Fatalf("gzip %v: %d %q, want 413", gz, resp.StatusCode, answer)
			}
		}
	})
}

func TestNonBareRepository(t *testing.T) {
	c := newClient(t)
	dir := filepath.Join(t.TempDir(), "checkout")
	c.git(t, "", "clone", "-q", origin(t, c), dir)
	s := serve(t, gitserve.Target{Dir: dir, Read: true, Push: []string{taskBranch, "refs/heads/main"}}, gitserve.Config{})
	work := checkout(t, c, s.url)
	head := commit(t, c, work, "x.txt", []byte("x\n"))
	c.git(t, work, "push", "-q", "origin", "HEAD:"+taskBranch)
	if got := c.git(t, dir, "rev-parse", taskBranch); got != head {
		t.Fatalf("task branch %s, want %s", got, head)
	}
	// main is checked out there: git refuses to move it.
	main := c.git(t, dir, "rev-parse", "main")
	out, err := c.run(work, "push", "origin", "HEAD:refs/heads/main")
	if err == nil || !strings.Contains(out, "checked out") {
		t.Fatalf("push to the checked-out branch: %v\n%s", err, out)
	}
	if got := c.git(t, dir, "rev-parse", "main"); got != main {
		t.Fatalf("main moved to %s", got)
	}
	if st := c.git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("the work tree changed:\n%s", st)
	}
}

func TestErrorsNameNoPath(t *testing.T) {
	c := newClient(t)
	secret := filepath.Join(t.TempDir(), "secret-place")
	if err := os.Mkdir(secret, 0o755); err != nil {
		t.Fatal(err)
	}
	s := serve(t, gitserve.Target{Dir: filepath.Join(secret, "missing"), Read: true}, gitserve.Config{})
	for _, dir := range []string{filepath.Join(secret, "missing"), secret} {
		s.grant(gitserve.Target{Dir: dir, Read: true}, nil)
		req, _ := http.NewRequest("GET", s.url+"/info/refs?service=git-upload-pack", nil)
		resp, body := do(t, req)
		if resp.StatusCode != 500 || strings.TrimSpace(body) != "internal error" {
			t.Fatalf("%s: %d %q", dir, resp.StatusCode, body)
		}
		out, _ := c.run("", "clone", s.url, filepath.Join(t.TempDir(), "c"))
		if strings.Contains(out, "secret-place") {
			t.Fatalf("git's output names the path:\n%s", out)
		}
	}
	if !strings.Contains(s.logs.String(), "secret-place") {
		t.Errorf("the log does not say what failed:\n%s", s.logs.String())
	}
}

// wrappedGit writes a git that writes its pid into a fifo as it starts (it
// waits there until the pid is read) and then runs the real git. It returns
// the wrapper's path and a function that reads the pid, or fails the test
// when a request is answered first.
func wrappedGit(t *testing.T) (string, func(handled <-chan seen) int) {
	t.Helper()
	bin := t.TempDir()
	fifo := filepath.Join(bin, "pid")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\necho $$ > %s\nexec %s \"$@\"\n", fifo, real)
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(bin, "git"), func(handled <-chan seen) int {
		t.Helper()
		pidc := make(chan string, 1)
		go func() {
			b, _ := os.ReadFile(fifo)
			pidc <- string(b)
		}()
		select {
		case text := <-pidc:
			var pid int
			if _, err := fmt.Sscan(text, &pid); err != nil {
				t.Fatal(err)
			}
			return pid
		case r := <-handled:
			// Release the reader of the fifo.
			if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				f.Close()
			}
			<-pidc
			t.Fatalf("%s %s was answered %d before git started", r.method, r.path, r.status)
			return 0
		}
	}
}

// watch makes the server send each request it answered on the returned
// channel.
func (s *server) watch() <-chan seen {
	ch := make(chan seen, 10)
	s.mu.Lock()
	s.handled = ch
	s.mu.Unlock()
	return ch
}

// stalledPost starts a POST whose body begins with start and then waits
// until the returned writer is closed. The request's outcome arrives on
// the returned channel.
func stalledPost(t *testing.T, ctx context.Context, url, contentType, start string) (*io.PipeWriter, <-chan error) {
	t.Helper()
	pr, pw := io.Pipe()
	req, _ := http.NewRequestWithContext(ctx, "POST", url, pr)
	req.Header.Set("Content-Type", contentType)
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			err = errors.New("answered " + resp.Status)
		}
		errc <- err
	}()
	if _, err := io.WriteString(pw, start); err != nil {
		t.Fatal(err)
	}
	return pw, errc
}

// handledOne waits for the server to answer a request.
func handledOne(t *testing.T, handled <-chan seen) seen {
	t.Helper()
	select {
	case r := <-handled:
		return r
	case <-progresstest.Context(t).Done():
		t.Fatal("the handler did not return")
		return seen{}
	}
}

// pushStart is the start of a push of the task branch to main's commit: its
// commands, then the start of a pack of 3 objects that never comes.
func pushStart(main string) string {
	return pkt(strings.Repeat("0", 40)+" "+main+" "+taskBranch+"\x00report-status\n") + "0000" +
		"PACK\x00\x00\x00\x02\x00\x00\x00\x03"
}

// TestABrokenOffPushKillsGit cuts a push off while git reads its pack: the
// handler kills git (its process is gone when the handler returns) and no
// ref moves.
func TestABrokenOffPushKillsGit(t *testing.T) {
	c := newClient(t)
	bare := origin(t, c)
	gitPath, pidOf := wrappedGit(t)
	s := serve(t, pushTarget(bare), gitserve.Config{Git: gitPath})
	handled := s.watch()
	before := refs(t, c, bare)

	ctx, cancel := context.WithCancel(progresstest.Context(t))
	defer cancel()
	pw, errc := stalledPost(t, ctx, s.url+"/git-receive-pack", "application/x-git-receive-pack-request",
		pushStart(c.git(t, bare, "rev-parse", "main")))
	pid := pidOf(handled)
	cancel()
	pw.Close()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("client: %v", err)
	}
	handledOne(t, handled)
	if proc.Exists(pid) {
		t.Fatalf("git (pid %d) outlived its request", pid)
	}
	if got := refs(t, c, bare); got != before {
		t.Fatalf("refs changed:\n%s", got)
	}
}

func TestTimeout(t *testing.T) {
	c := newClient(t)
	bare := origin(t, c)
	main := c.git(t, bare, "rev-parse", "main")
	before := refs(t, c, bare)
	const timeout = time.Minute

	t.Run("a push whose pack stops coming", func(t *testing.T) {
		gitPath, pidOf := wrappedGit(t)
		fake := clocktest.New(time.Unix(0, 0))
		s := serve(t, pushTarget(bare), gitserve.Config{Git: gitPath, Clock: fake, Timeout: timeout})
		handled := s.watch()
		pw, errc := stalledPost(t, progresstest.Context(t), s.url+"/git-receive-pack",
			"application/x-git-receive-pack-request", pushStart(main))
		defer func() { pw.Close(); <-errc }()
		pid := pidOf(handled)
		if err := fake.WaitTimer(progresstest.Context(t), timeout); err != nil {
			t.Fatal(err)
		}
		fake.Advance(timeout)
		if r := handledOne(t, handled); r.status != http.StatusRequestTimeout {
			t.Fatalf("answered %d, want 408", r.status)
		}
		if proc.Exists(pid) {
			t.Fatalf("git (pid %d) outlived its request", pid)
		}
		if got := refs(t, c, bare); got != before {
			t.Fatalf("refs changed:\n%s", got)
		}
	})

	t.Run("a fetch whose negotiation stops coming", func(t *testing.T) {
		fake := clocktest.New(time.Unix(0, 0))
		s := serve(t, pushTarget(bare), gitserve.Config{Clock: fake, Timeout: timeout})
		handled := s.watch()
		pw, errc := stalledPost(t, progresstest.Context(t), s.url+"/git-upload-pack",
			"application/x-git-upload-pack-request", "0014command=ls-refs\n")
		defer func() { pw.Close(); <-errc }()
		if err := fake.WaitTimer(progresstest.Context(t), timeout); err != nil {
			t.Fatal(err)
		}
		fake.Advance(timeout)
		if r := handledOne(t, handled); r.status != http.StatusRequestTimeout {
			t.Fatalf("answered %d, want 408", r.status)
		}
	})

	t.Run("a git that takes too long", func(t *testing.T) {
		// The wrapper waits until its pid is read, which never happens.
		gitPath, _ := wrappedGit(t)
		fake := clocktest.New(time.Unix(0, 0))
		s := serve(t, pushTarget(bare), gitserve.Config{Git: gitPath, Clock: fake, Timeout: timeout})
		handled := s.watch()
		got := make(chan struct{})
		defer func() { <-got }()
		go func() {
			defer close(got)
			resp, err := http.Get(s.url + "/info/refs?service=git-upload-pack")
			if err == nil {
				resp.Body.Close()
			}
		}()
		if err := fake.WaitTimer(progresstest.Context(t), timeout); err != nil {
			t.Fatal(err)
		}
		fake.Advance(timeout)
		if r := handledOne(t, handled); r.status != http.StatusServiceUnavailable {
			t.Fatalf("answered %d, want 503", r.status)
		}
	})
}

func TestGitsEnvironmentIsBuiltNotInherited(t *testing.T) {
	c := newClient(t)
	bare := origin(t, c)
	t.Setenv("AQ_TEST_SECRET", "s3cret")
	t.Setenv("GIT_DIR", t.TempDir())
	t.Setenv("GIT_CONFIG_PARAMETERS", "'receive.denydeletes'='false'")
	bin := t.TempDir()
	envFile := filepath.Join(bin, "env")
	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\nenv > %s\nexec %s \"$@\"\n", envFile, real)
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	s := serve(t, pushTarget(bare), gitserve.Config{Git: filepath.Join(bin, "git")})
	for _, tc := range []struct{ header, want string }{{"version=2", "GIT_PROTOCOL=version=2"}, {"version=2;rm", ""}} {
		req, _ := http.NewRequest("GET", s.url+"/info/refs?service=git-upload-pack", nil)
		req.Header.Set("Git-Protocol", tc.header)
		if resp, body := do(t, req); resp.StatusCode != 200 {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		b, err := os.ReadFile(envFile)
		if err != nil {
			t.Fatal(err)
		}
		env := "\n" + string(b)
		for _, bad := range []string{"AQ_TEST_SECRET", "GIT_DIR", "GIT_CONFIG_PARAMETERS"} {
			if strings.Contains(env, "\n"+bad+"=") {
				t.Errorf("git saw %s:\n%s", bad, env)
			}
		}
		for _, want := range []string{"HOME=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull, "PATH="} {
			if !strings.Contains(env, "\n"+want) {
				t.Errorf("git did not see %s:\n%s", want, env)
			}
		}
		if tc.want != "" && !strings.Contains(env, "\n"+tc.want+"\n") {
			t.Errorf("Git-Protocol %q: git did not see %s:\n%s", tc.header, tc.want, env)
		}
		if tc.want == "" && strings.Contains(env, "GIT_PROTOCOL") {
			t.Errorf("Git-Protocol %q reached git:\n%s", tc.header, env)
		}
	}
}

func TestTheRepositorysHooksDoNotRun(t *testing.T) {
	c := newClient(t)
	bare := origin(t, c)
	ran := filepath.Join(t.TempDir(), "ran")
	for _, hook := range []string{"pre-receive", "update", "post-receive", "post-update"} {
		write(t, bare, "hooks/"+hook, []byte(fmt.Sprintf("#!/bin/sh\necho %s >> %s\nexit 1\n", hook, ran)))
		if err := os.Chmod(filepath.Join(bare, "hooks", hook), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The repository's own configuration cannot turn them back on.
	c.git(t, bare, "config", "core.hooksPath", filepath.Join(bare, "hooks"))
	s := serve(t, pushTarget(bare), gitserve.Config{})
	work := checkout(t, c, s.url)
	head := commit(t, c, work, "x.txt", []byte("x\n"))
	c.git(t, work, "push", "-q", "origin", "HEAD:"+taskBranch)
	if got := c.git(t, bare, "rev-parse", taskBranch); got != head {
		t.Fatalf("task branch %s, want %s", got, head)
	}
	if b, err := os.ReadFile(ran); err == nil {
		t.Fatalf("hooks ran:\n%s", b)
	}
}

// tree fills a work tree with files of pseudo-random text, and returns
// their total size.
func tree(t testing.TB, dir string, files, size int) int64 {
	rng := mrand.New(mrand.NewPCG(1, 2))
	const letters = "abcdefghijklmnopqrstuvwxyz      \n"
	var total int64
	for i := range files {
		b := make([]byte, size)
		for j := range b {
			b[j] = letters[rng.IntN(len(letters))]
		}
		write(t, dir, fmt.Sprintf("d%02d/f%03d.txt", i%25, i), b)
		total += int64(size)
	}
	return total
}

// BenchmarkClone clones a repository of 500 files of 8 kB of text (4 MB,
// a pack of 2.5 MB) with git over protocol version 2, without a work tree
// (--bare: the transfer and the client's index of the pack, not the
// writing of files): "http" through the handler on 127.0.0.1, "file" from
// the same repository by git's own file:// transport (upload-pack and its
// pack, no HTTP), the cost the handler adds to.
func BenchmarkClone(b *testing.B) {
	c := newClient(b)
	work, bare := b.TempDir(), filepath.Join(b.TempDir(), "origin.git")
	c.git(b, work, "init", "-q")
	size := tree(b, work, 500, 8<<10)
	c.git(b, work, "add", ".")
	c.git(b, work, "commit", "-q", "-m", "files")
	c.git(b, "", "clone", "-q", "--bare", work, bare)
	c.git(b, bare, "gc", "-q")
	var pack float64
	for _, l := range strings.Split(c.git(b, bare, "count-objects", "-v"), "\n") {
		if v, ok := strings.CutPrefix(l, "size-pack: "); ok {
			fmt.Sscan(v, &pack)
		}
	}
	h, err := gitserve.New(gitserve.Config{Resolve: func(*http.Request) (gitserve.Target, error) {
		return gitserve.Target{Dir: bare, Read: true}, nil
	}})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, tc := range []struct{ name, url string }{{"http", srv.URL + mount}, {"file", "file://" + bare}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(size)
			dst := filepath.Join(b.TempDir(), "clone")
			for b.Loop() {
				c.git(b, "", "-c", "protocol.version=2", "clone", "-q", "--bare", tc.url, dst)
				b.StopTimer()
				if err := os.RemoveAll(dst); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(pack/1024, "pack-MiB")
		})
	}
}
