package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/driver"
)

var _ driver.ResultDeleter = (*Driver)(nil)

// DeleteResults implements driver.ResultDeleter: one statement per call.
func (d *Driver) DeleteResults(ctx context.Context, ids []string) (int64, error) {
	if err := d.closing.Err(); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, nil
	}
	q := "DELETE FROM " + pgx.Identifier{d.cfg.schema}.Sanitize() + ".results WHERE queue = $1 AND task_id = ANY($2::text[])"
	tag, err := d.pool.Exec(ctx, q, d.cfg.queue, ids)
	if err != nil {
		return 0, wrap(ctx, "delete results", err)
	}
	return tag.RowsAffected(), nil
}
