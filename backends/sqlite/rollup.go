package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"sort"
	"strconv"
	"time"

	"github.com/jobq/jobq/driver"
)

// Rollups (driver.Rollup): a history window whose edges and buckets fall
// on rollup slots is added up from jobq_results_rollup, a row per queue
// and closed generation of records (results.go) that holds what the
// generation's records add up to by slot of ten minutes, instead of from
// every record. A record is only ever written into its queue's newest
// generation, so an older one changes only when records are deleted
// (purged, deleted, or forgotten at a redrive). Nothing on the task path
// writes the rollups: the workers fill them (rollupfill.go), and a
// history keeps the generations it had to add up. Each row keeps the
// fingerprint of the generation it was added up from (how many records,
// and the sum of their rowids), read from the key alone; a history adds
// up from the records only the newest generation and those whose
// fingerprint changed or that have no row yet, so what it returns is
// what adding up every record returns.
const rollupTable = `
CREATE TABLE IF NOT EXISTS jobq_results_rollup (
	queue   TEXT    NOT NULL,
	gen     INTEGER NOT NULL,
	records INTEGER NOT NULL,
	rowids  INTEGER NOT NULL,
	first   INTEGER NOT NULL,
	last    INTEGER NOT NULL,
	sums    BLOB    NOT NULL,
	PRIMARY KEY (queue, gen)
);
`

// rollupSlotUS is driver.RollupSlot in microseconds, as SQL.
var rollupSlotUS = strconv.FormatInt(driver.RollupSlot.Microseconds(), 10)

const (
	// rollupFingerprints returns each generation of queue ?1: how many
	// records, and the sum of their rowids (from the key, no table read).
	rollupFingerprints = `SELECT gen, count(*), sum(rowid) FROM jobq_results INDEXED BY jobq_results_key WHERE queue = ?1 GROUP BY gen`
	// rollupStored reads the kept rollups of queue ?1, with the sums of
	// those that hold slots of [?2, ?3).
	rollupStored = `SELECT gen, records, rowids, CASE WHEN last >= ?2 AND first < ?3 THEN sums END FROM jobq_results_rollup WHERE queue = ?1`
	// rollupPut keeps one generation's rollup.
	rollupPut = `INSERT INTO jobq_results_rollup (queue, gen, records, rowids, first, last, sums) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
		ON CONFLICT (queue, gen) DO UPDATE SET records = excluded.records, rowids = excluded.rowids,
			first = excluded.first, last = excluded.last, sums = excluded.sums`
	// rollupForget forgets the kept rollups of queue ?1 whose generation
	// is not in the JSON list ?2 of those that hold records.
	rollupForget = `DELETE FROM jobq_results_rollup WHERE queue = ?1 AND gen NOT IN (SELECT value FROM json_each(?2))`
)

// rollupSums adds up the final records of queue ?1 in the generations of
// the JSON list ?2, by generation and slot, as the history queries do
// (history.go). Each row is (kind, gen, slot, k, a, b, n, f, t): 'e' an
// end bin (k the runtime bin, a the state, f the longest runtime in ms),
// 'a' attempts (k the attempt's slot, a the outcome, b the environment),
// 'g' an error group (k the exit code, a the first line, t the last time,
// Unix µs) and 'x' one of its examples (b the task ID, t its time).
var rollupSums = `WITH rd AS MATERIALIZED (
		SELECT gen, updated_at, state, task_id, updated_at / ` + rollupSlotUS + ` AS s, CAST(data AS BLOB) AS data FROM jobq_results
		WHERE queue = ?1 AND gen IN (SELECT value FROM json_each(?2))
			AND state IN ('succeeded', 'dead-lettered', 'cancelled')),
	r AS MATERIALIZED (SELECT gen, updated_at, state, task_id, s, j FROM (
		SELECT gen, updated_at, state, task_id, s, CAST(data AS TEXT) AS j FROM rd
		WHERE instr(data, '"attempts"') > 0 OR state = 'dead-lettered')
		WHERE json_valid(j)),
	t AS MATERIALIZED (SELECT gen, s, state,
		(julianday(` + memberSQL("finished") + `) - julianday(` + memberSQL("started") + `)) * 86400000.0 AS rt FROM rd),
	e AS (SELECT gen, s, state, CASE WHEN rt IS NULL OR rt < 0 THEN -1 WHEN rt < 100 THEN 0
		ELSE min(CAST(floor(2 * log2(rt / 100.0)) AS INTEGER) + 1, ` + maxRuntimeBinSQL + `) END AS bin, rt FROM t),
	o AS (SELECT gen, s, updated_at, task_id, CASE WHEN json_type(j, '$.exit_code') = 'integer' THEN j ->> '$.exit_code' END AS ec,
		ltrim(coalesce(CASE WHEN json_type(j, '$.output') = 'text' THEN j ->> '$.output' END, ''), ` + blanksSQL + `) AS out,
		ltrim(coalesce(CASE WHEN json_type(j, '$.error') = 'text' THEN j ->> '$.error' END, ''), ` + blanksSQL + `) AS err
		FROM r WHERE state = 'dead-lettered'),
	f AS (SELECT gen, s, updated_at, task_id, ec, CASE WHEN out <> '' THEN out ELSE err END AS str FROM o),
	l AS (SELECT gen, s, updated_at, task_id, ec,
		substr(rtrim(substr(str, 1, instr(str || char(10), char(10)) - 1), ` + blanksSQL + `), 1, ` + maxFirstLineSQL + `) AS line FROM f),
	x AS (SELECT gen, s, ec, line, task_id, updated_at, row_number() OVER (PARTITION BY gen, s, ec, line ORDER BY updated_at DESC) AS rn FROM l)
	SELECT 'e', gen, s, bin, state, NULL, count(*), coalesce(max(rt), 0), NULL FROM e GROUP BY gen, s, state, bin
	UNION ALL
	SELECT 'a', gen, s, ab, outcome, env, count(*), NULL, NULL FROM (
		SELECT r.gen, r.s, coalesce(CAST((julianday(a.value ->> '$.end') - 2440587.5) * 86400000000.0 AS INTEGER), r.updated_at) / ` + rollupSlotUS + ` AS ab,
			coalesce(a.value ->> '$.outcome', '') AS outcome,
			coalesce(nullif(a.value ->> '$.env', ''), a.value ->> '$.host', '') AS env
		FROM r, json_each(r.j, '$.attempts') a
		WHERE json_type(r.j, '$.attempts') = 'array' AND a.type = 'object' AND coalesce(a.value ->> '$.outcome', '') <> 'success')
	GROUP BY gen, s, ab, outcome, env
	UNION ALL
	SELECT 'g', gen, s, ec, line, NULL, count(*), NULL, max(updated_at) FROM l GROUP BY gen, s, ec, line
	UNION ALL
	SELECT 'x', gen, s, ec, line,
		CASE WHEN typeof(task_id) = 'blob' AND length(task_id) = 16 THEN lower(hex(task_id)) ELSE CAST(task_id AS TEXT) END,
		NULL, NULL, updated_at FROM x WHERE rn <= ` + strconv.Itoa(driver.RollupExamples)

