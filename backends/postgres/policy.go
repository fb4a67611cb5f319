package postgres

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/driver"
)

// Queue policies (docs/policies.md).
//
// Policies live in the policies table, so every process sees them. A queue
// without concurrency or rate policies claims with the ordinary statement;
// one with them claims through claim_lookup (as step 20 made it:
// claimheld.go; step 16: claimcount.go; claim_packed before schema step 14: claimlookup.go;
// claim_with_policies before step 11: layout.go),
// a PL/pgSQL function that
// does everything in one round trip: it locks a window of visible messages
// in claim order, takes a transaction-scoped advisory lock on each capped
// key among them (so that two claimers never both see a key one below its
// cap; a key another claim holds is left out, not waited for), counts those
// keys' held leases in the held table and their unexpired rate admissions,
// then leases what it may — skipping keys that fill up during the batch, and
// scanning on past keys that were full (claimFunctionKeyLocks).
//
// held records each lease taken on a capped key (schema step 5). Since
// step 20 the settlements of a queue with key policies delete the rows of
// the leases they end, and a claim deletes a key's rows whose lease no
// longer holds (expired, or left by a settlement) only when the key is
// within reach of its cap (claimheld.go). No
// index on messages covers a column a claim changes, so every claim, keyed
// or not, stays a HOT update (an index on visible_at or lease, even a
// partial one over keyed messages only, makes Postgres index every claim of
// every message anew).
//
// Each driver caches the queue's policies for policyTTL, so a policy set
// from another process takes effect within that time (at once for the
// process that set it).
//
// Max-depth is checked in the push's transaction under another advisory lock
// on the queue: the live messages are counted (an index-only scan, so the
// cost grows with the bound) and the push rolls back whole when it would
// exceed the bound.

// policyTTL bounds how stale a driver's view of the policies may be.
const policyTTL = time.Second

// policyMigration is schema step 2: key columns and policy tables. Its
// index on messages is dropped again by step 5 (heldMigration): it made every
// claim a non-HOT update.
const policyMigration = `
ALTER TABLE {{s}}.messages ADD COLUMN concurrency_key text COLLATE "C", ADD COLUMN rate_key text COLLATE "C";
ALTER TABLE {{s}}.dead_letters ADD COLUMN concurrency_key text, ADD COLUMN rate_key text;
CREATE INDEX messages_concurrency_key ON {{s}}.messages (queue, concurrency_key, visible_at) INCLUDE (lease)
	WHERE concurrency_key IS NOT NULL;

CREATE TABLE {{s}}.policies (
	queue     text COLLATE "C" NOT NULL,
	kind      text NOT NULL,
	key       text COLLATE "C" NOT NULL,
	limit_n   bigint NOT NULL CHECK (limit_n > 0),
	period_us bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (queue, kind, key)
);

CREATE TABLE {{s}}.admissions (
	queue      text COLLATE "C" NOT NULL,
	key        text COLLATE "C" NOT NULL,
	expires_at timestamptz NOT NULL
);
CREATE INDEX admissions_expiry ON {{s}}.admissions (queue, expires_at);

`

// heldMigration is schema step 5: held leases of capped keys get a table
// of their own, filled with the leases in flight on capped keys, and the
// index that counted them in messages (on visible_at and lease, which
// turned every claim into a non-HOT update) goes.
const heldMigration = `
DROP INDEX IF EXISTS {{s}}.messages_concurrency_key;
CREATE TABLE {{s}}.held (
	queue    text COLLATE "C" NOT NULL,
	key      text COLLATE "C" NOT NULL,
	id       bigint NOT NULL,
	priority integer NOT NULL,
	lease    uuid NOT NULL,
	PRIMARY KEY (queue, key, id)
);
INSERT INTO {{s}}.held (queue, key, id, priority, lease)
SELECT m.queue, m.concurrency_key, m.id, m.priority, m.lease
FROM {{s}}.messages m JOIN {{s}}.policies p ON p.queue = m.queue AND p.kind = 'concurrency' AND p.key = m.concurrency_key
WHERE m.lease IS NOT NULL AND m.visible_at > now();
` + claimFunctionKeyLocks

