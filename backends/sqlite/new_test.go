package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// TestNewFromPath builds a queue from a path and Options, runs a task
// through it, and checks that the file stays usable after Close: a second
// driver on it sees the first one's work.
func TestNewFromPath(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "new.db")
	d, err := New(ctx, path, Options{Queue: "render", Poll: 5 * time.Millisecond, Synchronous: "FULL"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := d.Push(ctx, []*driver.Message{{ID: "t1", Body: []byte("a")}, {ID: "t2", Body: []byte("b")}}); err != nil {
		t.Fatalf("push: %v", err)
	}
	got, err := d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: time.Second})
	if err != nil || len(got) != 1 || got[0].ID != "t1" {
		t.Fatalf("receive = %v, %v; want t1", got, err)
	}
	if errs := d.Complete(ctx, driver.Completions(got[0].Lease)); errs != nil {
		t.Fatalf("complete: %v", errs)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := New(ctx, path, Options{Queue: "render"})
	if err != nil {
		t.Fatalf("New on the same file after Close: %v", err)
	}
	defer again.Close()
	st, err := again.Stats(ctx)
	if err != nil || st.Ready != 1 {
		t.Fatalf("stats after reopening = %+v, %v; want t2 still ready", st, err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name string
		path string
		opts Options
		want string
		code errcode.Code
	}{
		{"empty path", "", Options{}, "path is empty", errcode.InvalidArgument},
		{"huge messages", "a.db", Options{MaxMessageBytes: 1 << 30}, "MaxMessageBytes", errcode.InvalidArgument},
		{"negative poll", "a.db", Options{Poll: -time.Second}, "Poll", errcode.InvalidArgument},
		{"bad synchronous", "a.db", Options{Synchronous: "off"}, "Synchronous", errcode.InvalidArgument},
		{"cache too large", "a.db", Options{CacheSize: 1 << 30}, "CacheSize", errcode.InvalidArgument},
		{"negative mmap", "a.db", Options{MmapSize: -1}, "MmapSize", errcode.InvalidArgument},
		{"missing directory", "nodir/a.db", Options{}, "does not exist", errcode.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := tt.path
			if path != "" {
				path = filepath.Join(dir, path)
			}
			d, err := New(t.Context(), path, tt.opts)
			if err == nil {
				d.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || errcode.Of(err) != tt.code {
				t.Fatalf("New(%q, %+v) = %v; want a %v error containing %q", path, tt.opts, err, tt.code, tt.want)
			}
		})
	}
}
