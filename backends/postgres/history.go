package postgres

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/driver"
)

var _ driver.ResultAggregator = (*Driver)(nil)

// The result history (driver.ResultAggregator) is three GROUP BY queries
// over the queue's records of the window, read in one repeatable-read
// transaction so that they agree. The records' details are JSON text in
// the data column, parsed once per row (OFFSET 0 keeps the planner from
// parsing it again for each use); the attempts and errors queries parse
// only the records that can count (that name attempts, that are dead
// letters). NUL escapes, which jsonb refuses, are dropped first. A record
// whose details are not JSON (jobq never writes one) fails the query.

// historyRecords selects the window's final records with their details
// as jsonb j: $1 queue, $2 since, $3 until, $4 bucket (seconds); {{where}}
// narrows them.
const historyRecords = `SELECT updated_at, state, task_id,
		floor(extract(epoch FROM updated_at - $2) / $4)::int AS b,
		replace(convert_from(data, 'UTF8'), '\u0000', '')::jsonb AS j
	FROM {{s}}.results
	WHERE queue = $1 AND updated_at >= $2 AND updated_at < $3
		AND state IN ('succeeded', 'dead-lettered', 'cancelled') {{where}}
	OFFSET 0`

// historyEnds counts the records by bucket, state and runtime bin
// (driver.RuntimeBin in SQL; rt is the runtime in milliseconds). It reads
// the start and finish without parsing the details: the encoding spells
// each top-level member once as "name": "value" (a quote inside a string
// is escaped, so the pattern matches nothing else), and this query reads
// every record of the window.
const historyEnds = `SELECT b, state, CASE WHEN rt IS NULL OR rt < 0 THEN -1 WHEN rt < 100 THEN 0
		ELSE least(floor(2 * ln(rt / 100.0) / ln(2.0))::int + 1, {{maxbin}}) END AS bin,
	count(*), coalesce(max(rt), 0)::float8
	FROM (SELECT b, state, extract(epoch FROM f - s)::float8 * 1000 AS rt FROM (
		SELECT floor(extract(epoch FROM updated_at - $2) / $4)::int AS b, state,
			{{member finished}}::timestamptz AS f, {{member started}}::timestamptz AS s
		FROM {{s}}.results
		WHERE queue = $1 AND updated_at >= $2 AND updated_at < $3
			AND state IN ('succeeded', 'dead-lettered', 'cancelled')
		OFFSET 0) r) t
	GROUP BY b, state, bin`

// memberSQL is the string value of the details' top-level member name,
// found by its spelling (see historyEnds); NULL where there is none.
func memberSQL(name string) string {
	pat := `'"` + name + `": "'::bytea`
	at := `position(` + pat + ` IN data)`
	return `CASE WHEN ` + at + ` > 0 THEN split_part(convert_from(substring(data FROM ` + at + ` + ` + strconv.Itoa(len(name)+5) + ` FOR 40), 'UTF8'), '"', 1) END`
}

// historyAttempts counts the attempts of the records' histories by the
// bucket of their end (of the record's time when it is unknown), outcome
// and environment (the label, else the host).
const historyAttempts = `SELECT coalesce(floor(extract(epoch FROM (a ->> 'end')::timestamptz - $2) / $4)::int, r.b) AS ab,
		coalesce(a ->> 'outcome', '') AS outcome,
		coalesce(nullif(a ->> 'env', ''), a ->> 'host', '') AS env,
		count(*)
	FROM (` + historyRecords + `) r,
		jsonb_array_elements(CASE WHEN jsonb_typeof(r.j -> 'attempts') = 'array' THEN r.j -> 'attempts' ELSE '[]'::jsonb END) a
	WHERE jsonb_typeof(a) = 'object' AND coalesce(a ->> 'outcome', '') <> 'success'
	GROUP BY ab, outcome, env`

// historyErrors groups the dead-lettered records by exit code and first
// line (driver.FirstLine in SQL), the largest $5 groups, with up to $6
// task IDs each, most recent first.
const historyErrors = `WITH o AS (
	SELECT updated_at, task_id,
		CASE WHEN jsonb_typeof(j -> 'exit_code') = 'number' THEN (j ->> 'exit_code')::numeric::int END AS ec,
		ltrim(coalesce(CASE WHEN jsonb_typeof(j -> 'output') = 'string' THEN j ->> 'output' END, ''), E' \t\r\n') AS out,
		ltrim(coalesce(CASE WHEN jsonb_typeof(j -> 'error') = 'string' THEN j ->> 'error' END, ''), E' \t\r\n') AS err
	FROM (` + historyRecords + `) r
), e AS (
	SELECT updated_at, task_id, ec, left(rtrim(split_part(CASE WHEN out <> '' THEN out ELSE err END, E'\n', 1), E' \t\r\n'), {{maxline}}) AS line
	FROM o
), g AS (
	SELECT ec, line, count(*) AS n, max(updated_at) AS last FROM e GROUP BY ec, line ORDER BY n DESC, last DESC LIMIT $5
), x AS (
	SELECT e.ec, e.line, e.task_id, row_number() OVER (PARTITION BY e.ec, e.line ORDER BY e.updated_at DESC) AS rn
	FROM e JOIN g ON e.ec IS NOT DISTINCT FROM g.ec AND e.line = g.line
)
SELECT g.ec, g.line, g.n, g.last, x.task_id
FROM g LEFT JOIN x ON x.ec IS NOT DISTINCT FROM g.ec AND x.line = g.line AND x.rn <= $6
ORDER BY g.n DESC, g.last DESC, x.rn`

