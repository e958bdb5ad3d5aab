package main

import (
	"bytes"
	"database/sql"
	"fmt"
	"os"
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
	raw, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	var pageSize, pages int64
	if _, err := raw.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
	if err := raw.QueryRow("PRAGMA page_size").Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	if err := raw.QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xA5}, int(2*pageSize)), (pages/2)*pageSize); err != nil {
		t.Fatal(err)
	}
	f.Close()

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
