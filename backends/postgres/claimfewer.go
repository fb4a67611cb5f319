package postgres

// claimFewerFunction is schema step 26: claim_lookup (step 25's
// claimCursorFunction) running fewer statements where the keys it meets
// are far from their caps, the usual case on a capped queue. Each
// statement of a PL/pgSQL function costs an executor start of its own:
//
//   - the statement that locks the new keys also returns their largest and
//     smallest caps, so the bound of held rows to count is an expression,
//     and when that count leaves the smallest cap at least the window in
//     hand, no statement looks for keys near their cap;
//   - when, in pass 1, no key is busy and the count leaves every key more
//     slots than the window has candidates, the window is taken as it
//     comes (as step 23 does) without listing each key's slots: pass 2,
//     which reads that list, cannot follow a pass that took its window;
//   - otherwise pass 1 has the fewest slots left from the statement that
//     lists them; pass 2, after pass 1 took some, still asks.
//
// What each claim takes is unchanged. Under callgrind, claims of 32 over
// 100 keys capped at 1,000 cost the claiming backend 0.83x the
// instructions of step 25's (performance.md). Its name and columns stay,
// so a process of an earlier release claims through it too.
var claimFewerFunction = mustReplace(claimCursorFunction,
	"\tbound bigint;             -- how many of the queue's held rows to count\n",
	"\tbound bigint;             -- how many of the queue's held rows to count\n"+
		"\tlim_max bigint;           -- the largest and smallest caps of locked\n"+
		"\tlim_min bigint;\n"+
		"\tmin_left bigint;          -- the fewest slots left of pass 1's keys\n"+
		"\tquick boolean := false;   -- pass 1 takes its window as it comes, its keys unlisted\n",
	`			       coalesce(array_agg(x.key) FILTER (WHERE NOT x.got), '{}')
			INTO locked, lims, busy
`,
	`			       coalesce(array_agg(x.key) FILTER (WHERE NOT x.got), '{}'),
			       max(x.limit_n) FILTER (WHERE x.got), min(x.limit_n) FILTER (WHERE x.got)
			INTO locked, lims, busy, lim_max, lim_min
`,
	`			bound := least(coalesce((SELECT max(x.n) FROM unnest(lims) AS x(n)), 0) - win + 1, 1000);`,
	`			bound := least(coalesce(lim_max, 0) - win + 1, 1000);`,
	`			ELSE
				SELECT coalesce(array_agg(x.k), '{}') INTO near
				FROM unnest(locked, lims) AS x(k, n) WHERE total IS NULL OR x.n - total < win;
`,
	`			ELSIF total IS NOT NULL AND (lim_min IS NULL OR lim_min - total >= win) THEN
				near := '{}'; -- every locked key has the window in hand
			ELSE
				SELECT coalesce(array_agg(x.k), '{}') INTO near
				FROM unnest(locked, lims) AS x(k, n) WHERE total IS NULL OR x.n - total < win;
`,
	`			SELECT array_agg(u.k), array_agg(CASE`,
	`			-- When no key of the window is busy and the queue's count
			-- leaves each more slots than it has candidates, pass 1 takes
			-- them all, and pass 2 does not run: the keys' slots need no
			-- list.
			quick := pass = 1 AND fetched > 0 AND cardinality(array_remove(w_rk, NULL)) = 0 AND cardinality(busy) = 0
			         AND total IS NOT NULL AND (lim_min IS NULL OR lim_min - total > fetched);
			IF NOT quick THEN
			-- (OFFSET 0 counts a near key once: pulled up, l would be
			-- evaluated once per aggregate.)
			SELECT array_agg(y.k), array_agg(y.l), min(y.l) INTO new_ck, new_left, min_left
			FROM (SELECT u.k, CASE`,
	`				END)
			INTO new_ck, new_left
			FROM unnest(new_k) AS u(k)`,
	`				END AS l
			FROM unnest(new_k) AS u(k)`,
	`			LEFT JOIN unnest(far, far_left) AS f(k, n) ON f.k = u.k;
			ck := ck || new_ck;
			ck_left := ck_left || new_left;
`,
	`			LEFT JOIN unnest(far, far_left) AS f(k, n) ON f.k = u.k
			OFFSET 0) AS y;
			ck := ck || new_ck;
			ck_left := ck_left || new_left;
			END IF;
`,
	`		IF fetched > 0 AND cardinality(array_remove(w_rk, NULL)) = 0
		   AND fetched < coalesce((SELECT min(x.l) FROM unnest(ck_left) AS x(l)), fetched + 1) THEN
`,
	`		IF pass = 2 THEN
			quick := false;
			min_left := (SELECT min(x.l) FROM unnest(ck_left) AS x(l));
		END IF;
		IF quick OR fetched > 0 AND cardinality(array_remove(w_rk, NULL)) = 0
		   AND fetched < coalesce(min_left, fetched + 1) THEN
`,
)