// fingerprint identifies the records a generation's rollup was added up
// from.
type fingerprint struct{ records, rowids int64 }

// rollupHistory adds up a Rollable window from the kept rollups of closed
// generations, and from the records of the newest generation and of those
// whose rollup is missing or stale; it then keeps the rollups of the
// closed ones among them.
func (d *Driver) rollupHistory(ctx context.Context, p driver.HistoryParams) (*driver.History, error) {
	if !d.hasRollups(ctx) {
		return d.scanHistory(ctx, p)
	}
	first, last := p.Slots()
	sum := &driver.Rollup{}
	fresh := map[int64]*driver.Rollup{}
	var prints map[int64]fingerprint
	var newest int64
	var gone bool
	err := func() error {
		tx, err := d.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		if prints, newest, err = d.rollupPrints(ctx, tx); err != nil {
			return err
		}
		stale, err := d.readKept(ctx, tx, first, last, prints, newest, sum, &gone)
		if err != nil || len(stale) == 0 {
			return err
		}
		for _, g := range stale {
			if g != newest {
				d.rollupFill.ReadAddedUp.Add(1)
			}
		}
		return d.rollupRows(ctx, tx, stale, fresh)
	}()
	if err != nil {
		return nil, d.wrap(ctx, "result history", err)
	}
	for _, r := range fresh {
		sum.Add(r)
	}
	if gone || len(fresh) > 1 || (len(fresh) == 1 && fresh[newest] == nil) {
		d.keepRollups(ctx, fresh, prints, newest)
	}
	return driver.FoldRollup(p, sum), nil
}

