package service

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// TestRunnerTokenIsShownOnceAndOnlyItsHashStored: a runner's token is
// "aqr_" and 256 random bits in base64url, different for each runner; it
// finds its runner by its hash, and neither the token nor its random part
// is anywhere in the database's files.
func TestRunnerTokenIsShownOnceAndOnlyItsHashStored(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := storetest.Open(t, storetest.WithPath(filepath.Join(dir, storetest.FileName)))
	svc := New(Config{Store: st})
	ctx := context.Background()

	r, token, err := svc.AddRunner(ctx, "r1", []string{"gpu"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "r1" || r.State != models.RunnerActive || r.Capacity != 2 || len(r.Labels) != 1 {
		t.Fatalf("added %+v", r)
	}
	body, ok := strings.CutPrefix(token, "aqr_")
	if !ok || len(body) != 43 {
		t.Fatalf("token %q: want aqr_ and 43 characters", token)
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || len(raw) != 32 {
		t.Fatalf("token %q: %d bytes of base64url (%v), want 32", token, len(raw), err)
	}
	_, second, err := svc.AddRunner(ctx, "r2", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if second == token {
		t.Fatal("two runners were given the same token")
	}
	if got, err := st.RunnerByTokenHash(ctx, models.RunnerTokenHash(token)); err != nil || got.Name != "r1" {
		t.Fatalf("the runner of the token's hash: %+v %v", got, err)
	}
	if _, _, err := svc.AddRunner(ctx, "r1", nil, 0); models.ErrorCodeOf(err) != models.CodeConflict {
		t.Fatalf("adding r1 again: %v", err)
	}

	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, storetest.FileName+"*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("database files: %v %v", files, err)
	}
	hash := models.RunnerTokenHash(token)
	var sawHash bool
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{token, second, body, string(raw)} {
			if bytes.Contains(data, []byte(secret)) {
				t.Errorf("%s holds a runner's token", filepath.Base(f))
			}
		}
		sawHash = sawHash || bytes.Contains(data, []byte(hash))
	}
	if !sawHash {
		t.Errorf("no database file holds the token's hash: the search looked in the wrong files %v", files)
	}
}

func TestDrainAndResumeARunner(t *testing.T) {
	t.Parallel()
	svc := New(Config{Store: storetest.Open(t)})
	ctx := context.Background()
	if _, _, err := svc.AddRunner(ctx, "r1", nil, 0); err != nil {
		t.Fatal(err)
	}
	if r, err := svc.DrainRunner(ctx, "r1"); err != nil || r.State != models.RunnerDraining {
		t.Fatalf("drain: %+v %v", r, err)
	}
	if r, err := svc.GetRunner(ctx, "r1"); err != nil || r.State != models.RunnerDraining {
		t.Fatalf("after the drain: %+v %v", r, err)
	}
	if r, err := svc.ResumeRunner(ctx, "r1"); err != nil || r.State != models.RunnerActive {
		t.Fatalf("resume: %+v %v", r, err)
	}
	if err := svc.RemoveRunner(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if rs, err := svc.ListRunners(ctx); err != nil || len(rs) != 0 {
		t.Fatalf("after the removal: %+v %v", rs, err)
	}
	if _, err := svc.DrainRunner(ctx, "r1"); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("draining a removed runner: %v", err)
	}
}
