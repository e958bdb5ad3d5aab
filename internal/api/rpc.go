package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Paths, headers and tools of the agent RPC.
const (
	// RPCPrefix is the path prefix of the agent RPC: tools are POST RPCPrefix/{tool}.
	RPCPrefix = "/rpc/v1"
	// HeaderTaskID carries the task id (AQ_TASK_ID) a call is made for.
	HeaderTaskID = "X-AQ-Task-ID"
)

// The agent RPC's tools.
const (
	ToolHeartbeat   = "heartbeat"
	ToolProgress    = "progress"
	ToolAsk         = "ask"
	ToolComplete    = "complete"
	ToolFail        = "fail"
	ToolUsage       = "usage"
	ToolRateLimited = "rate_limited"
	ToolProposePlan = "propose_plan"
	ToolApprove     = "approve"
	ToolReject      = "reject"
)

// verdict decodes a reviewer's approve or reject.
func (s *RPCServer) verdict(approve bool) func(ctx context.Context, run models.Run, body []byte) (any, error) {
	return func(ctx context.Context, run models.Run, body []byte) (any, error) {
		var v Verdict
		if err := decodeJSON(body, &v); err != nil {
			return nil, err
		}
		if err := models.CheckText("reasons", v.Reasons, models.MaxDescriptionLen); err != nil {
			return nil, err
		}
		return RPCOK{OK: true}, s.svc.Verdict(ctx, run, approve, v.Reasons)
	}
}

// Verdict is a reviewer's approve or reject, with its reasons.
type Verdict struct {
	Reasons string `json:"reasons"`
}

// RPCTools lists every tool of the agent RPC.
var RPCTools = []string{ToolHeartbeat, ToolProgress, ToolAsk, ToolComplete, ToolFail, ToolUsage, ToolRateLimited,
	ToolProposePlan, ToolApprove, ToolReject}

// Defaults of the RPC server.
const (
	// DefaultRPCMaxBodyBytes caps RPC request bodies.
	DefaultRPCMaxBodyBytes = 8 << 20
	// DefaultRPCReadTimeout bounds the time to read a request, body included.
	DefaultRPCReadTimeout = time.Minute
	// DefaultRPCWriteTimeout bounds the time to handle a call and write its
	// answer, for every tool but ask, which waits for a human as long as it takes.
	DefaultRPCWriteTimeout = 2 * time.Minute
	// socketProbeTimeout bounds the dial that tells a live socket from a stale one.
	socketProbeTimeout = time.Second
	// maxSocketPath is the longest portable Unix socket path (104 bytes on
	// BSDs and macOS, 108 on Linux).
	maxSocketPath = 104
	// MaxUsageTokensPerReport caps each count of one usage report: no real
	// call of a model uses more, and a count beyond it is a broken or
	// hostile agent, not usage to book (nor a total to overflow).
	MaxUsageTokensPerReport = 100_000_000
)

// RunService is what the agent RPC needs from the orchestrator.
type RunService interface {
	// Authenticate returns the open run a run token belongs to; unknown or ended runs are refused (*models.Error CodeUnauthorized).
	Authenticate(ctx context.Context, token string) (models.Run, error)
	Heartbeat(ctx context.Context, run models.Run) error
	// Progress records a progress report: a message for the task's thread
	// and the counts of items processed so far (nil: unchanged).
	Progress(ctx context.Context, run models.Run, p models.TaskProgress) error
	// Ask blocks until a human answers (the task is WAITING_INPUT meanwhile),
	// the question expires, or ctx ends.
	Ask(ctx context.Context, run models.Run, ask models.Ask) (answer string, err error)
	Complete(ctx context.Context, run models.Run, c models.Completion) error
	Fail(ctx context.Context, run models.Run, message string) error
	// Usage records token use; the server fills u's project, task and agent from the run.
	Usage(ctx context.Context, run models.Run, u models.TokenUsage) error
	RateLimited(ctx context.Context, run models.Run, r models.RateLimit) error
	// ProposePlan creates subtasks of the run's task. plan.ProjectID is the
	// run's project; its entries set no project, parent, plan source or
	// plan-subtask flag (the server refuses those): the service sets them.
	ProposePlan(ctx context.Context, run models.Run, plan models.TaskBatch) ([]models.BatchResult, error)
	// Verdict is a review run's approve or reject of the task it reviews.
	Verdict(ctx context.Context, run models.Run, approve bool, reasons string) error
}

