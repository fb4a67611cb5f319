package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// idleWatch tells a waiting receiver cheaply whether a claim could succeed,
// so that idle polling takes no write lock and scans nothing while the file
// is unchanged. After a look at the queue finds nothing visible, it
// remembers the file's PRAGMA data_version (which changes whenever another
// connection, in any process, commits) and the earliest visible_at (when a
// delayed message or an expired lease becomes claimable). Until one of the
// two changes, the answer is "no" for the cost of one pragma.
//
// Looking at the queue scans the order index past every message that is not
// visible, which is slow when hundreds of thousands are delayed. So that
// such a queue cannot make idle receivers burn CPU while another process
// keeps writing, a look that took d is not repeated for 10·d (at most
// about a tenth of a core per driver).
type idleWatch struct {
	mu       sync.Mutex
	conn     *sql.Conn // data_version is per connection
	valid    bool
	version  int64
	nextDue  int64 // Unix µs; 0 when the queue holds no messages
	nextLook time.Time

	// fewFree is set when the file had fewer than reclaimMinPages free at
	// data_version fewFreeVersion (vacuum.go).
	fewFree        bool
	fewFreeVersion int64

	// noSweep is set when no key sweep was running or due at data_version
	// noSweepVersion (keys.go).
	noSweep        bool
	noSweepVersion int64
}

const (
	// anyVisible stops at the first visible message in claim order.
	anyVisible = `SELECT EXISTS (SELECT 1 FROM jobq_messages INDEXED BY jobq_messages_order
		WHERE queue = ? AND (visible_at <= ? OR typeof(visible_at) IN ('text', 'blob')))`
	// nextVisible is the earliest time any message of the queue is visible
	// (a value another tool wrote as a real counts as its integer part).
	nextVisible = `SELECT CAST(MIN(visible_at) AS INTEGER) FROM jobq_messages INDEXED BY jobq_messages_order WHERE queue = ?`
)

// mayClaim reports whether a message of queue may be claimable now.
func (w *idleWatch) mayClaim(ctx context.Context, queue string) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var v int64
	if err := w.conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
		return false, err
	}
	now := time.Now()
	us := micros(now)
	if w.valid && v == w.version && (w.nextDue == 0 || us < w.nextDue) {
		return false, nil
	}
	if now.Before(w.nextLook) {
		return false, nil
	}
	var visible bool
	var due sql.NullInt64
	err := w.conn.QueryRowContext(ctx, anyVisible, queue, us).Scan(&visible)
	if err == nil && !visible {
		err = w.conn.QueryRowContext(ctx, nextVisible, queue).Scan(&due)
	}
	if err != nil {
		return false, err
	}
	w.nextLook = now.Add(10 * time.Since(now))
	if visible {
		w.valid = false
		return true, nil
	}
	w.valid, w.version, w.nextDue = true, v, due.Int64
	return false, nil
}
