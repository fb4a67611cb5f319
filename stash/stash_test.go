package stash_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"google.golang.org/api/option"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/stash"
)

// testBundle is one store under test plus a way to overwrite an object
// behind its back (to simulate tampering or a different writer).
type testBundle struct {
	store     stash.Store
	overwrite func(t testing.TB, name string, data []byte)
}

// fakeGCS starts an in-process fake-gcs-server with one bucket.
func fakeGCS(t testing.TB, bucket string) *fakestorage.Server {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1", Writer: ioDiscard{}})
	if err != nil {
		t.Fatalf("start fake-gcs-server: %v", err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: bucket})
	return srv
}

type ioDiscard struct{}

func (ioDiscard) Write(p []byte) (int, error) { return len(p), nil }

func setups() map[string]func(t testing.TB) testBundle {
	return map[string]func(t testing.TB) testBundle{
		"file": func(t testing.TB) testBundle {
			dir := t.TempDir()
			s, err := stash.Open(context.Background(), "file://"+filepath.ToSlash(dir)+"/objects")
			if err != nil {
				t.Fatal(err)
			}
			return testBundle{store: s, overwrite: func(t testing.TB, name string, data []byte) {
				if err := os.WriteFile(filepath.Join(dir, "objects", name), data, 0o600); err != nil {
					t.Fatal(err)
				}
			}}
		},
		"gcs": func(t testing.TB) testBundle {
			srv := fakeGCS(t, "bkt")
			s, err := stash.OpenGCS(context.Background(), "bkt", "/jobs/big/",
				option.WithEndpoint(srv.URL()+"/storage/v1/"), option.WithoutAuthentication(),
				storage.WithJSONReads(), option.WithHTTPClient(srv.HTTPClient()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return testBundle{store: s, overwrite: func(t testing.TB, name string, data []byte) {
				srv.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "bkt", Name: "jobs/big/" + name}, Content: data})
			}}
		},
	}
}

func TestStore(t *testing.T) {
	t.Parallel()
	for kind, setup := range setups() {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			tests := []struct {
				name string
				run  func(t *testing.T, b testBundle)
			}{
				{"put get load", func(t *testing.T, b testBundle) {
					data := bytes.Repeat([]byte("0123456789abcdef"), 300_000) // 4.8 MB
					obj, err := b.store.Put(ctx(t), data)
					if err != nil {
						t.Fatal(err)
					}
					if obj.SHA256 != stash.Sum(data) || obj.Size != int64(len(data)) || obj.URL != b.store.Location()+"/"+obj.SHA256 {
						t.Fatalf("Put = %+v, want name %s size %d under %s", obj, stash.Sum(data), len(data), b.store.Location())
					}
					got, err := stash.Load(ctx(t), b.store, obj.URL, obj.SHA256, obj.Size)
					if err != nil || !bytes.Equal(got, data) {
						t.Fatalf("Load: %d bytes, %v; want the %d bytes put", len(got), err, len(data))
					}
				}},
				{"put is create-only and idempotent", func(t *testing.T, b testBundle) {
					data := []byte(`{"version": 1}`)
					first, err := b.store.Put(ctx(t), data)
					if err != nil {
						t.Fatal(err)
					}
					// The same bytes again, and concurrently: one object, no error.
					var wg sync.WaitGroup
					errs := make(chan error, 8)
					for range 8 {
						wg.Go(func() {
							obj, err := b.store.Put(ctx(t), data)
							if err == nil && obj != first {
								err = fmt.Errorf("second Put = %+v, first %+v", obj, first)
							}
							errs <- err
						})
					}
					wg.Wait()
					close(errs)
					for err := range errs {
						if err != nil {
							t.Error(err)
						}
					}
					// Create-only: an existing object is not replaced.
					b.overwrite(t, first.SHA256, []byte("other"))
					if _, err := b.store.Put(ctx(t), data); err != nil {
						t.Fatal(err)
					}
					got, _ := b.store.Get(ctx(t), first.SHA256, -1)
					if string(got) != "other" {
						t.Errorf("Put replaced an existing object: now %q", got)
					}
				}},
				{"checksum mismatch", func(t *testing.T, b testBundle) {
					obj, err := b.store.Put(ctx(t), []byte("original"))
					if err != nil {
						t.Fatal(err)
					}
					b.overwrite(t, obj.SHA256, []byte("tampered"))
					_, err = stash.Load(ctx(t), b.store, obj.URL, obj.SHA256, obj.Size)
					expect(t, err, driver.InvalidArgument, "SHA-256")
					b.overwrite(t, obj.SHA256, []byte("short"))
					_, err = stash.Load(ctx(t), b.store, obj.URL, obj.SHA256, obj.Size)
					expect(t, err, driver.InvalidArgument, "is 5 bytes")
				}},
				{"missing object", func(t *testing.T, b testBundle) {
					name := stash.Sum([]byte("never stored"))
					_, err := stash.Load(ctx(t), b.store, b.store.Location()+"/"+name, name, 12)
					expect(t, err, driver.NotFound, "does not exist")
				}},
				{"delete", func(t *testing.T, b testBundle) {
					obj, err := b.store.Put(ctx(t), []byte("to delete"))
					if err != nil {
						t.Fatal(err)
					}
					if err := b.store.Delete(ctx(t), obj.SHA256); err != nil {
						t.Fatal(err)
					}
					_, err = b.store.Get(ctx(t), obj.SHA256, -1)
					expect(t, err, driver.NotFound, "does not exist")
					if err := b.store.Delete(ctx(t), obj.SHA256); err != nil {
						t.Errorf("deleting a missing object: %v, want no error", err)
					}
				}},
				{"names must be digests", func(t *testing.T, b testBundle) {
					_, err := b.store.Get(ctx(t), "../../etc/passwd", -1)
					expect(t, err, driver.InvalidArgument, "not a SHA-256")
					expect(t, b.store.Delete(ctx(t), "x"), driver.InvalidArgument, "not a SHA-256")
					_, err = stash.Load(ctx(t), b.store, b.store.Location()+"/passwd", stash.Sum(nil), 0)
					expect(t, err, driver.InvalidArgument, "does not end in a SHA-256")
					other := stash.Sum([]byte("a"))
					_, err = stash.Load(ctx(t), b.store, b.store.Location()+"/"+other, stash.Sum(nil), 0)
					expect(t, err, driver.InvalidArgument, "carries checksum")
				}},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.run(t, setup(t))
				})
			}
		})
	}
}