// claimFunctionKeyLocks creates claim_with_policies, as schema steps 3, 4
// and 5 (step 11 makes claim_packed from it). Step 3's first version serialised every claim of a queue with policies
// under one advisory lock, which cost a third of a worker's throughput, and
// probed each key with two queries the first time a batch met it; step 4
// replaced it with this one, and step 3 now creates this one too (a
// database already at step 3 gets it from step 4; step 5 moved the count
// of held leases to the held table). This version locks a
// window of candidates in one query, then takes a transaction-scoped
// advisory lock per capped key the window brings
// (pg_try_advisory_xact_lock: a key another claim holds right now is left
// out of this claim, never waited for, so claims cannot deadlock), and only
// then, in the next statement and so in a snapshot that sees every claim
// committed under that key's lock, counts the key's held leases and recent
// admissions, for all of the window's keys in one query per kind. What to
// take is decided in plain PL/pgSQL array code. Claims on different keys,
// and on unkeyed messages, run in parallel.
const claimFunctionKeyLocks = `
CREATE OR REPLACE FUNCTION {{s}}.claim_with_policies(p_queue text, p_max int, p_vis_us bigint)
RETURNS TABLE (r_id bigint, r_task_id text, r_body bytea, r_deliveries int, r_enqueued_at timestamptz, r_lease text, r_priority int)
LANGUAGE plpgsql AS $fn$
DECLARE
	blocked_c text[] := '{}';
	blocked_r text[] := '{}';
	ck text[] := '{}';        -- concurrency keys met in this claim, with
	ck_left bigint[] := '{}'; -- how many more each may take (NULL: no cap)
	rk text[] := '{}';
	rk_left bigint[] := '{}';
	rk_per bigint[] := '{}';  -- rate periods (microseconds)
	new_k text[];             -- keys the window brings for the first time
	locked text[];            -- capped ones whose lock this claim holds
	busy text[];              -- capped ones another claim holds: left out
	w_ids bigint[];           -- the window of candidates, in claim order
	w_prios int[];
	w_ck text[];
	w_rk text[];
	capped text[] := '{}';    -- the keys of ck that have a cap
	ids bigint[] := '{}';
	prios int[] := '{}';
	adm text[] := '{}';
	admp bigint[] := '{}';
	win int := p_max + 8;
	fetched int := 0;
	pass int;
	i int;
	j int;
	n int := 0;
BEGIN
	DELETE FROM {{s}}.admissions a WHERE a.queue = p_queue AND a.expires_at <= now();
	-- Pass 1 takes the first candidates in claim order. When full keys
	-- left it short in a full window (they crowd the head of the queue),
	-- pass 2 leaves out every full key at once and scans on.
	FOR pass IN 1..2 LOOP
		IF pass = 2 THEN
			EXIT WHEN n >= p_max OR fetched < win;
			SELECT coalesce(array_agg(p.key), '{}') INTO blocked_c FROM {{s}}.policies p
			WHERE p.queue = p_queue AND p.kind = 'concurrency' AND p.limit_n <= (
				SELECT count(*) FROM {{s}}.held h JOIN {{s}}.messages m
				ON m.queue = h.queue AND m.priority = h.priority AND m.id = h.id AND m.lease = h.lease
				WHERE h.queue = p_queue AND h.key = p.key AND m.visible_at > now());
			SELECT coalesce(array_agg(p.key), '{}') INTO blocked_r FROM {{s}}.policies p
			WHERE p.queue = p_queue AND p.kind = 'rate' AND p.limit_n <= (
				SELECT count(*) FROM {{s}}.admissions a WHERE a.queue = p_queue AND a.key = p.key);
			FOR i IN 1 .. coalesce(array_length(ck, 1), 0) LOOP
				IF ck_left[i] <= 0 THEN
					blocked_c := blocked_c || ck[i];
				END IF;
			END LOOP;
			FOR i IN 1 .. coalesce(array_length(rk, 1), 0) LOOP
				IF rk_left[i] <= 0 THEN
					blocked_r := blocked_r || rk[i];
				END IF;
			END LOOP;
		END IF;
		SELECT coalesce(array_agg(c.id ORDER BY c.priority DESC, c.id), '{}'),
		       array_agg(c.priority ORDER BY c.priority DESC, c.id),
		       array_agg(c.concurrency_key ORDER BY c.priority DESC, c.id),
		       array_agg(c.rate_key ORDER BY c.priority DESC, c.id)
		INTO w_ids, w_prios, w_ck, w_rk
		FROM (SELECT m.id, m.priority, m.concurrency_key, m.rate_key FROM {{s}}.messages m
			WHERE m.queue = p_queue AND m.visible_at <= now()
			  AND (m.concurrency_key IS NULL OR NOT (m.concurrency_key = ANY (blocked_c)))
			  AND (m.rate_key IS NULL OR NOT (m.rate_key = ANY (blocked_r)))
			  AND NOT (m.id = ANY (ids))
			ORDER BY m.priority DESC, m.id
			LIMIT win
			FOR UPDATE SKIP LOCKED) c;
		fetched := coalesce(array_length(w_ids, 1), 0);

		-- Concurrency keys: lock the capped ones, then count.
		SELECT coalesce(array_agg(DISTINCT u.k), '{}') INTO new_k
		FROM unnest(w_ck) AS u(k) WHERE u.k IS NOT NULL AND NOT (u.k = ANY (ck));
		IF cardinality(new_k) > 0 THEN
			SELECT coalesce(array_agg(x.key) FILTER (WHERE x.got), '{}'), coalesce(array_agg(x.key) FILTER (WHERE NOT x.got), '{}')
			INTO locked, busy
			FROM (SELECT p.key, pg_try_advisory_xact_lock(hashtextextended('jobq.key.{{s}}.c.' || p_queue || '.' || p.key, 0)) AS got
				FROM {{s}}.policies p WHERE p.queue = p_queue AND p.kind = 'concurrency' AND p.key = ANY (new_k)) AS x;
			-- Under their locks, forget the locked keys' leases that have
			-- ended (settled, expired or claimed again), then count the rest.
			DELETE FROM {{s}}.held h WHERE h.queue = p_queue AND h.key = ANY (locked) AND NOT EXISTS (
				SELECT 1 FROM {{s}}.messages m WHERE m.queue = h.queue AND m.priority = h.priority AND m.id = h.id
				AND m.lease = h.lease AND m.visible_at > now());
			SELECT ck || array_agg(u.k), ck_left || array_agg(CASE
				WHEN u.k = ANY (busy) THEN 0
				WHEN u.k = ANY (locked) THEN (SELECT p.limit_n FROM {{s}}.policies p
					WHERE p.queue = p_queue AND p.kind = 'concurrency' AND p.key = u.k) - (SELECT count(*) FROM {{s}}.held h
					WHERE h.queue = p_queue AND h.key = u.k)
				END)
			INTO ck, ck_left
			FROM unnest(new_k) AS u(k);
		END IF;

		-- Rate keys: the same, against the admissions of their window.
		SELECT coalesce(array_agg(DISTINCT u.k), '{}') INTO new_k
		FROM unnest(w_rk) AS u(k) WHERE u.k IS NOT NULL AND NOT (u.k = ANY (rk));
		IF cardinality(new_k) > 0 THEN
			SELECT coalesce(array_agg(x.key) FILTER (WHERE x.got), '{}'), coalesce(array_agg(x.key) FILTER (WHERE NOT x.got), '{}')
			INTO locked, busy
			FROM (SELECT p.key, pg_try_advisory_xact_lock(hashtextextended('jobq.key.{{s}}.r.' || p_queue || '.' || p.key, 0)) AS got
				FROM {{s}}.policies p WHERE p.queue = p_queue AND p.kind = 'rate' AND p.key = ANY (new_k)) AS x;
			SELECT rk || array_agg(u.k), rk_left || array_agg(CASE
				WHEN u.k = ANY (busy) THEN 0
				WHEN u.k = ANY (locked) THEN p.limit_n - (SELECT count(*) FROM {{s}}.admissions a WHERE a.queue = p_queue AND a.key = u.k)
				END), rk_per || array_agg(p.period_us)
			INTO rk, rk_left, rk_per
			FROM unnest(new_k) AS u(k)
			LEFT JOIN {{s}}.policies p ON p.queue = p_queue AND p.kind = 'rate' AND p.key = u.k;
		END IF;

		FOR j IN 1 .. fetched LOOP
			EXIT WHEN n >= p_max;
			IF w_ck[j] IS NOT NULL THEN
				i := array_position(ck, w_ck[j]);
				CONTINUE WHEN ck_left[i] <= 0;
			END IF;
			IF w_rk[j] IS NOT NULL THEN
				i := array_position(rk, w_rk[j]);
				CONTINUE WHEN rk_left[i] <= 0;
				IF rk_left[i] IS NOT NULL THEN
					rk_left[i] := rk_left[i] - 1;
					adm := adm || w_rk[j];
					admp := admp || rk_per[i];
				END IF;
			END IF;
			IF w_ck[j] IS NOT NULL THEN
				i := array_position(ck, w_ck[j]);
				ck_left[i] := ck_left[i] - 1;
			END IF;
			ids := ids || w_ids[j];
			prios := prios || w_prios[j];
			n := n + 1;
		END LOOP;
	END LOOP;
	IF n = 0 THEN
		RETURN;
	END IF;
	FOR i IN 1 .. coalesce(array_length(ck, 1), 0) LOOP
		IF ck_left[i] IS NOT NULL THEN
			capped := capped || ck[i];
		END IF;
	END LOOP;
	IF array_length(adm, 1) > 0 THEN
		INSERT INTO {{s}}.admissions (queue, key, expires_at)
			SELECT p_queue, x.k, now() + x.p * interval '1 microsecond' FROM unnest(adm, admp) AS x(k, p);
	END IF;
	-- The leases taken on capped keys go into held, in the same statement.
	RETURN QUERY
	WITH u AS (
		UPDATE {{s}}.messages m
		SET visible_at = now() + p_vis_us * interval '1 microsecond',
			lease = gen_random_uuid(),
			deliveries = ` + nextDelivery + `
		FROM unnest(ids, prios) AS x(xid, xprio)
		WHERE m.queue = p_queue AND m.priority = x.xprio AND m.id = x.xid
		RETURNING m.id, m.task_id, m.body, m.deliveries, m.enqueued_at, m.lease, m.priority, m.concurrency_key
	), h AS (
		INSERT INTO {{s}}.held (queue, key, id, priority, lease)
		SELECT p_queue, u.concurrency_key, u.id, u.priority, u.lease FROM u
		WHERE u.concurrency_key = ANY (capped)
		ON CONFLICT (queue, key, id) DO UPDATE SET priority = excluded.priority, lease = excluded.lease
	)
	SELECT u.id, coalesce(u.task_id, ''), u.body, u.deliveries, u.enqueued_at, u.lease::text, u.priority FROM u;
END
$fn$;
`

