package postgres

// Held leases in an unlogged table (schema step 29).
//
// held (schema step 5) has a row per lease taken on a capped key: the
// claim inserts it and the settlement deletes it. Each of those wrote the
// row and its key entry to the write-ahead log, about a sixth of what a
// capped task logged. Since step 29 the table is UNLOGGED, and its writes
// skip the log.
//
// An unlogged table is emptied when Postgres recovers from a crash. A
// standby promoted in a failover starts it empty, and a base backup does
// not hold its rows. An empty held would let claims take each capped key
// up to its cap again while the leases taken before the crash still run.
// So the table keeps one more row, its mark: queue '' (no queue has that
// name), key '', id 0. A claim under policies looks the mark up before it
// counts any key's rows. Where the mark is gone, held_rebuild rebuilds
// the rows from the leases in flight on capped keys in messages (as step
// 5 first filled the table), then writes the mark. An advisory lock makes claims
// that find the mark gone at the same time wait for one rebuild.
//
// A claim or settlement racing with the rebuild leaves it correct:
//   - A claim that commits before the rebuild's insert is seen by the
//     insert. ON CONFLICT skips a row that the claim wrote itself.
//   - A claim that commits after it writes its own rows.
//   - A lease settled during the rebuild may leave a row behind. That row
//     counts against its key until a claim near the key's cap forgets it,
//     as it forgets the row of any lease that ended.
//
// So a count never falls below the leases in flight. (Releases before
// step 14 claim through claim_packed, which does not look for the mark.)
//
// Where Postgres refuses to make the table unlogged (it is in a
// publication), the step leaves it logged, which is only slower.

// heldMark is the condition that finds held's mark.
const heldMark = `h.queue = '' AND h.key = '' AND h.id = 0`

// heldUnloggedMigration is schema step 29 (claimUnloggedFunction follows it).
const heldUnloggedMigration = `
DO $do$
BEGIN
	ALTER TABLE {{s}}.held SET UNLOGGED;
EXCEPTION WHEN OTHERS THEN
	NULL; -- refused (the table is in a publication): it stays logged
END
$do$;

CREATE OR REPLACE FUNCTION {{s}}.held_rebuild() RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
	PERFORM pg_advisory_xact_lock(hashtextextended('jobq.held.{{s}}', 0));
	IF EXISTS (SELECT FROM {{s}}.held h WHERE ` + heldMark + `) THEN
		RETURN; -- a claim that waited for the lock finds it rebuilt
	END IF;
	INSERT INTO {{s}}.held (queue, key, id, priority, lease)
	SELECT m.queue, m.concurrency_key, m.id, m.priority, m.lease
	FROM {{s}}.messages m JOIN {{s}}.policies p ON p.queue = m.queue AND p.kind = 'concurrency' AND p.key = m.concurrency_key
	WHERE m.lease IS NOT NULL AND m.visible_at > now()
	ON CONFLICT DO NOTHING;
	INSERT INTO {{s}}.held (queue, key, id, priority, lease)
	VALUES ('', '', 0, 0, '00000000-0000-0000-0000-000000000000') ON CONFLICT DO NOTHING;
END
$fn$;

INSERT INTO {{s}}.held (queue, key, id, priority, lease)
VALUES ('', '', 0, 0, '00000000-0000-0000-0000-000000000000') ON CONFLICT DO NOTHING;
`

// claimUnloggedFunction is claim_lookup (step 27's claimPlannedFunction)
// rebuilding held where its mark is gone. The statement that locks the
// window's capped keys looks the mark up too, so a claim pays no statement
// of its own for it; the rows are counted only after that statement.
var claimUnloggedFunction = mustReplace(claimPlannedFunction,
	"\tbound bigint;             -- how many of the queue's held rows to count\n",
	"\tbound bigint;             -- how many of the queue's held rows to count\n"+
		"\tmarked boolean;           -- whether held has its mark (heldunlogged.go)\n",
	`max(x.limit_n) FILTER (WHERE x.got), min(x.limit_n) FILTER (WHERE x.got)
			INTO locked, lims, busy, lim_max, lim_min
`,
	`max(x.limit_n) FILTER (WHERE x.got), min(x.limit_n) FILTER (WHERE x.got),
			       EXISTS (SELECT FROM {{s}}.held h WHERE `+heldMark+`)
			INTO locked, lims, busy, lim_max, lim_min, marked
`,
	`			busy_c := busy_c || busy;
`,
	`			busy_c := busy_c || busy;
			IF NOT marked AND cardinality(locked) > 0 THEN
				PERFORM {{s}}.held_rebuild(); -- held was emptied by a crash
			END IF;
`)
