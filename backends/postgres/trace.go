package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// The producer's W3C trace context (driver.Message.TraceParent) is the
// column trace_parent of the messages table, NULL when the push was not
// traced, so that the body keeps ai4s-jobq's bytes. A requeue keeps it; a
// dead letter does not.
//
// The column is additive and independent of the numbered steps: migrate
// adds it to a schema that lacks it, whatever step the schema is at, so
// that it can join the history without taking a step number.

// ensureTraceColumn adds the trace_parent column when the schema's
// messages table lacks it. It runs in migrate's transaction, under its
// lock; adding a nullable column rewrites nothing.
func ensureTraceColumn(ctx context.Context, tx pgx.Tx, schema, quoted string) error {
	var has bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM information_schema.columns
		WHERE table_schema = $1 AND table_name = 'messages' AND column_name = 'trace_parent')`, schema).Scan(&has); err != nil {
		return err
	}
	if has {
		return nil
	}
	_, err := tx.Exec(ctx, `ALTER TABLE `+quoted+`.messages ADD COLUMN IF NOT EXISTS trace_parent text`)
	return err
}