// policyQueries are the policy statements with the schema filled in.
type policyQueries struct {
	list, upsert, remove, claim, depth, lockDepth, keyStats, admitted string
	// rateFrees is how long until the first rate key at its limit admits
	// again (µs; NULL: none is at its limit).
	rateFrees string
}

func buildPolicyQueries(schema string) policyQueries {
	r := strings.NewReplacer("{{s}}", schema)
	return policyQueries{
		list: r.Replace(`SELECT kind, key, limit_n, period_us FROM {{s}}.policies WHERE queue = $1`),
		// A new cap counts the key's leases already in flight: they go into
		// held with it (one scan of the queue's messages, at set time only).
		upsert: r.Replace(`WITH p AS (
	INSERT INTO {{s}}.policies (queue, kind, key, limit_n, period_us) VALUES ($1, $2, $3, $4, $5)
	ON CONFLICT (queue, kind, key) DO UPDATE SET limit_n = excluded.limit_n, period_us = excluded.period_us
), h AS (
	INSERT INTO {{s}}.held (queue, key, id, priority, lease)
	SELECT m.queue, m.concurrency_key, m.id, m.priority, m.lease FROM {{s}}.messages m
	WHERE $2 = 'concurrency' AND m.queue = $1 AND m.concurrency_key = $3 AND m.lease IS NOT NULL AND m.visible_at > now()
	ON CONFLICT (queue, key, id) DO UPDATE SET priority = excluded.priority, lease = excluded.lease
)
SELECT`),
		// A key's held leases are forgotten with its cap.
		remove: r.Replace(`WITH h AS (DELETE FROM {{s}}.held WHERE queue = $1 AND key = $3 AND $2 = 'concurrency')
DELETE FROM {{s}}.policies WHERE queue = $1 AND kind = $2 AND key = $3`),
		// claim_lookup (schema step 14) returns the trace context and the
		// group too.
		claim: r.Replace(asyncCTE + ` SELECT c.* FROM async, {{s}}.claim_lookup($1, $2, $3) AS c`),
		// depth counts live messages off the claim index (index-only).
		depth:     r.Replace(`SELECT count(*) FROM {{s}}.messages WHERE queue = $1`),
		lockDepth: r.Replace(`SELECT pg_advisory_xact_lock(hashtextextended('jobq.depth.{{s}}.' || $1, 0))`),
		keyStats: r.Replace(`
SELECT 'concurrency', concurrency_key,
       count(*) FILTER (WHERE visible_at > now() AND lease IS NOT NULL),
       count(*) FILTER (WHERE visible_at <= now())
FROM {{s}}.messages WHERE queue = $1 AND concurrency_key IS NOT NULL GROUP BY concurrency_key
UNION ALL
SELECT 'rate', rate_key, 0, count(*) FILTER (WHERE visible_at <= now())
FROM {{s}}.messages WHERE queue = $1 AND rate_key IS NOT NULL GROUP BY rate_key`),
		admitted: r.Replace(`SELECT key, count(*) FROM {{s}}.admissions WHERE queue = $1 AND expires_at > now() GROUP BY key`),
		rateFrees: r.Replace(`
SELECT (extract(epoch FROM min(x.oldest) - now()) * 1000000)::bigint FROM (
	SELECT key, min(expires_at) AS oldest, count(*) AS n FROM {{s}}.admissions
	WHERE queue = $1 AND expires_at > now() GROUP BY key) x
JOIN {{s}}.policies p ON p.queue = $1 AND p.kind = 'rate' AND p.key = x.key
WHERE x.n >= p.limit_n`),
	}
}

