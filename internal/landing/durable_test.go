package landing_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/landing"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/repo"
	"github.com/agentqueued/agentqueued/internal/store"
)

// heldDurability is the real store whose WaitDurable is held until release
// is closed; waited receives a signal at each call.
type heldDurability struct {
	*store.Store
	waited  chan struct{}
	release chan struct{}
}

func (h *heldDurability) WaitDurable(ctx context.Context) error {
	select {
	case h.waited <- struct{}{}:
	default:
	}
	<-h.release
	return h.Store.WaitDurable(ctx)
}

// TestAVerificationActsOnlyOnWhatIsOnDisk: a verification runs its checks
// (which act outside the daemon) only after what it read of its task is on
// disk, and not while the store's wait for that is held.
func TestAVerificationActsOnlyOnWhatIsOnDisk(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	marker := filepath.Join(t.TempDir(), "checked")
	id := e.verifying(models.BatchTask{Title: "T", TestCommands: []string{"touch " + marker}})
	held := &heldDurability{Store: e.st, waited: make(chan struct{}, 16), release: make(chan struct{})}
	ws, err := repo.New(repo.Config{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	l := landing.New(landing.Config{RunDir: t.TempDir(), Environ: os.Environ(), QAAgent: "qa",
		Clock: clocktest.NewFollowing()}, held, ws, &host{})
	t.Cleanup(func() { l.Shutdown(); l.Wait() })
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Verify(id)
	}()
	select {
	case <-held.waited:
	case <-done:
		t.Fatal("the verification ended without waiting for what it read to be on disk")
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the checks ran while the wait for the disk was held (%v)", err)
	}
	close(held.release)
	<-done
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the checks did not run: %v", err)
	}
	if tk := e.task(id); tk.Status != models.StatusCompleted {
		t.Fatalf("after the verification: %s %q", tk.Status, tk.StatusReason)
	}
}
