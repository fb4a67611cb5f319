package sqlite

import (
	"crypto/rand"
	"database/sql"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// walBytes empties the WAL (a truncating checkpoint), runs op, and returns
// the bytes of WAL frames op wrote: what its write transaction wrote
// while holding the file's write lock.
func walBytes(t *testing.T, d *Driver, op func()) int64 {
	t.Helper()
	var db *sql.DB
	if !d.As(&db) {
		t.Fatal("the driver gives no *sql.DB")
	}
	var busy, frames, copied int64
	if err := db.QueryRowContext(t.Context(), "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &copied); err != nil || busy != 0 {
		t.Fatalf("truncating checkpoint: busy %d, error %v", busy, err)
	}
	op()
	if err := db.QueryRowContext(t.Context(), "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &copied); err != nil {
		t.Fatal(err)
	}
	var pageSize int64
	if err := db.QueryRowContext(t.Context(), "PRAGMA page_size").Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	return frames * (pageSize + 24) // a frame is a 24-byte header and a page
}

// TestLargestMessageWriteFitsTheWAL: pushing and claiming a message of the
// default size limit each write less WAL than the driver keeps
// (journal_size_limit). Every other writer of the file waits while such a
// transaction writes: at the former 16 MiB limit a push or claim wrote
// about 17 MiB of frames each and, on a loaded machine, held the lock past
// the 5 s busy timeout, failing the other workers' settlements.
func TestLargestMessageWriteFitsTheWAL(t *testing.T) {
	t.Parallel()
	b := setup(t, "queue=large")
	limit := b.drv.Capabilities().MaxMessageBytes
	if limit != DefaultMaxMessageBytes {
		t.Fatalf("MaxMessageBytes %d, want the default %d", limit, DefaultMaxMessageBytes)
	}
	body := make([]byte, limit)
	_, _ = rand.Read(body)
	pushed := walBytes(t, b.drv, func() { b.push(t, &driver.Message{ID: "large", Body: body}) })
	var got []*driver.Received
	claimed := walBytes(t, b.drv, func() { got = b.receive(t, 1, time.Minute) })
	if len(got) != 1 || len(got[0].Body) != limit {
		t.Fatalf("received %d messages; want the %d-byte one", len(got), limit)
	}
	for what, n := range map[string]int64{"push": pushed, "claim": claimed} {
		if n > walSizeLimit {
			t.Errorf("the %s of a %d-byte message (the default limit) wrote %d bytes of WAL in one transaction, more than the %d the WAL is kept to: every other writer waits that long", what, limit, n, walSizeLimit)
		}
		t.Logf("%s of a %d-byte message: %d bytes of WAL", what, limit, n)
	}
}
