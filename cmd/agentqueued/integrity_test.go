package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// TestADamagedDatabaseStopsTheDaemon: the daemon reads its whole database
// once while it serves (not before, which made every start of a large
// database wait) and stops, saying so, when it is damaged.
func TestADamagedDatabaseStopsTheDaemon(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := startDaemon(t, dir)
	if err := d.m.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "agentqueued.db")
	st := storetest.OpenAt(t, path)
	storetest.Project(t, st, "p")
	var tasks []models.BatchTask
	for i := range 400 {
		tasks = append(tasks, models.BatchTask{Title: fmt.Sprintf("task %d with a title long enough to fill pages", i)})
	}
	storetest.Tasks(t, st, "p", tasks...)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	storetest.DamageMiddle(t, path, 2)

	d2, err := startMain(t, nil, "run", "--data-dir", dir, "--listen", "127.0.0.1:0")
	if err == nil {
		t.Log("the daemon started; its check must stop it")
		d2.stoppedWithError = true
		select {
		case err = <-d2.errc:
		case <-d2.watch.Done():
			t.Fatalf("the daemon serves a damaged database: %v\n%s", d2.watch.Err(), d2.logs)
		}
	}
	if err == nil || !strings.Contains(err.Error(), "the database is damaged") {
		t.Fatalf("Run = %v, want it to stop on the damaged database", err)
	}
}
