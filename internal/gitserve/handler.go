package gitserve

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock"
	"github.com/agentqueued/agentqueued/internal/models"
)

// Defaults of Config.
const (
	// DefaultMaxFetchBody is git-http-backend's own bound on a fetch's
	// negotiation (GIT_HTTP_MAX_REQUEST_BUFFER).
	DefaultMaxFetchBody = 10 << 20
	DefaultMaxPushBody  = 1 << 30
	DefaultTimeout      = time.Hour
)

// Errors Resolve returns to answer a request with 401, 403 or 404.
var (
	ErrUnauthorized = errors.New("gitserve: authentication required")
	ErrForbidden    = errors.New("gitserve: forbidden")
	ErrNotFound     = errors.New("gitserve: repository not found")
)

// Target is what Resolve grants a request: the repository it addresses and
// what it may do there.
type Target struct {
	// Dir is the repository's directory: a bare repository, or the work
	// tree of a non-bare one.
	Dir string
	// Read allows fetches and clones (git-upload-pack).
	Read bool
	// Push lists the branches a push may create or update, by full name
	// (refs/heads/...). None: every push is refused. A name outside
	// refs/heads/ is never granted; no push may delete a ref.
	Push []string
}

// Config configures a Handler.
type Config struct {
	// Resolve authorises a request and names its repository (required).
	// It is called once per request, before anything is read of its body;
	// see the package's documentation for what its errors answer.
	Resolve func(r *http.Request) (Target, error)
	// Git is the git binary (default "git", looked up on PATH by New).
	Git string
	// Home is git's HOME (default os.DevNull: nothing is read from there).
	Home string
	// MaxFetchBody bounds a fetch's request body, inflated (default
	// DefaultMaxFetchBody).
	MaxFetchBody int64
	// MaxPushBody bounds a push's request body, inflated (default
	// DefaultMaxPushBody).
	MaxPushBody int64
	// Timeout bounds one request, from the reading of its body to git's
	// end (default DefaultTimeout). On expiry git is killed and, when
	// nothing was answered yet, the answer is 408 (the body was still
	// arriving) or 503.
	Timeout time.Duration
	// Clock measures Timeout (nil: the real clock).
	Clock clock.Clock
	// Logger receives what the client is not told: git's error output and
	// the reasons of failures (default: discarded).
	Logger *slog.Logger
}

// Handler serves git's smart HTTP protocol; see the package's
// documentation.
type Handler struct {
	cfg   Config
	git   string
	clock clock.Clock
}

