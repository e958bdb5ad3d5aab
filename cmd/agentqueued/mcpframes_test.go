package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestMCPFramesFilter: valid frames pass on unchanged, blank lines are
// dropped, and each bad frame (not JSON, or longer than the limit) gets
// one -32700 answer instead of reaching the server.
func TestMCPFramesFilter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, passed string
		parseErrors      int
	}{
		{"valid", `{"id":1}` + "\n" + `{"id":2}` + "\r\n", `{"id":1}` + "\n" + `{"id":2}` + "\n", 0},
		{"blank lines", "\n  \n" + `{"id":1}` + "\n", `{"id":1}` + "\n", 0},
		{"no final newline", `{"id":1}`, `{"id":1}` + "\n", 0},
		{"bad between good", `{"id":1}` + "\n{oops\n" + `{"id":2}` + "\n", `{"id":1}` + "\n" + `{"id":2}` + "\n", 1},
		{"bad at the end", "[1,\n", "", 1},
		{"too long", `{"id":"` + strings.Repeat("x", 100) + `"}` + "\n" + `{"id":2}` + "\n", `{"id":2}` + "\n", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			f := newMCPFrames(io.NopCloser(strings.NewReader(tt.in)), &lockedWriter{w: &out}, 64)
			got, err := io.ReadAll(f)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.passed {
				t.Errorf("passed %q, want %q", got, tt.passed)
			}
			if n := strings.Count(out.String(), `"code":-32700`); n != tt.parseErrors {
				t.Errorf("%d parse errors, want %d: %s", n, tt.parseErrors, out.String())
			}
		})
	}
}
