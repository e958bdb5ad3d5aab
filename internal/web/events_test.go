package web_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/web"
)

// sseEvent is one event of a stream.
type sseEvent struct {
	name, id, data string
}

// openEvents opens the dashboard's event stream at path and returns its
// events as they arrive; the channel closes when the stream ends.
func (e *env) openEvents(ctx context.Context, path string) <-chan sseEvent {
	e.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		resp.Body.Close()
		e.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan sseEvent, 64)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20) // a log event's line may be a whole chunk
		var ev sseEvent
		var data []string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				ev.data = strings.Join(data, "\n")
				out <- ev
				ev, data = sseEvent{}, nil
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				data = append(data, strings.TrimPrefix(line, "data: "))
			case strings.HasPrefix(line, "retry: "):
				ev.name = "retry"
			}
		}
	}()
	return out
}

// next returns the stream's next event named one of names, skipping others.
func next(t *testing.T, dog *progresstest.Watchdog, events <-chan sseEvent, names ...string) sseEvent {
	t.Helper()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the stream ended waiting for %v", names)
			}
			for _, n := range names {
				if ev.name == n {
					dog.Progress("the event " + n)
					return ev
				}
			}
		case <-dog.Done():
			t.Fatalf("waiting for %v: %v", names, dog.Err())
		}
	}
}

// TestEventsStreamChangesAndTheTaskLog: the stream says "change" after a
// committed change and streams what the task's log gains, with ids a
// reconnecting browser continues from.
func TestEventsStreamChangesAndTheTaskLog(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	id := e.task("web", "Build")
	dir := filepath.Join(e.runDir, id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "1.log")
	if err := os.WriteFile(logPath, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.get("/ui/overview") // the session's cookie
	dog := progresstest.New(t, "the event stream")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := e.openEvents(ctx, "/ui/events?task="+id+"&offset=0")
	if ev := next(t, dog, events, "log"); ev.data != "hello\n" || ev.id != "1:6" {
		t.Fatalf("first log event %+v", ev)
	}
	f, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("world\nno newline yet"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	e.feed.Output(id)
	if ev := next(t, dog, events, "log"); ev.data != "world\nno newline yet" || ev.id != "1:26" {
		t.Fatalf("second log event %+v", ev)
	}
	e.feed.Notify()
	if ev := next(t, dog, events, "change"); ev.data == "" {
		t.Fatalf("change event %+v", ev)
	}

	// A page read before a change learns of it as its stream opens.
	seq, _ := e.feed.Changed()
	e.feed.Notify()
	late := e.openEvents(ctx, fmt.Sprintf("/ui/events?since=%d", seq))
	if ev := next(t, dog, late, "change", "log"); ev.name != "change" || ev.data != fmt.Sprint(seq+1) {
		t.Fatalf("a stream opened after a change the page missed: %+v, want change %d", ev, seq+1)
	}

	// A reconnecting browser sends the last id: the stream goes on from there.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+"/ui/events?task="+id+"&offset=0", nil)
	req.Header.Set("Last-Event-ID", "1:12")
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var got []string
	for sc.Scan() && sc.Text() != "data: no newline yet" {
		got = append(got, sc.Text())
	}
	if strings.Contains(strings.Join(got, "\n"), "hello") || strings.Contains(strings.Join(got, "\n"), "world") {
		t.Fatalf("a reconnection streamed the log again: %q", got)
	}
}

// TestShutdownEndsEventStreams: open event streams do not hold up the
// server's stop (an hour's shutdown timeout here: a server waiting for
// them stalls the watchdog instead).
func TestShutdownEndsEventStreams(t *testing.T) {
	t.Parallel()
	e, served := newEnvServed(t, "", true)
	id := e.task("web", "Build")
	e.get("/ui/overview")
	dog := progresstest.New(t, "the event streams")
	// A failing test hangs up, so that even a server that waits for its
	// streams returns and the cleanup ends.
	ctx, hangUp := context.WithCancel(context.Background())
	t.Cleanup(hangUp)
	var streams []<-chan sseEvent
	for _, path := range []string{"/ui/events", "/ui/events?task=" + id} {
		s := e.openEvents(ctx, path)
		next(t, dog, s, "retry")
		streams = append(streams, s)
	}
	e.stop()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve = %v, want nil", err)
		}
	case <-dog.Done():
		t.Fatalf("Serve did not return while event streams were open: %v", dog.Err())
	}
	for _, s := range streams {
		for range s { // each ends
		}
	}
}

