package sqlite

import (
	"context"
	"encoding/json"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

var _ driver.ResultDeleter = (*Driver)(nil)

// deleteResults deletes the records of the task IDs of the JSON list ?2
// in queue ?1, in every generation (an older one holds a copy that the
// newer hid), and returns the IDs' keys, once per deleted row.
var deleteResults = `DELETE FROM jobq_results WHERE rowid IN (
		WITH RECURSIVE ` + gensOf + `,
		ids(k) AS (SELECT DISTINCT CASE WHEN ` + canonicalSQL("value") + ` THEN unhex(value) ELSE value END FROM json_each(?2))
		SELECT r.rowid FROM ids CROSS JOIN gens CROSS JOIN jobq_results r
		WHERE r.queue = ?1 AND r.gen = gens.g AND r.task_id = ids.k)
	RETURNING task_id`

// DeleteResults implements driver.ResultDeleter: one write transaction
// per call, which deletes every generation's copy of each record.
func (d *Driver) DeleteResults(ctx context.Context, ids []string) (int64, error) {
	if err := d.closing.Check(ctx); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return 0, driver.Errorf(errcode.InvalidArgument, "sqlite: task IDs: %w", err)
	}
	var n int64
	err = d.writeTx(ctx, "delete results", func(tx wtx) error {
		rows, err := tx.Query(deleteResults, d.cfg.queue, string(list))
		if err != nil {
			return err
		}
		defer rows.Close()
		seen := map[string]bool{}
		for rows.Next() {
			var key any
			if err := rows.Scan(&key); err != nil {
				return err
			}
			seen[keyID(key)] = true
		}
		n = int64(len(seen))
		return rows.Err()
	})
	return n, err
}
