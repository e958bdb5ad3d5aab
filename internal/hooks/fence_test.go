package hooks_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// TestACommandStepNeedsTheLease: a hook's command runs in the project's
// hook checkout, which the daemon that takes the database over shares. A
// daemon whose lease is about to expire without a renewal starts no
// command: the step fails with the lease's error, and the command never
// ran.
func TestACommandStepNeedsTheLease(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const ttl = 30 * time.Second
	if err := h.st.AcquireLease(context.Background(), models.LeaseHolder{Owner: "a", Hostname: "host-a", PID: 1}, ttl); err != nil {
		t.Fatal(err)
	}
	ran := filepath.Join(t.TempDir(), "ran")
	h.project("web", func(p *models.Project) { p.Settings.HookCommands = []string{"touch " + ran} })
	hk := h.hook(`{"project_id":"web","name":"Touch","trigger":{"type":"manual"},` +
		`"context_steps":[{"type":"run_command","command":"touch ` + ran + `","skip_llm_if":"exit_code_zero"}],` +
		`"prompt_template":"x"}`)
	h.clock.Advance(ttl - time.Second) // renewals have failed: a second is left

	r := h.fire(hk.ID, models.HookFire{})
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("the hook's command ran although the lease was about to expire")
	}
	if r.Status != models.HookRunFailed || !strings.Contains(r.Error, "lease") {
		t.Fatalf("run %s: %q; want it failed on the lease", r.Status, r.Error)
	}
}