// Request and answer bodies of the agent RPC besides the models themselves.
type (
	// RPCMessage is the body of fail (and of progress, which also takes
	// models.TaskProgress's counts).
	RPCMessage struct {
		Message string `json:"message"`
	}
	// AskRequest is the body of ask.
	AskRequest struct {
		Question string `json:"question"`
		// Default is the answer the agent proposes should nobody answer
		// before the question expires (used when its project's on_expiry
		// is default).
		Default *string `json:"default,omitempty"`
	}
	// AskResponse answers ask.
	AskResponse struct {
		Answer string `json:"answer"`
	}
	// UsageReport is the body of usage: token counts only, since the run
	// decides the project, task and agent they are booked to.
	UsageReport struct {
		Input      int64 `json:"input_tokens"`
		Output     int64 `json:"output_tokens"`
		CacheRead  int64 `json:"cache_read_tokens,omitempty"`
		CacheWrite int64 `json:"cache_write_tokens,omitempty"`
	}
	// PlanRequest is the body of propose_plan.
	PlanRequest struct {
		Tasks []models.BatchTask `json:"tasks"`
	}
	// RPCOK answers the tools that return nothing else.
	RPCOK struct {
		OK bool `json:"ok"`
	}
)

// RPCConfig configures an RPCServer.
type RPCConfig struct {
	// SocketPath is the Unix socket Listen binds.
	SocketPath string
	// Logger receives call and error logs; default discards.
	Logger *slog.Logger
	// MaxBodyBytes caps request bodies; default DefaultRPCMaxBodyBytes.
	MaxBodyBytes int64
}

// RPCServer serves the agent RPC over a Unix socket for a RunService.
type RPCServer struct {
	cfg     RPCConfig
	svc     RunService
	log     *slog.Logger
	resp    *Server // writes answers and reads bodies exactly as the HTTP API does
	tools   map[string]rpcTool
	handler http.Handler
}

// rpcTool is one tool: call decodes and checks the body, then calls the service.
type rpcTool struct {
	// emptyBody allows an absent body, read as {}.
	emptyBody bool
	// longLived calls may wait indefinitely: no write timeout, and they end
	// when the server shuts down.
	longLived bool
	call      func(ctx context.Context, run models.Run, body []byte) (any, error)
}

// NewRPCServer returns an RPC server for svc. It starts nothing: call
// Listen and Serve.
func NewRPCServer(cfg RPCConfig, svc RunService) (*RPCServer, error) {
	if svc == nil {
		return nil, errors.New("new rpc server: service is nil")
	}
	if cfg.SocketPath == "" {
		return nil, errors.New("new rpc server: socket path is empty")
	}
	if cfg.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("new rpc server: MaxBodyBytes %d is negative", cfg.MaxBodyBytes)
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultRPCMaxBodyBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &RPCServer{cfg: cfg, svc: svc, log: cfg.Logger,
		resp: &Server{cfg: Config{MaxBodyBytes: cfg.MaxBodyBytes}, log: cfg.Logger}}
	s.tools = s.toolTable()
	mux := http.NewServeMux()
	mux.HandleFunc(RPCPrefix+"/{tool}", s.handleCall)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.resp.writeError(w, r, models.Errorf(models.CodeNotFound, "no such endpoint: %s %s (tools are POST %s/{tool})",
			r.Method, r.URL.Path, RPCPrefix))
	})
	s.handler = mux
	return s, nil
}

// Handler returns the RPC's handler, authentication included.
func (s *RPCServer) Handler() http.Handler { return s.handler }

// SocketPath returns the socket the server listens on.
func (s *RPCServer) SocketPath() string { return s.cfg.SocketPath }

// Listen binds the Unix socket at RPCConfig.SocketPath. It creates the
// socket's directory (mode 0700) when it is missing, removes a stale socket
// file that nothing answers on, refuses a socket a live server answers on
// ("socket in use") and any other kind of file, and makes the socket 0600.
func (s *RPCServer) Listen() (net.Listener, error) {
	path := s.cfg.SocketPath
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("listen on %s: create socket directory: %w", path, err)
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		if errors.Is(err, syscall.EINVAL) && len(path) > maxSocketPath {
			return nil, fmt.Errorf("listen on %s: the path is %d bytes long, longer than a Unix socket path may be (%d): %w",
				path, len(path), maxSocketPath, err)
		}
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen on %s: restrict socket permissions: %w", path, err)
	}
	return ln, nil
}

