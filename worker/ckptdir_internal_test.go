package worker

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTarDirRoundTrip: files, directories and links come back as they
// were; the marker files are left out; the size limit holds.
func TestTarDirRoundTrip(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src, "a", "b"), 0o755))
	must(os.WriteFile(filepath.Join(src, "a", "b", "f"), []byte("deep"), 0o600))
	must(os.WriteFile(filepath.Join(src, "top"), []byte("top"), 0o644))
	must(os.Symlink("a/b/f", filepath.Join(src, "link")))
	must(os.WriteFile(filepath.Join(src, CheckpointMarker), nil, 0o600))
	fp1, err := fingerprint(src)
	must(err)
	data, err := tarDir([]byte("head\n"), src, 1<<20)
	must(err)
	if !bytes.HasPrefix(data, []byte("head\n")) {
		t.Fatalf("archive does not start with the header")
	}
	dst := t.TempDir()
	must(untarDir(dst, data[len("head\n"):]))
	for name, want := range map[string]string{"a/b/f": "deep", "top": "top", "link": "deep"} {
		got, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(dst, CheckpointMarker)); !os.IsNotExist(err) {
		t.Errorf("the marker was archived (%v)", err)
	}
	// Markers come and go without changing the fingerprint; a write does.
	must(os.Remove(filepath.Join(src, CheckpointMarker)))
	if fp2, _ := fingerprint(src); fp2 != fp1 {
		t.Errorf("removing the marker changed the fingerprint")
	}
	must(os.WriteFile(filepath.Join(src, "top"), []byte("changed"), 0o644))
	if fp3, _ := fingerprint(src); fp3 == fp1 {
		t.Errorf("a changed file left the fingerprint as it was")
	}
	if _, err := tarDir(nil, src, 10); err == nil || !strings.Contains(err.Error(), "over the limit of 10 bytes") {
		t.Errorf("tarDir over the limit = %v; want an error naming it", err)
	}
}

// TestUntarStaysInside: a checkpoint cannot write outside its directory,
// by a path or through a link.
func TestUntarStaysInside(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	archive := func(entries ...tar.Header) []byte {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, h := range entries {
			h := h
			if h.Typeflag == tar.TypeReg {
				h.Size = 1
			}
			h.Mode = 0o600
			if err := tw.WriteHeader(&h); err != nil {
				t.Fatal(err)
			}
			if h.Typeflag == tar.TypeReg {
				tw.Write([]byte("x"))
			}
		}
		tw.Close()
		return buf.Bytes()
	}
	for name, data := range map[string][]byte{
		"dot-dot":  archive(tar.Header{Name: "../escaped", Typeflag: tar.TypeReg}),
		"absolute": archive(tar.Header{Name: filepath.Join(outside, "escaped"), Typeflag: tar.TypeReg}),
		"via link": archive(tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: outside}, tar.Header{Name: "l/escaped", Typeflag: tar.TypeReg}),
	} {
		dir := filepath.Join(t.TempDir(), "ckpt")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		err := untarDir(dir, data)
		if _, serr := os.Stat(filepath.Join(outside, "escaped")); serr == nil {
			t.Fatalf("%s: the archive wrote outside the directory", name)
		}
		if _, serr := os.Stat(filepath.Join(filepath.Dir(dir), "escaped")); serr == nil {
			t.Fatalf("%s: the archive wrote beside the directory", name)
		}
		if err == nil {
			t.Errorf("%s: untar succeeded; want an error", name)
		}
	}
}
