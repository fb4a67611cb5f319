package postgres

// awaitingMigration is schema step 17: a waiting receiver registers and
// learns when the queue's next message comes due in one statement
// (await_next), and records notifications go out only while a process
// waits for records (result_waiters).
//
// Postgres signals every backend of the database that LISTENs, whatever
// its channel, at each commit that notified: with a fleet of 50 workers, a
// records notification sent at every settlement woke 50 backends for
// nobody. A process that waits for records (WaitResults, while LISTEN is
// up) registers its handle for a while (until) and then reads the records,
// in one statement (await_results), under the queue's records lock taken
// exclusively; a statement that stored records notifies only when
// results_awaited, which takes that lock shared and then reads under a
// snapshot of its own, finds a waiter. So either the registration
// committed before the settlement's look, which then sees it and notifies,
// or the settlement took its lock first: await_results, which only tries
// the lock, then registers nothing and returns -1, and the waiter looks
// again shortly, when the settlement has committed. A registration
// outlives the waits it covers by a little; those that expired long ago
// (their process stopped) are deleted by the next registration.
//
// await_next is step 12's await with the next-visible look of the queue
// (receive.go, nextVisible) in the same round trip: ok says whether it
// registered (false while a push is in flight), and next_us is
// microseconds until the queue's earliest message becomes visible (NULL
// when the queue is empty), as nextVisible reads it.
const awaitingMigration = `
CREATE UNLOGGED TABLE {{s}}.result_waiters (
	queue  text COLLATE "C" NOT NULL,
	handle text COLLATE "C" NOT NULL,
	until  timestamptz NOT NULL,
	PRIMARY KEY (queue, handle)
);

CREATE FUNCTION {{s}}.results_awaited(q text) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
	PERFORM pg_advisory_xact_lock_shared(hashtextextended('jobq.results.{{s}}.' || q, 0));
	RETURN EXISTS (SELECT FROM {{s}}.result_waiters WHERE queue = q AND until > now());
END
$$;

CREATE FUNCTION {{s}}.await_results(q text, h text, ids text[], secs double precision) RETURNS integer
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
	IF NOT pg_try_advisory_xact_lock(hashtextextended('jobq.results.{{s}}.' || q, 0)) THEN
		RETURN -1;
	END IF;
	DELETE FROM {{s}}.result_waiters WHERE queue = q AND until < now() - interval '1 hour';
	INSERT INTO {{s}}.result_waiters AS w (queue, handle, until) VALUES (q, h, now() + secs * interval '1 second')
	ON CONFLICT (queue, handle) DO UPDATE SET until = greatest(w.until, excluded.until);
	IF EXISTS (SELECT FROM {{s}}.results
		WHERE queue = q AND task_id = ANY(ids) AND expires_at > now() AND state <> 'cancel-requested') THEN
		RETURN 1;
	END IF;
	RETURN 0;
END
$$;

CREATE FUNCTION {{s}}.await_next(q text, h text, OUT ok boolean, OUT next_us bigint)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
	ok := pg_try_advisory_xact_lock(hashtextextended('jobq.wait.{{s}}.' || q, 0));
	IF ok THEN
		INSERT INTO {{s}}.waiters (queue, handle) VALUES (q, h) ON CONFLICT DO NOTHING;
	END IF;
	SELECT (extract(epoch FROM min(visible_at) FILTER (WHERE isfinite(visible_at)) - now()) * 1e6)::bigint
	INTO next_us
	FROM (SELECT visible_at FROM {{s}}.messages WHERE queue = q LIMIT 1000) AS s;
END
$$;
`
