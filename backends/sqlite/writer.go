package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// writer is the driver's one write connection. All write transactions of a
// driver run on it, one at a time (Driver.writeSem), so its statements are
// prepared once and reused: parsing SQL was most of the cost of a claim.
// Transactions are opened with BEGIN IMMEDIATE, which takes the file's
// write lock before anything is read.
type writer struct {
	conn        *sql.Conn
	stmts       map[string]*sql.Stmt
	busyTimeout time.Duration
	// gens caches, per queue, the record generation of the open write
	// transaction (recordGen); begin clears it.
	gens map[string]int64
}

// wtx is an open write transaction; its methods mirror *sql.Tx's. Its
// statements run without the caller's cancellation: they hold the write
// lock already, so they never wait, and each takes microseconds, while
// watching a cancelable context costs modernc.org/sqlite a goroutine per
// statement. Cancellation is honoured while waiting for the lock (BEGIN).
type wtx struct {
	w   *writer
	ctx context.Context
}

// stmt returns the prepared statement for query, preparing it on first use.
// Only called by the holder of writeSem.
func (w *writer) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if s, ok := w.stmts[query]; ok {
		return s, nil
	}
	s, err := w.conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	w.stmts[query] = s
	return s, nil
}

// Exec runs a statement in the transaction.
func (t wtx) Exec(query string, args ...any) (sql.Result, error) {
	s, err := t.w.stmt(t.ctx, query)
	if err != nil {
		return nil, err
	}
	return s.ExecContext(t.ctx, args...)
}

// Query runs a query in the transaction.
func (t wtx) Query(query string, args ...any) (*sql.Rows, error) {
	s, err := t.w.stmt(t.ctx, query)
	if err != nil {
		return nil, err
	}
	return s.QueryContext(t.ctx, args...)
}

// QueryRow runs a query expected to return at most one row.
func (t wtx) QueryRow(query string, args ...any) *sql.Row {
	s, err := t.w.stmt(t.ctx, query)
	if err != nil {
		// Surface the preparation error through Row.Scan.
		return t.w.conn.QueryRowContext(t.ctx, query, args...)
	}
	return s.QueryRowContext(t.ctx, args...)
}

// begin opens an immediate transaction, waiting up to the busy timeout for
// another process's write lock, or until ctx ends or the driver closes.
//
// The waiting is done here rather than by SQLite's busy handler, whose
// back-off grows to 100 ms sleeps: with several processes on one file, a
// process in such a sleep kept missing the lock between the others' short
// transactions (one of four claimer processes often got no work at all).
// Retrying every 0.1–2 ms shares the file fairly and keeps pickup latency
// low, for a negligible cost while waiting.
func (w *writer) begin(ctx context.Context, closing *driver.Closing) error {
	var (
		start time.Time
		pause = 100 * time.Microsecond
		timer *time.Timer
	)
	for {
		// BEGIN runs without the caller's cancellation: it does not block
		// (busy is returned at once and retried below), and an interrupt that
		// lands just after it succeeded would report an error while leaving
		// the connection inside a transaction, failing every later write.
		_, err := w.exec(context.WithoutCancel(ctx), "BEGIN IMMEDIATE")
		if err == nil {
			clear(w.gens)
			if cerr := ctx.Err(); cerr != nil {
				_, _ = w.exec(context.WithoutCancel(ctx), "ROLLBACK")
				return cerr
			}
			return nil
		}
		if !isBusy(err) {
			return err
		}
		if start.IsZero() {
			start = time.Now()
		} else if time.Since(start) >= w.busyTimeout {
			e := driver.Errorf(errcode.Unavailable,
				"sqlite: the file stayed locked by another connection for longer than busy_timeout=%v (a long transaction in another process?): %w",
				w.busyTimeout, err)
			// BEGIN never took the lock: nothing was written, and a push
			// sent again is not a possible duplicate.
			e.Applied = driver.NotApplied
			return e
		}
		if timer == nil {
			timer = time.NewTimer(pause)
			defer timer.Stop()
		} else {
			timer.Reset(pause)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-closing.Done():
			return closing.Err()
		case <-timer.C:
		}
		pause = min(2*pause, 2*time.Millisecond)
	}
}

// runGroup runs each request's fn in the transaction begin opened and
// commits, returning one result per request. With several requests, each
// runs inside a savepoint that is rolled back if its fn fails, so one
// request's failure leaves the others' changes in place. If the commit
// fails, every request fails with its error. The transaction is always
// ended, so the connection is never left inside one.
func (w *writer) runGroup(reqs []*writeReq) []error {
	ctx := context.Background() // see wtx: statements here never wait
	errs := make([]error, len(reqs))
	var fatal error
	if len(reqs) == 1 {
		r := reqs[0]
		errs[0] = r.fn(wtx{w, context.WithoutCancel(r.ctx)})
		fatal = errs[0]
	} else {
		for i, r := range reqs {
			if _, err := w.exec(ctx, "SAVEPOINT jobq_op"); err != nil {
				fatal = err
				break
			}
			errs[i] = r.fn(wtx{w, context.WithoutCancel(r.ctx)})
			if errs[i] != nil {
				if _, err := w.exec(ctx, "ROLLBACK TO jobq_op"); err != nil {
					fatal = err
					break
				}
			}
			if _, err := w.exec(ctx, "RELEASE jobq_op"); err != nil {
				fatal = err
				break
			}
		}
	}
	if fatal == nil {
		if _, err := w.exec(ctx, "COMMIT"); err != nil {
			fatal = err
		}
	}
	if fatal != nil {
		_, _ = w.exec(ctx, "ROLLBACK")
		for i := range errs {
			if len(reqs) > 1 || errs[i] == nil {
				errs[i] = fatal
			}
		}
	}
	return errs
}

func (w *writer) exec(ctx context.Context, query string) (sql.Result, error) {
	s, err := w.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return s.ExecContext(ctx)
}

func (w *writer) close() error {
	for _, s := range w.stmts {
		_ = s.Close()
	}
	return w.conn.Close()
}
