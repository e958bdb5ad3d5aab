package githubtest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// repoState is one repository: a real bare repository on disk plus the
// pull requests, labels and deleted branches the API knows about.
type repoState struct {
	owner, name   string
	id            int64
	defaultBranch string
	dir           string
	created       time.Time
	prs           []*prState // index number-1
	labels        []*labelState
	deleted       []string
}

type labelState struct {
	id    int64
	name  string
	color string
}

// CreateRepo creates the bare repository owner/name with one initial
// commit (a README.md) on defaultBranch, receive-pack enabled, and returns
// its clone URL, URL()+"/owner/name.git". It panics when the repository
// exists or git fails.
func (s *Server) CreateRepo(owner, name, defaultBranch string) string {
	if owner == "" || name == "" || strings.ContainsAny(owner+name, "/\\ ") || strings.HasPrefix(owner, ".") || strings.HasPrefix(name, ".") {
		panic(fmt.Sprintf("githubtest: CreateRepo: bad name %q/%q", owner, name))
	}
	if defaultBranch == "" {
		defaultBranch = "main"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := strings.ToLower(owner + "/" + name)
	if _, ok := s.repos[key]; ok {
		panic("githubtest: CreateRepo: " + owner + "/" + name + " exists")
	}
	dir := filepath.Join(s.root, owner, name+".git")
	must := func(out string, err error) string {
		if err != nil {
			panic("githubtest: CreateRepo: " + err.Error())
		}
		return out
	}
	must(s.git("", "", "init", "--bare", "--quiet", "--initial-branch="+defaultBranch, dir))
	must(s.git(dir, "", "config", "http.receivepack", "true"))
	must(s.git(dir, "", "config", "receive.denyDeleteCurrent", "true"))
	blob := must(s.git(dir, "# "+name+"\n", "hash-object", "-w", "--stdin"))
	tree := must(s.git(dir, "100644 blob "+blob+"\tREADME.md\n", "mktree"))
	commit := must(s.git(dir, "", "commit-tree", tree, "-m", "Initial commit"))
	must(s.git(dir, "", "update-ref", "refs/heads/"+defaultBranch, commit, ""))
	s.repos[key] = &repoState{
		owner: owner, name: name, id: s.newID(), defaultBranch: defaultBranch,
		dir: dir, created: s.now(),
	}
	s.userID(owner)
	return s.base + "/" + owner + "/" + name + ".git"
}

// RepoDir returns the path of the bare repository owner/name, for tests
// to inspect refs, or "" when there is none.
func (s *Server) RepoDir(owner, name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rp := s.repos[strings.ToLower(owner+"/"+name)]; rp != nil {
		return rp.dir
	}
	return ""
}

// DeletedBranches returns the branches of owner/name deleted through the
// API (DELETE .../git/refs/heads/{branch}), in order.
func (s *Server) DeletedBranches(owner, repo string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rp := s.repos[strings.ToLower(owner+"/"+repo)]; rp != nil {
		return append([]string(nil), rp.deleted...)
	}
	return nil
}

// gitEnv is the scrubbed environment of every git process: no system or
// user configuration, no prompts, fixed identity, commit dates from Now.
func (s *Server) gitEnv() []string {
	date := fmt.Sprintf("@%d +0000", s.now().Unix())
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + s.home,
		"XDG_CONFIG_HOME=" + s.home,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"LC_ALL=C",
		"GIT_AUTHOR_NAME=GitHub",
		"GIT_AUTHOR_EMAIL=noreply@github.com",
		"GIT_COMMITTER_NAME=GitHub",
		"GIT_COMMITTER_EMAIL=noreply@github.com",
		"GIT_AUTHOR_DATE=" + date,
		"GIT_COMMITTER_DATE=" + date,
	}
}

// errExit1 is git exiting with status 1 (merge-tree: conflicts).
var errExit1 = errors.New("git: exit status 1")

// git runs git in dir (when not empty) with stdin and returns its trimmed
// standard output.
func (s *Server) git(dir, stdin string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = s.gitEnv()
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 1 {
			return strings.TrimSpace(out.String()), fmt.Errorf("%w: git %s: %s", errExit1, strings.Join(args, " "), strings.TrimSpace(errb.String()))
		}
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// branches returns the branches of the bare repository and their commits.
func (s *Server) branches(rp *repoState) (map[string]string, error) {
	out, err := s.git(rp.dir, "", "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/")
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		ref, sha, ok := strings.Cut(sc.Text(), " ")
		if ok {
			m[strings.TrimPrefix(ref, "refs/heads/")] = sha
		}
	}
	return m, nil
}

// serveGit serves git's smart HTTP protocol through git-http-backend,
// after checking the token.
func (s *Server) serveGit(w http.ResponseWriter, r *http.Request) {
	now := s.now()
	rec := GitRequest{
		Method:        r.Method,
		Path:          r.URL.Path,
		Service:       r.URL.Query().Get("service"),
		Authorization: r.Header.Get("Authorization") != "",
		Authorized:    tokenOf(r) == s.opts.Token,
		Time:          now,
	}
	if rec.Service == "" {
		rec.Service = filepath.Base(r.URL.Path)
	}
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		rec.Status = sw.status
		if rec.Status == 0 {
			rec.Status = http.StatusOK
		}
		s.mu.Lock()
		s.gitReqs = append(s.gitReqs, rec)
		s.mu.Unlock()
		s.logf("git %s %s (authorization %v) -> %d", rec.Method, rec.Path, rec.Authorization, rec.Status)
	}()

	if !rec.Authorized {
		sw.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
		http.Error(sw, "Invalid username or token. Password authentication is not supported for Git operations.", http.StatusUnauthorized)
		return
	}
	i := strings.Index(r.URL.Path, ".git/")
	key := strings.ToLower(strings.TrimPrefix(r.URL.Path[:i], "/"))
	s.mu.Lock()
	rp := s.repos[key]
	s.mu.Unlock()
	if rp == nil || strings.Contains(r.URL.Path, "..") {
		http.Error(sw, "Repository not found.", http.StatusNotFound)
		return
	}
	r.Header.Del("Authorization") // never into the CGI environment
	if r.ContentLength < 0 || len(r.TransferEncoding) > 0 {
		// net/http/cgi refuses chunked bodies (git sends them for packs
		// above http.postBuffer): buffer the body.
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<30))
		if err != nil {
			http.Error(sw, "reading request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.TransferEncoding = nil
	}
	h := &cgi.Handler{
		Path: s.backend,
		Dir:  s.root,
		Env: []string{
			"GIT_PROJECT_ROOT=" + s.root,
			"GIT_HTTP_EXPORT_ALL=1",
			"REMOTE_USER=x-access-token",
			"HOME=" + s.home,
			"XDG_CONFIG_HOME=" + s.home,
			"GIT_CONFIG_NOSYSTEM=1",
		},
		Stderr: logWriter{s},
	}
	h.ServeHTTP(sw, r)
}

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

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

type logWriter struct{ s *Server }

func (l logWriter) Write(b []byte) (int, error) {
	l.s.logf("git-http-backend: %s", strings.TrimSpace(string(b)))
	return len(b), nil
}