// policyCache is a driver's recent view of its queue's policies.
type policyCache struct {
	mu       sync.Mutex
	loaded   time.Time
	keyed    bool   // some concurrency or rate policy exists
	rated    bool   // some rate policy exists
	maxDepth int64  // 0: none
	gen      uint64 // counts invalidations (policy changes made here)
}

// current returns whether the queue has key policies and its max-depth,
// reading them again when the cache is older than policyTTL.
func (d *Driver) currentPolicies(ctx context.Context) (keyed bool, maxDepth int64, err error) {
	c := &d.policies
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.loaded) < policyTTL {
		return c.keyed, c.maxDepth, nil
	}
	pols, err := d.loadPolicies(ctx)
	if err != nil {
		return false, 0, err
	}
	c.note(pols)
	return c.keyed, c.maxDepth, nil
}

// note takes pols, just read, as the current policies. Called with mu
// held.
func (c *policyCache) note(pols []driver.Policy) {
	c.keyed, c.rated, c.maxDepth = false, false, 0
	for _, p := range pols {
		if p.Kind == driver.MaxDepthPolicy {
			c.maxDepth = p.Limit
		} else if p.Kind.Keyed() {
			c.keyed = true
		}
		c.rated = c.rated || p.Kind == driver.RatePolicy
	}
	c.loaded = time.Now()
}

