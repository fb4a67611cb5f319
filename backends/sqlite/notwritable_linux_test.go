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

// TestOpenReadOnlyFileSaysWhy: a file that cannot be written in a
// directory that can (another user's file of mode 0644; a read-only bind
// mount as root, whom modes do not stop) fails an open for writing with
// PermissionDenied naming the file. SQLite opened it read-only without a
// word, so the open succeeded and the first push failed with "attempt to
// write a readonly database", and a worker stopped with it.
func TestOpenReadOnlyFileSaysWhy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	d := openAt(t, path, "")
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := syscall.Mount(path, path, "", syscall.MS_BIND, ""); err != nil {
			t.Skipf("root cannot bind-mount here (%v): permissions would not stop it", err)
		}
		t.Cleanup(func() { _ = syscall.Unmount(path, 0) })
		if err := syscall.Mount(path, path, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			t.Skipf("cannot make a read-only bind mount (%v)", err)
		}
	} else if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	d2, err := New(t.Context(), path, Options{})
	if err == nil {
		d2.Close()
		t.Fatal("open for writing of a file that cannot be written succeeded; want PermissionDenied")
	}
	wantCode(t, err, errcode.PermissionDenied)
	for _, s := range []string{path + " cannot be written", "read commands"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
	r, err := New(t.Context(), path, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of the file: %v", err)
	}
	r.Close()
}
