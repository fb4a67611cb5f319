//go:build linux

// Package diskfull gives tests a filesystem that really fills up, or that
// is read-only: a small tmpfs mounted in a temporary directory. Mounting
// needs root; without it the helpers skip the test.
package diskfull

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the reader that pins the WAL (PinWAL)
)

// SmallDisk mounts a tmpfs of size bytes in a temporary directory and
// returns the directory; it skips the test where mounting is not allowed
// (not root).
func SmallDisk(t testing.TB, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting the test's tmpfs %s: %v", dir, err)
		}
	})
	return dir
}

// ReadOnly remounts the tmpfs SmallDisk mounted at dir read-only, so that
// nothing in it can be written, not even by root, until Writable.
func ReadOnly(t testing.TB, dir string) {
	t.Helper()
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Fatalf("remounting %s read-only: %v", dir, err)
	}
}

// Writable remounts the tmpfs at dir read-write again.
func Writable(t testing.TB, dir string) {
	t.Helper()
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT, ""); err != nil {
		t.Fatalf("remounting %s read-write: %v", dir, err)
	}
}

// Fill writes a file in dir until the filesystem is full, and returns its
// path: removing it frees the space.
func Fill(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return path
		}
	}
}

// PinWAL holds a read transaction on the jobq SQLite file at path until
// the returned function is called, so that the next write needs new space
// in the file and fails on a full disk. A write may otherwise reuse space
// the WAL file already holds: once the WAL is wholly checkpointed, the next
// writer starts it over from its beginning, over frames the file keeps.
// So PinWAL empties the WAL file (a truncating checkpoint), commits a write
// of its own (a reader that starts on an empty WAL does not stop the WAL
// starting over), then starts its read.
func PinWAL(t testing.TB, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	// A checkpoint that meets another under way (a writer's automatic
	// one) reports busy at once, without waiting: try again.
	for deadline := time.Now().Add(10 * time.Second); ; {
		var busy, logged, copied int
		err := db.QueryRow("PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logged, &copied)
		if err == nil && busy == 0 {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("emptying the WAL of %s: busy %d, %v", path, busy, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := db.Exec("CREATE TABLE IF NOT EXISTS diskfull_pin (n INTEGER); INSERT INTO diskfull_pin VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRow("SELECT count(*) FROM jobq_messages").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return func() {
		_ = tx.Rollback()
		_ = db.Close()
	}
}