func ctx(t *testing.T) context.Context { return t.Context() }

func expect(t *testing.T, err error, code driver.Code, msg string) {
	t.Helper()
	if err == nil {
		t.Errorf("got no error, want %v saying %q", code, msg)
		return
	}
	if got := driver.CodeOf(err); got != code || !strings.Contains(err.Error(), msg) {
		t.Errorf("error %v (code %v), want code %v saying %q", err, got, code, msg)
	}
}

func TestOpenRejects(t *testing.T) {
	t.Parallel()
	tests := []struct{ url, msg string }{
		{"s3://bucket/x", "unknown scheme"},
		{"gs:///prefix", "names no bucket"},
		{"file://otherhost/dir", "three slashes"},
		{"file:///tmp/x?mode=1", "query"},
		{"file://", "no directory"},
		{"%zz", "does not parse"},
	}
	for _, tc := range tests {
		_, err := stash.Open(context.Background(), tc.url)
		expect(t, err, driver.InvalidArgument, tc.msg)
	}
}

// TestOpenGCSEmulatorHost opens gs:// by URL alone, reaching the emulator
// through STORAGE_EMULATOR_HOST as users of fake-gcs-server would.
func TestOpenGCSEmulatorHost(t *testing.T) {
	srv := fakeGCS(t, "emu")
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(srv.URL(), "http://"))
	s, err := stash.Open(context.Background(), "gs://emu/prefix")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Location() != "gs://emu/prefix" {
		t.Errorf("Location = %s", s.Location())
	}
	obj, err := s.Put(t.Context(), []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.GetObject("emu", "prefix/"+obj.SHA256); err != nil {
		t.Errorf("object not where expected: %v", err)
	}
	if got, err := stash.Load(t.Context(), s, obj.URL, obj.SHA256, obj.Size); err != nil || string(got) != "hello" {
		t.Errorf("Load = %q, %v", got, err)
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
	if _, err := s.Get(t.Context(), obj.SHA256, -1); driver.CodeOf(err) != driver.NotFound {
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

func BenchmarkStore(b *testing.B) {
	data := bytes.Repeat([]byte("0123456789abcdef"), (5<<20)/16) // 5 MiB
	for kind, setup := range setups() {
		b.Run(kind+"/put-load-delete-5MiB", func(b *testing.B) {
			bundle := setup(b).store
			b.SetBytes(int64(len(data)))
			for i := 0; b.Loop(); i++ {
				d := append(data[:len(data):len(data)], byte(i), byte(i>>8), byte(i>>16))
				obj, err := bundle.Put(b.Context(), d)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := stash.Load(b.Context(), bundle, obj.URL, obj.SHA256, obj.Size); err != nil {
					b.Fatal(err)
				}
				if err := bundle.Delete(b.Context(), obj.SHA256); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
