package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/agentqueued/agentqueued/internal/service/areas"
)

// LogChunkBytes is the most one read of a task's log gives to its stream.
const LogChunkBytes = 64 << 10

// LogService serves tasks' run logs to read and follow: the service's
// log area.
type LogService interface {
	areas.Logs
}

// handleTaskLog streams the log of a task's run as text: the agent's
// output and its progress reports. With follow=true it goes on while the
// run does, writing what the log gains after each change of the daemon's
// state or output of this task's runs (another task's output does not
// wake it), and ends once the run has ended (or, for a task not started
// yet, once its first run has) or the server shuts down.
func (s *Server) handleTaskLog(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r.URL.RawQuery, "attempt", "follow")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	attempt := 0
	if v := q.Get("attempt"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			s.writeError(w, r, invalid("attempt: must be a positive integer (got %s)", quoteShort(v)))
			return
		}
		attempt = n
	}
	follow := false
	if v := q.Get("follow"); v != "" {
		if follow, err = strconv.ParseBool(v); err != nil {
			s.writeError(w, r, invalid("follow: must be true or false (got %s)", quoteShort(v)))
			return
		}
	}
	ctx, id := r.Context(), r.PathValue("id")
	var offset int64
	started := false
	done := func() {}
	defer func() { done() }()
	for {
		done()
		_, changed := s.cfg.Logs.Changed()
		var grew <-chan struct{}
		grew, done = s.cfg.Logs.LogChanged(id)
		c, err := s.cfg.Logs.ReadTaskLog(ctx, id, attempt, offset, LogChunkBytes)
		if err != nil {
			if !started {
				s.writeError(w, r, err)
			} else if ctx.Err() == nil {
				s.log.Warn("task log stream ended by an error", "task_id", id, "err", err)
			}
			return
		}
		if !started {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		if c.Attempt != 0 {
			attempt = c.Attempt // a follow stays with the attempt it began with
		}
		if c.Data != "" {
			if _, err := io.WriteString(w, c.Data); err != nil {
				return
			}
			offset = c.Next
			if len(c.Data) == LogChunkBytes {
				continue
			}
		}
		if err := http.NewResponseController(w).Flush(); err != nil {
			return
		}
		if !follow || c.Ended {
			return
		}
		select {
		case <-changed:
		case <-grew:
		case <-ctx.Done():
			return
		case <-stopping(r):
			return // the stream ends whole, as when the run ends
		}
	}
}

// Stopping returns a channel closed once the Serve that accepted r shuts
// down, so that a request waiting on the daemon (a log follow, the web
// dashboard's event streams) ends instead of holding up the shutdown; nil
// (never closed) when the handler is served otherwise.
func Stopping(r *http.Request) <-chan struct{} { return stopping(r) }

// stopping is Stopping.
func stopping(r *http.Request) <-chan struct{} {
	if serveCtx, ok := r.Context().Value(serveCtxKey{}).(context.Context); ok {
		return serveCtx.Done()
	}
	return nil
}

// handleChanges is a long poll for views that refresh on change: with
// ?after=SEQ it answers once the daemon's state has changed (a run's output
// is no change here) since the change
// numbered SEQ (at once when it already has), or after wait (default
// DefaultChangeWait, at most MaxChangeWait), or when the server shuts down,
// whichever comes first; without after it answers at once.
// {"changed": true|false, "seq": the number of changes so far}.
func (s *Server) handleChanges(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r.URL.RawQuery, "wait", "after")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	wait := DefaultChangeWait
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > MaxChangeWait {
			s.writeError(w, r, invalid("wait: must be a duration from 1s to %s (got %s)", MaxChangeWait, quoteShort(v)))
			return
		}
		wait = d
	}
	seq, changed := s.cfg.Logs.Changed()
	v := q.Get("after")
	if v == "" {
		s.writeJSON(w, r, http.StatusOK, Changes{Seq: seq})
		return
	}
	after, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		s.writeError(w, r, invalid("after: must be a change number from a previous answer (got %s)", quoteShort(v)))
		return
	}
	if seq == after {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		select {
		case <-changed:
		case <-timer.C:
		case <-stopping(r): // answered as when the wait runs out
		case <-r.Context().Done():
			return
		}
		seq, _ = s.cfg.Logs.Changed()
	}
	s.writeJSON(w, r, http.StatusOK, Changes{Changed: seq != after, Seq: seq})
}

// Long-poll bounds of GET /api/v1/changes.
const (
	// DefaultChangeWait is how long a request waits for a change without ?wait.
	DefaultChangeWait = 30 * time.Second
	// MaxChangeWait is the longest ?wait.
	MaxChangeWait = 5 * time.Minute
)

// Changes answers GET /api/v1/changes.
type Changes struct {
	// Changed is true when the daemon's state changed, false when the
	// wait ran out first.
	Changed bool `json:"changed"`
	// Seq numbers the changes so far; ?after= takes it.
	Seq uint64 `json:"seq"`
}

// FollowTaskLog writes the log of a task's attempt (0: the latest) to w as
// it arrives; with follow it returns once the run has ended, else once the
// log so far is written. The request has no overall timeout: ctx bounds it.
func (c *Client) FollowTaskLog(ctx context.Context, id string, attempt int, follow bool, w io.Writer) error {
	q := url.Values{}
	if attempt > 0 {
		q.Set("attempt", strconv.Itoa(attempt))
	}
	if follow {
		q.Set("follow", "true")
	}
	return c.stream(ctx, APIPrefix+"/tasks/"+url.PathEscape(id)+"/logs", q, w)
}

// Changes answers the number of the daemon's changes so far, at once.
func (c *Client) Changes(ctx context.Context) (Changes, error) {
	var out Changes
	return out, c.do(ctx, http.MethodGet, APIPrefix+"/changes", nil, nil, &out)
}

// WaitForChange waits until the daemon has changed since the change
// numbered after, or wait passes (0: the server's default), and answers
// whether it changed and the number of changes so far.
func (c *Client) WaitForChange(ctx context.Context, after uint64, wait time.Duration) (Changes, error) {
	q := url.Values{"after": {strconv.FormatUint(after, 10)}}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	var out Changes
	_, err := c.untimed().send(ctx, http.MethodGet, APIPrefix+"/changes", q, "", nil, &out)
	return out, err
}

// untimed returns a copy of c without the overall request timeout, for a
// call the daemon answers when something happens: its ctx bounds it.
func (c *Client) untimed() *Client {
	hc := *c.hc
	hc.Timeout = 0
	cc := *c
	cc.hc = &hc
	return &cc
}

// stream GETs path and copies the answer's body to w as it arrives,
// without the client's overall timeout.
func (c *Client) stream(ctx context.Context, path string, q url.Values, w io.Writer) error {
	u := *c.base
	u.Path, u.RawPath = "", ""
	raw := c.base.EscapedPath() + path
	unescaped, err := url.PathUnescape(raw)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	u.Path, u.RawPath, u.RawQuery = unescaped, raw, q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.untimed().hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("GET %s: %w", u.String(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return responseError(resp)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}
