package repo

import (
	"context"
	"strings"
	"testing"
)

// TestGitErrorHidesCredentials: what a git error quotes (its arguments,
// what git printed) loses the credentials of URLs.
func TestGitErrorHidesCredentials(t *testing.T) {
	t.Parallel()
	w, err := New(Config{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = w.gitRaw(context.Background(), "", gitOutputCap, "ls-remote", "--", "https://user:tok3n-s3cret@127.0.0.1:1/x.git")
	if err == nil {
		t.Fatal("ls-remote of a closed port succeeded")
	}
	if strings.Contains(err.Error(), "tok3n") || !strings.Contains(err.Error(), "https://***@127.0.0.1:1/x.git") {
		t.Errorf("git error: %v", err)
	}
}
