package sqlite

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/jobq/jobq/errcode"
)

// TestOpenNotWritableSaysWhy: opening an existing file for writing where it
// cannot be written fails PermissionDenied, naming what to fix and that the
// read commands still work, not SQLite's "unable to open database file"
// under "create tables in" (Unavailable, so a worker kept retrying). As
// root, whom permissions do not stop, the directory is made a read-only
// bind mount; elsewhere it is made read-only (chmod 0555).
func TestOpenNotWritableSaysWhy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "q.db")
	d := openAt(t, path, "")
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	want := "is not writable"
	if os.Geteuid() == 0 {
		if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
			t.Skipf("root cannot bind-mount here (%v): permissions would not stop it", err)
		}
		t.Cleanup(func() { _ = syscall.Unmount(dir, 0) })
		if err := syscall.Mount(dir, dir, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			t.Skipf("cannot make a read-only bind mount (%v)", err)
		}
		want = "cannot be written (open " + path + ": read-only file system)"
	} else {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
		_ = os.Remove(path + "-shm") // a reader could reuse one; a writer must create it
	}
	_, err := New(t.Context(), path, Options{})
	wantCode(t, err, errcode.PermissionDenied)
	for _, s := range []string{want, "read commands"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
}
