package sqlite

import (
	"context"
	"database/sql"
)

// The producer's trace context (driver.Message.TraceParent) is the column
// trace_parent of jobq_messages, beside the body, so that the body keeps
// ai4s-jobq's bytes. Files made before it existed get it from
// migrateTrace. A requeue keeps it; a dead letter does not.

// migrateTrace adds the trace_parent column. It runs inside migrate's
// transaction.
func migrateTrace(ctx context.Context, tx *sql.Tx) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info('jobq_messages') WHERE name = 'trace_parent'`).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	_, err := tx.ExecContext(ctx, `ALTER TABLE jobq_messages ADD COLUMN trace_parent TEXT NOT NULL DEFAULT ''`)
	return err
}

// traceText reads the trace_parent column of a claimed row, which another
// tool may have written with any type: anything but text is no trace.
func traceText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return ""
}
