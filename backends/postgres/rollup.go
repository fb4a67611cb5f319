package postgres

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/driver"
)

// Rollups (driver.Rollup): a history window whose edges and buckets fall
// on rollup slots is added up from results_rollup, a row per queue and
// slot of ten minutes that holds what the slot's records add up to,
// instead of from every record. Nothing on the task path writes it: the
// workers fill it when each slot ends (rollupfill.go), and a history
// keeps the slots it had to add up from the records. Each row keeps the fingerprint of the records it was added up
// from (how many, and the sum of their row versions' xmin, which any
// insert, update or delete of a record changes); a history first reads
// the fingerprints of its window's records (one pass over the records'
// row headers, no details parsed), and adds up from the records only the
// slots whose fingerprint changed (a late record, a purge, a record
// replaced) or that have no row yet, so what it returns is what adding up
// every record returns.
//
// The table is made by the first history that needs it (CREATE TABLE IF
// NOT EXISTS), not by a schema step, so that a queue whose history is
// never read has none; where the role cannot create it (a read-only one),
// histories are added up from the records as before.
const rollupTable = `
CREATE TABLE IF NOT EXISTS {{s}}.results_rollup (
	queue   text COLLATE "C" NOT NULL,
	slot    bigint NOT NULL,
	records bigint NOT NULL,
	xmins   numeric NOT NULL,
	sums    bytea NOT NULL,
	PRIMARY KEY (queue, slot)
);
`

// rollupWindow selects the final records of queue $1 in [$2, $3).
const rollupWindow = `FROM {{s}}.results
	WHERE queue = $1 AND updated_at >= $2 AND updated_at < $3
		AND state IN ('succeeded', 'dead-lettered', 'cancelled')`

// rollupSlotSQL is the rollup slot of a time (driver.SlotOf). It divides
// the time's float8 epoch, which holds a microsecond exactly for the next
// hundred years and costs much less than the numeric one (extract).
func rollupSlotSQL(t string) string {
	return `floor(date_part('epoch', ` + t + `) / ` + strconv.Itoa(int(driver.RollupSlot.Seconds())) + `)::bigint`
}

// rollupFingerprints returns each slot's records of the window: how many,
// and the sum of their xmin.
var rollupFingerprints = `SELECT ` + rollupSlotSQL("updated_at") + ` AS slot, count(*), sum(xmin::text::bigint)
	` + rollupWindow + `
	GROUP BY slot`

