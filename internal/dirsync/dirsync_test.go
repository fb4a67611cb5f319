package dirsync

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func write(t *testing.T, path, data string, mtime time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

func TestCopy(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), t.TempDir()
	old := time.Now().Add(-time.Hour)
	write(t, filepath.Join(src, "a.txt"), "a1", old)
	write(t, filepath.Join(src, "sub", "b.txt"), "b1", old)
	write(t, filepath.Join(src, "skip.log"), "x", old)
	write(t, filepath.Join(src, "keep.log"), "k", old)
	write(t, filepath.Join(src, FlushFile), "", old)
	write(t, filepath.Join(dst, "preexisting"), "p", old)
	s := &Sync{src: src, dst: dst, o: Options{Exclude: []string{"*.log"}, Include: []string{"keep.*"}}, log: slog.New(slog.DiscardHandler)}
	if err := s.Copy(context.Background()); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"a.txt": "a1", "sub/b.txt": "b1", "keep.log": "k", "preexisting": "p"} {
		if got := read(t, filepath.Join(dst, p)); got != want {
			t.Errorf("%s: %q, want %q", p, got, want)
		}
	}
	for _, p := range []string{"skip.log", FlushFile} {
		if _, err := os.Stat(filepath.Join(dst, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was copied", p)
		}
	}
	// A changed file is copied again; an unchanged one is left alone.
	write(t, filepath.Join(src, "a.txt"), "a2", time.Now())
	write(t, filepath.Join(dst, "sub", "b.txt"), "edited at the destination", time.Now())
	if err := s.Copy(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dst, "a.txt")); got != "a2" {
		t.Errorf("changed file: %q, want a2", got)
	}
	if got := read(t, filepath.Join(dst, "sub", "b.txt")); got != "edited at the destination" {
		t.Errorf("a file newer at the destination was overwritten: %q", got)
	}
}

func TestDeleteAfterCopyAndStop(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), t.TempDir()
	s := Start(src, dst, Options{Interval: time.Hour, DeleteAfterCopy: true}, slog.New(slog.DiscardHandler))
	write(t, filepath.Join(src, "out.bin"), "data", time.Now())
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dst, "out.bin")); got != "data" {
		t.Errorf("final copy: %q", got)
	}
	if _, err := os.Stat(filepath.Join(src, "out.bin")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("source kept after copy with DeleteAfterCopy")
	}
}

func TestOptionsFromEnv(t *testing.T) {
	t.Parallel()
	o, err := OptionsFromEnv([]string{"AMLT_DIRSYNC_FREQ=1", "AMLT_DIRSYNC_FREQ=5", "AMLT_DELETE_AFTER_COPY=True", "AMLT_DIRSYNC_EXCLUDE=*.ckpt tmp/*"})
	if err != nil || o.Interval != 5*time.Second || !o.DeleteAfterCopy || len(o.Exclude) != 2 {
		t.Errorf("options %+v, %v", o, err)
	}
	if _, err := OptionsFromEnv([]string{"AMLT_DIRSYNC_FREQ=soon"}); err == nil {
		t.Error("a bad AMLT_DIRSYNC_FREQ was accepted")
	}
}