// historyQueries are the result history statements of one schema.
type historyQueries struct{ ends, attempts, errors string }

func buildHistoryQueries(schema string) historyQueries {
	fill := func(q, where string) string {
		return strings.NewReplacer("{{where}}", where, "{{s}}", schema,
			"{{member finished}}", memberSQL("finished"), "{{member started}}", memberSQL("started"),
			"{{maxbin}}", strconv.Itoa(driver.MaxRuntimeBin), "{{maxline}}", strconv.Itoa(driver.MaxFirstLine)).Replace(q)
	}
	return historyQueries{
		ends:     fill(historyEnds, ""),
		attempts: fill(historyAttempts, `AND position('"attempts"'::bytea IN data) > 0`),
		errors:   fill(historyErrors, `AND state = 'dead-lettered'`),
	}
}

// AggregateResults implements driver.ResultAggregator: a Rollable window
// from the rollups (rollup.go), any other from the records.
func (d *Driver) AggregateResults(ctx context.Context, p driver.HistoryParams) (*driver.History, error) {
	if err := d.closing.Err(); err != nil {
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
	const op = "result history"
	hq := buildHistoryQueries(pgx.Identifier{d.cfg.schema}.Sanitize())
	h := &driver.History{}
	err := pgx.BeginTxFunc(ctx, d.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		args := []any{d.cfg.queue, p.Since, p.Until, p.Bucket.Seconds()}
		if err := d.historyEnds(ctx, tx, hq.ends, args, h); err != nil {
			return err
		}
		if err := historyAttemptRows(ctx, tx, hq.attempts, args, p, h); err != nil {
			return err
		}
		if p.ErrorGroups == 0 {
			return nil
		}
		return historyErrorRows(ctx, tx, hq.errors, append(args, p.ErrorGroups, p.Examples), h)
	})
	if err != nil {
		return nil, wrap(ctx, op, err)
	}
	return h, nil
}

// historyEnds reads the ends query into h.Ends.
func (d *Driver) historyEnds(ctx context.Context, tx pgx.Tx, q string, args []any, h *driver.History) error {
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	var b driver.EndBin
	var state string
	var maxMS float64
	_, err = pgx.ForEachRow(rows, []any{&b.Bucket, &state, &b.RuntimeBin, &b.Count, &maxMS}, func() error {
		b.State = driver.ResultState(state)
		b.MaxRuntime = time.Duration(maxMS * float64(time.Millisecond))
		h.Ends = append(h.Ends, b)
		return nil
	})
	return err
}

// historyAttemptRows reads the attempts query into h.Attempts.
func historyAttemptRows(ctx context.Context, tx pgx.Tx, q string, args []any, p driver.HistoryParams, h *driver.History) error {
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	var b driver.AttemptBin
	_, err = pgx.ForEachRow(rows, []any{&b.Bucket, &b.Outcome, &b.Env, &b.Count}, func() error {
		b.Bucket = max(0, min(b.Bucket, p.NumBuckets()-1))
		h.Attempts = append(h.Attempts, b)
		return nil
	})
	return err
}

// historyErrorRows reads the errors query into h.Errors: a row per
// example, a group's rows together.
func historyErrorRows(ctx context.Context, tx pgx.Tx, q string, args []any, h *driver.History) error {
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	var ec *int
	var line string
	var n int64
	var last time.Time
	var example *string
	_, err = pgx.ForEachRow(rows, []any{&ec, &line, &n, &last, &example}, func() error {
		k := len(h.Errors)
		if k == 0 || h.Errors[k-1].FirstLine != line || !sameCode(h.Errors[k-1].ExitCode, ec) {
			g := driver.ErrorGroup{FirstLine: line, Count: n, Last: last.UTC()}
			if ec != nil {
				code := *ec
				g.ExitCode = &code
			}
			h.Errors = append(h.Errors, g)
		}
		if example != nil {
			g := &h.Errors[len(h.Errors)-1]
			g.Examples = append(g.Examples, *example)
		}
		return nil
	})
	return err
}

// sameCode reports whether two exit codes are the same (both none, or
// equal).
func sameCode(a, b *int) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}
