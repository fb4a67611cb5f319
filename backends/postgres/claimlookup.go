package postgres

// claimLookupFunction is schema step 14: claim_lookup, claim_packed
// (claimPackedFunction) with the rows it reads from messages found by
// lookups whatever the planner estimates, and the trace context and the
// group (step 13) among its columns. claim_packed stays for the releases before the step.
//
// The window of candidates now also collects the rows' ctids, and the
// update finds the rows it takes by them (ctid = ANY: a TID scan, no join;
// the window's FOR UPDATE holds the rows, so their ctids cannot change
// before the update; with no other condition on the table the planner has
// no index to prefer). Before, it joined on (queue, priority, id), and
// where the statistics said the queue held about one row (a schema's
// queue first analyzed while empty, or one of many queues in a schema),
// the planner read every message of the queue once per claim and matched
// each against the batch: 165 ms for a claim of 64 on a queue of 5,000
// (EXPLAIN ANALYZE through auto_explain), and a drain under caps ran at a
// fifth of the uncapped rate. The claim statement then joined the
// function's rows to messages once more for their trace context, which
// the planner did the same way (a hash of the whole queue per claim); the
// update returns it now.
//
// The check of held leases runs per held row as a subquery that cannot be
// turned into a join (OFFSET 0), so it looks each message up by its full
// key (queue, priority, id) instead of scanning the queue beside the held
// rows (20 ms per claim in the same case).
var claimLookupFunction = mustReplace(claimPackedFunction,
	`CREATE OR REPLACE FUNCTION {{s}}.claim_packed(`, `CREATE OR REPLACE FUNCTION {{s}}.claim_lookup(`,
	`r_lease text, r_priority int)`, `r_lease text, r_priority int, r_trace_parent text, r_grp text)`,
	"\tw_ids bigint[];           -- the window of candidates, in claim order\n",
	"\tw_ids bigint[];           -- the window of candidates, in claim order\n\tw_ctids tid[];            -- and where each is\n\tctids tid[] := '{}';      -- where the taken ones are\n",
	`SELECT coalesce(array_agg(c.id ORDER BY c.priority DESC, c.id), '{}'),`,
	`SELECT coalesce(array_agg(c.id ORDER BY c.priority DESC, c.id), '{}'),
		       array_agg(c.ctid ORDER BY c.priority DESC, c.id),`,
	`INTO w_ids, w_prios, w_ck, w_rk`,
	`INTO w_ids, w_ctids, w_prios, w_ck, w_rk`,
	`FROM (SELECT m.id, m.priority, m.concurrency_key, m.rate_key FROM {{s}}.messages m`,
	`FROM (SELECT m.ctid, m.id, m.priority, m.concurrency_key, m.rate_key FROM {{s}}.messages m`,
	`			ids := ids || w_ids[j];
`,
	`			ids := ids || w_ids[j];
			ctids := ctids || w_ctids[j];
`,
	`		FROM unnest(ids, prios) AS x(xid, xprio)
		WHERE m.queue = p_queue AND m.priority = x.xprio AND m.id = x.xid
		RETURNING m.id, m.task_key, m.packed_body, m.deliveries, m.enqueued_at, m.lease, m.priority, m.concurrency_key`,
	`		WHERE m.ctid = ANY (ctids)
		RETURNING m.id, m.task_key, m.packed_body, m.deliveries, m.enqueued_at, m.lease, m.priority, m.concurrency_key, m.trace_parent, m.grp`,
	`SELECT u.id, u.task_key, u.packed_body, u.deliveries, u.enqueued_at, u.lease::text, u.priority FROM u;`,
	`SELECT u.id, u.task_key, u.packed_body, u.deliveries, u.enqueued_at, u.lease::text, u.priority, coalesce(u.trace_parent, ''), coalesce(u.grp, '') FROM u;`,
	`DELETE FROM {{s}}.held h WHERE h.queue = p_queue AND h.key = ANY (locked) AND NOT EXISTS (
				SELECT 1 FROM {{s}}.messages m WHERE m.queue = h.queue AND m.priority = h.priority AND m.id = h.id
				AND m.lease = h.lease AND m.visible_at > now());`,
	`DELETE FROM {{s}}.held h WHERE h.queue = p_queue AND h.key = ANY (locked) AND NOT EXISTS (
				SELECT 1 FROM {{s}}.messages m WHERE m.queue = h.queue AND m.priority = h.priority AND m.id = h.id
				AND m.lease = h.lease AND m.visible_at > now() OFFSET 0);`,
)
