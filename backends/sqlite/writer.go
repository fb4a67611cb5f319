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

// wtx is an open write transaction; its methods mirror *sql.Tx's.
type wtx struct{ w *writer }

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
func (t wtx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	s, err := t.w.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return s.ExecContext(ctx, args...)
}

// QueryContext runs a query in the transaction.
func (t wtx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	s, err := t.w.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return s.QueryContext(ctx, args...)
}

// QueryRowContext runs a query expected to return at most one row.
func (t wtx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	s, err := t.w.stmt(ctx, query)
	if err != nil {
		// Surface the preparation error through Row.Scan.
		return t.w.conn.QueryRowContext(ctx, query, args...)
	}
	return s.QueryRowContext(ctx, args...)
}

// run executes fn between BEGIN IMMEDIATE and COMMIT, rolling back when fn or
// the commit fails. The rollback ignores ctx's cancellation so that the
// connection is never left inside a transaction.
func (w *writer) run(ctx context.Context, fn func(t wtx) error) error {
	if _, err := w.exec(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	err := fn(wtx{w})
	if err == nil {
		_, err = w.exec(ctx, "COMMIT")
	}
	if err != nil {
		_, _ = w.exec(context.WithoutCancel(ctx), "ROLLBACK")
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
