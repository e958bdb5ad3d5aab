package repo_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/repo"
)

// TestCheckSource: a LINK path must be a repository's top level, a CLONE
// URL must answer git ls-remote in bounded time; errors are invalid and
// name the field.
func TestCheckSource(t *testing.T) {
	t.Parallel()
	w, err := repo.New(repo.Config{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(t.TempDir(), "work")
	if err := os.MkdirAll(filepath.Join(work, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, work, "init", "-q")
	bare := filepath.Join(t.TempDir(), "o.git")
	if err := os.MkdirAll(bare, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, bare, "init", "-q", "--bare")
	plain := t.TempDir()

	// A server that accepts and never answers: the check gives up.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	silent := "http://" + ln.Addr().String() + "/x.git"

	tests := []struct {
		name string
		r    models.RepoConfig
		want string
	}{
		{"a working tree", models.RepoConfig{SourceType: models.RepoLink, SourcePath: work}, ""},
		{"a bare repository", models.RepoConfig{SourceType: models.RepoLink, SourcePath: bare}, ""},
		{"a plain directory", models.RepoConfig{SourceType: models.RepoLink, SourcePath: plain}, "repo.source_path: " + plain + " is not a git repository"},
		{"a subdirectory", models.RepoConfig{SourceType: models.RepoLink, SourcePath: filepath.Join(work, "sub")}, "is inside the repository"},
		{"a missing path", models.RepoConfig{SourceType: models.RepoLink, SourcePath: filepath.Join(plain, "x")}, "does not exist"},
		{"a URL that answers", models.RepoConfig{SourceType: models.RepoClone, URL: "file://" + bare}, ""},
		{"a URL that does not exist", models.RepoConfig{SourceType: models.RepoClone, URL: "file://" + plain + "/x.git"},
			"repo.url: file://" + plain + "/x.git does not answer `git ls-remote`: fatal:"},
		{"a URL that never answers", models.RepoConfig{SourceType: models.RepoClone, URL: silent}, "does not answer `git ls-remote`: no answer within 300ms"},
		{"init", models.RepoConfig{SourceType: models.RepoInit}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			timeout := time.Duration(0) // the default: the outcome does not depend on speed
			if tt.r.URL == silent {
				timeout = 300 * time.Millisecond
			}
			err := w.CheckSource(ctx, tt.r, timeout)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("CheckSource = %v; want invalid %q", err, tt.want)
			}
		})
	}
}
