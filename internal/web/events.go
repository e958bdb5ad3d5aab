package web

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentqueued/agentqueued/internal/models"
)

// LogChunkBytes is the most one read of a task's log gives to its stream.
const LogChunkBytes = 64 << 10

// sseRetryMillis is how long a browser waits before it reconnects a
// stream that ended.
const sseRetryMillis = 5000

// handleEvents is GET /ui/events: Server-Sent Events for one open page.
// Each committed change of the daemon's state is an event "change" (data:
// the number of changes so far), on which the page re-reads its live
// parts; with ?since=SEQ (the number of changes the page was read after)
// a change since then is told at once. With ?task=ID&offset=N it also streams the task's latest run log
// from byte N as events "log" (data: the text, id: the offset after it;
// a reconnecting browser's Last-Event-ID continues there), and "logreset"
// when a new attempt's log begins (data: the attempt). The handler blocks
// on the change feed and the task's log; nothing polls. It ends when the
// browser goes or the server shuts down. A stream of an unknown task is
// refused with 404 (the browser then stops reconnecting).
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	taskID := q.Get("task")
	var offset int64
	attempt := 0
	if v := q.Get("offset"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			s.renderError(w, r, http.StatusBadRequest, models.Errorf(models.CodeInvalid,
				"offset: must be a byte offset (got %q)", v))
			return
		}
		offset = n
	}
	if v := q.Get("attempt"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			s.renderError(w, r, http.StatusBadRequest, models.Errorf(models.CodeInvalid,
				"attempt: must be an attempt number (got %q)", v))
			return
		}
		attempt = n
	}
	ctx := r.Context()
	if taskID != "" {
		// An unknown or deleted task's stream is refused before it
		// starts: a browser's EventSource gives up on a 404, while a
		// stream that answered 200 and ended would be reopened forever.
		if _, err := s.svc.GetTaskDetail(ctx, taskID); err != nil {
			s.renderError(w, r, 0, err)
			return
		}
	}
	seq, changed := s.svc.Changed()
	since := seq
	if v := q.Get("since"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			s.renderError(w, r, http.StatusBadRequest, models.Errorf(models.CodeInvalid,
				"since: must be a change number (got %q)", v))
			return
		}
		since = n
	}
	if v := r.Header.Get("Last-Event-ID"); v != "" && taskID != "" {
		if a, o, ok := parseEventID(v); ok {
			attempt, offset = a, o
		}
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if _, err := fmt.Fprintf(w, "retry: %d\n\n", sseRetryMillis); err != nil {
		return
	}
	if seq != since { // changed since the page was read
		if _, err := fmt.Fprintf(w, "event: change\ndata: %d\n\n", seq); err != nil {
			return
		}
	}
	logDone := func() {}
	defer func() { logDone() }()
	following := taskID != ""
	for {
		var grew <-chan struct{}
		if following {
			logDone()
			grew, logDone = s.svc.LogChanged(taskID)
			ended, err := s.streamLog(w, r, taskID, &attempt, &offset)
			if err != nil {
				return
			}
			if ended {
				// A later attempt's log is looked for at the next change.
				logDone()
				grew, logDone = nil, func() {}
			}
		}
		if err := rc.Flush(); err != nil {
			return
		}
		select {
		case <-changed:
			var now uint64
			now, changed = s.svc.Changed()
			if now != seq {
				seq = now
				if _, err := fmt.Fprintf(w, "event: change\ndata: %d\n\n", seq); err != nil {
					return
				}
			}
		case <-grew:
		case <-ctx.Done():
			return
		case <-s.cfg.Stopping(r):
			return
		}
	}
}

// streamLog writes what the task's log gained since offset: of the attempt
// followed, or, once that has ended, of a later one (announced by an event
// "logreset"). It reports whether the log followed has ended.
func (s *Server) streamLog(w io.Writer, r *http.Request, taskID string, attempt *int, offset *int64) (bool, error) {
	for {
		c, err := s.svc.ReadTaskLog(r.Context(), taskID, *attempt, *offset, LogChunkBytes)
		if err != nil {
			if r.Context().Err() == nil {
				s.log.Warn("event stream: read task log", "task_id", taskID, "err", err)
			}
			return true, err
		}
		if *attempt == 0 && c.Attempt != 0 {
			*attempt = c.Attempt
		}
		full := len(c.Data) == LogChunkBytes
		// A chunk ending inside a character stops before it: the
		// character's bytes come with the next chunk.
		if n := completeRunes(c.Data); n < len(c.Data) {
			c.Next -= int64(len(c.Data) - n)
			c.Data = c.Data[:n]
		}
		if c.Data != "" {
			if err := writeLogEvent(w, c.Attempt, c.Next, c.Data); err != nil {
				return true, err
			}
			*offset = c.Next
			if full {
				continue
			}
		}
		if !c.Ended || c.Attempt == 0 {
			return c.Ended, nil
		}
		// The attempt followed has ended: is there a later one?
		latest, err := s.svc.ReadTaskLog(r.Context(), taskID, 0, 0, 0)
		if err != nil || latest.Attempt <= *attempt {
			return true, nil
		}
		*attempt, *offset = latest.Attempt, 0
		if _, err := fmt.Fprintf(w, "event: logreset\ndata: %d\n\n", latest.Attempt); err != nil {
			return true, err
		}
	}
}

// writeLogEvent writes a log chunk as an event "log": each line a data
// line (the browser joins them with line feeds, giving the chunk back
// exactly), its id "attempt:offset".
func writeLogEvent(w io.Writer, attempt int, next int64, data string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "event: log\nid: %d:%d\n", attempt, next)
	for line := range strings.SplitSeq(strings.ReplaceAll(data, "\r", ""), "\n") {
		b.WriteString("data: ")
		b.WriteString(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

// completeRunes is the length of s without an incomplete UTF-8 sequence
// at its end (the start of a character cut by a read's bound).
func completeRunes(s string) int {
	for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			if utf8.FullRuneInString(s[i:]) {
				return len(s)
			}
			return i
		}
	}
	return len(s)
}

// partialRunes is the length of the continuation bytes at the start of s
// (the end of a character whose start a read's bound cut off).
func partialRunes(s string) int {
	i := 0
	for i < len(s) && i < utf8.UTFMax-1 && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}

// parseEventID reads an event id "attempt:offset".
func parseEventID(v string) (attempt int, offset int64, ok bool) {
	a, o, found := strings.Cut(v, ":")
	if !found {
		return 0, 0, false
	}
	n, err1 := strconv.Atoi(a)
	m, err2 := strconv.ParseInt(o, 10, 64)
	if err1 != nil || err2 != nil || n < 0 || m < 0 {
		return 0, 0, false
	}
	return n, m, true
}
