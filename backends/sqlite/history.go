package sqlite

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq/driver"
)

var _ driver.ResultAggregator = (*Driver)(nil)

// The result history (driver.ResultAggregator) is three GROUP BY queries
// over the queue's records of the window, read in one transaction so that
// they agree. The records' details are JSON text in the data column:
// json_valid skips a damaged one (the JSON functions would fail the query
// on it), and SQLite caches a parsed document for the next json_extract
// on the same row. A record that a later generation hides (results.go) is
// counted too: that happens only to a task recorded again after about
// 1<<genShift others, and lasts until the purge.

// historyRecords is the window's final records with their details as
// text: ?1 queue, ?2 since, ?3 until (Unix µs), ?4 bucket (µs); {{where}}
// narrows them (the attempts and errors queries parse only the records that
// can count).
const historyRecords = `r AS (
	SELECT updated_at, state, task_id, j FROM (
		SELECT updated_at, state, task_id, CAST(data AS TEXT) AS j FROM jobq_results
		WHERE queue = ?1 AND updated_at >= ?2 AND updated_at < ?3
			AND state IN ('succeeded', 'dead-lettered', 'cancelled') {{where}})
	WHERE json_valid(j))`

// historyEnds counts the records by bucket, state and runtime bin
// (driver.RuntimeBin in SQL; rt is the runtime in milliseconds). It reads
// the start and finish without parsing the details: the encoding spells
// each top-level member once as "name": "value" (a quote inside a string
// is escaped, so the pattern matches nothing else), and this query reads
// every record of the window.
var historyEnds = `WITH r AS (
		SELECT updated_at, state, CAST(data AS BLOB) AS data FROM jobq_results
		WHERE queue = ?1 AND updated_at >= ?2 AND updated_at < ?3
			AND state IN ('succeeded', 'dead-lettered', 'cancelled')),
	t AS MATERIALIZED (SELECT (updated_at - ?2) / ?4 AS b, state,
		(julianday(` + memberSQL("finished") + `) - julianday(` + memberSQL("started") + `)) * 86400000.0 AS rt FROM r)
	SELECT b, state, CASE WHEN rt IS NULL OR rt < 0 THEN -1 WHEN rt < 100 THEN 0
		ELSE min(CAST(floor(2 * log2(rt / 100.0)) AS INTEGER) + 1, ` + maxRuntimeBinSQL + `) END AS bin,
		count(*), coalesce(max(rt), 0)
	FROM t GROUP BY b, state, bin`

// memberSQL is the string value of the details' top-level member name,
// found by its spelling (see historyEnds); NULL where there is none.
func memberSQL(name string) string {
	pat := `'"` + name + `": "'`
	at := `instr(data, ` + pat + `)`
	v := `CAST(substr(data, ` + at + ` + ` + strconv.Itoa(len(name)+5) + `, 40) AS TEXT)`
	return `CASE WHEN ` + at + ` > 0 THEN substr(` + v + `, 1, instr(` + v + `, '"') - 1) END`
}

// historyAttempts counts the attempts of the records' histories by the
// bucket of their end (of the record's time when it is unknown), outcome
// and environment (the label, else the host).
var historyAttempts = `WITH ` + strings.Replace(historyRecords, "{{where}}", `AND instr(data, '"attempts"') > 0`, 1) + `
	SELECT (coalesce(CAST((julianday(a.value ->> '$.end') - 2440587.5) * 86400000000.0 AS INTEGER), r.updated_at) - ?2) / ?4 AS b,
		coalesce(a.value ->> '$.outcome', '') AS outcome,
		coalesce(nullif(a.value ->> '$.env', ''), a.value ->> '$.host', '') AS env,
		count(*)
	FROM r, json_each(r.j, '$.attempts') a
	WHERE json_type(r.j, '$.attempts') = 'array' AND a.type = 'object' AND coalesce(a.value ->> '$.outcome', '') <> 'success'
	GROUP BY b, outcome, env`

// historyErrors groups the dead-lettered records by exit code and first
// line (driver.FirstLine in SQL), the largest ?5 groups, with up to ?6
// task IDs each, most recent first.
var historyErrors = `WITH ` + strings.Replace(historyRecords, "{{where}}", `AND state = 'dead-lettered'`, 1) + `,
	o AS (SELECT updated_at, task_id, CASE WHEN json_type(j, '$.exit_code') = 'integer' THEN j ->> '$.exit_code' END AS ec,
		ltrim(coalesce(CASE WHEN json_type(j, '$.output') = 'text' THEN j ->> '$.output' END, ''), ` + blanksSQL + `) AS out,
		ltrim(coalesce(CASE WHEN json_type(j, '$.error') = 'text' THEN j ->> '$.error' END, ''), ` + blanksSQL + `) AS err
		FROM r WHERE state = 'dead-lettered'),
	f AS (SELECT updated_at, task_id, ec, CASE WHEN out <> '' THEN out ELSE err END AS s FROM o),
	e AS (SELECT updated_at, task_id, ec,
		substr(rtrim(substr(s, 1, instr(s || char(10), char(10)) - 1), ` + blanksSQL + `), 1, ` + maxFirstLineSQL + `) AS line FROM f),
	g AS (SELECT ec, line, count(*) AS n, max(updated_at) AS last FROM e GROUP BY ec, line ORDER BY n DESC, last DESC LIMIT ?5),
	x AS (SELECT e.ec, e.line, e.task_id, row_number() OVER (PARTITION BY e.ec, e.line ORDER BY e.updated_at DESC) AS rn
		FROM e JOIN g ON e.ec IS g.ec AND e.line IS g.line)
	SELECT g.ec, g.line, g.n, g.last,
		CASE WHEN typeof(x.task_id) = 'blob' AND length(x.task_id) = 16 THEN lower(hex(x.task_id)) ELSE CAST(x.task_id AS TEXT) END
	FROM g LEFT JOIN x ON x.ec IS g.ec AND x.line IS g.line AND x.rn <= ?6
	ORDER BY g.n DESC, g.last DESC, x.rn`

