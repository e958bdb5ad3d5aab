package gitserve

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentqueued/agentqueued/internal/proc"
)

// Bounds of git's process.
const (
	// waitDelay bounds how long output held open by a leftover child is
	// waited for once git has exited or been killed.
	waitDelay = 5 * time.Second
	// stderrCap bounds what is kept of git's error output for the log.
	stderrCap = 16 << 10
)

// envPass lists the daemon's variables git sees: nothing secret, and no
// GIT_* variable that could point it at another repository.
var envPass = []string{"PATH", "LANG", "TZ", "TMPDIR"}

// settings are given to every git command on its command line, which
// outranks the repository's configuration.
var settings = []string{
	"core.hooksPath=" + os.DevNull,
	"core.fsmonitor=false",
	"user.name=agentqueued",
	"user.email=agentqueued@localhost",
	"receive.fsckObjects=true",
	"receive.denyDeletes=true",
	"receive.denyDeleteCurrent=refuse",
	"receive.denyCurrentBranch=refuse",
	"receive.denyNonFastForwards=false",
	"receive.advertisePushOptions=false",
	"receive.autogc=false",
}

// command returns git's command for service on t's repository, with the
// scrubbed environment and its own process group, killed when ctx ends.
func (h *Handler) command(ctx context.Context, t Target, service, proto string, advertise bool) *exec.Cmd {
	var args []string
	for _, s := range settings {
		args = append(args, "-c", s)
	}
	args = append(args, strings.TrimPrefix(service, "git-"), "--stateless-rpc")
	if advertise {
		args = append(args, "--advertise-refs")
	}
	cmd := proc.Command(ctx, h.git, append(args, ".")...)
	cmd.Dir = t.Dir
	cmd.WaitDelay = waitDelay
	env := []string{"HOME=" + h.cfg.Home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull,
		"GIT_TERMINAL_PROMPT=0"}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); slices.Contains(envPass, k) || strings.HasPrefix(k, "LC_") {
			env = append(env, kv)
		}
	}
	if proto != "" {
		env = append(env, "GIT_PROTOCOL="+proto)
	}
	cmd.Env = env
	return cmd
}

// output is git's standard output on its way to the client: the answer's
// headers and prefix are written with its first bytes, so that a git that
// fails before it says anything can still be answered with an error, and
// every write is flushed (git's keepalives must reach the client while it
// computes).
type output struct {
	w           http.ResponseWriter
	contentType string
	prefix      []byte
	started     bool
	err         error
}

func (o *output) Write(p []byte) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	if !o.started {
		o.start()
	}
	if _, err := o.w.Write(p); err != nil {
		o.err = err
		return 0, err
	}
	if err := http.NewResponseController(o.w).Flush(); err != nil {
		o.err = err
		return 0, err
	}
	return len(p), nil
}

// start writes the answer's headers and prefix.
func (o *output) start() {
	o.started = true
	noCache(o.w.Header())
	o.w.Header().Set("Content-Type", o.contentType)
	o.w.WriteHeader(http.StatusOK)
	if len(o.prefix) > 0 {
		if _, err := o.w.Write(o.prefix); err != nil {
			o.err = err
		}
	}
}

// capped keeps the first max bytes written to it.
type capped struct {
	buf bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// errTimedOut is the cause of a request's context ended by
// Config.Timeout.
var errTimedOut = errors.New("request timed out")

// withTimeout returns a context of r's that ends, with errTimedOut as its
// cause, once Config.Timeout has passed on the handler's clock. stop ends
// it and its watch; it may be called more than once, and must be before the
// request's handler returns.
func (h *Handler) withTimeout(r *http.Request) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(r.Context())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-h.clock.After(h.cfg.Timeout):
			cancel(errTimedOut)
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		cancel(context.Canceled)
		<-watched
	}
}

// advertise answers GET info/refs: git's advertisement of refs for
// service, after the "# service=" preamble unless git speaks version 2 of
// its protocol (never for pushes).
func (h *Handler) advertise(w http.ResponseWriter, r *http.Request, t Target, service, proto string) {
	ctx, stop := h.withTimeout(r)
	defer stop()
	out := &output{w: w, contentType: "application/x-" + service + "-advertisement"}
	if service == receivePack || !isV2(proto) {
		out.prefix = append(pktLine("# service="+service+"\n"), flushPkt...)
	}
	cmd := h.command(ctx, t, service, proto, true)
	errb := &capped{max: stderrCap}
	cmd.Stdout, cmd.Stderr = out, errb
	h.finish(ctx, w, r, t, service, out, errb, cmd.Run(), nil)
}

// uploadPack answers POST git-upload-pack: the whole negotiation is read
// first (bounded), then handed to git.
func (h *Handler) uploadPack(w http.ResponseWriter, r *http.Request, t Target, b *body, proto string) {
	ctx, stop := h.withTimeout(r)
	defer stop()
	rd := &reads{rc: http.NewResponseController(w), active: true}
	defer context.AfterFunc(ctx, rd.stop)()
	in, err := io.ReadAll(b)
	if rd.done() {
		err = context.Cause(ctx)
	}
	if err != nil {
		status, msg := failure(err)
		refuse(w, status, msg)
		return
	}
	out := &output{w: w, contentType: "application/x-git-upload-pack-result"}
	cmd := h.command(ctx, t, uploadPack, proto, false)
	errb := &capped{max: stderrCap}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), out, errb
	h.finish(ctx, w, r, t, uploadPack, out, errb, cmd.Run(), nil)
}