// rollupSums adds up the window's records of the slots in $4 (which lie
// in [$2, $3)), by slot, as
// the history queries do (history.go): ends by state and runtime bin,
// attempts by the slot of their end, outcome and environment, and error
// groups with their most recent examples. Each row is (kind, slot, k,
// a, b, n, f, t): 'e' an end bin (k the runtime bin, a the state, f the
// longest runtime in ms), 'a' attempts (k the attempt's slot, a the
// outcome, b the environment), 'g' an error group (k the exit code, a
// the first line, t the last time) and 'x' one of its examples (b the
// task ID, t its time); 'f' is the slot's fingerprint (n the records,
// b their xmin sum).
const rollupSums = `WITH r AS MATERIALIZED (
	SELECT updated_at, state, task_id, {{slot updated_at}} AS s, data, xmin::text::bigint AS xm
	` + rollupWindow + ` AND {{slot updated_at}} = ANY($4::bigint[])
), j AS (
	SELECT updated_at, state, task_id, s, replace(convert_from(data, 'UTF8'), '\u0000', '')::jsonb AS j
	FROM r WHERE position('"attempts"'::bytea IN data) > 0 OR state = 'dead-lettered'
	OFFSET 0
), e AS (
	SELECT s, state, CASE WHEN rt IS NULL OR rt < 0 THEN -1 WHEN rt < 100 THEN 0
		ELSE least(floor(2 * ln(rt / 100.0) / ln(2.0))::int + 1, {{maxbin}}) END AS bin, rt
	FROM (SELECT s, state, extract(epoch FROM f - st)::float8 * 1000 AS rt FROM (
		SELECT s, state, {{member finished}}::timestamptz AS f, {{member started}}::timestamptz AS st FROM r OFFSET 0) x) y
), o AS (
	SELECT updated_at, task_id, s,
		CASE WHEN jsonb_typeof(j -> 'exit_code') = 'number' THEN (j ->> 'exit_code')::numeric::int END AS ec,
		ltrim(coalesce(CASE WHEN jsonb_typeof(j -> 'output') = 'string' THEN j ->> 'output' END, ''), E' \t\r\n') AS out,
		ltrim(coalesce(CASE WHEN jsonb_typeof(j -> 'error') = 'string' THEN j ->> 'error' END, ''), E' \t\r\n') AS err
	FROM j WHERE state = 'dead-lettered'
), l AS (
	SELECT updated_at, task_id, s, ec, left(rtrim(split_part(CASE WHEN out <> '' THEN out ELSE err END, E'\n', 1), E' \t\r\n'), {{maxline}}) AS line
	FROM o
), x AS (
	SELECT s, ec, line, task_id, updated_at, row_number() OVER (PARTITION BY s, ec, line ORDER BY updated_at DESC) AS rn FROM l
)
SELECT 'e', s, bin::bigint, state, NULL::text, count(*), coalesce(max(rt), 0)::float8, NULL::timestamptz FROM e GROUP BY s, state, bin
UNION ALL
SELECT 'a', s, ab, outcome, env, count(*), NULL, NULL FROM (
	SELECT j.s, coalesce({{slot (a ->> 'end')::timestamptz}}, j.s) AS ab,
		coalesce(a ->> 'outcome', '') AS outcome, coalesce(nullif(a ->> 'env', ''), a ->> 'host', '') AS env
	FROM j, jsonb_array_elements(CASE WHEN jsonb_typeof(j.j -> 'attempts') = 'array' THEN j.j -> 'attempts' ELSE '[]'::jsonb END) a
	WHERE jsonb_typeof(a) = 'object' AND coalesce(a ->> 'outcome', '') <> 'success') t
GROUP BY s, ab, outcome, env
UNION ALL
SELECT 'g', s, ec::bigint, line, NULL, count(*), NULL, max(updated_at) FROM l GROUP BY s, ec, line
UNION ALL
SELECT 'x', s, ec::bigint, line, task_id, NULL, NULL, updated_at FROM x WHERE rn <= {{examples}}
UNION ALL
SELECT 'f', s, NULL, '', sum(xm)::text, count(*), NULL, NULL FROM r GROUP BY s`

// rollupTotal is the count and xmin sum of the final records of queue $1
// in [$2, $3): one number for many slots, which a parallel scan adds up.
const rollupTotal = `SELECT count(*), coalesce(sum(xmin::text::bigint), 0)::text ` + rollupWindow

// rollupKeptTotal is the same of the kept rollups of slots [$2, $3).
const rollupKeptTotal = `SELECT coalesce(sum(records), 0)::bigint, coalesce(sum(xmins), 0)::text FROM {{s}}.results_rollup WHERE queue = $1 AND slot >= $2 AND slot < $3`

// rollupStored reads the kept rollups of queue $1's slots [$2, $3).
const rollupStored = `SELECT slot, records, xmins::text, sums FROM {{s}}.results_rollup WHERE queue = $1 AND slot >= $2 AND slot < $3`

// rollupPut keeps the rollups of the slots in $2 (with the fingerprints
// $3, $4 and the sums $5), and forgets those of the slots in $6 (which
// have no records any more).
const rollupPut = `WITH put AS (
	INSERT INTO {{s}}.results_rollup AS r (queue, slot, records, xmins, sums)
	SELECT $1, slot, records, xmins::numeric, sums FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::bytea[]) AS x(slot, records, xmins, sums)
	ON CONFLICT (queue, slot) DO UPDATE SET records = excluded.records, xmins = excluded.xmins, sums = excluded.sums
	RETURNING 1
)
DELETE FROM {{s}}.results_rollup WHERE queue = $1 AND slot = ANY($6::bigint[])`

// rollupLatest is the latest kept slot of queue $1 before slot $2 (the
// table's key).
const rollupLatest = `SELECT max(slot) FROM {{s}}.results_rollup WHERE queue = $1 AND slot < $2`

// rollupClaim lets one filler of queue $2 of schema $1 at a time work
// (until its transaction ends); the others skip.
const rollupClaim = `SELECT pg_try_advisory_xact_lock(hashtextextended('jobq rollup fill ' || $1 || ' ' || $2, 0))`

// rollupQueries are the rollup statements of one schema.
type rollupQueries struct{ table, total, keptTotal, fingerprints, sums, stored, put, latest, claim string }

