package sqlite

import (
	"bytes"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// pragmaInt reads an integer pragma through a connection of the driver's
// own pool, which got the URL's pragmas when it was opened.
func pragmaInt(t *testing.T, d *Driver, name string) int64 {
	t.Helper()
	var db *sql.DB
	if !d.As(&db) {
		t.Fatal("As(*sql.DB) failed")
	}
	var v int64
	if err := db.QueryRowContext(t.Context(), "PRAGMA "+name).Scan(&v); err != nil {
		t.Fatalf("PRAGMA %s: %v", name, err)
	}
	return v
}

func TestTunedPragmasReachConnections(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		query     string
		opts      Options
		cacheSize int64
		mmapSize  int64
	}{
		{name: "url", query: "cache_size=-65536&mmap_size=1048576", cacheSize: -65536, mmapSize: 1 << 20},
		{name: "url pages", query: "cache_size=5000", cacheSize: 5000, mmapSize: 0},
		{name: "url defaults", query: "", cacheSize: DefaultCacheSize, mmapSize: 0},
		{name: "options defaults", cacheSize: DefaultCacheSize, mmapSize: 0},
		{name: "options", opts: Options{CacheSize: -32768, MmapSize: 2 << 20}, cacheSize: -32768, mmapSize: 2 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "q.db")
			var d *Driver
			if strings.HasPrefix(tt.name, "options") {
				var err error
				if d, err = New(t.Context(), path, tt.opts); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = d.Close() })
			} else {
				d = openAt(t, path, tt.query)
			}
			// Several pool connections at once, so that more than one is
			// opened and each is checked.
			var db *sql.DB
			d.As(&db)
			conns := make([]*sql.Conn, 3)
			for i := range conns {
				c, err := db.Conn(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				conns[i] = c
			}
			for i, c := range conns {
				var cache, mmap int64
				if err := c.QueryRowContext(t.Context(), "PRAGMA cache_size").Scan(&cache); err != nil {
					t.Fatal(err)
				}
				if err := c.QueryRowContext(t.Context(), "PRAGMA mmap_size").Scan(&mmap); err != nil {
					t.Fatal(err)
				}
				if cache != tt.cacheSize || mmap != tt.mmapSize {
					t.Errorf("connection %d: cache_size %d mmap_size %d, want %d and %d", i, cache, mmap, tt.cacheSize, tt.mmapSize)
				}
			}
		})
	}
}

// TestSpaceGivenBackAfterDrain pushes and drains a fat backlog and checks
// that idle receives give the freed pages back to the file system, and that
// the queue works afterwards.
func TestSpaceGivenBackAfterDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes 20,000 fat tasks")
	}
	t.Parallel()
	b := setup(t, "queue=q")
	if got := pragmaInt(t, b.drv, "auto_vacuum"); got != 2 {
		t.Fatalf("a new file has auto_vacuum=%d, want 2 (incremental)", got)
	}
	idleSize := fileSize(t, b.path)

	const n, batch = 20000, 500
	body := bytes.Repeat([]byte("x"), 2000)
	for i := 0; i < n; i += batch {
		msgs := make([]*driver.Message, batch)
		for j := range msgs {
			msgs[j] = &driver.Message{ID: fmt.Sprintf("t%d", i+j), Body: body}
		}
		b.push(t, msgs...)
	}
	checkpoint(t, b.drv)
	peak := fileSize(t, b.path)
	for done := 0; done < n; {
		got := b.receive(t, 1000, time.Minute)
		if len(got) == 0 {
			t.Fatalf("queue empty after %d of %d", done, n)
		}
		leases := make([]driver.Lease, len(got))
		for i, r := range got {
			leases[i] = r.Lease
		}
		if errs := b.drv.Complete(b.ctx, driver.Completions(leases...)); errs != nil {
			t.Fatalf("complete: %v", errs)
		}
		done += len(got)
	}
	// Receives that find the queue empty give pages back, a bounded step
	// each; enough of them empty the free list.
	for i := 0; i < 200 && pragmaInt(t, b.drv, "freelist_count") >= reclaimMinPages; i++ {
		if got := b.receive(t, 1, time.Minute); len(got) != 0 {
			t.Fatalf("received %d from a drained queue", len(got))
		}
	}
	// What a user sees at this point, without a forced checkpoint: the last
	// steps may still be in the WAL.
	seen := fileSize(t, b.path) + fileSize(t, b.path+"-wal")
	checkpoint(t, b.drv)
	after := fileSize(t, b.path)
	t.Logf("file size: idle %d, peak %d, after the drain %d with WAL, %d checkpointed", idleSize, peak, seen, after)
	if seen > peak/4 {
		t.Errorf("file and WAL take %d bytes after the drain, peak was %d", seen, peak)
	}
	if free := pragmaInt(t, b.drv, "freelist_count"); free >= reclaimMinPages {
		t.Errorf("%d free pages left after the drain", free)
	}
	if after > peak/10 {
		t.Errorf("file is %d bytes after the drain, peak was %d: not given back", after, peak)
	}

	// The queue still works.
	b.push(t, msg("again"))
	got := b.receive(t, 10, time.Minute)
	if len(got) != 1 || got[0].ID != "again" {
		t.Fatalf("after the drain received %v", ids(got))
	}
	if errs := b.drv.Complete(b.ctx, driver.Completions(got[0].Lease)); errs != nil {
		t.Fatalf("complete: %v", errs)
	}
	if s := b.stats(t); s != (driver.Stats{}) {
		t.Fatalf("stats %+v after the last complete, want empty", s)
	}
}