// removeStaleSocket removes the socket at path if nothing answers on it.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("%s exists and is not a socket (mode %s); remove it or choose another path", path, fi.Mode())
	}
	conn, err := net.DialTimeout("unix", path, socketProbeTimeout)
	if err == nil {
		conn.Close()
		return errors.New("socket in use: another server answers on it")
	}
	if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("probe existing socket: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	return nil
}

// serveCtxKey carries Serve's context to handlers, so that long-lived calls
// end when the server shuts down.
type serveCtxKey struct{}

// Serve serves calls on ln until ctx is cancelled, then stops accepting
// connections, ends waiting ask calls and waits up to
// DefaultShutdownTimeout for calls in flight. It closes ln, removes the
// socket file and returns nil after a graceful shutdown.
func (s *RPCServer) Serve(ctx context.Context, ln net.Listener) error {
	defer s.removeSocket(ln)
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: DefaultReadHeaderTimeout,
		ReadTimeout:       DefaultRPCReadTimeout,
		WriteTimeout:      DefaultRPCWriteTimeout,
		IdleTimeout:       DefaultIdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		// Calls are not cancelled by ctx itself: shutdown lets them finish.
		BaseContext: func(net.Listener) context.Context {
			return context.WithValue(context.WithoutCancel(ctx), serveCtxKey{}, ctx)
		},
	}
	return serveUntilDone(ctx, srv, ln, "rpc", DefaultShutdownTimeout)
}

// removeSocket removes the socket file of a listener bound to the
// configured path.
func (s *RPCServer) removeSocket(ln net.Listener) {
	if ln.Addr().Network() != "unix" || ln.Addr().String() != s.cfg.SocketPath {
		return
	}
	if err := os.Remove(s.cfg.SocketPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("remove rpc socket", "path", s.cfg.SocketPath, "err", err)
	}
}

// handleCall serves POST /rpc/v1/{tool}: it finds the tool, authenticates
// the run, reads the body and answers the tool's result.
func (s *RPCServer) handleCall(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	name := r.PathValue("tool")
	tool, ok := s.tools[name]
	if !ok {
		s.resp.writeError(w, r, models.Errorf(models.CodeNotFound, "unknown tool %q (want one of %s)",
			name, strings.Join(RPCTools, ", ")))
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.resp.writeError(w, r, &httpError{status: http.StatusMethodNotAllowed, err: models.Errorf(models.CodeInvalid,
			"method %s is not allowed on %s (allowed: POST)", r.Method, r.URL.Path)})
		return
	}
	run, err := s.authenticate(r)
	if err != nil {
		if models.ErrorCodeOf(err) == models.CodeUnauthorized {
			s.log.InfoContext(r.Context(), "rpc call refused", "tool", name,
				"task_id", cleanHeader(r.Header.Get(HeaderTaskID)), "reason", models.ErrorMessageOf(err))
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentqueued-rpc"`)
		}
		s.fail(w, r, name, models.Run{}, err)
		return
	}
	log := s.log.With("tool", name, "task_id", run.TaskID, "run_id", run.ID, "agent", run.AgentID)

	ctx := r.Context()
	if tool.longLived {
		// The answer may come hours later: no write deadline, but end with the server.
		if err := http.NewResponseController(w).SetWriteDeadline(time.Time{}); err != nil {
			log.WarnContext(ctx, "rpc: clear write deadline", "err", err)
		}
		if serveCtx, ok := ctx.Value(serveCtxKey{}).(context.Context); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(serveCtx, cancel)()
		}
	}
	body, err := s.resp.readBody(w, r)
	if err != nil {
		s.fail(w, r, name, run, err)
		return
	}
	if tool.emptyBody && len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	out, err := tool.call(ctx, run, body)
	if err != nil {
		if ctx.Err() != nil {
			if r.Context().Err() != nil {
				log.InfoContext(ctx, "rpc call abandoned by the agent", "duration", time.Since(start))
				return
			}
			log.InfoContext(ctx, "rpc call ended by shutdown", "duration", time.Since(start))
			s.resp.writeError(w, r, &httpError{status: http.StatusServiceUnavailable, err: models.Errorf(models.CodeInternal,
				"the daemon is shutting down; call %s again once it is back", name)})
			return
		}
		s.fail(w, r, name, run, err)
		log.DebugContext(ctx, "rpc call failed", "code", models.ErrorCodeOf(err), "duration", time.Since(start))
		return
	}
	s.resp.writeJSON(w, r, http.StatusOK, out)
	log.DebugContext(ctx, "rpc call", "duration", time.Since(start))
}