// keyedPolicies reports whether the queue had key policies at the last
// read of its policies.
func (d *Driver) keyedPolicies() bool {
	d.policies.mu.Lock()
	defer d.policies.mu.Unlock()
	return d.policies.keyed
}

// rateWindowFrees is how long until the first rate key at its limit
// admits again (its oldest admission leaves the window), or 0 when none
// is at its limit or the queue has no rate policy. An error reads as 0:
// the receiver then looks again as it would have.
func (d *Driver) rateWindowFrees(ctx context.Context) time.Duration {
	d.policies.mu.Lock()
	rated := d.policies.rated
	d.policies.mu.Unlock()
	if !rated {
		return 0
	}
	var us *int64
	if err := d.pool.QueryRow(ctx, d.psql.rateFrees, d.cfg.queue).Scan(&us); err != nil || us == nil || *us < 0 {
		return 0
	}
	return time.Duration(*us) * time.Microsecond
}

func (d *Driver) invalidatePolicies() {
	d.policies.mu.Lock()
	d.policies.loaded = time.Time{}
	d.policies.gen++
	d.policies.mu.Unlock()
}

func (d *Driver) loadPolicies(ctx context.Context) ([]driver.Policy, error) {
	rows, err := d.pool.Query(ctx, d.psql.list, d.cfg.queue)
	if err != nil {
		return nil, err
	}
	pols, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (driver.Policy, error) {
		var p driver.Policy
		var periodUS int64
		err := row.Scan(&p.Kind, &p.Key, &p.Limit, &periodUS)
		p.Period = time.Duration(periodUS) * time.Microsecond
		return p, err
	})
	driver.SortPolicies(pols)
	return pols, err
}