func buildRollupQueries(schema string) rollupQueries {
	r := strings.NewReplacer("{{s}}", schema,
		"{{slot updated_at}}", rollupSlotSQL("updated_at"),
		"{{slot (a ->> 'end')::timestamptz}}", rollupSlotSQL("(a ->> 'end')::timestamptz"),
		"{{member finished}}", memberSQL("finished"), "{{member started}}", memberSQL("started"),
		"{{maxbin}}", strconv.Itoa(driver.MaxRuntimeBin), "{{maxline}}", strconv.Itoa(driver.MaxFirstLine),
		"{{examples}}", strconv.Itoa(driver.RollupExamples))
	return rollupQueries{table: r.Replace(rollupTable), total: r.Replace(rollupTotal), keptTotal: r.Replace(rollupKeptTotal),
		fingerprints: r.Replace(rollupFingerprints), sums: r.Replace(rollupSums),
		stored: r.Replace(rollupStored), put: r.Replace(rollupPut), latest: r.Replace(rollupLatest), claim: rollupClaim}
}

// fingerprint identifies the records a slot's rollup was added up from.
type fingerprint struct {
	records int64
	xmins   string
}

// rollupHistory adds up a Rollable window from the kept rollups, and from
// the records of the slots whose rollup is missing or stale and of the
// open ones; it then keeps the rollups of those slots that have ended.
// Most of the time the kept rollups of the closed slots all hold, which
// one parallel pass over the records' row headers tells (their count and
// xmin sum against the kept rows'); only when they do not does it read
// each slot's fingerprint to find the stale ones.
func (d *Driver) rollupHistory(ctx context.Context, p driver.HistoryParams) (*driver.History, error) {
	rq := buildRollupQueries(pgx.Identifier{d.cfg.schema}.Sanitize())
	if !d.rollupTable(ctx, rq.table) {
		return d.scanHistory(ctx, p)
	}
	first, last := p.Slots()
	open := max(first, min(driver.SlotOf(time.Now()), last))
	// The open slots are added up from their records on a connection of
	// their own meanwhile (each is a pass over the table); their numbers
	// are those of another instant than the closed slots', a few
	// milliseconds apart.
	tail := make(chan tailSums, 1)
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { tail <- d.openSums(tctx, rq, open, last) }()
	sum := &driver.Rollup{}
	fresh := map[int64]*driver.Rollup{}
	var prints map[int64]fingerprint
	var gone []int64
	plain := false
	err := pgx.BeginTxFunc(ctx, d.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		held, now, kept, err := d.keptHold(ctx, tx, rq, first, open, sum)
		if err != nil || held {
			return err
		}
		if kept.records == 0 || kept.records*2 < now.records {
			// Most of the window is not rolled up yet (no worker
			// fills them, or not for long): adding its records up at
			// once is quicker than slot by slot.
			plain = true
			return nil
		}
		// Some kept rollup is missing or stale: find which by each
		// slot's fingerprint, and add them up with the open ones.
		cancel()
		sum.Ends, sum.Attempts, sum.Errors = nil, nil, nil
		if prints, err = rollupPrints(ctx, tx, rq.fingerprints, d.cfg.queue, p); err != nil {
			return err
		}
		var stale []int64
		if stale, gone, err = d.readKept(ctx, tx, rq.stored, first, last, prints, sum); err != nil {
			return err
		}
		for _, s := range stale {
			if s < open {
				d.rollupFill.ReadAddedUp.Add(1)
			}
		}
		return addUp(ctx, tx, rq, d.cfg.queue, stale, fresh, nil)
	})
	if plain {
		cancel()
	}
	t := <-tail
	if err != nil {
		return nil, wrap(ctx, "result history", err)
	}
	if plain {
		d.rollupFill.ReadAddedUp.Add(open - first)
		d.fillLater()
		return d.scanHistory(ctx, p)
	}
	if prints == nil {
		if t.err != nil {
			return nil, wrap(ctx, "result history", t.err)
		}
		fresh = t.sums
	}
	for _, r := range fresh {
		sum.Add(r)
	}
	if prints != nil {
		d.keepRollups(ctx, rq.put, fresh, prints, gone)
	}
	return driver.FoldRollup(p, sum), nil
}

// tailSums are the sums of the open slots, by slot.
type tailSums struct {
	sums map[int64]*driver.Rollup
	err  error
}

