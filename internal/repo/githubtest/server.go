package githubtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock"
)

// Options configures a Server.
type Options struct {
	// Token is the only credential the server accepts. API requests must
	// carry "Authorization: Bearer <Token>" or "Authorization: token
	// <Token>" (or Basic with the token as password); git requests must
	// carry Basic credentials whose password is the token, or the Bearer
	// and token forms. New panics when it is empty.
	Token string
	// Logf, when set, receives one line per request (t.Logf fits). Tokens
	// are never logged.
	Logf func(string, ...any)
	// Clock is the clock for rate-limit windows and reset times, pull
	// request timestamps and the dates of the commits the server writes;
	// nil: clock.Real.
	Clock clock.Clock
	// RateLimit is the primary rate limit per hour; default 5000. Every
	// API answer carries X-RateLimit-* headers for it.
	RateLimit int
	// Login is the user the token belongs to: the author of pull requests
	// created through the API and the merger of those merged through it;
	// default "octocat".
	Login string
	// Scopes are the OAuth scopes of the token, answered in the
	// X-OAuth-Scopes header of every API answer, as GitHub answers for a
	// classic token; nil sends no such header (a fine-grained token).
	Scopes []string
}

// Request is one API request as the server saw and answered it.
type Request struct {
	// Method is the HTTP method.
	Method string
	// Path is the API path without the "/api/v3" prefix, unescaped, e.g.
	// "/repos/acme/widgets/pulls/1".
	Path string
	// Query is the raw query string.
	Query string
	// Status is the status of the answer, including 304 Not Modified.
	Status int
	// Conditional reports whether the request carried If-None-Match (or
	// If-Modified-Since).
	Conditional bool
	// RateLimited reports an answer refusing the request for a rate limit
	// (primary, secondary or 429), injected or real.
	RateLimited bool
	// Time is the server clock (Options.Clock) when the request arrived.
	Time time.Time
}

// GitRequest is one smart-HTTP git request as the server saw and answered
// it. It records whether credentials were sent, never the credentials.
type GitRequest struct {
	// Method is the HTTP method.
	Method string
	// Path is the URL path, e.g. "/acme/widgets.git/info/refs".
	Path string
	// Service is the git service of the request: "git-upload-pack"
	// (fetch, clone) or "git-receive-pack" (push).
	Service string
	// Authorization reports whether the request carried an Authorization
	// header at all.
	Authorization bool
	// Authorized reports whether that header carried the token.
	Authorized bool
	// Status is the status of the answer.
	Status int
	// Time is the server clock when the request arrived.
	Time time.Time
}

// Server is a fake GitHub: a REST API under /api/v3/ for pull requests,
// reviews, labels, refs and rate limits, and git over smart HTTP for its
// repositories. It is safe for concurrent use.
type Server struct {
	opts    Options
	ts      *httptest.Server
	base    string
	tmp     string // removed by Close
	root    string // GIT_PROJECT_ROOT: <root>/<owner>/<name>.git
	home    string // HOME of every git process
	backend string // git-http-backend
	hooks   *http.Client
	once    sync.Once

	mu       sync.Mutex
	repos    map[string]*repoState // by lower-case "owner/name"
	userIDs  map[string]int64      // by lower-case login
	nextID   int64
	requests []Request
	gitReqs  []GitRequest
	used     int       // counted requests in the current window
	reset    time.Time // end of the current window
	injected []injection
	seq      uint64
}

type injection struct {
	kind       string
	retryAfter time.Duration
}

// New starts a fake GitHub on 127.0.0.1. It panics when Options.Token is
// empty or git (with git-http-backend) is not installed. Close it when done.
func New(opts Options) *Server {
	if opts.Token == "" {
		panic("githubtest: Options.Token is required")
	}
	opts.Clock = clock.Or(opts.Clock)
	if opts.RateLimit <= 0 {
		opts.RateLimit = 5000
	}
	if opts.Login == "" {
		opts.Login = "octocat"
	}
	gitBin, err := exec.LookPath("git")
	if err != nil {
		panic("githubtest: git is not installed: " + err.Error())
	}
	out, err := exec.Command(gitBin, "--exec-path").Output()
	if err != nil {
		panic("githubtest: git --exec-path: " + err.Error())
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		panic("githubtest: git-http-backend not found: " + err.Error())
	}
	tmp, err := os.MkdirTemp("", "githubtest-")
	if err != nil {
		panic("githubtest: " + err.Error())
	}
	s := &Server{
		opts:    opts,
		tmp:     tmp,
		root:    filepath.Join(tmp, "repos"),
		home:    filepath.Join(tmp, "home"),
		backend: backend,
		repos:   map[string]*repoState{},
		userIDs: map[string]int64{},
		nextID:  1000,
	}
	for _, d := range []string{s.root, s.home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			panic("githubtest: " + err.Error())
		}
	}
	s.hooks = &http.Client{
		Transport: http.DefaultTransport.(*http.Transport).Clone(),
		Timeout:   10 * time.Second, // GitHub gives up on a delivery after 10 s
	}
	s.ts = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	s.base = s.ts.URL
	return s
}

