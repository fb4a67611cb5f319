package postgres

// wakeOnceFunction is the last part of schema step 14: wake (wakeMigration)
// with the handles it takes picked once. Step 12's wake deleted from
// waiters USING a subquery that picks the n oldest handles (LIMIT n FOR
// UPDATE SKIP LOCKED); where the planner put that subquery on the inner
// side of a nested loop (it did on a server whose statistics of waiters
// were fresh), it ran again for every waiting row, each time past the
// handles already deleted, and a push of one task woke two or three
// handles (TestPushWakesOneHandlePerTask failed every run there). A
// MATERIALIZED common table expression is evaluated once.
const wakeOnceFunction = `
CREATE OR REPLACE FUNCTION {{s}}.wake(q text, n integer, prefix text) RETURNS integer
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	h text;
	k integer := 0;
BEGIN
	PERFORM pg_advisory_xact_lock_shared(hashtextextended('jobq.wait.{{s}}.' || q, 0));
	FOR h IN
		WITH pick AS MATERIALIZED (
			SELECT handle FROM {{s}}.waiters WHERE queue = q ORDER BY since LIMIT greatest(n, 0) FOR UPDATE SKIP LOCKED
		)
		DELETE FROM {{s}}.waiters w USING pick
		WHERE w.queue = q AND w.handle = pick.handle
		RETURNING w.handle
	LOOP
		PERFORM pg_notify(prefix || h, q);
		k := k + 1;
	END LOOP;
	RETURN k;
END
$$;
`
