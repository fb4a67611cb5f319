package postgres

// claimFarFunction is schema step 23: claim_lookup (step 20's
// claimHeldFunction) with less work where no cap is within reach. Its
// name, columns and guarantees stay, so a process of an earlier release
// claims through it too.
//
//   - A window without rate keys, whose capped keys each have more slots
//     left than the window has candidates, is taken as it comes: no key
//     can reach its cap in it, so the loop that checks each candidate
//     against its key would take the same ones.
//   - Expired rate admissions are deleted only by claims that meet rate
//     keys (before they count them, under their locks), not by every
//     claim; the counts of admissions leave expired ones out, so one
//     left behind never blocks a key.
//   - The capped keys whose leases go into held are gathered as they are
//     locked, not by a loop over every key met at the end.
//   - Keys are matched by hashed joins instead of = ANY over text arrays,
//     and the window's arrays come from one aggregation over its ordered
//     rows instead of five sorts.
//
// Under callgrind, a claim of 32 over 100 keys capped at 1,000 costs the
// server about a quarter fewer instructions than step 20's, and one at
// caps of 1 about a tenth fewer (performance.md).
var claimFarFunction = mustReplace(claimHeldFunction,
	"\tDELETE FROM {{s}}.admissions a WHERE a.queue = p_queue AND a.expires_at <= now();\n", "",
	`SELECT count(*) FROM {{s}}.admissions a WHERE a.queue = p_queue AND a.key = p.key);`,
	`SELECT count(*) FROM {{s}}.admissions a WHERE a.queue = p_queue AND a.key = p.key AND a.expires_at > now());`,
	`			SELECT rk || array_agg(u.k), rk_left || array_agg(CASE`,
	`			DELETE FROM {{s}}.admissions a WHERE a.queue = p_queue AND a.expires_at <= now();
			SELECT rk || array_agg(u.k), rk_left || array_agg(CASE`,
	`(SELECT count(*) FROM {{s}}.admissions a WHERE a.queue = p_queue AND a.key = u.k)`,
	`(SELECT count(*) FROM {{s}}.admissions a WHERE a.queue = p_queue AND a.key = u.k AND a.expires_at > now())`,
	"\t\tFOR j IN 1 .. fetched LOOP\n",
	`		-- Far from every cap and without rate keys, the window's first
		-- candidates are taken as they come (ck_left, left as it is, is
		-- not read again: pass 2 never follows a pass that took some).
		IF fetched > 0 AND cardinality(array_remove(w_rk, NULL)) = 0
		   AND fetched < coalesce((SELECT min(x.l) FROM unnest(ck_left) AS x(l)), fetched + 1) THEN
			j := least(fetched, p_max - n);
			ids := ids || w_ids[1:j];
			ctids := ctids || w_ctids[1:j];
			prios := prios || w_prios[1:j];
			n := n + j;
		ELSE
		FOR j IN 1 .. fetched LOOP
`,
	"\t\tEND LOOP;\n\tEND LOOP;\n\tIF n = 0 THEN",
	"\t\tEND LOOP;\n\t\tEND IF;\n\tEND LOOP;\n\tIF n = 0 THEN",
	// The keys whose taken leases go into held: those locked, gathered as
	// they are locked rather than by a loop over ck at the end (a busy key,
	// the other with a cap, has nothing taken).
	// Keys are matched by joins (hashed), not by = ANY over arrays, which
	// compared every key met with every other, and with every policy of
	// the queue: about 4,000 text comparisons a claim of 30 over 100 keys.
	`FROM {{s}}.policies p WHERE p.queue = p_queue AND p.kind = 'concurrency' AND p.key = ANY (new_k)) AS x;`,
	`FROM unnest(new_k) AS u(k) JOIN {{s}}.policies p ON p.queue = p_queue AND p.kind = 'concurrency' AND p.key = u.k) AS x;`,
	`			SELECT array_agg(u.k), array_agg(CASE
				WHEN u.k = ANY (busy) THEN 0
				WHEN u.k = ANY (near) THEN lims[l.i] - (SELECT count(*) FROM {{s}}.held h WHERE h.queue = p_queue AND h.key = u.k)
				WHEN l.i IS NOT NULL THEN lims[l.i] - total
				END)
			INTO new_ck, new_left
			FROM unnest(new_k) AS u(k), LATERAL (SELECT array_position(locked, u.k) AS i) AS l;`,
	`			SELECT array_agg(u.k), array_agg(CASE
				WHEN b.k IS NOT NULL THEN 0
				WHEN nr.k IS NOT NULL THEN l.n - (SELECT count(*) FROM {{s}}.held h WHERE h.queue = p_queue AND h.key = u.k)
				WHEN l.k IS NOT NULL THEN l.n - total
				END)
			INTO new_ck, new_left
			FROM unnest(new_k) AS u(k)
			LEFT JOIN unnest(locked, lims) AS l(k, n) ON l.k = u.k
			LEFT JOIN unnest(busy) AS b(k) ON b.k = u.k
			LEFT JOIN unnest(near) AS nr(k) ON nr.k = u.k;`,
	"\t\tSELECT p_queue, u.concurrency_key, u.id, u.priority, u.lease FROM u\n\t\tWHERE u.concurrency_key = ANY (capped)\n",
	"\t\tSELECT p_queue, u.concurrency_key, u.id, u.priority, u.lease FROM u JOIN unnest(capped) AS c(k) ON c.k = u.concurrency_key\n",
	// The window's rows come in claim order (its subquery's ORDER BY,
	// under LIMIT and FOR UPDATE), and one aggregation over them fills its
	// five arrays in that order: five sorts of the same rows were planned
	// and run on every call.
	"\t\tSELECT coalesce(array_agg(c.id ORDER BY c.priority DESC, c.id), '{}'),\n"+
		"\t\t       array_agg(c.ctid ORDER BY c.priority DESC, c.id),\n"+
		"\t\t       array_agg(c.priority ORDER BY c.priority DESC, c.id),\n"+
		"\t\t       array_agg(c.concurrency_key ORDER BY c.priority DESC, c.id),\n"+
		"\t\t       array_agg(c.rate_key ORDER BY c.priority DESC, c.id)\n",
	"\t\tSELECT coalesce(array_agg(c.id), '{}'), array_agg(c.ctid), array_agg(c.priority), array_agg(c.concurrency_key), array_agg(c.rate_key)\n",
	"\t\t\tbusy_c := busy_c || busy;\n",
	"\t\t\tbusy_c := busy_c || busy;\n\t\t\tcapped := capped || locked;\n",
	`	FOR i IN 1 .. coalesce(array_length(ck, 1), 0) LOOP
		IF ck_left[i] IS NOT NULL THEN
			capped := capped || ck[i];
		END IF;
	END LOOP;
`, "",
)
