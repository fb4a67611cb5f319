package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/driver"
)

var _ driver.ResultLister = (*Driver)(nil)

// listResultsSQL pages through the records of queue $1 by task ID (the
// key's order), after $2, with the filters $3 (a state, ” for all) and
// $4 (written since, NULL for all).
const listResultsSQL = `
SELECT task_id, state, updated_at, expires_at, data FROM {{s}}.results
WHERE queue = $1 AND task_id > $2 AND expires_at > now()
	AND ($3 = '' OR state = $3) AND ($4::timestamptz IS NULL OR updated_at >= $4)
ORDER BY task_id
LIMIT $5`

// ListResults implements driver.ResultLister: keyset pages of the
// records' key, the cursor being the last task ID of a full page.
func (d *Driver) ListResults(ctx context.Context, f driver.ResultFilter, cursor string, limit int) ([]*driver.ResultRecord, string, error) {
	if err := d.closing.Err(); err != nil {
		return nil, "", err
	}
	since := pgtype.Timestamptz{Time: f.Since, Valid: !f.Since.IsZero()}
	rows, err := d.pool.Query(ctx, d.rsql.list, d.cfg.queue, cursor, string(f.State), since, limit)
	if err != nil {
		return nil, "", wrap(ctx, "list results", err)
	}
	recs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*driver.ResultRecord, error) {
		var r driver.ResultRecord
		var state string
		var updated, expires pgtype.Timestamptz
		if err := row.Scan(&r.ID, &state, &updated, &expires, &r.Data); err != nil {
			return nil, err
		}
		r.State = driver.ResultState(state)
		r.UpdatedAt, r.ExpiresAt = updated.Time, expires.Time
		return &r, nil
	})
	if err != nil {
		return nil, "", wrap(ctx, "list results", err)
	}
	if len(recs) < limit {
		return recs, "", nil
	}
	return recs, recs[len(recs)-1].ID, nil
}