// New returns a Handler for cfg. It fails when cfg.Resolve is missing or
// git cannot be found.
func New(cfg Config) (*Handler, error) {
	if cfg.Resolve == nil {
		return nil, errors.New("gitserve: Config.Resolve is required")
	}
	if cfg.Git == "" {
		cfg.Git = "git"
	}
	bin, err := exec.LookPath(cfg.Git)
	if err != nil {
		return nil, fmt.Errorf("gitserve: %w", err)
	}
	if cfg.Home == "" {
		cfg.Home = os.DevNull
	}
	if cfg.MaxFetchBody <= 0 {
		cfg.MaxFetchBody = DefaultMaxFetchBody
	}
	if cfg.MaxPushBody <= 0 {
		cfg.MaxPushBody = DefaultMaxPushBody
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{cfg: cfg, git: bin, clock: clock.Or(cfg.Clock)}, nil
}

// The two services.
const (
	uploadPack  = "git-upload-pack"
	receivePack = "git-receive-pack"
)

// route names the service a request's path and query ask for and whether
// it is the advertisement of refs (GET info/refs) or the exchange (POST).
func route(r *http.Request) (service string, advertise, ok bool) {
	p := r.URL.Path
	switch {
	case strings.HasSuffix(p, "/info/refs"):
		s := r.URL.Query().Get("service")
		return s, true, s == uploadPack || s == receivePack
	case strings.HasSuffix(p, "/"+uploadPack):
		return uploadPack, false, true
	case strings.HasSuffix(p, "/"+receivePack):
		return receivePack, false, true
	}
	return "", false, false
}

// ServeHTTP serves one request of git's smart HTTP protocol.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	service, advertise, ok := route(r)
	if !ok {
		refuse(w, http.StatusNotFound, "not found")
		return
	}
	if method := map[bool]string{true: http.MethodGet, false: http.MethodPost}[advertise]; r.Method != method {
		w.Header().Set("Allow", method)
		refuse(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	t, err := h.cfg.Resolve(r)
	if err != nil {
		h.refuseResolve(w, r, err)
		return
	}
	if t.Dir == "" {
		h.cfg.Logger.Error("git request refused: Resolve named no repository directory", "path", r.URL.Path)
		refuse(w, http.StatusInternalServerError, "internal error")
		return
	}
	if fi, err := os.Stat(t.Dir); err != nil || !fi.IsDir() {
		h.cfg.Logger.Error("git request refused: its repository is not a directory", "path", r.URL.Path,
			"dir", t.Dir, "err", err)
		refuse(w, http.StatusInternalServerError, "internal error")
		return
	}
	switch {
	case service == uploadPack && !t.Read:
		refuse(w, http.StatusForbidden, "fetching is not allowed")
		return
	case service == receivePack && len(t.Push) == 0:
		refuse(w, http.StatusForbidden, "pushing is not allowed")
		return
	}
	proto := protocol(r.Header.Get("Git-Protocol"))
	if advertise {
		h.advertise(w, r, t, service, proto)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-git-"+strings.TrimPrefix(service, "git-")+"-request" {
		refuse(w, http.StatusUnsupportedMediaType, "unsupported content type")
		return
	}
	limit := h.cfg.MaxFetchBody
	if service == receivePack {
		limit = h.cfg.MaxPushBody
	}
	body, status, msg := requestBody(r, limit)
	if status != 0 {
		refuse(w, status, msg)
		return
	}
	defer body.close()
	if service == uploadPack {
		h.uploadPack(w, r, t, body, proto)
	} else {
		h.receivePack(w, r, t, body, proto)
	}
}

// refuseResolve answers a request Resolve refused, as its error says.
func (h *Handler) refuseResolve(w http.ResponseWriter, r *http.Request, err error) {
	var me *models.Error
	switch {
	case errors.Is(err, ErrUnauthorized):
		w.Header().Set("WWW-Authenticate", `Basic realm="agentqueued"`)
		refuse(w, http.StatusUnauthorized, "authentication required")
	case errors.Is(err, ErrForbidden):
		refuse(w, http.StatusForbidden, "forbidden")
	case errors.Is(err, ErrNotFound):
		refuse(w, http.StatusNotFound, "repository not found")
	case errors.As(err, &me):
		status := me.Code.HTTPStatus()
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Basic realm="agentqueued"`)
		}
		if status == http.StatusInternalServerError {
			h.cfg.Logger.Error("git request: resolving its repository failed", "path", r.URL.Path, "err", err)
		}
		refuse(w, status, models.ErrorMessageOf(err))
	default:
		h.cfg.Logger.Error("git request: resolving its repository failed", "path", r.URL.Path, "err", err)
		refuse(w, http.StatusInternalServerError, "internal error")
	}
}

// refuse answers a request with status and a one-line message, which git
// shows its user.
func refuse(w http.ResponseWriter, status int, msg string) {
	noCache(w.Header())
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	io.WriteString(w, msg+"\n")
}

// noCache sets the headers git-http-backend sends so that no cache keeps an
// answer.
func noCache(h http.Header) {
	h.Set("Expires", "Fri, 01 Jan 1980 00:00:00 GMT")
	h.Set("Pragma", "no-cache")
	h.Set("Cache-Control", "no-cache, max-age=0, must-revalidate")
}

// gitProtocol is what a Git-Protocol header may hold to reach git: key=value
// pairs of letters and digits joined by ':'.
var gitProtocol = regexp.MustCompile(`^[0-9a-zA-Z]+=[0-9a-zA-Z]+(:[0-9a-zA-Z]+=[0-9a-zA-Z]+)*$`)

// protocol returns the Git-Protocol header's value when it may reach git
// as GIT_PROTOCOL, else "".
func protocol(header string) string {
	if gitProtocol.MatchString(header) {
		return header
	}
	return ""
}

// isV2 reports whether a GIT_PROTOCOL value asks for protocol version 2.
func isV2(proto string) bool {
	return proto != "" && slices.Contains(strings.Split(proto, ":"), "version=2")
}

// errTooLarge is a request body beyond its limit.
var errTooLarge = errors.New("request body too large")

// body is a request's body, inflated when it came gzipped, and bounded.
type body struct {
	r     io.Reader
	limit int64
	n     int64
	gz    *gzip.Reader
	// err is the first error reading the body met, other than its end.
	err error
}

// requestBody returns r's body ready to read, or the status and message
// that refuse it.
func requestBody(r *http.Request, limit int64) (*body, int, string) {
	b := &body{r: r.Body, limit: limit}
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
		if r.ContentLength > limit {
			return nil, http.StatusRequestEntityTooLarge, "request too large"
		}
	case "gzip", "x-gzip":
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, http.StatusBadRequest, "malformed gzip body"
		}
		b.r, b.gz = gz, gz
	default:
		return nil, http.StatusUnsupportedMediaType, "unsupported content encoding"
	}
	return b, 0, ""
}

// Read reads the body, failing with errTooLarge past its limit.
func (b *body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if room := b.limit - b.n + 1; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	if b.n > b.limit {
		n -= int(b.n - b.limit)
		b.n = b.limit
		err = errTooLarge
	}
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

func (b *body) close() {
	if b.gz != nil {
		b.gz.Close()
	}
}

// failure is the status and message that answer a request whose body
// failed with err.
func failure(err error) (int, string) {
	switch {
	case errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge, "request too large"
	case errors.Is(err, errTimedOut):
		return http.StatusRequestTimeout, "request timed out"
	}
	return http.StatusBadRequest, "malformed request body"
}
