package postgres

// claimCursorMigration is schema step 25: claim_lookup (step 24's
// claimFirstFunction) with a cursor for pass 2, kept in claim_cursors.
//
// Pass 2 runs when full keys crowd the head of the queue: it scans the
// claim order from the head, leaving out the full keys' tasks one by one.
// Tasks of a key at its cap queued ahead of claimable work (100,000 tasks
// of a key capped at 1, pushed first) made every claim read all of them:
// 43 ms a claim of 32, and a fleet polling an otherwise drained queue kept the
// server busy with nothing to claim.
//
// A pass 2 that scans from the head and finds its first candidate far
// from pass 1's window (more than cursorGap IDs on, or at another
// priority) keeps where it found it, with the keys it left out. For a
// second, a pass 2 whose keys left out include all of those starts at
// that task: what lies before it was tasks of those keys, which are still
// full. What it can pass by is a task that became claimable there since:
// a lease that expired or was requeued, a task another claim had locked
// and left. Such a task waits until the cursor is a second old, when the
// next pass 2 scans from the head again. A key that frees a slot is no
// longer left out, so no cursor of the keys it was among is used, and the
// next pass 2 scans from the head.
//
// The table is UNLOGGED: a cursor is a hint, and after a crash the next
// pass 2 scans from the head. A queue has one row, written only by a
// claim that scanned far: from the head, or from the cursor (which it then
// moves on, keeping its age and keys). A claim that finds the row locked
// by another claim's write leaves it to that one rather than wait; ON
// CONFLICT DO NOTHING does the same for the queue's first row.
const claimCursorMigration = `
CREATE UNLOGGED TABLE IF NOT EXISTS {{s}}.claim_cursors (
	queue     text COLLATE "C" PRIMARY KEY,
	priority  integer NOT NULL,
	id        bigint NOT NULL,
	left_c    text[] NOT NULL, -- the keys pass 2 left out, concurrency
	left_r    text[] NOT NULL, -- and rate
	set_at    timestamptz NOT NULL
);
`

// cursorGap is how many message IDs past pass 1's window pass 2 must find
// its first candidate before it keeps a cursor (as SQL text): nearer, the
// scan from the head is short, and a cursor would cost a write.
const cursorGap = "1000"

// windowScan is step 24's scan of the claim order for a window of
// candidates, which pass 1 runs, and pass 2 without a cursor.
const windowScan = `		SELECT coalesce(array_agg(c.id), '{}'), array_agg(c.ctid), array_agg(c.priority), array_agg(c.concurrency_key), array_agg(c.rate_key)
		INTO w_ids, w_ctids, w_prios, w_ck, w_rk
		FROM (SELECT m.ctid, m.id, m.priority, m.concurrency_key, m.rate_key FROM {{s}}.messages m
			WHERE m.queue = p_queue AND m.visible_at <= now()
			  AND (m.concurrency_key IS NULL OR NOT (m.concurrency_key = ANY (blocked_c)))
			  AND (m.rate_key IS NULL OR NOT (m.rate_key = ANY (blocked_r)))
			  AND NOT (m.id = ANY (ids))
			ORDER BY m.priority DESC, m.id
			LIMIT win
			FOR UPDATE SKIP LOCKED) c;
`

// scanFrom is windowScan restricted by cond, into the arrays into, taking
// at most limit.
func scanFrom(cond, into, limit string) string {
	return mustReplace(windowScan,
		"m.queue = p_queue AND m.visible_at <= now()", "m.queue = p_queue AND "+cond+" AND m.visible_at <= now()",
		"INTO w_ids, w_ctids, w_prios, w_ck, w_rk", "INTO "+into,
		"LIMIT win\n", "LIMIT "+limit+"\n")
}

// claimCursorFunction is claim_lookup of schema step 25 (see
// claimCursorMigration). Its name and columns stay.
var claimCursorFunction = mustReplace(claimFirstFunction,
	"\tfetched int := 0;\n",
	"\tfetched int := 0;\n"+
		"\tcur_prio int;             -- pass 2's cursor (claimcursor.go)\n"+
		"\tcur_id bigint;\n"+
		"\tfrom_cursor boolean := false;\n"+
		"\thead_prio int;            -- the last candidate of pass 1\n"+
		"\thead_id bigint;\n"+
		"\tx_ids bigint[];           -- candidates past the cursor's priority\n"+
		"\tx_ctids tid[];\n"+
		"\tx_prios int[];\n"+
		"\tx_ck text[];\n"+
		"\tx_rk text[];\n",
	windowScan+"\t\tfetched := coalesce(array_length(w_ids, 1), 0);\n",
	`		IF pass = 2 THEN
			SELECT c.priority, c.id INTO cur_prio, cur_id FROM {{s}}.claim_cursors c
			WHERE c.queue = p_queue AND c.set_at > now() - interval '1 second'
			  AND c.left_c <@ blocked_c AND c.left_r <@ blocked_r;
			from_cursor := FOUND;
		END IF;
		IF from_cursor THEN
			-- From the cursor on: the rest of its priority, then the lower ones.
`+scanFrom("m.priority = cur_prio AND m.id >= cur_id", "w_ids, w_ctids, w_prios, w_ck, w_rk", "win")+`			fetched := cardinality(w_ids);
			IF fetched < win THEN
`+scanFrom("m.priority < cur_prio", "x_ids, x_ctids, x_prios, x_ck, x_rk", "win - fetched")+`				w_ids := w_ids || x_ids;
				w_ctids := w_ctids || x_ctids;
				w_prios := w_prios || x_prios;
				w_ck := w_ck || x_ck;
				w_rk := w_rk || x_rk;
			END IF;
		ELSE
`+windowScan+`		END IF;
		fetched := coalesce(array_length(w_ids, 1), 0);
		IF pass = 1 AND fetched > 0 THEN
			head_prio := w_prios[fetched];
			head_id := w_ids[fetched];
		ELSIF pass = 2 AND from_cursor AND fetched > 0
		      AND (w_prios[1] <> cur_prio OR w_ids[1] - cur_id > `+cursorGap+`) THEN
			-- Far past the cursor (the work there was taken): move it on,
			-- keeping its age and the keys it passes by.
			PERFORM FROM {{s}}.claim_cursors c WHERE c.queue = p_queue FOR UPDATE SKIP LOCKED;
			IF FOUND THEN
				UPDATE {{s}}.claim_cursors c SET priority = w_prios[1], id = w_ids[1] WHERE c.queue = p_queue;
			END IF;
		ELSIF pass = 2 AND NOT from_cursor AND fetched > 0
		      AND (w_prios[1] <> head_prio OR w_ids[1] - head_id > `+cursorGap+`) THEN
			-- A long scan from the head: keep where it found work.
			PERFORM FROM {{s}}.claim_cursors c WHERE c.queue = p_queue FOR UPDATE SKIP LOCKED;
			IF FOUND THEN
				UPDATE {{s}}.claim_cursors c SET priority = w_prios[1], id = w_ids[1], left_c = blocked_c, left_r = blocked_r, set_at = now()
				WHERE c.queue = p_queue;
			ELSE
				INSERT INTO {{s}}.claim_cursors (queue, priority, id, left_c, left_r, set_at)
				VALUES (p_queue, w_prios[1], w_ids[1], blocked_c, blocked_r, now())
				ON CONFLICT (queue) DO NOTHING;
			END IF;
		END IF;
`,
)