// URL is the server's base URL, http://127.0.0.1:PORT. The API base is
// URL()+"/api/v3/"; clone URLs are URL()+"/{owner}/{repo}.git".
func (s *Server) URL() string { return s.base }

// Close stops the server, closes idle webhook connections and removes the
// repositories. It may be called more than once.
func (s *Server) Close() {
	s.once.Do(func() {
		s.ts.Close()
		s.hooks.CloseIdleConnections()
		_ = os.RemoveAll(s.tmp)
	})
}

// Requests returns every API request so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Counts returns how many API requests arrived and how many of them were
// answered 304 Not Modified.
func (s *Server) Counts() (total, notModified int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.requests {
		if r.Status == http.StatusNotModified {
			notModified++
		}
	}
	return len(s.requests), notModified
}

// GitRequests returns every smart-HTTP git request so far, in arrival
// order.
func (s *Server) GitRequests() []GitRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]GitRequest(nil), s.gitReqs...)
}

// RateLimitNext makes the next n API requests (other than GET /rate_limit,
// which GitHub never limits) fail for a rate limit instead of being served.
// Kinds:
//   - "primary": 403 with X-RateLimit-Remaining: 0 and X-RateLimit-Reset =
//     Now()+retryAfter in unix seconds, body "API rate limit exceeded for
//     ..."; go-github returns *github.RateLimitError.
//   - "secondary": 403 with Retry-After: seconds and the secondary-limit
//     documentation URL; go-github returns *github.AbuseRateLimitError.
//   - "429": 429 with Retry-After: seconds and the same body; go-github
//     v60 returns a plain *github.ErrorResponse.
//
// The refused requests do not count against the primary limit. It panics
// for another kind.
func (s *Server) RateLimitNext(n int, kind string, retryAfter time.Duration) {
	switch kind {
	case "primary", "secondary", "429":
	default:
		panic("githubtest: RateLimitNext: unknown kind " + strconv.Quote(kind))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.injected = append(s.injected, injection{kind: kind, retryAfter: retryAfter})
	}
}

func (s *Server) logf(format string, args ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf("githubtest: "+format, args...)
	}
}

func (s *Server) now() time.Time { return s.opts.Clock.Now() }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case p == "/api/v3" || strings.HasPrefix(p, "/api/v3/"):
		s.serveAPI(w, r)
	case strings.Contains(p, ".git/"):
		s.serveGit(w, r)
	default:
		http.NotFound(w, r)
	}
}