// TestEventsOfAnUnknownTaskAre404: a stream for a task that does not
// exist (or no longer does) is refused before it starts, so the browser
// stops reconnecting; a deleted task's page stream is refused too.
func TestEventsOfAnUnknownTaskAre404(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	deleted := e.task("web", "Gone soon")
	if err := e.store.DeleteTask(context.Background(), deleted); err != nil {
		t.Fatal(err)
	}
	e.get("/ui/overview") // the session's cookie
	for _, id := range []string{"no-such-task", deleted} {
		p := e.get("/ui/events?task=" + id + "&offset=0")
		if p.status != http.StatusNotFound || p.header.Get("Content-Type") == "text/event-stream" {
			t.Errorf("the events of task %s: %d %s, want 404", id, p.status, p.header.Get("Content-Type"))
		}
	}
}

// TestLogIsCutBetweenCharacters: a log's chunks on the stream and its
// tail on the task's page begin and end on whole UTF-8 characters; the
// bytes of a character a bound cuts come with the next chunk.
func TestLogIsCutBetweenCharacters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.get("/ui/overview") // the session's cookie
	tests := []struct {
		name string
		log  string
	}{
		{"a character across the chunk bound", strings.Repeat("a", web.LogChunkBytes-1) + "é€ end\n"},
		{"a four-byte character across the bound", strings.Repeat("a", web.LogChunkBytes-2) + "𝄞 end\n"},
		{"chunks of characters", strings.Repeat("é", web.LogChunkBytes) + "x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := e.task("web", tc.name)
			e.writeLog(id, 1, tc.log)
			dog := progresstest.New(t, "the log stream")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			events := e.openEvents(ctx, "/ui/events?task="+id+"&offset=0")
			var got strings.Builder
			for got.Len() < len(tc.log) {
				ev := next(t, dog, events, "log")
				if !utf8.ValidString(ev.data) {
					t.Fatalf("a log event cut inside a character: ends %q", ev.data[max(0, len(ev.data)-4):])
				}
				got.WriteString(ev.data)
			}
			if got.String() != tc.log {
				t.Fatalf("the stream gave %d bytes unlike the log's %d", got.Len(), len(tc.log))
			}
		})
	}

	// The page's tail starts inside a character, and the log ends in the
	// middle of one being written.
	id := e.task("web", "Tail")
	body := strings.Repeat("é", web.TaskLogTail) + "xy" // the tail starts at an odd offset
	e.writeLog(id, 1, body+"\xc3")
	p := e.get("/ui/tasks/" + id)
	m := regexp.MustCompile(`(?s)<pre id="log"[^>]*>(.*?)</pre>`).FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("the task's page has no log:\n%s", p.body)
	}
	if !utf8.ValidString(m[1]) || strings.ContainsRune(m[1], utf8.RuneError) || !strings.HasSuffix(m[1], "éxy") || !strings.HasPrefix(m[1], "é") {
		t.Errorf("the page's log tail is cut inside a character: starts %q, ends %q", m[1][:4], m[1][len(m[1])-4:])
	}
	if want := fmt.Sprintf("offset=%d", len(body)); !strings.Contains(p.body, want) {
		t.Errorf("the page's stream does not continue at the unfinished character (%s)", want)
	}
}

// TestEventStreamEndsWhenTheBrowserGoes: a stream's handler returns once
// its browser hangs up, whether it waits on changes alone or on a task's
// log too: the test server's Close, which waits for every handler, returns.
func TestEventStreamEndsWhenTheBrowserGoes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		taskLog bool
	}{
		{"changes", false},
		{"changes and a task's log", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, "")
			path := "/ui/events"
			if tc.taskLog {
				path += "?task=" + e.task("web", "Build")
			}
			e.get("/ui/overview") // the session's cookie
			dog := progresstest.New(t, "the event stream's end")
			ctx, hangUp := context.WithCancel(context.Background())
			events := e.openEvents(ctx, path)
			next(t, dog, events, "retry")
			hangUp()
			for range events { // the browser's side ends
			}
			closed := make(chan struct{})
			go func() {
				defer close(closed)
				e.client.CloseIdleConnections()
				e.srv.Close()
			}()
			select {
			case <-closed:
			case <-dog.Done():
				// Changes make the handler write to the closed
				// connection until a write fails and it returns, so
				// that Close returns and the test ends.
				for ended := false; !ended; {
					e.feed.Notify()
					select {
					case <-closed:
						ended = true
					default:
						runtime.Gosched()
					}
				}
				t.Fatalf("the stream's handler did not return after its browser went: %v", dog.Err())
			}
		})
	}
}
