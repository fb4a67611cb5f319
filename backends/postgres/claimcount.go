package postgres

// claimCountFunction is schema step 16: claim_lookup (claimlookup.go) with
// less work per claim under caps. Its name, columns and guarantees are
// those of step 14 (a capped key's leases are still counted exactly, under
// its lock, in a statement after the one that took the lock), so a process
// of the release before the step claims through it too.
//
//   - When pass 1 took something and only busy keys (whose lock another
//     claim holds) left it short, the claim returns what it took. Before,
//     pass 2 ran: a count of the leases of every capped key of the queue,
//     a second window, and the locks and counts of its keys, to fill the
//     batch from behind keys that were never full. In the policies
//     benchmark (100 capped keys, 16 handlers) 23 % of the claims ran it,
//     each at about twice the cost of pass 1; now 3 % do. A claim that took
//     nothing still scans on past busy keys, and a full key still sends a
//     claim on.
//   - Pass 2 counts a key's leases exactly (a lookup in messages per held
//     row) only when its held rows alone reach its cap.
//   - The caps of the locked keys come with their locks, not from a lookup
//     of policies per key in the count.
//   - A window without rate keys runs none of their statements.
var claimCountFunction = mustReplace(claimLookupFunction,
	"\tcapped text[] := '{}';    -- the keys of ck that have a cap\n",
	"\tcapped text[] := '{}';    -- the keys of ck that have a cap\n\tlims bigint[];             -- the caps of locked\n"+
		"\tbusy_c text[] := '{}';    -- the keys left out as busy, concurrency\n\tbusy_r text[] := '{}';    -- and rate\n"+
		"\tfull_met boolean := false; -- whether a full key (not a busy one) left a candidate out\n",
	// A key cannot be full while its held rows, ended leases and all, are
	// fewer than its cap: that count needs no lookup in messages.
	`WHERE p.queue = p_queue AND p.kind = 'concurrency' AND p.limit_n <= (`,
	`WHERE p.queue = p_queue AND p.kind = 'concurrency'
			AND p.limit_n <= (SELECT count(*) FROM {{s}}.held h WHERE h.queue = p_queue AND h.key = p.key) AND p.limit_n <= (`,
	`		-- Concurrency keys: lock the capped ones, then count.
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
				AND m.lease = h.lease AND m.visible_at > now() OFFSET 0);
			SELECT ck || array_agg(u.k), ck_left || array_agg(CASE
				WHEN u.k = ANY (busy) THEN 0
				WHEN u.k = ANY (locked) THEN (SELECT p.limit_n FROM {{s}}.policies p
					WHERE p.queue = p_queue AND p.kind = 'concurrency' AND p.key = u.k) - (SELECT count(*) FROM {{s}}.held h
					WHERE h.queue = p_queue AND h.key = u.k)
				END)
			INTO ck, ck_left
			FROM unnest(new_k) AS u(k);
		END IF;
`,
	`		-- Concurrency keys: lock the capped ones, then count.
		SELECT coalesce(array_agg(DISTINCT u.k), '{}') INTO new_k
		FROM unnest(w_ck) AS u(k) WHERE u.k IS NOT NULL AND NOT (u.k = ANY (ck));
		IF cardinality(new_k) > 0 THEN
			SELECT coalesce(array_agg(x.key) FILTER (WHERE x.got), '{}'), coalesce(array_agg(x.limit_n) FILTER (WHERE x.got), '{}'),
			       coalesce(array_agg(x.key) FILTER (WHERE NOT x.got), '{}')
			INTO locked, lims, busy
			FROM (SELECT p.key, p.limit_n, pg_try_advisory_xact_lock(hashtextextended('jobq.key.{{s}}.c.' || p_queue || '.' || p.key, 0)) AS got
				FROM {{s}}.policies p WHERE p.queue = p_queue AND p.kind = 'concurrency' AND p.key = ANY (new_k)) AS x;
			busy_c := busy_c || busy;
			-- Under their locks, forget the locked keys' leases that have
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
		END IF;
`,
	`		SELECT coalesce(array_agg(DISTINCT u.k), '{}') INTO new_k
		FROM unnest(w_rk) AS u(k) WHERE u.k IS NOT NULL AND NOT (u.k = ANY (rk));
`,
	`		new_k := '{}';
		IF cardinality(array_remove(w_rk, NULL)) > 0 THEN
			SELECT coalesce(array_agg(DISTINCT u.k), '{}') INTO new_k
			FROM unnest(w_rk) AS u(k) WHERE u.k IS NOT NULL AND NOT (u.k = ANY (rk));
		END IF;
`,
	// Rate keys left out as busy are remembered too.
	`			LEFT JOIN {{s}}.policies p ON p.queue = p_queue AND p.kind = 'rate' AND p.key = u.k;
`,
	`			LEFT JOIN {{s}}.policies p ON p.queue = p_queue AND p.kind = 'rate' AND p.key = u.k;
`+"\t\t\tbusy_r := busy_r || busy;\n",
	// Pass 2 scans on past full keys. When only busy keys (another claim
	// holds them) left pass 1 short, and it took something, the claim
	// returns what it took: the other claim is settling those keys.
	`			EXIT WHEN n >= p_max OR fetched < win;
`,
	`			EXIT WHEN n >= p_max OR fetched < win OR (n > 0 AND NOT full_met);
`,
	`				CONTINUE WHEN ck_left[i] <= 0;
`,
	`				IF ck_left[i] <= 0 THEN
					full_met := full_met OR NOT (w_ck[j] = ANY (busy_c));
					CONTINUE;
				END IF;
`,
	`				CONTINUE WHEN rk_left[i] <= 0;
`,
	`				IF rk_left[i] <= 0 THEN
					full_met := full_met OR NOT (w_rk[j] = ANY (busy_r));
					CONTINUE;
				END IF;
`,
)
