package sqlite

import (
	"context"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

var _ driver.ResultLister = (*Driver)(nil)

// listGens lists the generations of queue ?1 that hold records.
const listGens = `WITH RECURSIVE ` + gensOf + ` SELECT json_group_array(g) FROM gens WHERE g IS NOT NULL`

// listResults pages through the records of queue ?1 in rowid order, after
// rowid ?2, up to ?3 rows (a range of the table's own b-tree: "+queue"
// keeps SQLite from reading the whole queue off its key index and sorting
// it by rowid for every page), each with whether a higher generation of the
// JSON list ?4 (listGens) holds a record of the same task (hidden: one
// seek in the key per generation above the row's).
const listResults = `WITH page AS (SELECT rowid AS rid, gen, task_id, state, updated_at, expires_at, data FROM jobq_results
		WHERE +queue = ?1 AND rowid > ?2 ORDER BY rowid LIMIT ?3)
	SELECT rid, task_id, CAST(state AS TEXT), CAST(updated_at AS INTEGER), CAST(expires_at AS INTEGER), CAST(data AS BLOB),
		EXISTS (SELECT 1 FROM json_each(?4) g CROSS JOIN jobq_results h ON h.queue = ?1 AND h.gen = g.value AND h.task_id = page.task_id
			WHERE g.value > page.gen)
	FROM page ORDER BY rid`

// ListResults implements driver.ResultLister: pages of the records in
// rowid order (the order they were first written), the cursor being the
// last rowid read. Hidden, expired and filtered-out records are skipped,
// so a page may hold fewer than limit.
func (d *Driver) ListResults(ctx context.Context, f driver.ResultFilter, cursor string, limit int) ([]*driver.ResultRecord, string, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, "", err
	}
	var after int64
	if cursor != "" {
		var err error
		if after, err = strconv.ParseInt(cursor, 10, 64); err != nil {
			return nil, "", driver.Errorf(errcode.InvalidArgument, "sqlite list results: cursor %q was not made by this backend", cursor)
		}
	}
	var gens string
	if err := d.db.QueryRowContext(ctx, listGens, d.cfg.queue).Scan(&gens); err != nil {
		return nil, "", d.wrap(ctx, "list results", err)
	}
	rows, err := d.db.QueryContext(ctx, listResults, d.cfg.queue, after, limit, gens)
	if err != nil {
		return nil, "", d.wrap(ctx, "list results", err)
	}
	defer rows.Close()
	now := micros(time.Now())
	since := int64(0)
	if !f.Since.IsZero() {
		since = micros(f.Since)
	}
	var out []*driver.ResultRecord
	n, last := 0, after
	for rows.Next() {
		var (
			r               driver.ResultRecord
			key             any
			state           string
			updated, expire int64
			hidden          bool
		)
		if err := rows.Scan(&last, &key, &state, &updated, &expire, &r.Data, &hidden); err != nil {
			return nil, "", d.wrap(ctx, "list results", err)
		}
		n++
		r.State = driver.ResultState(state)
		if hidden || expire <= now || f.State != "" && r.State != f.State || updated < since {
			continue
		}
		r.ID = keyID(key)
		r.UpdatedAt, r.ExpiresAt = fromMicros(updated), fromMicros(expire)
		out = append(out, &r)
	}
	if err := rows.Err(); err != nil {
		return nil, "", d.wrap(ctx, "list results", err)
	}
	if n < limit {
		return out, "", nil
	}
	return out, strconv.FormatInt(last, 10), nil
}

// keyID is the task ID of a task_id column value (taskKey's inverse).
func keyID(key any) string {
	switch k := key.(type) {
	case []byte:
		if len(k) == 16 {
			return hex.EncodeToString(k)
		}
		return string(k)
	case string:
		return k
	}
	return ""
}
