package postgres

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Held leases leave with their settlement (schema step 20).
//
// held has a row per lease taken on a capped key (schema step 5). Before
// the step, settlements left the rows, and every claim that met a capped
// key deleted the key's rows whose lease had ended (a lookup in messages
// per row) before it counted the rest. Now the settlements that end
// leases (complete, requeue, dead-letter) delete their rows in the same
// statement, when the queue has key policies (heldSettledSQL), so a key's
// rows are its leases in flight plus those that expired (and the few that
// a settlement left: one by a process of an earlier release, or by one
// whose view of the policies had not seen the cap yet). A claim counts
// the queue's held rows, up to a limit: a key whose cap leaves at least
// the claim's window of candidates beyond that count needs nothing more.
// Only the other keys (within reach of their caps) forget their rows of
// ended leases and are counted one by one. So a count never falls below
// the leases in flight, an expired lease frees its slot at the first
// claim that needs the slot, and claims of keys far from their caps
// neither look their rows up in messages nor count them key by key.
//
// Server instructions per task of a claim of 16 and its completion, 100
// keys (callgrind, harness on branch caps-held-settle): at caps of 1000,
// 336k against 359k before (-7 %); at caps of 1, the same; without
// policies, 105k.

// claimHeldFunction is claim_lookup (step 16's claimCountFunction) with
// the check of ended leases and the count per key only where the cap is
// within reach. Its name
// and columns stay, so a process of an earlier release claims through it
// too.
var claimHeldFunction = mustReplace(claimCountFunction,
	"\tfull_met boolean := false; -- whether a full key (not a busy one) left a candidate out\n",
	"\tfull_met boolean := false; -- whether a full key (not a busy one) left a candidate out\n"+
		"\tnew_ck text[];             -- the keys new to ck, with\n"+
		"\tnew_left bigint[];         -- their ck_left\n"+
		"\tnear text[];               -- locked keys whose cap this claim could reach\n"+
		"\tbound bigint;             -- how many of the queue's held rows to count\n"+
		"\ttotal bigint;             -- and how many there are (NULL: that many or more)\n",
	`			-- Under their locks, forget the locked keys' leases that have
			-- ended (settled, expired or claimed again), then count the rest.
			DELETE FROM {{s}}.held h WHERE h.queue = p_queue AND h.key = ANY (locked) AND NOT EXISTS (
				SELECT 1 FROM {{s}}.messages m WHERE m.queue = h.queue AND m.priority = h.priority AND m.id = h.id
				AND m.lease = h.lease AND m.visible_at > now() OFFSET 0);
			SELECT ck || array_agg(u.k), ck_left || array_agg(CASE
				WHEN u.k = ANY (busy) THEN 0
				WHEN l.i IS NOT NULL THEN lims[l.i] - (SELECT count(*) FROM {{s}}.held h WHERE h.queue = p_queue AND h.key = u.k)
				END)
			INTO ck, ck_left
			FROM unnest(new_k) AS u(k), LATERAL (SELECT array_position(locked, u.k) AS i) AS l;
`,
	`			-- Under their locks (so in statements after the one that took
			-- them), count the locked keys' held rows: their leases in
			-- flight, and expired ones. The queue's held rows, counted up to
			-- a limit, bound every key's: a key whose cap is at least the
			-- window beyond that bound needs no count of its own.
			total := NULL;
			bound := least(coalesce((SELECT max(x.n) FROM unnest(lims) AS x(n)), 0) - win + 1, 1000);
			IF bound > 0 THEN
				SELECT count(*) INTO total FROM (SELECT FROM {{s}}.held h WHERE h.queue = p_queue LIMIT bound) AS s;
				IF total >= bound THEN
					total := NULL;
				END IF;
			END IF;
			-- The keys left with fewer slots than the window has
			-- candidates forget the rows whose lease has ended, and are
			-- counted key by key.
			SELECT coalesce(array_agg(x.k), '{}') INTO near
			FROM unnest(locked, lims) AS x(k, n) WHERE total IS NULL OR x.n - total < win;
			IF cardinality(near) > 0 THEN
				DELETE FROM {{s}}.held h WHERE h.queue = p_queue AND h.key = ANY (near) AND NOT EXISTS (
					SELECT 1 FROM {{s}}.messages m WHERE m.queue = h.queue AND m.priority = h.priority AND m.id = h.id
					AND m.lease = h.lease AND m.visible_at > now() OFFSET 0);
			END IF;
			SELECT array_agg(u.k), array_agg(CASE
				WHEN u.k = ANY (busy) THEN 0
				WHEN u.k = ANY (near) THEN lims[l.i] - (SELECT count(*) FROM {{s}}.held h WHERE h.queue = p_queue AND h.key = u.k)
				WHEN l.i IS NOT NULL THEN lims[l.i] - total
				END)
			INTO new_ck, new_left
			FROM unnest(new_k) AS u(k), LATERAL (SELECT array_position(locked, u.k) AS i) AS l;
			ck := ck || new_ck;
			ck_left := ck_left || new_left;
`,
)