// reply is an API answer before its common headers are written.
type reply struct {
	status      int
	v           any    // JSON body; nil for none
	raw         []byte // set from v by serveAPI
	header      http.Header
	uncounted   bool       // does not count against the primary limit
	rateLimited bool       // a rate-limit refusal
	zeroReset   *time.Time // announce Remaining 0 with this reset
	lastMod     time.Time  // Last-Modified, when not zero
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	rel := strings.TrimPrefix(r.URL.Path, "/api/v3")
	if rel == "" {
		rel = "/"
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.reset.IsZero() || !now.Before(s.reset) {
		s.used = 0
		s.reset = now.Add(time.Hour).Truncate(time.Second)
	}
	s.seq++
	conditional := r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Modified-Since") != ""

	var rep *reply
	switch {
	case !s.apiAuthorized(r):
		rep = &reply{status: http.StatusUnauthorized, uncounted: true,
			v: apiError{Message: "Bad credentials", DocumentationURL: "https://docs.github.com/rest"}}
	case rel == "/rate_limit" && r.Method == http.MethodGet:
		rep = &reply{status: http.StatusOK, v: s.rateLimitJSON(now), uncounted: true}
	case len(s.injected) > 0:
		in := s.injected[0]
		s.injected = s.injected[1:]
		rep = s.rateLimitReply(in.kind, now, in.retryAfter)
	case s.used >= s.opts.RateLimit:
		rep = s.rateLimitReply("exhausted", now, s.reset.Sub(now))
	default:
		rep = s.route(r, rel, body, now)
	}

	if rep.v != nil {
		raw, err := marshal(rep.v)
		if err != nil {
			rep = &reply{status: http.StatusInternalServerError, raw: []byte(`{"message":"Server Error"}`)}
		} else {
			rep.raw = raw
		}
	}
	h := w.Header()
	if s.opts.Scopes != nil && rep.status != http.StatusUnauthorized {
		h.Set("X-OAuth-Scopes", strings.Join(s.opts.Scopes, ", "))
	}
	for k, vs := range rep.header {
		h[k] = vs
	}
	if r.Method == http.MethodGet && rep.status == http.StatusOK && rep.raw != nil {
		etag := `"` + hashHex(rep.raw) + `"`
		h.Set("ETag", etag)
		if !rep.lastMod.IsZero() {
			h.Set("Last-Modified", rep.lastMod.UTC().Format(http.TimeFormat))
		}
		if notModified(r, etag, rep.lastMod) {
			rep.status = http.StatusNotModified
			rep.raw = nil
			rep.uncounted = true // as on GitHub: 304s are free
		}
	}
	if !rep.uncounted {
		s.used++
	}
	remaining, reset, used := s.opts.RateLimit-s.used, s.reset, s.used
	if remaining < 0 {
		remaining = 0
	}
	if rep.zeroReset != nil {
		remaining, reset, used = 0, *rep.zeroReset, s.opts.RateLimit
	}
	h.Set("X-RateLimit-Limit", strconv.Itoa(s.opts.RateLimit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
	h.Set("X-RateLimit-Used", strconv.Itoa(used))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")
	h.Set("X-GitHub-Request-Id", s.requestID(now))
	h.Set("X-GitHub-Media-Type", "github.v3; format=json")
	h.Set("X-GitHub-Api-Version-Selected", "2022-11-28")
	h.Set("Vary", "Accept, Authorization, Cookie, X-GitHub-OTP")
	if r.Method == http.MethodGet {
		h.Set("Cache-Control", "private, max-age=60, s-maxage=60")
	}
	if rep.raw != nil {
		h.Set("Content-Type", "application/json; charset=utf-8")
		h.Set("Content-Length", strconv.Itoa(len(rep.raw)))
	}
	s.requests = append(s.requests, Request{
		Method: r.Method, Path: rel, Query: r.URL.RawQuery, Status: rep.status,
		Conditional: conditional, RateLimited: rep.rateLimited, Time: now,
	})
	s.logf("%s %s%s -> %d (remaining %d)", r.Method, rel, queryPart(r.URL.RawQuery), rep.status, remaining)
	w.WriteHeader(rep.status)
	if rep.raw != nil && r.Method != http.MethodHead {
		_, _ = w.Write(rep.raw)
	}
}

func queryPart(q string) string {
	if q == "" {
		return ""
	}
	return "?" + q
}

// notModified applies If-None-Match (which wins when present) and
// If-Modified-Since as GitHub does.
func notModified(r *http.Request, etag string, lastMod time.Time) bool {
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		for _, c := range strings.Split(inm, ",") {
			c = strings.TrimSpace(c)
			if c == "*" || strings.TrimPrefix(c, "W/") == etag {
				return true
			}
		}
		return false
	}
	if ims := r.Header.Get("If-Modified-Since"); ims != "" && !lastMod.IsZero() {
		if t, err := http.ParseTime(ims); err == nil && !lastMod.Truncate(time.Second).After(t) {
			return true
		}
	}
	return false
}

// apiAuthorized accepts "Bearer <token>", "token <token>" and Basic with
// the token as password.
func (s *Server) apiAuthorized(r *http.Request) bool {
	return tokenOf(r) == s.opts.Token
}

// tokenOf returns the token an Authorization header carries, or "".
func tokenOf(r *http.Request) string {
	a := r.Header.Get("Authorization")
	scheme, cred, ok := strings.Cut(a, " ")
	if !ok {
		return ""
	}
	cred = strings.TrimSpace(cred)
	switch strings.ToLower(scheme) {
	case "bearer", "token":
		return cred
	case "basic":
		raw, err := base64.StdEncoding.DecodeString(cred)
		if err != nil {
			return ""
		}
		_, pass, ok := strings.Cut(string(raw), ":")
		if !ok {
			return ""
		}
		return pass
	}
	return ""
}

const (
	docsPrimary   = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
	docsSecondary = "https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"
)

func (s *Server) rateLimitReply(kind string, now time.Time, retryAfter time.Duration) *reply {
	secs := int64(math.Ceil(retryAfter.Seconds()))
	if secs < 0 {
		secs = 0
	}
	reqID := s.requestID(now)
	secondary := apiError{
		Message:          "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID " + reqID + ".",
		DocumentationURL: docsSecondary,
	}
	switch kind {
	case "secondary", "429":
		st := http.StatusForbidden
		if kind == "429" {
			st = http.StatusTooManyRequests
		}
		return &reply{status: st, v: secondary, uncounted: true, rateLimited: true,
			header: http.Header{"Retry-After": {strconv.FormatInt(secs, 10)}}}
	default: // "primary", "exhausted"
		reset := now.Add(time.Duration(secs) * time.Second)
		if kind == "exhausted" {
			reset = s.reset
		}
		return &reply{status: http.StatusForbidden, uncounted: true, rateLimited: true, zeroReset: &reset,
			v: apiError{
				Message:          fmt.Sprintf("API rate limit exceeded for user ID %d. If you reach out to GitHub Support for help, please include the request ID %s.", s.userID(s.opts.Login), reqID),
				DocumentationURL: docsPrimary + "#about-the-primary-rate-limit",
			}}
	}
}

// requestID is the X-GitHub-Request-Id of the current request, in
// GitHub's shape. Callers hold s.mu.
func (s *Server) requestID(now time.Time) string {
	return fmt.Sprintf("%04X:%04X:%06X:%06X:%08X", s.seq%0xFFFF, 0x3A2B, s.seq*7919%0xFFFFFF, s.seq, now.Unix()&0xFFFFFFFF)
}

func (s *Server) rateLimitJSON(now time.Time) any {
	type rate struct {
		Limit     int    `json:"limit"`
		Used      int    `json:"used"`
		Remaining int    `json:"remaining"`
		Reset     int64  `json:"reset"`
		Resource  string `json:"resource,omitempty"`
	}
	rem := max(s.opts.RateLimit-s.used, 0)
	core := rate{Limit: s.opts.RateLimit, Used: s.used, Remaining: rem, Reset: s.reset.Unix(), Resource: "core"}
	minute := now.Add(time.Minute).Unix()
	hour := now.Add(time.Hour).Unix()
	return map[string]any{
		"resources": map[string]any{
			"core":                 core,
			"search":               rate{Limit: 30, Remaining: 30, Reset: minute},
			"graphql":              rate{Limit: 5000, Remaining: 5000, Reset: hour},
			"integration_manifest": rate{Limit: 5000, Remaining: 5000, Reset: hour},
			"code_search":          rate{Limit: 10, Remaining: 10, Reset: minute},
		},
		"rate": core,
	}
}

// apiError is GitHub's error body.
type apiError struct {
	Message          string       `json:"message"`
	Errors           []fieldError `json:"errors,omitempty"`
	DocumentationURL string       `json:"documentation_url,omitempty"`
	Status           string       `json:"status,omitempty"`
}

type fieldError struct {
	Resource string `json:"resource"`
	Code     string `json:"code"`
	Field    string `json:"field,omitempty"`
	Message  string `json:"message,omitempty"`
}

func errReply(status int, msg, docs string) *reply {
	return &reply{status: status, v: apiError{Message: msg, DocumentationURL: docs, Status: strconv.Itoa(status)}}
}

func notFound(docs string) *reply {
	if docs == "" {
		docs = "https://docs.github.com/rest"
	}
	return errReply(http.StatusNotFound, "Not Found", docs)
}

func validationFailed(docs string, errs ...fieldError) *reply {
	return &reply{status: http.StatusUnprocessableEntity,
		v: apiError{Message: "Validation Failed", Errors: errs, DocumentationURL: docs, Status: "422"}}
}

func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func hashHex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// userID returns the stable id of a login. Callers hold s.mu.
func (s *Server) userID(login string) int64 {
	k := strings.ToLower(login)
	id, ok := s.userIDs[k]
	if !ok {
		s.nextID++
		id = s.nextID
		s.userIDs[k] = id
	}
	return id
}

// newID returns a fresh numeric id. Callers hold s.mu.
func (s *Server) newID() int64 {
	s.nextID++
	return s.nextID
}
