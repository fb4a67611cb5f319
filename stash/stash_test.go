package stash_test

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/stash"
	"github.com/jobq/jobq/stash/stashtest"
)

// newFileStore opens a fresh directory store.
func newFileStore(t testing.TB) stash.Store {
	t.Helper()
	s, err := stash.Open(context.Background(), "file://"+filepath.ToSlash(t.TempDir())+"/objects")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestFileStore(t *testing.T) {
	t.Parallel()
	stashtest.Run(t, stashtest.Harness{
		NewStore: newFileStore,
		Overwrite: func(t testing.TB, s stash.Store, name string, data []byte) {
			u, err := url.Parse(s.Location())
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(filepath.FromSlash(u.Path), name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		},
	})
}

func expect(t *testing.T, err error, code errcode.Code, msg string) {
	t.Helper()
	if err == nil {
		t.Errorf("got no error, want %v saying %q", code, msg)
		return
	}
	if got := errcode.Of(err); got != code || !strings.Contains(err.Error(), msg) {
		t.Errorf("error %v (code %v), want code %v saying %q", err, got, code, msg)
	}
}

func TestOpenRejects(t *testing.T) {
	t.Parallel()
	tests := []struct{ url, msg string }{
		{"s3://bucket/x", "unknown scheme"},
		{"gs://bucket/x", "unknown scheme \"gs\"; registered: file"},
		{"file://otherhost/dir", "three slashes"},
		{"file:///tmp/x?mode=1", "query"},
		{"file://", "no directory"},
		{"%zz", "does not parse"},
	}
	for _, tc := range tests {
		_, err := stash.Open(context.Background(), tc.url)
		expect(t, err, errcode.InvalidArgument, tc.msg)
	}
}

// The file stash shared by two processes: one writes, the other reads,
// verifies and deletes, and the reverse.
func TestFileStoreAcrossProcesses(t *testing.T) {
	t.Parallel()
	loc := "file://" + filepath.ToSlash(t.TempDir())
	data := bytes.Repeat([]byte("x"), 3<<20)

	// This process writes; a child reads, verifies and deletes.
	s, err := stash.Open(context.Background(), loc)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := s.Put(t.Context(), data)
	if err != nil {
		t.Fatal(err)
	}
	out := child(t, "load-delete", obj.URL, obj.SHA256, strconv.FormatInt(obj.Size, 10))
	if out != "ok "+strconv.Itoa(len(data)) {
		t.Fatalf("child said %q", out)
	}
	if _, err := s.Get(t.Context(), obj.SHA256, -1); errcode.Of(err) != errcode.NotFound {
		t.Errorf("object still there after the child deleted it: %v", err)
	}

	// A child writes; this process reads it.
	parts := strings.Fields(child(t, "put", loc, "from the child"))
	if len(parts) != 3 {
		t.Fatalf("child said %q", parts)
	}
	size, _ := strconv.ParseInt(parts[2], 10, 64)
	got, err := stash.Load(t.Context(), s, parts[0], parts[1], size)
	if err != nil || string(got) != "from the child" {
		t.Fatalf("Load of the child's object = %q, %v", got, err)
	}
}

// child runs this test binary as a helper process (see TestHelperProcess).
func child(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), "JOBQ_STASH_HELPER="+strings.Join(args, "\x1f"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper process %v: %v\n%s", args, err, out)
	}
	// The test framework prints PASS after the helper's line.
	line, _, _ := strings.Cut(string(out), "\n")
	return line
}

// TestHelperProcess is the other process of TestFileStoreAcrossProcesses.
func TestHelperProcess(t *testing.T) {
	spec := os.Getenv("JOBQ_STASH_HELPER")
	if spec == "" {
		t.Skip("helper process for TestFileStoreAcrossProcesses")
	}
	args := strings.Split(spec, "\x1f")
	c := context.Background()
	switch args[0] {
	case "load-delete":
		loc, name, err := stash.Split(args[1])
		if err != nil {
			fail(err)
		}
		s, err := stash.Open(c, loc)
		if err != nil {
			fail(err)
		}
		size, _ := strconv.ParseInt(args[3], 10, 64)
		data, err := stash.Load(c, s, args[1], args[2], size)
		if err != nil {
			fail(err)
		}
		if err := s.Delete(c, name); err != nil {
			fail(err)
		}
		fmt.Printf("ok %d\n", len(data))
	case "put":
		s, err := stash.Open(c, args[1])
		if err != nil {
			fail(err)
		}
		obj, err := s.Put(c, []byte(args[2]))
		if err != nil {
			fail(err)
		}
		fmt.Printf("%s %s %d\n", obj.URL, obj.SHA256, obj.Size)
	}
	os.Exit(0)
}

func fail(err error) {
	fmt.Println("error:", err)
	os.Exit(1)
}

// TestURLMux: a program's own mux serves only what it registered, with the
// opener it registered; registering a scheme twice panics.
func TestURLMux(t *testing.T) {
	t.Parallel()
	var mux stash.URLMux
	if _, err := mux.Open(t.Context(), "file:///tmp/x"); errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), "unknown scheme") {
		t.Errorf("an empty mux opened file:// = %v", err)
	}
	var got *url.URL
	mux.Register("MEM", openerFunc(func(_ context.Context, u *url.URL) (stash.Store, error) {
		got = u
		return newFileStore(t), nil
	}))
	if !mux.ValidScheme("mem") || strings.Join(mux.Schemes(), ",") != "mem" {
		t.Errorf("schemes %v, want [mem]", mux.Schemes())
	}
	if _, err := mux.Open(t.Context(), "mem://box/prefix"); err != nil || got == nil || got.Host != "box" || got.Path != "/prefix" {
		t.Errorf("Open = %v, opener got %v", err, got)
	}
	if _, err := mux.Open(t.Context(), "mem://box/p?key=secret"); errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), "no parameters") {
		t.Errorf("Open with a query = %v, want InvalidArgument", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("registering mem twice did not panic")
		}
	}()
	mux.Register("mem", openerFunc(nil))
}

type openerFunc func(context.Context, *url.URL) (stash.Store, error)

func (f openerFunc) OpenStoreURL(ctx context.Context, u *url.URL) (stash.Store, error) {
	return f(ctx, u)
}

func BenchmarkStore(b *testing.B) {
	stashtest.Benchmark(b, newFileStore(b))
}
