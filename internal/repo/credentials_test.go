package repo_test

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/repo"
	"github.com/agentqueued/agentqueued/internal/repo/githubtest"
)

// secretURL is a repository URL with credentials, as an older daemon
// accepted it.
const secretURL = "https://user:tok3n-s3cret@127.0.0.1:1/owner/x.git"

// recordingGitScript records each of its invocations in the file "calls"
// beside the path it was run by, then runs git. TestMain writes it before
// any test runs: writing an executable while a parallel test forks makes
// exec fail with "text file busy".
var recordingGitScript string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "repo-test-bin")
	if err != nil {
		panic(err)
	}
	recordingGitScript = filepath.Join(dir, "git")
	if err := os.WriteFile(recordingGitScript, []byte("#!/bin/sh\necho \"$*\" >> \"$(dirname \"$0\")/calls\"\nexec git \"$@\"\n"), 0o755); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// recordingGit returns a git executable that records its invocations, and
// the file it records them in.
func recordingGit(t *testing.T) (exe, calls string) {
	t.Helper()
	dir := t.TempDir()
	exe, calls = filepath.Join(dir, "git"), filepath.Join(dir, "calls")
	if err := os.Symlink(recordingGitScript, exe); err != nil {
		t.Fatal(err)
	}
	return exe, calls
}

// TestCredentialURLIsNeverUsed: a project whose stored repo.url carries
// credentials (an older daemon accepted them) is refused by every
// operation before any git runs, with an error that names the project and
// what to do and shows the URL redacted.
func TestCredentialURLIsNeverUsed(t *testing.T) {
	t.Parallel()
	p := models.Project{ID: "legacy", Repo: &models.RepoConfig{ID: "legacy", ProjectID: "legacy",
		SourceType: models.RepoClone, URL: secretURL, DefaultBranch: "main"}}
	task := models.Task{ID: "bold-orbit", ProjectID: "legacy", Title: "Fix it"}
	agent := models.Agent{ID: "a1"}
	ops := []struct {
		name string
		run  func(ctx context.Context, w *repo.Workspaces, src string) error
	}{
		{"prepare", func(ctx context.Context, w *repo.Workspaces, _ string) error {
			_, err := w.Prepare(ctx, agent, p, task)
			return err
		}},
		{"stage", func(ctx context.Context, w *repo.Workspaces, src string) error {
			_, err := w.Stage(ctx, p, task, src)
			return err
		}},
		{"diff", func(ctx context.Context, w *repo.Workspaces, src string) error {
			_, err := w.Diff(ctx, p, task, src)
			return err
		}},
		{"push", func(ctx context.Context, w *repo.Workspaces, src string) error {
			_, _, err := w.PushBranch(ctx, p, task, src)
			return err
		}},
		{"deliver", func(ctx context.Context, w *repo.Workspaces, src string) error {
			_, err := w.Deliver(ctx, p, task, src)
			return err
		}},
		{"cleanup", func(ctx context.Context, w *repo.Workspaces, src string) error {
			return w.Cleanup(ctx, p, task, src, true)
		}},
		{"hook checkout", func(ctx context.Context, w *repo.Workspaces, _ string) error {
			_, done, err := w.HookCheckout(ctx, p)
			if done != nil {
				done()
			}
			return err
		}},
	}
	t.Run("control: the recording git records", func(t *testing.T) {
		t.Parallel()
		exe, calls := recordingGit(t)
		w, err := repo.New(repo.Config{BaseDir: t.TempDir(), Git: exe})
		if err != nil {
			t.Fatal(err)
		}
		clean := models.Project{ID: "clean", Repo: &models.RepoConfig{SourceType: models.RepoClone, URL: bareOrigin(t)}}
		clean.ApplyDefaults()
		if _, err := w.Prepare(ctx, agent, clean, task); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(calls); err != nil || !strings.Contains(string(b), "clone") {
			t.Errorf("calls %q, %v", b, err)
		}
	})
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			t.Parallel()
			exe, calls := recordingGit(t)
			w, err := repo.New(repo.Config{BaseDir: t.TempDir(), Git: exe})
			if err != nil {
				t.Fatal(err)
			}
			err = op.run(ctx, w, filepath.Join(t.TempDir(), "checkout"))
			msg := models.ErrorMessageOf(err)
			switch {
			case err == nil:
				t.Fatal("the project's URL with credentials was used")
			case models.ErrorCodeOf(err) != models.CodeInvalid:
				t.Errorf("code %s, want invalid: %v", models.ErrorCodeOf(err), err)
			case strings.Contains(err.Error(), "tok3n"):
				t.Errorf("the error shows the credentials: %v", err)
			case !strings.Contains(msg, "project legacy") || !strings.Contains(msg, "https://***@127.0.0.1:1/owner/x.git") ||
				!strings.Contains(msg, "github.token") || !strings.Contains(msg, "SSH"):
				t.Errorf("the error does not name the project, the redacted URL and what to do: %s", msg)
			}
			if b, err := os.ReadFile(calls); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("git ran: %s", b)
			}
		})
	}
}