// authenticate returns the run of the call's token and checks that the
// call is for the run's own task.
func (s *RPCServer) authenticate(r *http.Request) (models.Run, error) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return models.Run{}, models.Errorf(models.CodeUnauthorized, "missing run token (Authorization: Bearer <AQ_RUN_TOKEN>)")
	}
	taskID := strings.TrimSpace(r.Header.Get(HeaderTaskID))
	if taskID == "" {
		return models.Run{}, models.Errorf(models.CodeUnauthorized, "missing %s header (the run's AQ_TASK_ID)", HeaderTaskID)
	}
	run, err := s.svc.Authenticate(r.Context(), token)
	if err != nil {
		return models.Run{}, err
	}
	if run.TaskID != taskID {
		return models.Run{}, models.Errorf(models.CodeUnauthorized, "this run token is for another task")
	}
	return run, nil
}

// fail answers err. An internal error is logged with the call's keys and
// answered with a generic message: internals never reach the agent.
func (s *RPCServer) fail(w http.ResponseWriter, r *http.Request, tool string, run models.Run, err error) {
	var he *httpError
	if models.ErrorCodeOf(err) == models.CodeInternal && !errors.As(err, &he) {
		s.log.ErrorContext(r.Context(), "rpc call failed", "tool", tool, "task_id", run.TaskID, "run_id", run.ID,
			"agent", run.AgentID, "err", err)
		err = &httpError{status: http.StatusInternalServerError, err: models.Errorf(models.CodeInternal, "internal error")}
	}
	s.resp.writeError(w, r, err)
}

// toolTable returns the tools by name.
func (s *RPCServer) toolTable() map[string]rpcTool {
	ok := RPCOK{OK: true}
	return map[string]rpcTool{
		ToolHeartbeat: {emptyBody: true, call: func(ctx context.Context, run models.Run, body []byte) (any, error) {
			var req struct{}
			if err := decodeJSON(body, &req); err != nil {
				return nil, err
			}
			return ok, s.svc.Heartbeat(ctx, run)
		}},
		ToolProgress: {call: func(ctx context.Context, run models.Run, body []byte) (any, error) {
			var p models.TaskProgress
			if err := decodeJSON(body, &p); err != nil {
				return nil, err
			}
			if err := p.Validate(); err != nil {
				return nil, err
			}
			return ok, s.svc.Progress(ctx, run, p)
		}},
		ToolAsk: {longLived: true, call: func(ctx context.Context, run models.Run, body []byte) (any, error) {
			var req AskRequest
			if err := decodeJSON(body, &req); err != nil {
				return nil, err
			}
			ask := models.Ask{Question: req.Question, Default: req.Default}
			if err := ask.Validate(); err != nil {
				return nil, err
			}
			answer, err := s.svc.Ask(ctx, run, ask)
			if err != nil {
				return nil, err
			}
			return AskResponse{Answer: answer}, nil
		}},
		ToolComplete: {call: func(ctx context.Context, run models.Run, body []byte) (any, error) {
			var c models.Completion
			if err := decodeJSON(body, &c); err != nil {
				return nil, err
			}
			if err := c.Validate(); err != nil {
				return nil, err
			}
			return ok, s.svc.Complete(ctx, run, c)
		}},
		ToolFail: {call: func(ctx context.Context, run models.Run, body []byte) (any, error) {
			msg, err := decodeMessage(body)
			if err != nil {
				return nil, err
			}
			return ok, s.svc.Fail(ctx, run, msg)
		}},
		ToolUsage: {call: func(ctx context.Context, run models.Run, body []byte) (any, error) {
			var u UsageReport
			if err := decodeJSON(body, &u); err != nil {
				return nil, err
			}
			if err := u.Validate(); err != nil {
				return nil, err
			}
			return ok, s.svc.Usage(ctx, run, models.TokenUsage{ProjectID: run.ProjectID, TaskID: run.TaskID,
				AgentID: run.AgentID, Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite})
		}},
		ToolRateLimited: {call: func(ctx context.Context, run models.Run, body []byte) (any, error) {
			var rl models.RateLimit
			if err := decodeWithTime(body, &rl, "reset_at"); err != nil {
				return nil, err
			}
			if err := rl.Validate(); err != nil {
				return nil, err
			}
			return ok, s.svc.RateLimited(ctx, run, rl)
		}},
		ToolProposePlan: {call: func(ctx context.Context, run models.Run, body []byte) (any, error) {
			var req PlanRequest
			if err := decodeWithTime(body, &req, "tasks[].not_before"); err != nil {
				return nil, err
			}
			if err := req.Validate(); err != nil {
				return nil, err
			}
			results, err := s.svc.ProposePlan(ctx, run, models.TaskBatch{ProjectID: run.ProjectID, Tasks: req.Tasks})
			if err != nil {
				return nil, err
			}
			return BatchResponse{Results: nonNil(results)}, nil
		}},
		ToolApprove: {call: s.verdict(true)},
		ToolReject:  {call: s.verdict(false)},
	}
}