// hasRollups reports whether the file has the rollup table: a file made
// before it, opened read-only, has none (it is made at every other open).
func (d *Driver) hasRollups(ctx context.Context) bool {
	if d.rollupReady.Load() {
		return true
	}
	var n int
	if err := d.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'jobq_results_rollup'`).Scan(&n); err != nil || n == 0 {
		return false
	}
	d.rollupReady.Store(true)
	return true
}

// rollupPrints reads the fingerprint of each generation of the queue, and
// the newest generation.
func (d *Driver) rollupPrints(ctx context.Context, tx *sql.Tx) (map[int64]fingerprint, int64, error) {
	prints := map[int64]fingerprint{}
	newest := int64(-1)
	err := historyRows(ctx, tx, rollupFingerprints, []any{d.cfg.queue}, func(rows *sql.Rows) error {
		var gen int64
		var fp fingerprint
		if err := rows.Scan(&gen, &fp.records, &fp.rowids); err != nil {
			return err
		}
		prints[gen] = fp
		newest = max(newest, gen)
		return nil
	})
	return prints, newest, err
}

// readKept adds the kept rollups that still hold to sum, and returns the
// generations to add up from their records: the newest, and those whose
// rollup is missing or stale. It sets gone when a kept rollup's
// generation has no records any more.
func (d *Driver) readKept(ctx context.Context, tx *sql.Tx, first, last int64, prints map[int64]fingerprint, newest int64, sum *driver.Rollup, gone *bool) ([]int64, error) {
	kept := map[int64]bool{}
	err := historyRows(ctx, tx, rollupStored, []any{d.cfg.queue, first, last}, func(rows *sql.Rows) error {
		var gen int64
		var fp fingerprint
		var sums []byte
		if err := rows.Scan(&gen, &fp.records, &fp.rowids, &sums); err != nil {
			return err
		}
		now, ok := prints[gen]
		if !ok {
			*gone = true
		}
		if !ok || now != fp || gen == newest {
			return nil
		}
		if sums != nil {
			var r driver.Rollup
			if json.Unmarshal(sums, &r) != nil {
				return nil // added up again
			}
			sum.Add(r.Within(first, last))
		}
		kept[gen] = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	var stale []int64
	for gen := range prints {
		if !kept[gen] {
			stale = append(stale, gen)
		}
	}
	return stale, nil
}

// rollupRows reads rollupSums for the generations gens into one Rollup
// per generation.
func (d *Driver) rollupRows(ctx context.Context, tx *sql.Tx, gens []int64, out map[int64]*driver.Rollup) error {
	list, err := json.Marshal(gens)
	if err != nil {
		return err
	}
	type ex struct {
		gen, slot int64
		code      sql.NullInt64
		line      string
		x         driver.RollupExample
	}
	var examples []ex
	for _, g := range gens {
		out[g] = &driver.Rollup{}
	}
	err = historyRows(ctx, tx, rollupSums, []any{d.cfg.queue, string(list)}, func(rows *sql.Rows) error {
		var kind, a string
		var gen, slot int64
		var k sql.NullInt64
		var b sql.NullString
		var n sql.NullInt64
		var f sql.NullFloat64
		var t sql.NullInt64
		if err := rows.Scan(&kind, &gen, &slot, &k, &a, &b, &n, &f, &t); err != nil {
			return err
		}
		r := out[gen]
		switch kind {
		case "e":
			r.Ends = append(r.Ends, driver.RollupEnd{Slot: slot, State: driver.ResultState(a), RuntimeBin: int(k.Int64), Count: n.Int64,
				MaxRuntime: time.Duration(f.Float64 * float64(time.Millisecond))})
		case "a":
			r.Attempts = append(r.Attempts, driver.RollupAttempt{Slot: slot, AttemptSlot: k.Int64, Outcome: a, Env: b.String, Count: n.Int64})
		case "g":
			e := driver.RollupError{Slot: slot, FirstLine: a, Count: n.Int64, Last: time.UnixMicro(t.Int64).UTC()}
			if k.Valid {
				code := int(k.Int64)
				e.ExitCode = &code
			}
			r.Errors = append(r.Errors, e)
		case "x":
			examples = append(examples, ex{gen, slot, k, a, driver.RollupExample{ID: b.String, At: time.UnixMicro(t.Int64).UTC()}})
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, x := range examples {
		r := out[x.gen]
		for i := range r.Errors {
			if e := &r.Errors[i]; e.Slot == x.slot && sameGroup(&driver.ErrorGroup{ExitCode: e.ExitCode, FirstLine: e.FirstLine}, x.code, x.line) {
				e.Examples = append(e.Examples, x.x)
				break
			}
		}
	}
	for _, r := range out {
		for i := range r.Errors {
			x := r.Errors[i].Examples
			sort.SliceStable(x, func(i, j int) bool { return x[i].At.After(x[j].At) })
		}
	}
	return nil
}

// keepRollups stores the rollups of the closed generations added up from
// their records, with their fingerprints, and forgets those of
// generations without records. It is a cache: a failure only means the
// next history adds them up again.
func (d *Driver) keepRollups(ctx context.Context, fresh map[int64]*driver.Rollup, prints map[int64]fingerprint, newest int64) {
	gens := make([]int64, 0, len(prints))
	for g := range prints {
		gens = append(gens, g)
	}
	list, err := json.Marshal(gens)
	if err != nil {
		return
	}
	_ = d.writeTx(ctx, "keep result rollups", func(tx wtx) error {
		for gen, r := range fresh {
			if gen == newest {
				continue
			}
			b, err := json.Marshal(r)
			if err != nil {
				return err
			}
			first, last := slotRange(r)
			fp := prints[gen]
			if _, err := tx.Exec(rollupPut, d.cfg.queue, gen, fp.records, fp.rowids, first, last, b); err != nil {
				return err
			}
		}
		_, err := tx.Exec(rollupForget, d.cfg.queue, string(list))
		return err
	})
}

// slotRange is the first and last record slot of r.
func slotRange(r *driver.Rollup) (first, last int64) {
	first, last = 1<<62, -1<<62
	for _, e := range r.Ends {
		first, last = min(first, e.Slot), max(last, e.Slot)
	}
	return first, last
}
