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
type idleWatch struct {
	mu      sync.Mutex
	conn    *sql.Conn // data_version is per connection
	valid   bool
	version int64
	nextDue int64 // Unix µs; 0 when the queue holds no messages
}

// nextVisible is the earliest time any message of the queue is visible,
// read from the claim index without touching the table.
const nextVisible = `SELECT MIN(visible_at) FROM jobq_messages INDEXED BY jobq_messages_claim WHERE queue = ?`

// mayClaim reports whether a message of queue may be claimable now.
func (w *idleWatch) mayClaim(ctx context.Context, queue string) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var v int64
	if err := w.conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
		return false, err
	}
	now := micros(time.Now())
	if w.valid && v == w.version && (w.nextDue == 0 || now < w.nextDue) {
		return false, nil
	}
	var due sql.NullInt64
	if err := w.conn.QueryRowContext(ctx, nextVisible, queue).Scan(&due); err != nil {
		return false, err
	}
	if due.Valid && due.Int64 <= now {
		w.valid = false
		return true, nil
	}
	w.valid, w.version, w.nextDue = true, v, due.Int64
	return false, nil
}