// AggregateResults implements driver.ResultAggregator: a Rollable window
// from the rollups (rollup.go), any other from the records.
func (d *Driver) AggregateResults(ctx context.Context, p driver.HistoryParams) (*driver.History, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	if err := driver.CheckHistoryParams(p); err != nil {
		return nil, err
	}
	if p.Rollable() {
		return d.rollupHistory(ctx, p)
	}
	return d.scanHistory(ctx, p)
}

// scanHistory adds up the records of p's window.
func (d *Driver) scanHistory(ctx context.Context, p driver.HistoryParams) (*driver.History, error) {
	tx, err := d.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, d.wrap(ctx, "result history", err)
	}
	defer func() { _ = tx.Rollback() }()
	args := []any{d.cfg.queue, micros(p.Since), micros(p.Until), p.Bucket.Microseconds(), max(p.ErrorGroups, 0), max(p.Examples, 0)}
	h := &driver.History{}
	if err := historyRows(ctx, tx, historyEnds, args[:4], func(rows *sql.Rows) error {
		var b driver.EndBin
		var state string
		var maxMS float64
		if err := rows.Scan(&b.Bucket, &state, &b.RuntimeBin, &b.Count, &maxMS); err != nil {
			return err
		}
		b.State = driver.ResultState(state)
		b.MaxRuntime = time.Duration(maxMS * float64(time.Millisecond))
		h.Ends = append(h.Ends, b)
		return nil
	}); err != nil {
		return nil, d.wrap(ctx, "result history", err)
	}
	if err := historyRows(ctx, tx, historyAttempts, args[:4], func(rows *sql.Rows) error {
		var b driver.AttemptBin
		if err := rows.Scan(&b.Bucket, &b.Outcome, &b.Env, &b.Count); err != nil {
			return err
		}
		b.Bucket = max(0, min(b.Bucket, p.NumBuckets()-1))
		h.Attempts = append(h.Attempts, b)
		return nil
	}); err != nil {
		return nil, d.wrap(ctx, "result history", err)
	}
	if p.ErrorGroups > 0 {
		if err := historyRows(ctx, tx, historyErrors, args, errorGroupScanner(h)); err != nil {
			return nil, d.wrap(ctx, "result history", err)
		}
	}
	return h, nil
}

// errorGroupScanner adds each row of historyErrors to h.Errors: a row per
// example, a group's rows together.
func errorGroupScanner(h *driver.History) func(*sql.Rows) error {
	return func(rows *sql.Rows) error {
		var ec sql.NullInt64
		var line string
		var n, last int64
		var example sql.NullString
		if err := rows.Scan(&ec, &line, &n, &last, &example); err != nil {
			return err
		}
		var g *driver.ErrorGroup
		if k := len(h.Errors); k > 0 && sameGroup(&h.Errors[k-1], ec, line) {
			g = &h.Errors[k-1]
		} else {
			h.Errors = append(h.Errors, driver.ErrorGroup{FirstLine: line, Count: n, Last: time.UnixMicro(last).UTC()})
			g = &h.Errors[len(h.Errors)-1]
			if ec.Valid {
				code := int(ec.Int64)
				g.ExitCode = &code
			}
		}
		if example.Valid {
			g.Examples = append(g.Examples, example.String)
		}
		return nil
	}
}

// sameGroup reports whether g is the group of exit code ec and line.
func sameGroup(g *driver.ErrorGroup, ec sql.NullInt64, line string) bool {
	if g.FirstLine != line || (g.ExitCode != nil) != ec.Valid {
		return false
	}
	return g.ExitCode == nil || int64(*g.ExitCode) == ec.Int64
}

// historyRows runs query and calls scan on each row.
func historyRows(ctx context.Context, tx *sql.Tx, query string, args []any, scan func(*sql.Rows) error) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

const (
	// blanksSQL are driver.FirstLine's blanks as an SQL string.
	blanksSQL = `' ' || char(9, 13, 10)`
)

var (
	// maxRuntimeBinSQL and maxFirstLineSQL are the driver's bounds.
	maxRuntimeBinSQL = strconv.Itoa(driver.MaxRuntimeBin)
	maxFirstLineSQL  = strconv.Itoa(driver.MaxFirstLine)
)