// checkpoint copies the WAL into the file (and truncates the file to its
// page count), as SQLite's automatic checkpoints do, so that the file's
// size reflects the database.
func checkpoint(t *testing.T, d *Driver) {
	t.Helper()
	var db *sql.DB
	d.As(&db)
	if _, err := db.ExecContext(t.Context(), "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestExistingFileWithoutAutoVacuum: a file made without auto-vacuum (by an
// older jobq or another tool) is used as it is, with no implicit VACUUM,
// and the documented one-time conversion turns reclaiming on.
func TestExistingFileWithoutAutoVacuum(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "old.db")
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.ExecContext(t.Context(), "CREATE TABLE other (a)"); err != nil {
		t.Fatal(err)
	}
	open := func() *testBundle {
		return &testBundle{drv: openAt(t, path, "queue=q"), path: path, ctx: t.Context()}
	}
	b := open()
	if b.drv.autoVacuum || pragmaInt(t, b.drv, "auto_vacuum") != 0 {
		t.Fatalf("an existing file was switched to auto_vacuum=%d", pragmaInt(t, b.drv, "auto_vacuum"))
	}
	b.push(t, msg("a"))
	if got := b.receive(t, 1, time.Minute); len(got) != 1 {
		t.Fatalf("received %v", ids(got))
	}
	if got := b.receive(t, 1, time.Minute); len(got) != 0 { // reclaim: a no-op here
		t.Fatalf("received %v", ids(got))
	}
	if err := b.drv.Close(); err != nil {
		t.Fatal(err)
	}

	// The conversion docs/backends/sqlite.md gives, run while no worker
	// uses the file.
	if _, err := raw.ExecContext(t.Context(), "PRAGMA auto_vacuum = INCREMENTAL"); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.ExecContext(t.Context(), "VACUUM"); err != nil {
		t.Fatal(err)
	}
	b = open()
	if !b.drv.autoVacuum {
		t.Fatal("auto-vacuum is off after the conversion")
	}
	if s := b.stats(t); s.InFlight != 1 {
		t.Fatalf("stats %+v after the conversion, want the one message in flight", s)
	}
}

// TestNewFileLayout: a new file gets newPageSize pages, incremental
// auto-vacuum and WAL; an existing file keeps its page size.
func TestNewFileLayout(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	if got := pragmaInt(t, b.drv, "page_size"); got != newPageSize {
		t.Errorf("page_size %d, want %d", got, newPageSize)
	}
	if got := pragmaInt(t, b.drv, "auto_vacuum"); got != 2 {
		t.Errorf("auto_vacuum %d, want 2 (incremental)", got)
	}
	if got := pragmaInt(t, b.drv, "wal_autocheckpoint"); got != walCheckpointPages {
		t.Errorf("wal_autocheckpoint %d, want %d", got, walCheckpointPages)
	}
	var mode string
	if err := b.drv.db.QueryRowContext(b.ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode %q (%v), want wal", mode, err)
	}

	old := loadSchema0(t) // made with 4096-byte pages
	if got := pragmaInt(t, openAt(t, old, "queue=q"), "page_size"); got != 4096 {
		t.Errorf("existing file: page_size %d, want its own 4096", got)
	}
}
