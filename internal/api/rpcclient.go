package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Environment variables the daemon sets for each agent run.
const (
	// EnvSocket is the path of the RPC socket.
	EnvSocket = "AQ_SOCKET"
	// EnvTaskID is the id of the run's task.
	EnvTaskID = "AQ_TASK_ID"
	// EnvRunToken is the run's token: it authorises RPC calls for its task only.
	EnvRunToken = "AQ_RUN_TOKEN"
)

// rpcBaseURL is the URL calls are sent to; the transport dials the socket
// whatever the host.
const rpcBaseURL = "http://agentqueued"

// RPCClient calls the agent RPC of one run. Errors the server answered are
// *models.Error values carrying the server's code and message.
type RPCClient struct {
	socket string
	taskID string
	token  string
	hc     *http.Client
}

// NewRPCClient returns a client that calls the RPC on the Unix socket at
// socketPath for the task taskID with the run token token.
func NewRPCClient(socketPath, taskID, token string) (*RPCClient, error) {
	var missing []string
	for _, v := range []struct{ name, value string }{{"socket path", socketPath}, {"task id", taskID}, {"run token", token}} {
		if strings.TrimSpace(v.value) == "" {
			missing = append(missing, v.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("rpc client: %s empty", strings.Join(missing, ", "))
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socketPath)
		},
		// Calls are rare and the socket is local: a connection per call
		// leaves nothing open between calls.
		DisableKeepAlives: true,
	}
	return &RPCClient{socket: socketPath, taskID: taskID, token: token, hc: &http.Client{Transport: tr}}, nil
}

// NewRPCClientFromEnv returns a client configured by AQ_SOCKET, AQ_TASK_ID
// and AQ_RUN_TOKEN, as getenv reports them. The error names every missing
// variable.
func NewRPCClientFromEnv(getenv func(string) string) (*RPCClient, error) {
	var missing []string
	values := map[string]string{}
	for _, name := range []string{EnvSocket, EnvTaskID, EnvRunToken} {
		values[name] = strings.TrimSpace(getenv(name))
		if values[name] == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		verb := "is"
		if len(missing) > 1 {
			verb = "are"
		}
		return nil, fmt.Errorf("%s %s not set: the daemon sets %s, %s and %s for each agent run",
			strings.Join(missing, ", "), verb, EnvSocket, EnvTaskID, EnvRunToken)
	}
	return NewRPCClient(values[EnvSocket], values[EnvTaskID], values[EnvRunToken])
}

// TaskID returns the task the client calls for.
func (c *RPCClient) TaskID() string { return c.taskID }

// CloseIdleConnections closes the idle connections of the client's transport.
func (c *RPCClient) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// Heartbeat tells the daemon the agent is alive.
func (c *RPCClient) Heartbeat(ctx context.Context) error {
	return c.call(ctx, ToolHeartbeat, struct{}{}, nil)
}

// Progress reports a step of the work.
func (c *RPCClient) Progress(ctx context.Context, message string) error {
	return c.call(ctx, ToolProgress, RPCMessage{Message: message}, nil)
}

// ReportProgress reports a step of the work with the counts of items
// processed so far (cumulative; nil counts are left as they are).
func (c *RPCClient) ReportProgress(ctx context.Context, p models.TaskProgress) error {
	return c.call(ctx, ToolProgress, p, nil)
}

// Ask asks a human a question and waits for the answer, as long as it takes
// or until ctx ends; ask.Default is the answer proposed should the question
// expire unanswered.
func (c *RPCClient) Ask(ctx context.Context, ask models.Ask) (string, error) {
	var out AskResponse
	err := c.call(ctx, ToolAsk, AskRequest{Question: ask.Question, Default: ask.Default}, &out)
	return out.Answer, err
}

// Complete reports that the task is done.
func (c *RPCClient) Complete(ctx context.Context, comp models.Completion) error {
	return c.call(ctx, ToolComplete, comp, nil)
}

// Fail reports that the task cannot be done, and why.
func (c *RPCClient) Fail(ctx context.Context, message string) error {
	return c.call(ctx, ToolFail, RPCMessage{Message: message}, nil)
}

// Usage reports token use.
func (c *RPCClient) Usage(ctx context.Context, u UsageReport) error {
	return c.call(ctx, ToolUsage, u, nil)
}

// RateLimited reports that the agent's provider refuses work until a reset time.
func (c *RPCClient) RateLimited(ctx context.Context, r models.RateLimit) error {
	return c.call(ctx, ToolRateLimited, r, nil)
}

// ProposePlan proposes subtasks of the task, created all-or-nothing.
func (c *RPCClient) ProposePlan(ctx context.Context, tasks []models.BatchTask) ([]models.BatchResult, error) {
	var out BatchResponse
	err := c.call(ctx, ToolProposePlan, PlanRequest{Tasks: tasks}, &out)
	return out.Results, err
}

// Approve is a reviewer's verdict that the task under review may land.
func (c *RPCClient) Approve(ctx context.Context, reasons string) error {
	return c.call(ctx, ToolApprove, Verdict{Reasons: reasons}, nil)
}

// Reject is a reviewer's verdict that the task under review must be redone,
// with the reasons handed to its next attempt.
func (c *RPCClient) Reject(ctx context.Context, reasons string) error {
	return c.call(ctx, ToolReject, Verdict{Reasons: reasons}, nil)
}

// call sends one tool call and decodes a 2xx answer into out (when not
// nil). Every tool but ask is bounded by DefaultClientTimeout unless ctx
// ends sooner.
func (c *RPCClient) call(ctx context.Context, tool string, body, out any) error {
	op := "rpc " + tool
	if tool != ToolAsk {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultClientTimeout)
		defer cancel()
	}
	data, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("%s: encode request: %w", op, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rpcBaseURL+RPCPrefix+"/"+tool, bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set(HeaderTaskID, c.taskID)
	resp, err := c.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%s via %s: %w", op, c.socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return responseError(resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s: decode answer: %w", op, err)
	}
	return nil
}