// TestOriginMismatchHidesCredentials: a checkout whose origin an older
// daemon left with credentials is refused without showing them.
func TestOriginMismatchHidesCredentials(t *testing.T) {
	t.Parallel()
	w, err := repo.New(repo.Config{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	origin := bareOrigin(t)
	p := models.Project{ID: "p", Repo: &models.RepoConfig{SourceType: models.RepoClone, URL: origin}}
	p.ApplyDefaults()
	ws, err := w.Prepare(ctx, models.Agent{ID: "a1"}, p, models.Task{ID: "bold-orbit", ProjectID: "p", Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	// The checkout's origin, as an older daemon left it, holds credentials.
	git(t, ws.Dir, "remote", "set-url", "origin", "https://user:tok3n-s3cret@127.0.0.1:1/owner/x.git")
	w.Release(ws)
	_, err = w.Prepare(ctx, models.Agent{ID: "a1"}, p, models.Task{ID: "bold-orbit", ProjectID: "p", Title: "t"})
	if err == nil {
		t.Fatal("a checkout of another origin was used")
	}
	if strings.Contains(err.Error(), "tok3n") || !strings.Contains(err.Error(), "https://***@127.0.0.1:1/owner/x.git") {
		t.Errorf("the mismatch error does not redact the checkout's origin: %v", err)
	}
}

// TestCheckoutOriginLosesCredentials: a clone an older daemon made from a
// URL with credentials kept them in its configuration, which its agents
// read; once the project's URL is the same without them, Prepare removes
// them from the checkout and goes on.
func TestCheckoutOriginLosesCredentials(t *testing.T) {
	t.Parallel()
	const token = "ghs-t0ken-s3cret"
	gh := githubtest.New(githubtest.Options{Token: token, Logf: t.Logf})
	t.Cleanup(gh.Close)
	cloneURL := gh.CreateRepo("acme", "shop", "main")
	u, err := url.Parse(cloneURL)
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	w, err := repo.New(repo.Config{BaseDir: t.TempDir(), Credentials: repo.TokenCredentials(token, true, u.Hostname()),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	p := models.Project{ID: "shop", Repo: &models.RepoConfig{SourceType: models.RepoClone, URL: cloneURL}}
	p.ApplyDefaults()
	a, task := models.Agent{ID: "a1"}, models.Task{ID: "bold-orbit", ProjectID: "shop", Title: "t"}
	ws, err := w.Prepare(ctx, a, p, task)
	if err != nil {
		t.Fatal(err)
	}
	w.Release(ws)
	withToken := strings.Replace(cloneURL, "://", "://x-access-token:"+token+"@", 1)
	git(t, ws.Dir, "remote", "set-url", "origin", withToken)
	ws, err = w.Prepare(ctx, a, p, task)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	w.Release(ws)
	if cfg := read(t, filepath.Join(ws.Dir, ".git", "config")); strings.Contains(cfg, token) || !strings.Contains(cfg, cloneURL) {
		t.Errorf("the checkout's configuration:\n%s", cfg)
	}
	if !strings.Contains(logs.String(), "removed the credentials") || strings.Contains(logs.String(), token) {
		t.Errorf("log:\n%s", logs.String())
	}
}
