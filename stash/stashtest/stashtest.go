// Package stashtest checks a stash store against the contract of
// stash.Store. Every store's tests run it, and third-party stores can too:
//
//	func TestStore(t *testing.T) {
//		stashtest.Run(t, stashtest.Harness{
//			NewStore:  func(t testing.TB) stash.Store { ... a fresh, empty store ... },
//			Overwrite: func(t testing.TB, s stash.Store, name string, data []byte) { ... },
//		})
//	}
//
// The portable layer's use of a store (push, receive, poison, clean-up) is
// checked by conformance.RunStash.
package stashtest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/stash"
)

// Harness is what a store supplies to be checked.
type Harness struct {
	// NewStore returns a fresh, empty store that no other test uses (its
	// own directory, bucket prefix or container), closed by a t.Cleanup
	// the harness registers.
	NewStore func(t testing.TB) stash.Store
	// Overwrite replaces the bytes of the object named name in s behind
	// the store's back, creating it when missing, as a tampering or buggy
	// writer would.
	Overwrite func(t testing.TB, s stash.Store, name string, data []byte)
	// Mux opens a store's Location again, as a receiver does with a
	// reference; nil means stash.DefaultURLMux. A test whose stores need
	// credentials the environment lacks registers a configured opener on
	// a mux of its own.
	Mux *stash.URLMux
}

// Run runs every check as a parallel subtest of t.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.NewStore == nil || h.Overwrite == nil {
		t.Fatal("stashtest: Harness.NewStore and Harness.Overwrite must be set")
	}
	for _, tc := range checks {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, h, h.NewStore(t))
		})
	}
}

