package postgres

import "time"

// defaultListeners is how many processes of one queue hold a wake-up seat
// at once: are registered as waiting and LISTEN on their handle's channel
// (seatMigration).
//
// Postgres signals every backend of the database that LISTENs, whatever
// its channel, at each commit that notified, and each signalled backend
// wakes and reads the notification queue: with 50 worker processes each
// listening, a push that woke one handle cost the server 50 wake-ups. A
// process without a seat does not LISTEN at all; its receivers poll, and,
// finding the queue empty look after longer and longer sleeps (idleSleep),
// trying for a seat at each look. A woken process (its seat spent) finds
// a seat again when it comes back for work, so the seats stay with the
// processes that take the work.
const defaultListeners = 8

// seatHold is how long a process keeps its seat after a push woke its
// handle, for its receivers to come back and register again: a worker
// whose tasks are short keeps the seat from task to task, and the set of
// listening processes stays the same, rather than passing to a process in
// standby at every wake-up (each change a LISTEN and an UNLISTEN). A
// worker gone for longer (a long task, a killed process) leaves it to
// another.
const seatHold = 5 * time.Second

// seatMigration is schema step 19: seats, and await_seat, which is
// await_next (schema step 17) with the handle registered only if it holds
// one of the queue's k seats or takes a free one, and run on the process's
// LISTEN connection, where it LISTENs on the handle's channel (prefix ||
// h) when it registers and UNLISTENs when it cannot. LISTEN takes effect
// when the statement commits, with the registration: a push that sees the
// registration notifies after it, and the notification reaches the
// handle. A process that listens on nothing else leaves the server's
// listeners with the UNLISTEN, and no push's commit signals it.
//
// A seat is held while the handle is registered (in waiters) and for
// hold_secs after its last registration, so that a woken handle finds its
// seat again; seats neither registered nor renewed within that time are
// free, and deleted by the next registration of the queue.
//
// ok is false while a push of the queue is in flight (as await_next's)
// for longer than 20 ms (a push that is committing holds the lock for a
// moment: the registration waits that long for it, and pushes that come
// meanwhile wait behind it); then nothing changes and the caller looks
// again shortly. seated says
// whether the handle is registered (it was, or it is now). The seats are
// counted under the lock that registrations take exclusively, so two
// processes cannot take the last seat at once.
const seatMigration = `
CREATE UNLOGGED TABLE {{s}}.seats (
	queue  text COLLATE "C" NOT NULL,
	handle text COLLATE "C" NOT NULL,
	until  timestamptz NOT NULL,
	PRIMARY KEY (queue, handle)
);

CREATE FUNCTION {{s}}.await_seat(q text, h text, k integer, prefix text, hold_secs double precision,
	OUT ok boolean, OUT seated boolean, OUT next_us bigint)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
	ok := pg_try_advisory_xact_lock(hashtextextended('jobq.wait.{{s}}.' || q, 0));
	IF NOT ok THEN
		-- A push is committing: wait for it a little, rather than have
		-- the caller come back.
		BEGIN
			PERFORM set_config('lock_timeout', '20ms', true);
			PERFORM pg_advisory_xact_lock(hashtextextended('jobq.wait.{{s}}.' || q, 0));
			ok := true;
		EXCEPTION WHEN lock_not_available THEN
			ok := false;
		END;
	END IF;
	seated := false;
	IF ok THEN
		UPDATE {{s}}.seats SET until = now() + hold_secs * interval '1 second' WHERE queue = q AND handle = h;
		IF FOUND THEN
			seated := true;
		ELSE
			DELETE FROM {{s}}.seats s WHERE s.queue = q AND s.until < now()
				AND NOT EXISTS (SELECT FROM {{s}}.waiters w WHERE w.queue = q AND w.handle = s.handle);
			IF (SELECT count(*) FROM {{s}}.seats WHERE queue = q) < k THEN
				INSERT INTO {{s}}.seats (queue, handle, until) VALUES (q, h, now() + hold_secs * interval '1 second');
				seated := true;
			END IF;
		END IF;
		IF seated THEN
			INSERT INTO {{s}}.waiters (queue, handle) VALUES (q, h) ON CONFLICT DO NOTHING;
			EXECUTE format('LISTEN %I', prefix || h);
		ELSE
			EXECUTE format('UNLISTEN %I', prefix || h);
		END IF;
	END IF;
	-- The look reads at most 1,000 messages, in no set order: a queue of
	-- more says 0 (look now), since a visible message may lie past them
	-- and the receiver claims only on 0.
	SELECT CASE WHEN count(*) >= 1000 THEN 0
		ELSE (extract(epoch FROM min(visible_at) FILTER (WHERE isfinite(visible_at)) - now()) * 1e6)::bigint END
	INTO next_us
	FROM (SELECT visible_at FROM {{s}}.messages WHERE queue = q LIMIT 1000) AS s;
END
$$;
`
