package storetest

import (
	"bytes"
	"database/sql"
	"os"
	"testing"
)

// DamageTable overwrites the root page of table in the database at path,
// as a failing disk or a stray write would; the store may stay open.
func DamageTable(t testing.TB, path, table string) {
	t.Helper()
	pageSize := checkpoint(t, path)
	var root int64
	withRaw(t, path, func(db *sql.DB) error {
		return db.QueryRow("SELECT rootpage FROM sqlite_schema WHERE type = 'table' AND name = ?", table).Scan(&root)
	})
	scribble(t, path, (root-1)*pageSize, pageSize)
}

// DamageMiddle overwrites pages pages in the middle of the database file
// at path.
func DamageMiddle(t testing.TB, path string, pages int64) {
	t.Helper()
	pageSize := checkpoint(t, path)
	var count int64
	withRaw(t, path, func(db *sql.DB) error { return db.QueryRow("PRAGMA page_count").Scan(&count) })
	scribble(t, path, (count/2)*pageSize, pages*pageSize)
}

// checkpoint moves the WAL's pages into the database file, so that what is
// overwritten there is what a reader reads, and returns the page size.
func checkpoint(t testing.TB, path string) int64 {
	t.Helper()
	var size int64
	withRaw(t, path, func(db *sql.DB) error {
		if _, err := db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
			return err
		}
		return db.QueryRow("PRAGMA page_size").Scan(&size)
	})
	return size
}

// withRaw runs f on the database file opened directly, as sqlite3 would.
func withRaw(t testing.TB, path string, f func(*sql.DB) error) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := f(db); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
}

// scribble writes n bytes of junk at offset off of the file at path.
func scribble(t testing.TB, path string, off, n int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xA5}, int(n)), off); err != nil {
		t.Fatal(err)
	}
}