var checks = []struct {
	name string
	run  func(t *testing.T, h Harness, s stash.Store)
}{
	{"PutGetLoad", func(t *testing.T, h Harness, s stash.Store) {
		data := bytes.Repeat([]byte("0123456789abcdef"), 300_000) // 4.8 MB
		obj, err := s.Put(t.Context(), data)
		if err != nil {
			t.Fatal(err)
		}
		if obj.SHA256 != stash.Sum(data) || obj.Size != int64(len(data)) || obj.URL != s.Location()+"/"+obj.SHA256 {
			t.Fatalf("Put = %+v, want name %s size %d under %s", obj, stash.Sum(data), len(data), s.Location())
		}
		got, err := stash.Load(t.Context(), s, obj.URL, obj.SHA256, obj.Size)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Load: %d bytes, %v; want the %d bytes put", len(got), err, len(data))
		}
	}},
	{"PutIsCreateOnlyAndIdempotent", func(t *testing.T, h Harness, s stash.Store) {
		data := []byte(`{"version": 1}`)
		first, err := s.Put(t.Context(), data)
		if err != nil {
			t.Fatal(err)
		}
		// The same bytes again, and concurrently: one object, no error,
		// and none of these Puts claims to have created it (a refused
		// push would delete an object that other messages refer to).
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() {
				obj, err := s.Put(t.Context(), data)
				if want := (stash.Object{URL: first.URL, SHA256: first.SHA256, Size: first.Size}); err == nil && obj != want {
					err = fmt.Errorf("second Put = %+v, want %+v (not Created)", obj, want)
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
		h.Overwrite(t, s, first.SHA256, []byte("other"))
		if _, err := s.Put(t.Context(), data); err != nil {
			t.Fatal(err)
		}
		got, _ := s.Get(t.Context(), first.SHA256, -1)
		if string(got) != "other" {
			t.Errorf("Put replaced an existing object: now %q", got)
		}
	}},
	{"ReplaceSwitchesWhole", func(t *testing.T, h Harness, s stash.Store) {
		r, err := stash.ReplacerOf(s)
		if err != nil {
			t.Fatal(err)
		}
		name := stash.Sum([]byte("a pointer"))
		for _, data := range []string{"first", "second, longer than the first"} {
			if err := r.Replace(t.Context(), name, []byte(data)); err != nil {
				t.Fatal(err)
			}
			got, err := s.Get(t.Context(), name, -1)
			if err != nil || string(got) != data {
				t.Fatalf("Get after Replace(%q) = %q, %v", data, got, err)
			}
		}
		if err := r.Replace(t.Context(), "not-a-digest", []byte("x")); errcode.Of(err) != errcode.InvalidArgument {
			t.Errorf("Replace with a bad name = %v, want InvalidArgument", err)
		}
		if err := s.Delete(t.Context(), name); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(t.Context(), name, -1); errcode.Of(err) != errcode.NotFound {
			t.Errorf("Get after Delete = %v, want NotFound", err)
		}
	}},
	{"ChecksumMismatch", func(t *testing.T, h Harness, s stash.Store) {
		obj, err := s.Put(t.Context(), []byte("original"))
		if err != nil {
			t.Fatal(err)
		}
		h.Overwrite(t, s, obj.SHA256, []byte("tampered"))
		_, err = stash.Load(t.Context(), s, obj.URL, obj.SHA256, obj.Size)
		expect(t, err, errcode.InvalidArgument, "SHA-256")
		h.Overwrite(t, s, obj.SHA256, []byte("short"))
		_, err = stash.Load(t.Context(), s, obj.URL, obj.SHA256, obj.Size)
		expect(t, err, errcode.InvalidArgument, "is 5 bytes")
	}},
	{"MissingObject", func(t *testing.T, h Harness, s stash.Store) {
		name := stash.Sum([]byte("never stored"))
		_, err := stash.Load(t.Context(), s, s.Location()+"/"+name, name, 12)
		expect(t, err, errcode.NotFound, "does not exist")
	}},
	{"RangedAndEmptyReads", func(t *testing.T, h Harness, s stash.Store) {
		obj, err := s.Put(t.Context(), []byte("0123456789"))
		if err != nil {
			t.Fatal(err)
		}
		for _, limit := range []int64{0, 1, 3, 10, 11, -1} {
			want := "0123456789"
			if limit >= 0 && limit < 10 {
				want = want[:limit]
			}
			if got, err := s.Get(t.Context(), obj.SHA256, limit); err != nil || string(got) != want {
				t.Errorf("Get limit %d = %q, %v; want %q", limit, got, err, want)
			}
		}
		empty, err := s.Put(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := stash.Load(t.Context(), s, empty.URL, empty.SHA256, 0); err != nil || len(got) != 0 {
			t.Errorf("Load of an empty object = %q, %v", got, err)
		}
	}},
	{"Delete", func(t *testing.T, h Harness, s stash.Store) {
		obj, err := s.Put(t.Context(), []byte("to delete"))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(t.Context(), obj.SHA256); err != nil {
			t.Fatal(err)
		}
		_, err = s.Get(t.Context(), obj.SHA256, -1)
		expect(t, err, errcode.NotFound, "does not exist")
		if err := s.Delete(t.Context(), obj.SHA256); err != nil {
			t.Errorf("deleting a missing object: %v, want no error", err)
		}
	}},
	{"NamesMustBeDigests", func(t *testing.T, h Harness, s stash.Store) {
		_, err := s.Get(t.Context(), "../../etc/passwd", -1)
		expect(t, err, errcode.InvalidArgument, "not a SHA-256")
		expect(t, s.Delete(t.Context(), "x"), errcode.InvalidArgument, "not a SHA-256")
		_, err = stash.Load(t.Context(), s, s.Location()+"/passwd", stash.Sum(nil), 0)
		expect(t, err, errcode.InvalidArgument, "does not end in a SHA-256")
		other := stash.Sum([]byte("a"))
		_, err = stash.Load(t.Context(), s, s.Location()+"/"+other, stash.Sum(nil), 0)
		expect(t, err, errcode.InvalidArgument, "carries checksum")
	}},
	{"ReopenByLocation", func(t *testing.T, h Harness, s stash.Store) {
		// A receiver opens the store from a reference's URL alone.
		obj, err := s.Put(t.Context(), []byte("found again"))
		if err != nil {
			t.Fatal(err)
		}
		loc, _, err := stash.Split(obj.URL)
		if err != nil {
			t.Fatal(err)
		}
		mux := h.Mux
		if mux == nil {
			mux = stash.DefaultURLMux()
		}
		again, err := mux.Open(t.Context(), loc)
		if err != nil {
			t.Fatalf("Open(%s): %v", loc, err)
		}
		defer again.Close()
		if again.Location() != s.Location() {
			t.Errorf("reopened store's Location = %s, want %s", again.Location(), s.Location())
		}
		got, err := stash.Load(t.Context(), again, obj.URL, obj.SHA256, obj.Size)
		if err != nil || string(got) != "found again" {
			t.Errorf("Load through the reopened store = %q, %v", got, err)
		}
	}},
	{"CanceledContext", func(t *testing.T, h Harness, s stash.Store) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := s.Put(ctx, []byte("never"))
		if c := errcode.Of(err); c != errcode.Canceled {
			t.Errorf("Put with a canceled context = %v (code %v), want Canceled", err, c)
		}
		_, err = s.Get(ctx, stash.Sum(nil), -1)
		if c := errcode.Of(err); c != errcode.Canceled {
			t.Errorf("Get with a canceled context = %v (code %v), want Canceled", err, c)
		}
	}},
}

// expect checks that err has code and mentions msg.
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

// Benchmark measures a put, a verified load and a delete of 5 MiB on s.
func Benchmark(b *testing.B, s stash.Store) {
	data := bytes.Repeat([]byte("0123456789abcdef"), (5<<20)/16)
	b.Run("put-load-delete-5MiB", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for i := 0; b.Loop(); i++ {
			d := append(data[:len(data):len(data)], byte(i), byte(i>>8), byte(i>>16))
			obj, err := s.Put(b.Context(), d)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := stash.Load(b.Context(), s, obj.URL, obj.SHA256, obj.Size); err != nil {
				b.Fatal(err)
			}
			if err := s.Delete(b.Context(), obj.SHA256); err != nil {
				b.Fatal(err)
			}
		}
	})
}
