package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// hostileLines holds what an agent can write to fool a reviewer: erase
// the line (ESC[2K), move up a line (ESC[1A), the 8-bit CSI (U+009B, and
// as a raw byte), a right-to-left override and a carriage return that
// lets the rest of the line overwrite its start.
const hostileLines = "+\x1b[2K\x1b[1Aerased\n" +
	"+\u009b2Kc1\n" +
	"+raw\x9b2K\n" +
	"+x \u202e evil \u2066iso\u2069\n" +
	"+visible\rhidden\n" +
	"+kept\tcafé 日本 🎉\r\n"

// rawControls are the bytes and characters none of ctl's text output may
// carry as they are.
var rawControls = []string{"\x1b", "\u009b", "\x9b", "\u202e", "\u2066", "\u2069", "\rh"}

// shownControls are how ctl shows them instead. (The raw byte reaches
// ctl as is only in a log; JSON carries it as U+FFFD.)
var shownControls = []string{`\x1b[2K\x1b[1Aerased`, `\u009b2Kc1`, `x \u202e evil \u2066iso\u2069`,
	`visible\rhidden`, "café 日本 🎉"}

func TestTerminalText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, clean, text string }{
		{"plain", "café 日本 🎉 — ok", "café 日本 🎉 — ok", "café 日本 🎉 — ok"},
		{"layout", "a\tb\nc\r\nd", `a\tb\nc\r\nd`, "a\tb\nc\r\nd"},
		{"escape sequences", "\x1b[2K\x1b[1A\x07\x7f", `\x1b[2K\x1b[1A\a\x7f`, `\x1b[2K\x1b[1A\a\x7f`},
		{"C1", "\u0085\u009b\u009d", `\u0085\u009b\u009d`, `\u0085\u009b\u009d`},
		{"bidi", "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069", `\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069`,
			`\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069`},
		{"lone CR", "shown\rhidden\r", `shown\rhidden\r`, `shown\rhidden\r`},
		{"not UTF-8", "a\x9b\xff\xc3", `a\x9b\xff\xc3`, `a\x9b\xff\xc3`},
		{"replacement character kept", "\ufffd", "\ufffd", "\ufffd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := clean(tc.in); got != tc.clean {
				t.Errorf("clean(%q) = %q, want %q", tc.in, got, tc.clean)
			}
			if got := terminalText(tc.in); got != tc.text {
				t.Errorf("terminalText(%q) = %q, want %q", tc.in, got, tc.text)
			}
		})
	}
}

// TestCtlPrintsAgentTextVisibly: the diff, the log and the task (its
// title, result and events) an agent wrote reach the terminal with every
// control character shown, not acted on, in text and in --json; the
// JSON still decodes to the very text.
func TestCtlPrintsAgentTextVisibly(t *testing.T) {
	t.Parallel()
	diff := "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -0,0 +1,6 @@\n" + hostileLines
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.APIPrefix+"/tasks/evil/diff", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(api.TaskDiff{TaskID: "evil", Diff: diff}) //nolint:errcheck // a test's answer
	})
	mux.HandleFunc("GET "+api.APIPrefix+"/tasks/evil/logs", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, hostileLines) //nolint:errcheck // a test's answer
	})
	mux.HandleFunc("GET "+api.APIPrefix+"/tasks/evil", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(models.TaskDetail{ //nolint:errcheck // a test's answer
			Task:   models.Task{ID: "evil", ProjectID: "web", Title: hostileLines, Description: hostileLines, Status: models.StatusAwaitingApproval},
			Result: &models.Completion{Summary: hostileLines, FilesChanged: []string{"f\x1b[2K"}},
			Events: []models.EventRecord{{Event: models.EventAgentStarted, Actor: "agent\u202e", Reason: hostileLines}},
		})
	})
	mux.HandleFunc("POST "+api.APIPrefix+"/tasks/evil/approve", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusConflict)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "conflict", "message": hostileLines}}) //nolint:errcheck // a test's answer
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	for _, args := range [][]string{{"task", "diff", "evil"}, {"task", "logs", "evil"}, {"task", "show", "evil"}, {"task", "approve", "evil"}} {
		r := runCtl(t, addr, nil, args...)
		out := r.stdout + r.stderr
		for _, bad := range rawControls {
			if strings.Contains(out, bad) {
				t.Errorf("ctl %s prints %q as is:\n%s", strings.Join(args, " "), bad, out)
			}
		}
		for _, shown := range shownControls {
			if !strings.Contains(out, shown) {
				t.Errorf("ctl %s does not show %q:\n%s", strings.Join(args, " "), shown, out)
			}
		}
	}
	if out := mustCtl(t, addr, "task", "logs", "evil"); !strings.Contains(out, `+raw\x9b2K`) {
		t.Errorf("ctl task logs does not show a byte that is not UTF-8:\n%s", out)
	}
	if out := mustCtl(t, addr, "task", "diff", "evil"); !strings.Contains(out, "+kept\tcafé 日本 🎉\r\n") {
		t.Errorf("ctl task diff changed a line's tab or CRLF ending:\n%q", out)
	}

	for _, args := range [][]string{{"--json", "task", "diff", "evil"}, {"--json", "task", "show", "evil"}} {
		out := mustCtl(t, addr, args...)
		for _, bad := range rawControls {
			if strings.Contains(out, bad) {
				t.Errorf("ctl %s prints %q as is:\n%s", strings.Join(args, " "), bad, out)
			}
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("ctl %s is not JSON: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	var d api.TaskDiff
	if err := json.Unmarshal([]byte(mustCtl(t, addr, "--json", "task", "diff", "evil")), &d); err != nil || !strings.Contains(d.Diff, "\u202e evil") {
		t.Errorf("ctl --json task diff does not decode to the diff (%v): %q", err, d.Diff)
	}
}