// receivePack answers POST git-receive-pack: the push's commands are read
// and checked against t.Push before git starts; the rest of the body is
// streamed to git. When the body fails (too large, broken off, too slow)
// git is killed before it sees the end of its input, so that it updates
// nothing.
func (h *Handler) receivePack(w http.ResponseWriter, r *http.Request, t Target, b *body, proto string) {
	ctx, stop := h.withTimeout(r)
	defer stop()
	rc := http.NewResponseController(w)
	rd := &reads{rc: rc, active: true}
	defer context.AfterFunc(ctx, rd.stop)()

	br := bufio.NewReaderSize(b, 64<<10)
	head, cmds, err := readCommands(br)
	if err != nil {
		if rd.done() {
			err = context.Cause(ctx)
		} else if b.err != nil {
			err = b.err
		}
		status, msg := failure(err)
		if errors.Is(err, errMalformed) {
			msg = err.Error()
		}
		h.cfg.Logger.Info("git push refused", "path", r.URL.Path, "err", err)
		refuse(w, status, msg)
		return
	}
	if msg := allowed(cmds, t.Push); msg != "" {
		rd.done()
		h.cfg.Logger.Info("git push refused", "path", r.URL.Path, "reason", msg)
		// The pack that follows is not read.
		w.Header().Set("Connection", "close")
		refuse(w, http.StatusForbidden, msg)
		return
	}

	// git may answer while the body is still arriving (an early error).
	_ = rc.EnableFullDuplex()
	out := &output{w: w, contentType: "application/x-git-receive-pack-result"}
	cmd := h.command(ctx, t, receivePack, proto, false)
	errb := &capped{max: stderrCap}
	cmd.Stdout, cmd.Stderr = out, errb
	stdin, err := cmd.StdinPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		rd.done()
		h.finish(ctx, w, r, t, receivePack, out, errb, err, nil)
		return
	}
	waited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		rd.stop() // a read blocked on a silent client is no use now
		waited <- err
	}()
	_, _ = io.Copy(stdin, io.MultiReader(bytes.NewReader(head), br))
	bodyErr := b.err
	if rd.done() {
		// The read was ended on purpose: by git's exit, which says what
		// happened, or by the time up.
		bodyErr = nil
		if context.Cause(ctx) == errTimedOut {
			bodyErr = errTimedOut
		}
	}
	if b.err != nil {
		// git is killed with its input still open: it has not seen the
		// end of the pack and cannot have updated a ref. (Wait closes
		// the input once git is gone.)
		stop()
	} else {
		stdin.Close()
	}
	err = <-waited
	h.finish(ctx, w, r, t, receivePack, out, errb, err, bodyErr)
}

// reads ends the reads of a request's body on purpose: a read blocked on a
// silent client returns when stop is called (the request's time is up,
// git has exited), until done says the reading is over.
type reads struct {
	rc      *http.ResponseController
	mu      sync.Mutex
	active  bool
	stopped bool
}

// stop makes a read of the body under way, and every later one, fail.
func (rd *reads) stop() {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if rd.active && !rd.stopped {
		rd.stopped = rd.rc.SetReadDeadline(time.Now()) == nil
	}
}

// done ends the reading: stop does nothing from now on. It reports whether
// stop ended it.
func (rd *reads) done() bool {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	rd.active = false
	return rd.stopped
}

// finish ends the answer of a git command: one that said nothing is an
// empty answer when it succeeded; one that failed is logged, and answered
// when git said nothing yet: bodyErr, the request body's failure, decides
// the answer, else 503 when the time was up, else 500.
func (h *Handler) finish(ctx context.Context, w http.ResponseWriter, r *http.Request, t Target, service string, out *output, errb *capped, err, bodyErr error) {
	if err == nil && bodyErr == nil {
		if !out.started {
			out.start()
		}
		return
	}
	level := slog.LevelWarn
	if r.Context().Err() != nil {
		// The client hung up (go-git closes a fetch's advertisement early
		// when it has everything): not the server's failure.
		level = slog.LevelDebug
	}
	h.cfg.Logger.Log(ctx, level, "git "+strings.TrimPrefix(service, "git-")+" failed", "path", r.URL.Path, "dir", t.Dir,
		"err", err, "body", bodyErr, "stderr", strings.TrimSpace(errb.buf.String()))
	if out.started {
		return
	}
	switch {
	case bodyErr != nil:
		status, msg := failure(bodyErr)
		refuse(w, status, msg)
	case context.Cause(ctx) == errTimedOut:
		refuse(w, http.StatusServiceUnavailable, "timed out")
	default:
		refuse(w, http.StatusInternalServerError, "internal error")
	}
}
