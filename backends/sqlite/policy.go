package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"slices"
	"time"

	"github.com/jobq/jobq/driver"
)

// Queue policies (docs/policies.md). Policies live in jobq_policies, so
// every process on the file sees them; enforcement runs inside the claim's
// and the push's immediate transaction, so it is atomic across processes.
//
// A message's keys are columns of jobq_messages (added to older files by
// migratePolicies). In-flight counts per capped key come from a partial
// index that holds only keyed messages under a lease, ordered by when the
// lease ends: a claim under caps reads the leases in flight, whatever the
// backlog, and a keyed message enters the index only when it is claimed.
// Unkeyed traffic pays nothing for it. Rate windows are rows in
// jobq_admissions, one per claim of a rate-limited key, deleted once their
// window has passed.
const policySchema = `
CREATE TABLE IF NOT EXISTS jobq_policies (
	queue     TEXT    NOT NULL,
	kind      TEXT    NOT NULL,
	key       TEXT    NOT NULL,
	limit_n   INTEGER NOT NULL,
	period_us INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (queue, kind, key)
);
CREATE TABLE IF NOT EXISTS jobq_admissions (
	queue      TEXT    NOT NULL,
	key        TEXT    NOT NULL,
	expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS jobq_admissions_expiry ON jobq_admissions (queue, expires_at);
`

// Indexes that need the key columns, created after migratePolicies added
// them.
//
// jobq_messages_ckey was (queue, concurrency_key, visible_at, lease) over
// every keyed message: countInFlight then read the whole backlog of keyed
// messages of the queue on every claim under caps (a 100,000-task drain
// ran at 0.16x the uncapped rate), and a keyed message changed the index
// at its push, its claim and its end. It keeps its name, which the claims
// of earlier releases name in INDEXED BY and can use as it is now.
const policyIndexes = `
CREATE INDEX IF NOT EXISTS jobq_messages_ckey ON jobq_messages (queue, visible_at, concurrency_key)
	WHERE concurrency_key <> '' AND lease IS NOT NULL;
`

// oldKeyIndex tells the earlier definition of jobq_messages_ckey by its
// SQL text in sqlite_master.
const oldKeyIndex = `SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'jobq_messages_ckey' AND sql NOT LIKE '%lease IS NOT NULL%'`

// keyColumns are added to both message tables of files made before
// policies existed.
var keyColumns = []struct{ table, column string }{
	{"jobq_messages", "concurrency_key"}, {"jobq_messages", "rate_key"},
	{"jobq_dead", "concurrency_key"}, {"jobq_dead", "rate_key"},
}