// heldSettledCTE deletes the held rows of the leases that a settlement
// ended: the rows of the CTE named by %[1]s, with their queue, key and
// message id as cap_q, cap_k and id.
const heldSettledCTE = `, cap_held AS (
	DELETE FROM {{s}}.held h USING %[1]s c WHERE h.queue = c.cap_q AND h.key = c.cap_k AND h.id = c.id
)`

// capReturning is what a settlement's change of messages returns for
// heldSettledCTE.
const capReturning = "RETURNING m.queue AS cap_q, m.concurrency_key AS cap_k, m.id"

// heldSettledSettleSQL returns settlement statement stmt (schema filled
// in, grouped or not) with heldSettledCTE. The statements change messages
// in one of two ways: the CTE d of the deleted rows (complete,
// dead-letter), or an UPDATE (requeue), alone or as the CTE u of its
// grouped variant.
func heldSettledSettleSQL(stmt, schema string) (string, error) {
	cte := func(from string) string {
		return strings.ReplaceAll(fmt.Sprintf(heldSettledCTE, from), "{{s}}", schema)
	}
	update := "\nUPDATE " + schema + ".messages m"
	if i := strings.Index(stmt, ", d AS ("); i >= 0 {
		r := strings.Index(stmt[i:], "RETURNING m.id")
		end := strings.Index(stmt[i:], "\n)")
		if r < 0 || end < r {
			return "", fmt.Errorf("postgres: no place for the held leases in the statement %q", stmt)
		}
		r, end = r+i, end+i+2
		return stmt[:r] + capReturning + stmt[r+len("RETURNING m.id"):end] + cte("d") + stmt[end:], nil
	}
	if i := strings.Index(stmt, update); i >= 0 && strings.HasSuffix(stmt, "RETURNING m.id") {
		body := strings.TrimSuffix(stmt[i:], "RETURNING m.id") + capReturning
		return stmt[:i] + ",\nu AS (" + body + "\n)" + cte("u") + "\nSELECT id FROM u", nil
	}
	if i := strings.Index(stmt, ",\nu AS ("+update); i >= 0 && strings.HasSuffix(stmt, "\nSELECT id FROM u") {
		r := strings.Index(stmt[i:], "RETURNING m.id\n)")
		if r < 0 {
			return "", fmt.Errorf("postgres: no place for the held leases in the statement %q", stmt)
		}
		r += i
		out := stmt[:r] + capReturning + strings.TrimSuffix(stmt[r+len("RETURNING m.id"):], "\nSELECT id FROM u")
		return out + cte("u") + "\nSELECT id FROM u", nil
	}
	return "", fmt.Errorf("postgres: no place for the held leases in the statement %q", stmt)
}

// heldSettledSQL returns the variant of settlement statement stmt that
// deletes the held rows of the leases it ends, built once per statement.
func (d *Driver) heldSettledSQL(stmt string) (string, error) {
	if v, ok := d.heldSettled.Load(stmt); ok {
		return v.(string), nil
	}
	c, err := heldSettledSettleSQL(stmt, pgx.Identifier{d.cfg.schema}.Sanitize())
	if err != nil {
		return "", err
	}
	d.heldSettled.Store(stmt, c)
	return c, nil
}
