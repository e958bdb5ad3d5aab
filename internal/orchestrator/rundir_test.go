package orchestrator

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/models"
)

// TestRunDirectoryHoldsWhatTheRunUses: a run leaves its prompt and log in
// its task's private directory, and a state directory (private) only when
// its invocation uses one.
func TestRunDirectoryHoldsWhatTheRunUses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, typ string
		wantState bool
	}{
		{"command agent", "command", false},
		{"adapter that names its state directory", "claude", true},
		{"adapter that names none", "cursor", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, nil)
			h.o.adapters = agent.NewRegistry(agent.Command{}, stateAdapter{fakeAdapter{}}, noStateAdapter{fakeAdapter{}})
			h.agent("a1", tc.typ, "ok", nil)
			id := h.tasks(models.BatchTask{LocalID: "t", Title: "trivial"})["t"]
			h.start()
			h.waitStart()
			h.waitEnd()
			h.settle()
			dir := filepath.Join(h.o.cfg.RunDir, id)
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
				t.Fatalf("run directory %s: %v %v", dir, fi, err)
			}
			for _, name := range []string{"1.prompt", "1.log"} {
				if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode().Perm() != 0o600 {
					t.Fatalf("%s: %v %v", name, fi, err)
				}
			}
			fi, err := os.Stat(filepath.Join(dir, "1.state"))
			switch {
			case !tc.wantState && !os.IsNotExist(err):
				t.Fatalf("a run whose invocation uses no state directory has one: %v %v", fi, err)
			case tc.wantState && (err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700):
				t.Fatalf("state directory: %v %v", fi, err)
			}
		})
	}
}

// stateAdapter is fakeAdapter giving its agent a history file in the
// state directory, as aider's adapter does.
type stateAdapter struct{ fakeAdapter }

func (a stateAdapter) Invocation(rc agent.RunContext) (agent.Invocation, error) {
	inv, err := a.fakeAdapter.Invocation(rc)
	inv.Argv = append(inv.Argv, "--history", filepath.Join(rc.StateDir, "history"))
	return inv, err
}

// noStateAdapter is fakeAdapter under another type.
type noStateAdapter struct{ fakeAdapter }

func (noStateAdapter) Type() string { return "cursor" }

// TestUsesDir: files, an argument or an environment value naming the
// state directory make a run use it.
func TestUsesDir(t *testing.T) {
	t.Parallel()
	const dir = "/d/runs/t/1.state"
	for _, tc := range []struct {
		name string
		inv  agent.Invocation
		want bool
	}{
		{"nothing", agent.Invocation{Argv: []string{"/bin/true"}, Env: map[string]string{"A": "b"}}, false},
		{"files", agent.Invocation{Argv: []string{"x"}, Files: map[string]string{"mcp.json": "{}"}}, true},
		{"argument", agent.Invocation{Argv: []string{"x", "--history", dir + "/h"}}, true},
		{"environment", agent.Invocation{Argv: []string{"x"}, Env: map[string]string{"HIST": dir}}, true},
	} {
		if got := usesDir(tc.inv, dir); got != tc.want {
			t.Errorf("%s: usesDir = %v, want %v", tc.name, got, tc.want)
		}
	}
}
