package postgres

// claimFirstFunction is schema step 24: claim_lookup (step 23's
// claimFarFunction) with a plain insert of the held rows of first
// deliveries.
//
// The claim's insert into held needed ON CONFLICT for one case: a message
// whose earlier lease left its row (a lease that expired, or a settlement
// by a process that had not seen the cap yet) and that is now claimed
// again. A first delivery can have no row: held rows are written only for
// leases (by claims, and by a new cap for the leases in flight), every
// claim counts a delivery, no statement lowers a message's deliveries, and
// message IDs are never reused. So the leases whose message now has one
// delivery (it had none) are inserted plainly, and only the others take
// the speculative insertion of ON CONFLICT, which probes the key before
// it inserts. In a capped drain nearly every lease is a first delivery,
// and the claim's last statement took 3–5 µs less per task
// (performance.md).
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
)