// decodeWithTime decodes like decodeJSON and names timeField, the body's
// only time field, when a time fails to parse: encoding/json does not say
// which field it was.
func decodeWithTime(body []byte, v any, timeField string) error {
	err := decodeJSON(body, v)
	var pe *time.ParseError
	if errors.As(err, &pe) {
		return models.WrapError(models.CodeInvalid, err, "%s: %s is not an RFC 3339 time (like 2026-03-01T12:00:00Z)",
			timeField, pe.Value)
	}
	return err
}

// decodeMessage decodes an RPCMessage body and checks its message.
func decodeMessage(body []byte) (string, error) {
	var req RPCMessage
	if err := decodeJSON(body, &req); err != nil {
		return "", err
	}
	if err := models.ValidateQuestionText("message", req.Message); err != nil {
		return "", err
	}
	return req.Message, nil
}

// Validate checks a usage report: every count is from 0 to
// MaxUsageTokensPerReport.
func (u *UsageReport) Validate() error {
	for _, f := range []struct {
		name string
		n    int64
	}{{"input_tokens", u.Input}, {"output_tokens", u.Output}, {"cache_read_tokens", u.CacheRead},
		{"cache_write_tokens", u.CacheWrite}} {
		if f.n < 0 {
			return models.Errorf(models.CodeInvalid, "%s: must not be negative (got %d)", f.name, f.n)
		}
		if f.n > MaxUsageTokensPerReport {
			return models.Errorf(models.CodeInvalid, "%s: at most %d tokens in one report (got %d)",
				f.name, MaxUsageTokensPerReport, f.n)
		}
	}
	return nil
}

// Validate checks the shape of a plan: at least one task, at most
// models.MaxBatchSize, and none of the fields the daemon sets from the run.
// The tasks themselves are validated when the batch is created.
func (p *PlanRequest) Validate() error {
	switch {
	case len(p.Tasks) == 0:
		return models.Errorf(models.CodeInvalid, "tasks: at least one task is required")
	case len(p.Tasks) > models.MaxBatchSize:
		return models.Errorf(models.CodeInvalid, "tasks: at most %d tasks", models.MaxBatchSize)
	}
	for i, t := range p.Tasks {
		field := ""
		switch {
		case t.ProjectID != "":
			field = "project_id"
		case t.ParentTaskID != "":
			field = "parent_task_id"
		case t.PlanSource != "":
			field = "plan_source"
		case t.IsPlanSubtask:
			field = "is_plan_subtask"
		default:
			continue
		}
		name := fmt.Sprintf("tasks[%d]", i)
		if t.LocalID != "" {
			name += fmt.Sprintf(" (%s)", t.LocalID)
		}
		return models.Errorf(models.CodeInvalid, "%s: %s: set by the daemon from the run; leave it out", name, field)
	}
	return nil
}

// DecodePlan decodes the tasks of a plan: a PlanRequest object
// ({"tasks": [...]}) or a bare JSON array of models.BatchTask entries. It is
// as strict as the RPC: unknown fields and trailing data are errors.
func DecodePlan(data []byte) ([]models.BatchTask, error) {
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '[' {
		var tasks []models.BatchTask
		if err := decodeJSON(data, &tasks); err != nil {
			return nil, err
		}
		return tasks, nil
	}
	var req PlanRequest
	if err := decodeJSON(data, &req); err != nil {
		return nil, err
	}
	return req.Tasks, nil
}

// cleanHeader makes a header value safe to log: printable and short.
func cleanHeader(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) > 100 {
		s = s[:100]
	}
	return strings.ToValidUTF8(s, "")
}
