package sqlite

import (
	"context"
	"database/sql"
)

// writer is the driver's one write connection. All write transactions of a
// driver run on it, one at a time (Driver.writeSem), so its statements are
// prepared once and reused: parsing SQL was most of the cost of a claim.
// Transactions are opened with BEGIN IMMEDIATE, which takes the file's
// write lock before anything is read.
type writer struct {
	conn  *sql.Conn
	stmts map[string]*sql.Stmt
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

// ExecContext runs a statement in the transaction.
func (t wtx) Exec(query string, args ...any) (sql.Result, error) {
	s, err := t.w.stmt(t.ctx, query)
	if err != nil {
		return nil, err
	}
	return s.ExecContext(t.ctx, args...)
}

// QueryContext runs a query in the transaction.
func (t wtx) Query(query string, args ...any) (*sql.Rows, error) {
	s, err := t.w.stmt(t.ctx, query)
	if err != nil {
		return nil, err
	}
	return s.QueryContext(t.ctx, args...)
}

// QueryRowContext runs a query expected to return at most one row.
func (t wtx) QueryRow(query string, args ...any) *sql.Row {
	s, err := t.w.stmt(t.ctx, query)
	if err != nil {
		// Surface the preparation error through Row.Scan.
		return t.w.conn.QueryRowContext(t.ctx, query, args...)
	}
	return s.QueryRowContext(t.ctx, args...)
}

// run executes fn between BEGIN IMMEDIATE and COMMIT, rolling back when fn or
// the commit fails. Only BEGIN, which may wait for another process's write
// lock, watches ctx; a transaction once started runs to its end, so the
// connection is never left inside one.
func (w *writer) run(ctx context.Context, fn func(t wtx) error) error {
	if _, err := w.exec(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	inner := context.WithoutCancel(ctx)
	err := fn(wtx{w, inner})
	if err == nil {
		_, err = w.exec(inner, "COMMIT")
	}
	if err != nil {
		_, _ = w.exec(inner, "ROLLBACK")
	}
	return err
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