// migratePolicies creates the policy tables and adds the key columns. It
// runs inside migrate's transaction.
func migratePolicies(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, policySchema); err != nil {
		return err
	}
	for _, kc := range keyColumns {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?`, kc.table, kc.column).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			if _, err := tx.ExecContext(ctx, `ALTER TABLE `+kc.table+` ADD COLUMN `+kc.column+` TEXT NOT NULL DEFAULT ''`); err != nil {
				return err
			}
		}
	}
	var old int
	if err := tx.QueryRowContext(ctx, oldKeyIndex).Scan(&old); err != nil {
		return err
	}
	if old > 0 {
		if _, err := tx.ExecContext(ctx, `DROP INDEX jobq_messages_ckey`); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, policyIndexes)
	return err
}

const (
	selectPolicies = `SELECT kind, key, limit_n, period_us FROM jobq_policies WHERE queue = ? ORDER BY kind, key`
	upsertPolicy   = `INSERT INTO jobq_policies (queue, kind, key, limit_n, period_us) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (queue, kind, key) DO UPDATE SET limit_n = excluded.limit_n, period_us = excluded.period_us`
	deletePolicy = `DELETE FROM jobq_policies WHERE queue = ? AND kind = ? AND key = ?`
	// pushChecks reads what a push checks: the max-depth policy (NULL:
	// none) and whether the queue holds a task (held.go), in one query.
	pushChecks = `SELECT (SELECT limit_n FROM jobq_policies WHERE queue = ?1 AND kind = 'max-depth' AND key = ''),
		EXISTS (SELECT 1 FROM jobq_held WHERE queue = ?1)`
	countLive     = `SELECT COUNT(*) FROM jobq_messages INDEXED BY jobq_messages_order WHERE queue = ?`
	countInFlight = `SELECT concurrency_key, COUNT(*) FROM jobq_messages INDEXED BY jobq_messages_ckey
		WHERE queue = ? AND concurrency_key <> '' AND visible_at > ? AND lease IS NOT NULL GROUP BY concurrency_key`
	expireAdmissions = `DELETE FROM jobq_admissions WHERE queue = ? AND expires_at <= ?`
	countAdmissions  = `SELECT key, COUNT(*), MIN(expires_at) FROM jobq_admissions WHERE queue = ? GROUP BY key`
	insertAdmission  = `INSERT INTO jobq_admissions (queue, key, expires_at) VALUES (?, ?, ?)`
	// Candidates in claim order, leaving out keys blocked when the claim
	// began; keys that fill up during the batch are skipped in Go.
	// Parameters: ?1 queue, ?2 now, ?3 and ?4 the blocked keys, ?5 limit.
	selectCandidates = candidateColumns + `, 0, 0` + candidateFrom + candidateFilter + candidateOrder
	// selectPastBlocked is selectCandidates, with keys at their limit,
	// each row also carrying where the claim order begins (evaluated
	// once), to tell how far past it the first candidate is
	// (claimcursor.go).
	selectPastBlocked = candidateColumns + `,
	(SELECT priority` + candidateFrom + candidateOrderOne + `),
	(SELECT id` + candidateFrom + candidateOrderOne + `)` + candidateFrom + candidateFilter + candidateOrder
	// selectHead is the head of the claim order, whatever the keys.
	selectHead = candidateColumns + `, 0, 0` + candidateFrom + candidateOrder
	// selectFromCursor and selectBelowCursor are selectCandidates from a
	// cursor (?6 its priority, ?7 its ID) on: the rest of its priority,
	// then the lower ones.
	selectFromCursor  = candidateColumns + `, 0, 0` + candidateFrom + ` AND priority = ?6 AND id >= ?7` + candidateFilter + candidateOrder
	selectBelowCursor = candidateColumns + `, 0, 0` + candidateFrom + ` AND priority < ?6` + candidateFilter + candidateOrder

	candidateColumns = `SELECT id, concurrency_key, rate_key, priority`
	candidateFrom    = ` FROM jobq_messages INDEXED BY jobq_messages_order
WHERE queue = ?1 AND (visible_at <= ?2 OR typeof(visible_at) IN ('text', 'blob'))`
	candidateFilter = `
	AND concurrency_key NOT IN (SELECT value FROM json_each(?3))
	AND rate_key NOT IN (SELECT value FROM json_each(?4))`
	candidateOrder = `
ORDER BY priority DESC, id
LIMIT ?5`
	candidateOrderOne = ` ORDER BY priority DESC, id LIMIT 1`
	claimIDs          = `
UPDATE jobq_messages
SET lease = ?, visible_at = ?, deliveries = ` + nextDelivery + `
WHERE id IN (SELECT value FROM json_each(?))
RETURNING ` + claimedColumns
)

// queryer is what both a write transaction and the pool offer.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

type wtxQueryer struct{ tx wtx }

func (w wtxQueryer) QueryContext(_ context.Context, query string, args ...any) (*sql.Rows, error) {
	return w.tx.Query(query, args...)
}

// loadPolicies reads the queue's policies.
func loadPolicies(ctx context.Context, q queryer, queue string) ([]driver.Policy, error) {
	rows, err := q.QueryContext(ctx, selectPolicies, queue)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []driver.Policy
	for rows.Next() {
		var p driver.Policy
		var periodUS int64
		if err := rows.Scan(&p.Kind, &p.Key, &p.Limit, &periodUS); err != nil {
			return nil, err
		}
		p.Period = time.Duration(periodUS) * time.Microsecond
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b driver.Policy) int {
		return cmp.Or(cmp.Compare(slices.Index(driver.PolicyKinds, a.Kind), slices.Index(driver.PolicyKinds, b.Kind)), cmp.Compare(a.Key, b.Key))
	})
	return out, nil
}

// keyCounts are the per-key counts a claim checks.
type keyCounts struct {
	conc, rate         map[string]int64 // limits
	inFlight, admitted map[string]int64
	periods            map[string]time.Duration // of each rate limit
	// frees is when each rate key's oldest admission in its window
	// expires (µs): when a key at its limit admits again.
	frees map[string]int64
}

// rateFrees is when the first rate key at its limit admits again (µs), or
// 0 when none is at its limit.
func (k *keyCounts) rateFrees() int64 {
	var at int64
	for key, l := range k.rate {
		if f := k.frees[key]; k.admitted[key] >= l && f > 0 && (at == 0 || f < at) {
			at = f
		}
	}
	return at
}

// blocked reports whether a message with these keys would exceed a limit.
func (k *keyCounts) blocked(ckey, rkey string) bool {
	if l, ok := k.conc[ckey]; ok && ckey != "" && k.inFlight[ckey] >= l {
		return true
	}
	if l, ok := k.rate[rkey]; ok && rkey != "" && k.admitted[rkey] >= l {
		return true
	}
	return false
}

// limitedBy is true while the queue (its two parameters) has a
// concurrency or rate policy: the plain claim (claimMessages) then claims
// nothing, leaving the queue to claimWithPolicies. It names the kinds that
// loadLimits enforces, which on this backend are both (capabilities: both
// natively). A seek per kind: kind IN (...) filled an ephemeral table for
// its list on every claim.
const limitedBy = `(EXISTS (SELECT 1 FROM jobq_policies WHERE queue = ? AND kind = '` + string(driver.ConcurrencyPolicy) + `')
		OR EXISTS (SELECT 1 FROM jobq_policies WHERE queue = ? AND kind = '` + string(driver.RatePolicy) + `'))`

// claimWithPolicies is the claim when the queue has concurrency or rate
// policies; when it has none, the plain claim, which ran first, claimed
// for it. When it claims nothing, retryAt is when a rate key at its limit
// admits again (µs; 0: none is), for the receiver to look then.
func (d *Driver) claimWithPolicies(tx wtx, token string, now, expiry int64, max int) (out []*driver.Received, prio []int, retryAt int64, err error) {
	k, err := d.loadLimits(tx)
	if err != nil || k == nil {
		return nil, nil, 0, err
	}
	if err := d.countUsage(tx, k, now); err != nil {
		return nil, nil, 0, err
	}
	ids, admit, err := d.pickCandidates(tx, k, now, max)
	if err != nil || len(ids) == 0 {
		return nil, nil, k.rateFrees(), err
	}
	if err := d.recordAdmissions(tx, k, admit, now); err != nil {
		return nil, nil, 0, err
	}
	idList, _ := json.Marshal(ids)
	out, prio, err = d.scanClaimed(tx, token, now, expiry, claimIDs, token, expiry, string(idList))
	return out, prio, 0, err
}

// loadLimits reads the queue's concurrency and rate limits, which this
// driver enforces natively (capabilities). It returns nil when there are
// none, exactly when limitedBy is false.
func (d *Driver) loadLimits(tx wtx) (*keyCounts, error) {
	pols, err := loadPolicies(context.Background(), wtxQueryer{tx}, d.cfg.queue)
	if err != nil {
		return nil, err
	}
	k := &keyCounts{conc: map[string]int64{}, rate: map[string]int64{}, inFlight: map[string]int64{}, admitted: map[string]int64{}, periods: map[string]time.Duration{}, frees: map[string]int64{}}
	for _, p := range pols {
		switch {
		case p.Kind == driver.ConcurrencyPolicy:
			k.conc[p.Key] = p.Limit
		case p.Kind == driver.RatePolicy:
			k.rate[p.Key] = p.Limit
			k.periods[p.Key] = p.Period
		}
	}
	if len(k.conc) == 0 && len(k.rate) == 0 {
		return nil, nil
	}
	return k, nil
}

// countUsage fills k with the messages in flight per concurrency key and
// the admissions still inside their period per rate key, first dropping
// the expired admissions.
func (d *Driver) countUsage(tx wtx, k *keyCounts, now int64) error {
	if len(k.conc) > 0 {
		if err := scanCounts(tx, countInFlight, k.inFlight, nil, d.cfg.queue, now); err != nil {
			return err
		}
	}
	if len(k.rate) > 0 {
		if _, err := tx.Exec(expireAdmissions, d.cfg.queue, now); err != nil {
			return err
		}
		if err := scanCounts(tx, countAdmissions, k.admitted, k.frees, d.cfg.queue); err != nil {
			return err
		}
	}
	return nil
}

// blockedKeys returns the concurrency and rate keys already at their limit.
func (k *keyCounts) blockedKeys() (conc, rate []string) {
	for key := range k.conc {
		if k.blocked(key, "") {
			conc = append(conc, key)
		}
	}
	for key := range k.rate {
		if k.blocked("", key) {
			rate = append(rate, key)
		}
	}
	return conc, rate
}

// pickCandidates chooses up to max visible messages whose keys are under
// their limits, counting each one against k as it is chosen. admit is the
// rate key of each chosen message that has a rate limit. It scans the
// claim order from the head, leaving out the keys at their limit, or,
// while a cursor holds (claimcursor.go), looks at the head and then scans
// on from the cursor.
func (d *Driver) pickCandidates(tx wtx, k *keyCounts, now int64, max int) (ids []int64, admit []string, err error) {
	blockedC, blockedR := k.blockedKeys()
	limit := 4*max + 16
	jc, jr := jsonList(blockedC), jsonList(blockedR)
	p := picking{k: k, max: max}
	if len(blockedC)+len(blockedR) == 0 {
		_, err := p.scan(tx, selectCandidates, d.cfg.queue, now, jc, jr, limit)
		return p.ids, p.admit, err
	}
	prio, id, ok := d.cursor.from(now, blockedC, blockedR)
	if !ok {
		all, err := p.scan(tx, selectPastBlocked, d.cfg.queue, now, jc, jr, limit)
		if err == nil && all.n > 0 && far(all.first.prio, all.first.id, all.headPrio, all.headID+int64(limit)) {
			d.cursor.keep(now, all.first.prio, all.first.id, blockedC, blockedR)
		}
		return p.ids, p.admit, err
	}
	head, err := p.scan(tx, selectHead, d.cfg.queue, now, nil, nil, limit)
	if err != nil || p.full() || head.n < limit {
		return p.ids, p.admit, err
	}
	rest, err := p.scan(tx, selectFromCursor, d.cfg.queue, now, jc, jr, limit, prio, id)
	if err == nil && !p.full() && rest.n < limit {
		var below scanned
		below, err = p.scan(tx, selectBelowCursor, d.cfg.queue, now, jc, jr, limit-rest.n, prio)
		if rest.n == 0 {
			rest = below
		}
	}
	if err == nil && rest.n > 0 && far(rest.first.prio, rest.first.id, prio, id) {
		d.cursor.move(rest.first.prio, rest.first.id)
	}
	return p.ids, p.admit, err
}

// candidate is a visible message a claim may take.
type candidate struct {
	id         int64
	ckey, rkey string
	prio       int
}

// picking is a claim's choice of candidates so far.
type picking struct {
	k     *keyCounts
	max   int
	ids   []int64
	admit []string
}

func (p *picking) full() bool { return len(p.ids) >= p.max }

// scanned is what a scan read: how many rows and the first of them, and
// where the claim order begins (selectPastBlocked only).
type scanned struct {
	n        int
	first    candidate
	headPrio int
	headID   int64
}

// scan runs a candidates query and takes its rows in order until the claim
// holds max, each whose keys are under their limits and that it has not
// taken already, counting each against the limits.
func (p *picking) scan(tx wtx, query string, args ...any) (scanned, error) {
	var s scanned
	if p.full() {
		return s, nil
	}
	rows, err := tx.Query(query, args...)
	if err != nil {
		return s, err
	}
	defer rows.Close()
	for !p.full() && rows.Next() {
		var c candidate
		if err := rows.Scan(&c.id, &c.ckey, &c.rkey, &c.prio, &s.headPrio, &s.headID); err != nil {
			return s, err
		}
		if s.n == 0 {
			s.first = c
		}
		s.n++
		if p.k.blocked(c.ckey, c.rkey) || slices.Contains(p.ids, c.id) {
			continue
		}
		p.ids = append(p.ids, c.id)
		if p.k.take(c.ckey, c.rkey) {
			p.admit = append(p.admit, c.rkey)
		}
	}
	return s, rows.Err()
}

// take counts a chosen message with these keys against the limits, and
// reports whether it uses up an admission of a rate limit.
func (k *keyCounts) take(ckey, rkey string) (admitted bool) {
	if _, ok := k.conc[ckey]; ok && ckey != "" {
		k.inFlight[ckey]++
	}
	if _, ok := k.rate[rkey]; ok && rkey != "" {
		k.admitted[rkey]++
		return true
	}
	return false
}

// recordAdmissions stores one admission per rate key in admit, each
// expiring one period of its key after now.
func (d *Driver) recordAdmissions(tx wtx, k *keyCounts, admit []string, now int64) error {
	for _, key := range admit {
		if _, err := tx.Exec(insertAdmission, d.cfg.queue, key, addMicros(now, k.periods[key])); err != nil {
			return err
		}
	}
	return nil
}

// scanCounts reads (key, count) rows into m, and a third integer column,
// where the query has one and third is not nil, into third.
func scanCounts(tx wtx, query string, m, third map[string]int64, args ...any) error {
	rows, err := tx.Query(query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	for rows.Next() {
		var key string
		var n int64
		dest := []any{&key, &n}
		for range len(cols) - 2 {
			dest = append(dest, new(any))
		}
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		m[key] = n
		if third != nil && len(dest) > 2 {
			if v, ok := (*dest[2].(*any)).(int64); ok {
				third[key] = v
			}
		}
	}
	return rows.Err()
}

func jsonList(s []string) string {
	if len(s) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// checkDepth fails the push when adding n new messages would exceed the
// queue's max-depth (pushChecks, read by the push before its inserts). It
// runs in the push's transaction after the inserts, so that a failure
// rolls the whole batch back.
func (d *Driver) checkDepth(tx wtx, added int, maxDepth sql.NullInt64) error {
	if added == 0 || !maxDepth.Valid {
		return nil
	}
	var live int64
	if err := tx.QueryRow(countLive, d.cfg.queue).Scan(&live); err != nil {
		return err
	}
	if live > maxDepth.Int64 {
		return driver.QueueFull(live-int64(added), maxDepth.Int64, added)
	}
	return nil
}

var _ driver.PolicyStore = (*Driver)(nil)

// SetPolicy implements driver.PolicyStore.
func (d *Driver) SetPolicy(ctx context.Context, p driver.Policy) error {
	if err := p.Validate(); err != nil {
		return err
	}
	return d.writeTx(ctx, "policy set", func(tx wtx) error {
		_, err := tx.Exec(upsertPolicy, d.cfg.queue, string(p.Kind), p.Key, p.Limit, p.Period.Microseconds())
		return err
	})
}

// UnsetPolicy implements driver.PolicyStore.
func (d *Driver) UnsetPolicy(ctx context.Context, kind driver.PolicyKind, key string) (bool, error) {
	var had bool
	err := d.writeTx(ctx, "policy unset", func(tx wtx) error {
		res, err := tx.Exec(deletePolicy, d.cfg.queue, string(kind), key)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		had = n > 0
		return err
	})
	if err == nil {
		d.note.broadcast() // a removed limit may unblock messages
	}
	return had, err
}

// ListPolicies implements driver.PolicyStore.
func (d *Driver) ListPolicies(ctx context.Context) ([]driver.Policy, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	pols, err := loadPolicies(ctx, d.db, d.cfg.queue)
	return pols, d.wrap(ctx, "policy list", err)
}

// keyStatsQuery counts, per key of each kind, held leases and ready
// messages; admissions come from jobq_admissions.
const keyStatsQuery = `
SELECT 'concurrency', concurrency_key,
	COALESCE(SUM(visible_at > ?2 AND lease IS NOT NULL), 0), COALESCE(SUM(visible_at <= ?2), 0)
FROM jobq_messages WHERE queue = ?1 AND concurrency_key <> '' GROUP BY concurrency_key
UNION ALL
SELECT 'rate', rate_key, 0, COALESCE(SUM(visible_at <= ?2), 0)
FROM jobq_messages WHERE queue = ?1 AND rate_key <> '' GROUP BY rate_key`

// KeyStats implements driver.PolicyStore.
func (d *Driver) KeyStats(ctx context.Context) ([]driver.KeyStat, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	now := micros(time.Now())
	pols, err := loadPolicies(ctx, d.db, d.cfg.queue)
	if err != nil {
		return nil, d.wrap(ctx, "stats", err)
	}
	stats := driver.NewKeyStatSet(pols)
	rows, err := d.db.QueryContext(ctx, keyStatsQuery, d.cfg.queue, now)
	if err != nil {
		return nil, d.wrap(ctx, "stats", err)
	}
	defer rows.Close()
	for rows.Next() {
		var kind, key string
		var inFlight, waiting int64
		if err := rows.Scan(&kind, &key, &inFlight, &waiting); err != nil {
			return nil, d.wrap(ctx, "stats", err)
		}
		if stats.Lookup(driver.PolicyKind(kind), key) == nil && inFlight == 0 {
			continue // keys without a policy are shown only while leased
		}
		ks := stats.Get(driver.PolicyKind(kind), key)
		ks.InFlight, ks.Waiting = inFlight, waiting
	}
	if err := rows.Err(); err != nil {
		return nil, d.wrap(ctx, "stats", err)
	}
	arows, err := d.db.QueryContext(ctx, `SELECT key, COUNT(*) FROM jobq_admissions WHERE queue = ? AND expires_at > ? GROUP BY key`, d.cfg.queue, now)
	if err != nil {
		return nil, d.wrap(ctx, "stats", err)
	}
	defer arows.Close()
	for arows.Next() {
		var key string
		var n int64
		if err := arows.Scan(&key, &n); err != nil {
			return nil, d.wrap(ctx, "stats", err)
		}
		if ks := stats.Lookup(driver.RatePolicy, key); ks != nil {
			ks.Admitted = n
		}
	}
	return stats.Sorted(), arows.Err()
}
