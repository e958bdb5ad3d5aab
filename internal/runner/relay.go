package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// relay is the runner's agent RPC socket: the same endpoints as the
// daemon's (POST /rpc/v1/{tool}, the run's token, its task's id), each
// call relayed to the daemon as a numbered report of its run, and the
// daemon's answer given back as it came.
type relay struct {
	r    *Runner
	ln   net.Listener
	path string
}

// listenRelay binds a socket of the runner at path (mode 0600, in a 0700
// directory), replacing a stale socket file nothing answers on.
func (r *Runner) listenRelay(path string) (*relay, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("runner: socket %s: %w", path, err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("runner: socket %s: exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("runner: socket %s is in use: is another runner running with this data dir?", path)
		} else if errors.Is(err, syscall.ECONNREFUSED) {
			_ = os.Remove(path)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("runner: socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("runner: socket %s: %w", path, err)
	}
	return &relay{r: r, ln: ln, path: path}, nil
}

// serve answers the agents' calls until ctx ends.
func (rl *relay) serve(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+api.RPCPrefix+"/{tool}", rl.handle)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) }}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		_ = os.Remove(rl.path)
	}()
	if err := srv.Serve(rl.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// handle relays one call.
func (rl *relay) handle(w http.ResponseWriter, req *http.Request) {
	scheme, token, _ := strings.Cut(req.Header.Get("Authorization"), " ")
	j := rl.r.jobByToken(strings.TrimSpace(token))
	if !strings.EqualFold(scheme, "Bearer") || j == nil {
		writeError(w, models.Errorf(models.CodeUnauthorized, "unknown run token (Authorization: Bearer <AQ_RUN_TOKEN>)"))
		return
	}
	if strings.TrimSpace(req.Header.Get(api.HeaderTaskID)) != j.asg.Task.ID {
		writeError(w, models.Errorf(models.CodeUnauthorized, "this run token is for another task"))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, api.DefaultRPCMaxBodyBytes))
	if err != nil {
		writeError(w, models.Errorf(models.CodeInvalid, "request body: %v", err))
		return
	}
	if len(bytes.TrimSpace(body)) > 0 && !json.Valid(body) {
		writeError(w, models.Errorf(models.CodeInvalid, "request body: not valid JSON"))
		return
	}
	// What the agent printed before the call reaches the daemon's log
	// before the call (a progress report is a line of that log).
	j.readOutput()
	if err := j.flush(context.WithoutCancel(req.Context())); errors.Is(err, errRunGone) {
		writeError(w, models.Errorf(models.CodeUnauthorized, "this run has ended"))
		return
	}
	// The report goes out whatever the caller does meanwhile: a number
	// taken must be delivered, or the run's later reports would be out of
	// order.
	ans, err := j.report(context.WithoutCancel(req.Context()), models.RunnerReport{Kind: models.ReportRPC,
		Tool: req.PathValue("tool"), Body: json.RawMessage(body)})
	if errors.Is(err, errRunGone) {
		writeError(w, models.Errorf(models.CodeUnauthorized, "this run has ended"))
		return
	}
	if err != nil {
		writeError(w, err)
		return
	}
	status, body := ans.Status, []byte(ans.Answer)
	if status < 100 || status > 599 || len(body) == 0 {
		status, body = http.StatusOK, []byte(`{"ok":true}`) // a call applied before the daemon restarted
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeError answers err as the daemon's RPC would.
func writeError(w http.ResponseWriter, err error) {
	code := models.ErrorCodeOf(err)
	body, _ := json.Marshal(api.ErrorBody{Error: api.ErrorDetail{Code: code, Message: models.ErrorMessageOf(err)}})
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code.HTTPStatus())
	_, _ = w.Write(append(body, '\n'))
}
