package postgres

// claimFirstFunction is schema step 24: claim_lookup (step 23's
// claimFarFunction) with a plain insert of the held rows of first
// deliveries, and with each key counted on its own on a queue with many
// leases in flight.
//
// Inserts. The claim's insert into held needed ON CONFLICT for one case:
// a message whose earlier lease left its row (a lease that expired, or a
// settlement by a process that had not seen the cap yet) and that is now
// claimed again. A first delivery can have no row: held rows are written
// only for leases (by claims, and by a new cap for the leases in flight),
// every claim counts a delivery, no statement lowers a message's
// deliveries, and message IDs are never reused. So the leases whose
// message now has one delivery (it had none) are inserted plainly, and
// only the others take the speculative insertion of ON CONFLICT, which
// probes the key before it inserts. In a capped drain nearly every lease
// is a first delivery, and the claim's last statement took 3-5 µs less
// per task (performance.md).
//
// Counts. A claim counts the queue's held rows up to a bound (the largest
// cap less the window, at most 1,000) and takes that count as every
// key's. Before this step, a queue with more held rows than the bound (a
// fleet with many leases in flight) sent every key the claim met to the
// check of ended leases, a lookup in messages per held row of the key. Now
// each such key with a cap of at least the window counts its own rows, up
// to the count that would leave it fewer slots than the window has
// candidates; only the keys that reach it are checked. With 3,000 leases
// in flight over 100 keys capped at 5,000, a claim of 32 takes 0.40x the
// time (BenchmarkClaimBusyCappedQueue, performance.md).
//
// Its name and columns stay, so a process of an earlier release claims
// through it too.
var claimFirstFunction = mustReplace(claimFarFunction,
	"\t\tSELECT p_queue, u.concurrency_key, u.id, u.priority, u.lease FROM u JOIN unnest(capped) AS c(k) ON c.k = u.concurrency_key\n"+
		"\t\tON CONFLICT (queue, key, id) DO UPDATE SET priority = excluded.priority, lease = excluded.lease\n\t)\n",
	"\t\tSELECT p_queue, u.concurrency_key, u.id, u.priority, u.lease FROM u JOIN unnest(capped) AS c(k) ON c.k = u.concurrency_key\n"+
		"\t\tWHERE u.deliveries = 1\n"+
		"\t), h_again AS (\n"+
		"\t\tINSERT INTO {{s}}.held (queue, key, id, priority, lease)\n"+
		"\t\tSELECT p_queue, u.concurrency_key, u.id, u.priority, u.lease FROM u JOIN unnest(capped) AS c(k) ON c.k = u.concurrency_key\n"+
		"\t\tWHERE u.deliveries IS DISTINCT FROM 1\n"+
		"\t\tON CONFLICT (queue, key, id) DO UPDATE SET priority = excluded.priority, lease = excluded.lease\n\t)\n",
	"\tbound bigint;             -- how many of the queue's held rows to count\n",
	"\tbound bigint;             -- how many of the queue's held rows to count\n"+
		"\tfar text[];                -- locked keys counted one by one, far from their cap, with\n"+
		"\tfar_left bigint[];         -- how many more each may take\n",
	`			SELECT coalesce(array_agg(x.k), '{}') INTO near
			FROM unnest(locked, lims) AS x(k, n) WHERE total IS NULL OR x.n - total < win;
`,
	`			far := '{}';
			far_left := '{}';
			IF total IS NULL AND bound > 0 THEN
				-- More held rows on the queue than the bound: each key with
				-- a cap of at least the window counts its own, up to the
				-- count that would leave it fewer slots than the window has
				-- candidates, so that a queue with many leases in flight does
				-- not send every key it meets to the check of ended leases.
				-- (OFFSET 0 counts each key once: pulled up, the subquery's
				-- n_left was counted once per FILTER.)
				SELECT coalesce(array_agg(x.k) FILTER (WHERE x.n_left < win), '{}'),
				       coalesce(array_agg(x.k) FILTER (WHERE x.n_left >= win), '{}'),
				       coalesce(array_agg(x.n_left) FILTER (WHERE x.n_left >= win), '{}')
				INTO near, far, far_left
				FROM (SELECT l.k, CASE WHEN l.n < win THEN l.n ELSE l.n - (
					SELECT count(*) FROM (SELECT FROM {{s}}.held h WHERE h.queue = p_queue AND h.key = l.k LIMIT l.n - win + 1) AS s)
					END AS n_left
					FROM unnest(locked, lims) AS l(k, n) OFFSET 0) AS x;
			ELSE
				SELECT coalesce(array_agg(x.k), '{}') INTO near
				FROM unnest(locked, lims) AS x(k, n) WHERE total IS NULL OR x.n - total < win;
			END IF;
`,
	"\t\t\t\tWHEN l.k IS NOT NULL THEN l.n - total\n",
	"\t\t\t\tWHEN f.k IS NOT NULL THEN f.n\n\t\t\t\tWHEN l.k IS NOT NULL THEN l.n - total\n",
	"\t\t\tLEFT JOIN unnest(near) AS nr(k) ON nr.k = u.k;",
	"\t\t\tLEFT JOIN unnest(near) AS nr(k) ON nr.k = u.k\n\t\t\tLEFT JOIN unnest(far, far_left) AS f(k, n) ON f.k = u.k;",
)