// openSums adds up the records of slots [open, last) in a transaction of
// its own.
func (d *Driver) openSums(ctx context.Context, rq rollupQueries, open, last int64) tailSums {
	t := tailSums{sums: map[int64]*driver.Rollup{}}
	if open >= last {
		return t
	}
	slots := make([]int64, 0, last-open)
	for s := open; s < last; s++ {
		slots = append(slots, s)
	}
	t.err = pgx.BeginTxFunc(ctx, d.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		return addUp(ctx, tx, rq, d.cfg.queue, slots, t.sums, nil)
	})
	return t
}

// addUp adds up the records of slots into out, and their fingerprints
// into prints unless it is nil.
func addUp(ctx context.Context, tx pgx.Tx, rq rollupQueries, queue string, slots []int64, out map[int64]*driver.Rollup, prints map[int64]fingerprint) error {
	if len(slots) == 0 {
		return nil
	}
	lo, hi := slices.Min(slots), slices.Max(slots)
	return rollupRows(ctx, tx, rq.sums, []any{queue, driver.SlotStart(lo), driver.SlotStart(hi + 1), slots}, out, prints)
}

// keptHold checks in one pass whether the kept rollups of the closed
// slots [first, open) all hold: the records of those slots add up to the
// count and xmin sum of the kept rows. When they do it adds them to sum.
// It also returns both fingerprints.
// When no rollup with records is kept (read from the rollup table alone)
// it returns at once, without the pass.
func (d *Driver) keptHold(ctx context.Context, tx pgx.Tx, rq rollupQueries, first, open int64, sum *driver.Rollup) (held bool, now, kept fingerprint, err error) {
	if err := tx.QueryRow(ctx, rq.keptTotal, d.cfg.queue, first, open).Scan(&kept.records, &kept.xmins); err != nil {
		return false, now, kept, err
	}
	if kept.records == 0 && first < open {
		return false, now, kept, nil
	}
	if err := tx.QueryRow(ctx, rq.total, d.cfg.queue, driver.SlotStart(first), driver.SlotStart(open)).Scan(&now.records, &now.xmins); err != nil {
		return false, now, kept, err
	}
	if now != kept {
		return false, now, kept, nil
	}
	rows, err := tx.Query(ctx, rq.stored, d.cfg.queue, first, open)
	if err != nil {
		return false, now, kept, err
	}
	var slot int64
	var fp fingerprint
	var sums []byte
	bad := false
	_, err = pgx.ForEachRow(rows, []any{&slot, &fp.records, &fp.xmins, &sums}, func() error {
		var r driver.Rollup
		if json.Unmarshal(sums, &r) != nil {
			bad = true
		}
		sum.Add(&r)
		return nil
	})
	return err == nil && !bad, now, kept, err
}

// rollupTable makes the rollup table if it is missing, once per driver;
// it reports whether the table is there.
func (d *Driver) rollupTable(ctx context.Context, ddl string) bool {
	if d.rollupReady.Load() {
		return true
	}
	if _, err := d.pool.Exec(ctx, ddl); err != nil {
		return false
	}
	d.rollupReady.Store(true)
	return true
}

// rollupPrints reads the fingerprints of the window's slots.
func rollupPrints(ctx context.Context, tx pgx.Tx, q, queue string, p driver.HistoryParams) (map[int64]fingerprint, error) {
	rows, err := tx.Query(ctx, q, queue, p.Since, p.Until)
	if err != nil {
		return nil, err
	}
	prints := map[int64]fingerprint{}
	var slot int64
	var fp fingerprint
	_, err = pgx.ForEachRow(rows, []any{&slot, &fp.records, &fp.xmins}, func() error {
		prints[slot] = fp
		return nil
	})
	return prints, err
}

