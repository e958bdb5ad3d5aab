package service

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/fleet"
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

// TestRunnersAreShownLive: ListRunners, GetRunner and Overview give each
// runner whether the hub has it connected, its last request — the hub's
// when later than the database's (written once a minute), else the
// database's (as after a restart) — and its agents' runs in progress.
func TestRunnersAreShownLive(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktest.New(at)
	st := storetest.Open(t, storetest.WithClock(clk))
	hub := fleet.New(fleet.Config{Clock: clk})
	svc := New(Config{Store: st, Runners: hub, Clock: clk})
	ctx := context.Background()
	for _, name := range []string{"build-1", "gpu"} {
		if _, _, err := svc.AddRunner(ctx, name, nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.RunnerHello(ctx, "build-1", models.RunnerHello{Version: "1",
		Agents: []models.RunnerAgent{{Name: "a", AgentType: "command"}}}, "127.0.0.2:1"); err != nil {
		t.Fatal(err)
	}
	hub.Seen("build-1", "1", "127.0.0.2:1")
	storetest.Project(t, st, "web")
	if _, _, err := st.ClaimTask(ctx, storetest.Task(t, st, "web", "work"), "build-1/a"); err != nil {
		t.Fatal(err)
	}
	// gpu was seen by the database only, an hour ago; build-1's hello is
	// written, its poll 30 s later only known to the hub.
	if err := st.TouchRunner(ctx, "gpu", at.Add(-time.Hour), "1", "127.0.0.3:1"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(30 * time.Second)
	hub.Seen("build-1", "", "127.0.0.2:1")
	clk.Advance(5 * time.Second)

	check := func(what string, rs []models.Runner) {
		t.Helper()
		if len(rs) != 2 {
			t.Fatalf("%s: %+v", what, rs)
		}
		b, g := rs[0], rs[1]
		if b.Name != "build-1" || !b.Connected || b.RunsInProgress != 1 || b.LastSeenAt == nil ||
			!b.LastSeenAt.Equal(at.Add(30*time.Second)) {
			t.Errorf("%s: build-1 %+v", what, b)
		}
		if g.Name != "gpu" || g.Connected || g.RunsInProgress != 0 || g.LastSeenAt == nil || !g.LastSeenAt.Equal(at.Add(-time.Hour)) {
			t.Errorf("%s: gpu %+v", what, g)
		}
	}
	rs, err := svc.ListRunners(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check("ListRunners", rs)
	o, err := svc.Overview(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check("Overview", o.Runners)
	b, err := svc.GetRunner(ctx, "build-1")
	if err != nil {
		t.Fatal(err)
	}
	g, err := svc.GetRunner(ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	check("GetRunner", []models.Runner{b, g})
	if _, err := svc.GetRunner(ctx, "ghost"); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Errorf("GetRunner of an unknown runner: %v", err)
	}
}
