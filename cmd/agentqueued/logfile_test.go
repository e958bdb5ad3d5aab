package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLogFile: --log-file writes the daemon's log to a file of its
// user's alone (mode 0600, created with its directories, an existing one
// appended to and narrowed), not to standard error; a file that cannot
// be opened stops the start naming the flag.
func TestLogFile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// prepare makes what is at the log file's path in dir before the
		// start; it returns the file's path.
		prepare func(t *testing.T, dir string) string
		// kept is what the file held before and must still begin with.
		kept string
		// refused, when set, is the start's error.
		refused string
	}{
		{"a new file in new directories", func(t *testing.T, dir string) string {
			return filepath.Join(dir, "logs", "aq", "agentqueued.log")
		}, "", ""},
		{"an existing file readable by others", func(t *testing.T, dir string) string {
			p := writeFile(t, dir, "agentqueued.log", "an earlier life\n")
			if err := os.Chmod(p, 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}, "an earlier life\n", ""},
		{"a path under a file", func(t *testing.T, dir string) string {
			return filepath.Join(writeFile(t, dir, "plain", ""), "agentqueued.log")
		}, "", "run: --log-file "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := tt.prepare(t, dir)
			d, err := startMain(t, nil, "run", "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0",
				"--log-file", path)
			if tt.refused != "" {
				if err == nil || ExitCode(err) != exitUsage || !strings.Contains(err.Error(), tt.refused+path) {
					t.Fatalf("start with --log-file %s: %v; want exit 2 and %q", path, err, tt.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := d.m.Close(); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("the log file's mode is %v, want 0600", fi.Mode().Perm())
			}
			if tt.kept == "" {
				if di, err := os.Stat(filepath.Dir(path)); err != nil || di.Mode().Perm() != 0o700 {
					t.Errorf("the log file's new directory: %v, %v; want mode 0700", di, err)
				}
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			log := string(b)
			if !strings.HasPrefix(log, tt.kept) || !strings.Contains(log, `msg="agentqueued listening"`) ||
				!strings.Contains(log, `msg="agentqueued stopped"`) {
				t.Errorf("the log file:\n%s", log)
			}
			if s := d.logs.String(); s != "" {
				t.Errorf("the daemon still logged to standard error:\n%s", s)
			}
		})
	}
}
