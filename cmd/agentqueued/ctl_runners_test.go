package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

func TestCtlRunners(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := startDaemon(t, dir)
	addr := d.m.Addr()

	out := mustCtl(t, addr, "runner", "add", "build-1", "--label", "gpu", "--label", "linux,arm64", "--capacity", "2")
	token := regexp.MustCompile(`(?m)^token: (aqr_[A-Za-z0-9_-]{43})$`).FindStringSubmatch(out)
	if token == nil {
		t.Fatalf("runner add prints no token line:\n%s", out)
	}
	for _, want := range []string{"build-1  ACTIVE  gpu,linux,arm64  2", "This token is not shown again",
		"agentqueued runner --server URL --token-file FILE [--ca-file CA.pem]", "ctl runner remove build-1"} {
		if !strings.Contains(out, want) {
			t.Errorf("runner add lacks %q:\n%s", want, out)
		}
	}
	var added api.RunnerAdded
	if err := json.Unmarshal([]byte(mustCtl(t, addr, "--json", "runner", "add", "laptop")), &added); err != nil {
		t.Fatal(err)
	}
	if added.Runner.Name != "laptop" || !strings.HasPrefix(added.Token, "aqr_") || added.Token == token[1] {
		t.Fatalf("runner add --json: %+v", added)
	}

	// The daemon records each runner's requests; until runners connect,
	// the test records one in the database.
	st := storetest.OpenAt(t, filepath.Join(dir, "agentqueued.db"))
	seen := time.Now().UTC().Truncate(time.Second)
	if err := st.TouchRunner(context.Background(), "build-1", seen, "0.9.0", "127.0.0.2:40000"); err != nil {
		t.Fatal(err)
	}
	stamp := seen.Format(time.RFC3339)

	list := mustCtl(t, addr, "runner", "list")
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[0], "LAST_SEEN") ||
		!strings.Contains(lines[1], "build-1  ACTIVE  gpu,linux,arm64  2         0       "+stamp) ||
		!strings.Contains(lines[2], "laptop   ACTIVE  -                auto      0       -") {
		t.Fatalf("runner list:\n%s", list)
	}
	for _, secret := range []string{token[1], added.Token} {
		for _, args := range [][]string{{"runner", "list"}, {"--json", "runner", "list"}, {"--json", "runner", "show", "build-1"}} {
			if strings.Contains(mustCtl(t, addr, args...), secret) {
				t.Errorf("ctl %s shows a runner's token", strings.Join(args, " "))
			}
		}
	}
	show := mustCtl(t, addr, "runner", "show", "build-1")
	for _, want := range []string{"Name:       build-1", "State:      ACTIVE", "Labels:     gpu, linux, arm64",
		"Capacity:   2", "Last seen:  " + stamp, "Version:    0.9.0", "Address:    127.0.0.2:40000"} {
		if !strings.Contains(show, want) {
			t.Errorf("runner show lacks %q:\n%s", want, show)
		}
	}
	if show := mustCtl(t, addr, "runner", "show", "laptop"); !strings.Contains(show, "auto (as many runs as it has agents)") {
		t.Errorf("runner show of a runner of no capacity:\n%s", show)
	}

	if out := mustCtl(t, addr, "runner", "drain", "build-1"); !strings.Contains(out, "build-1  DRAINING") {
		t.Fatalf("runner drain:\n%s", out)
	}
	if out := mustCtl(t, addr, "--json", "runner", "show", "build-1"); !strings.Contains(out, `"state": "DRAINING"`) {
		t.Fatalf("runner show --json after the drain:\n%s", out)
	}
	if out := mustCtl(t, addr, "runner", "resume", "build-1"); !strings.Contains(out, "build-1  ACTIVE") {
		t.Fatalf("runner resume:\n%s", out)
	}
	if out := mustCtl(t, addr, "runner", "remove", "laptop"); !strings.Contains(out, "runner laptop removed with its agents; its token no longer works") {
		t.Fatalf("runner remove:\n%s", out)
	}
	if _, err := st.RunnerByTokenHash(context.Background(), models.RunnerTokenHash(added.Token)); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("the removed runner's token: %v", err)
	}

	refused := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"runner", "add", "build-1"}, 1, `runner "build-1" already exists`},
		{[]string{"runner", "add", "Build 2"}, 1, `name: runner name "Build 2"`},
		{[]string{"runner", "add", "r2", "--label", "has\x1b[2Jescape"}, 1, `labels[0]: label "has\x1b[2Jescape"`},
		{[]string{"runner", "add", "r2", "--capacity", "5000"}, 1, "capacity: must be from 0"},
		{[]string{"runner", "show", "ghost"}, 1, `runner "ghost" not found`},
		{[]string{"runner", "drain", "ghost"}, 1, `runner "ghost" not found`},
		{[]string{"runner", "remove", "laptop"}, 1, `runner "laptop" not found`},
		{[]string{"runner", "add"}, 2, "want NAME"},
		{[]string{"runner", "list", "extra"}, 2, "want no arguments"},
	}
	for _, tc := range refused {
		r := runCtl(t, addr, nil, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.msg) {
			t.Errorf("ctl %q: exit %d, stderr %q; want %d naming %q", tc.args, r.code, r.stderr, tc.code, tc.msg)
		}
		if strings.Contains(r.stderr, "\x1b") {
			t.Errorf("ctl %q prints a raw escape: %q", tc.args, r.stderr)
		}
	}
}