// readKept adds the kept rollups whose fingerprint still holds to sum, and
// returns the slots with records to add up again (stale) and the kept
// rows of slots without records (gone).
func (d *Driver) readKept(ctx context.Context, tx pgx.Tx, q string, first, last int64, prints map[int64]fingerprint, sum *driver.Rollup) (stale, gone []int64, err error) {
	rows, err := tx.Query(ctx, q, d.cfg.queue, first, last)
	if err != nil {
		return nil, nil, err
	}
	kept := map[int64]bool{}
	var slot int64
	var fp fingerprint
	var sums []byte
	_, err = pgx.ForEachRow(rows, []any{&slot, &fp.records, &fp.xmins, &sums}, func() error {
		now, ok := prints[slot]
		if !ok {
			gone = append(gone, slot)
			return nil
		}
		if now != fp {
			return nil
		}
		var r driver.Rollup
		if json.Unmarshal(sums, &r) != nil {
			return nil // added up again below
		}
		sum.Add(&r)
		kept[slot] = true
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	for s := range prints {
		if !kept[s] {
			stale = append(stale, s)
		}
	}
	return stale, gone, nil
}

// rollupRows reads rollupSums into one Rollup per slot, and the slots'
// fingerprints into prints unless it is nil.
func rollupRows(ctx context.Context, tx pgx.Tx, q string, args []any, out map[int64]*driver.Rollup, prints map[int64]fingerprint) error {
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	var kind string
	var slot int64
	var k *int64
	var a string
	var b *string
	var n *int64
	var f *float64
	var t *time.Time
	type ex struct {
		slot int64
		k    *int64
		line string
		x    driver.RollupExample
	}
	var examples []ex
	_, err = pgx.ForEachRow(rows, []any{&kind, &slot, &k, &a, &b, &n, &f, &t}, func() error {
		r := out[slot]
		if r == nil {
			r = &driver.Rollup{}
			out[slot] = r
		}
		switch kind {
		case "e":
			r.Ends = append(r.Ends, driver.RollupEnd{Slot: slot, State: driver.ResultState(a), RuntimeBin: int(*k), Count: *n,
				MaxRuntime: time.Duration(*f * float64(time.Millisecond))})
		case "a":
			r.Attempts = append(r.Attempts, driver.RollupAttempt{Slot: slot, AttemptSlot: *k, Outcome: a, Env: deref(b), Count: *n})
		case "g":
			e := driver.RollupError{Slot: slot, FirstLine: a, Count: *n, Last: t.UTC()}
			if k != nil {
				code := int(*k)
				e.ExitCode = &code
			}
			r.Errors = append(r.Errors, e)
		case "x":
			var code *int64
			if k != nil {
				c := *k
				code = &c
			}
			examples = append(examples, ex{slot, code, a, driver.RollupExample{ID: deref(b), At: t.UTC()}})
		case "f":
			if prints != nil {
				prints[slot] = fingerprint{records: *n, xmins: deref(b)}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, x := range examples {
		if g := findError(out[x.slot], x.k, x.line); g != nil {
			g.Examples = append(g.Examples, x.x)
		}
	}
	for _, r := range out {
		for i := range r.Errors {
			sortExamples(r.Errors[i].Examples)
		}
	}
	return nil
}

// findError is the error group of r with exit code k and first line.
func findError(r *driver.Rollup, k *int64, line string) *driver.RollupError {
	for i := range r.Errors {
		e := &r.Errors[i]
		if e.FirstLine == line && (e.ExitCode == nil) == (k == nil) && (k == nil || int64(*e.ExitCode) == *k) {
			return e
		}
	}
	return nil
}

// sortExamples orders examples most recent first.
func sortExamples(x []driver.RollupExample) {
	sort.SliceStable(x, func(i, j int) bool { return x[i].At.After(x[j].At) })
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// keepRollups stores the rollups of the slots added up from the records
// that have ended (an open slot keeps changing), with their fingerprints,
// and forgets the kept rows of gone slots. It is a cache: a failure (a
// read-only role, say) only means the next history adds them up again.
func (d *Driver) keepRollups(ctx context.Context, q string, fresh map[int64]*driver.Rollup, prints map[int64]fingerprint, gone []int64) {
	args := putArgs(d.cfg.queue, fresh, prints, driver.SlotOf(time.Now()), gone)
	if args == nil {
		return
	}
	_, _ = d.pool.Exec(ctx, q, args...)
}

// putArgs are rollupPut's arguments for the slots of fresh before open
// (with their fingerprints) and the gone ones; nil when there are none.
func putArgs(queue string, fresh map[int64]*driver.Rollup, prints map[int64]fingerprint, open int64, gone []int64) []any {
	var slots, records []int64
	var xmins []string
	var sums [][]byte
	for s, r := range fresh {
		fp, ok := prints[s]
		if !ok || s >= open {
			continue
		}
		b, err := json.Marshal(r)
		if err != nil {
			continue
		}
		slots, records, xmins, sums = append(slots, s), append(records, fp.records), append(xmins, fp.xmins), append(sums, b)
	}
	if len(slots) == 0 && len(gone) == 0 {
		return nil
	}
	if gone == nil {
		gone = []int64{}
	}
	return []any{queue, slots, records, xmins, sums, gone}
}