// claimSQL picks the claim statement: the policy function when the queue
// has key policies (and the driver enforces them).
func (d *Driver) claimSQL(ctx context.Context) (string, error) {
	keyed, _, err := d.currentPolicies(ctx)
	if err != nil || !keyed {
		return d.sql.claim, err
	}
	return d.psql.claim, nil
}

// pushDB is where a push runs: the pool, or an application's transaction
// (PushTx), in which Begin makes a savepoint.
type pushDB interface {
	querier
	Begin(ctx context.Context) (pgx.Tx, error)
}

// pushBounded runs push through db, and under a max-depth policy
// (maxDepth, from currentPolicies, 0 for none) in a transaction (a
// savepoint within the application's one) that enforces it, so that a full
// queue undoes only the push.
func (d *Driver) pushBounded(ctx context.Context, db pushDB, msgs []*driver.Message, w pushWake, maxDepth int64) ([]driver.PushResult, error) {
	if maxDepth == 0 {
		return d.push(ctx, db, msgs, w)
	}
	var res []driver.PushResult
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var err error
		res, err = d.pushWithinDepth(ctx, tx, msgs, w, maxDepth)
		return err
	})
	return res, err
}

// pushWithinDepth pushes msgs in tx under the queue's depth lock and fails
// with QueueFull, having pushed, when they overflow maxDepth: the caller
// must then roll tx back. The lock is held until tx ends.
func (d *Driver) pushWithinDepth(ctx context.Context, tx pgx.Tx, msgs []*driver.Message, w pushWake, maxDepth int64) ([]driver.PushResult, error) {
	if _, err := tx.Exec(ctx, d.psql.lockDepth, d.cfg.queue); err != nil {
		return nil, err
	}
	var depth int64
	if err := tx.QueryRow(ctx, d.psql.depth, d.cfg.queue).Scan(&depth); err != nil {
		return nil, err
	}
	r, err := d.push(ctx, tx, msgs, w)
	if err != nil {
		return nil, err
	}
	added := stored(r)
	if added > 0 && depth+int64(added) > maxDepth {
		return nil, driver.QueueFull(depth, maxDepth, added)
	}
	return r, nil
}

var _ driver.PolicyStore = (*Driver)(nil)

// SetPolicy implements driver.PolicyStore.
func (d *Driver) SetPolicy(ctx context.Context, p driver.Policy) error {
	if err := d.closing.Err(); err != nil {
		return err
	}
	if err := p.Validate(); err != nil {
		return err
	}
	_, err := d.pool.Exec(ctx, d.psql.upsert, d.cfg.queue, string(p.Kind), p.Key, p.Limit, p.Period.Microseconds())
	d.invalidatePolicies()
	return wrap(ctx, "policy set", err)
}

// UnsetPolicy implements driver.PolicyStore.
func (d *Driver) UnsetPolicy(ctx context.Context, kind driver.PolicyKind, key string) (bool, error) {
	if err := d.closing.Err(); err != nil {
		return false, err
	}
	tag, err := d.pool.Exec(ctx, d.psql.remove, d.cfg.queue, string(kind), key)
	d.invalidatePolicies()
	if err != nil {
		return false, wrap(ctx, "policy unset", err)
	}
	d.wake.Notify(-1) // a removed limit may unblock messages
	return tag.RowsAffected() > 0, nil
}

// ListPolicies implements driver.PolicyStore.
func (d *Driver) ListPolicies(ctx context.Context) ([]driver.Policy, error) {
	if err := d.closing.Err(); err != nil {
		return nil, err
	}
	c := &d.policies
	c.mu.Lock()
	gen := c.gen
	c.mu.Unlock()
	pols, err := d.loadPolicies(ctx)
	if err != nil {
		return nil, wrap(ctx, "policy list", err)
	}
	// A worker lists the policies every second or two (its pauses): the
	// claims' view of them need not read them again, unless a change made
	// here meanwhile may have come after this read.
	c.mu.Lock()
	if c.gen == gen {
		c.note(pols)
	}
	c.mu.Unlock()
	return pols, nil
}

// KeyStats implements driver.PolicyStore.
func (d *Driver) KeyStats(ctx context.Context) ([]driver.KeyStat, error) {
	if err := d.closing.Err(); err != nil {
		return nil, err
	}
	pols, err := d.loadPolicies(ctx)
	if err != nil {
		return nil, wrap(ctx, "stats", err)
	}
	stats := driver.NewKeyStatSet(pols)
	rows, err := d.pool.Query(ctx, d.psql.keyStats, d.cfg.queue)
	if err != nil {
		return nil, wrap(ctx, "stats", err)
	}
	for rows.Next() {
		var kind, key string
		var inFlight, waiting int64
		if err := rows.Scan(&kind, &key, &inFlight, &waiting); err != nil {
			rows.Close()
			return nil, wrap(ctx, "stats", err)
		}
		if stats.Lookup(driver.PolicyKind(kind), key) == nil && inFlight == 0 {
			continue // keys without a policy are shown only while leased
		}
		ks := stats.Get(driver.PolicyKind(kind), key)
		ks.InFlight, ks.Waiting = inFlight, waiting
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(ctx, "stats", err)
	}
	arows, err := d.pool.Query(ctx, d.psql.admitted, d.cfg.queue)
	if err != nil {
		return nil, wrap(ctx, "stats", err)
	}
	for arows.Next() {
		var key string
		var n int64
		if err := arows.Scan(&key, &n); err != nil {
			arows.Close()
			return nil, wrap(ctx, "stats", err)
		}
		if ks := stats.Lookup(driver.RatePolicy, key); ks != nil {
			ks.Admitted = n
		}
	}
	if err := arows.Err(); err != nil {
		return nil, wrap(ctx, "stats", err)
	}
	return stats.Sorted(), nil
}
