package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// migration is one step of the schema's history. Steps are applied in order,
// each in the same transaction as the row that records it, and never change
// once released: a change is a new step.
type migration struct {
	version int
	name    string
	sql     string // {{s}} stands for the quoted schema name
	// minRelease, when above 0, is the newest step a release must know to
	// run on a schema with this step applied: releases that know fewer
	// steps refuse the schema at open (checkNewer). 0 for an additive step,
	// beside which every release since step 22 runs.
	minRelease int
}

// migrations is the schema's history.
//
// messages holds the queued and in-flight messages of every queue in the
// schema. visible_at is when a message can next be claimed: the push time or
// not-before time for a new message, the lease expiry for a claimed one, the
// end of the delay for a requeued one. lease is the current claim's fencing
// token. Only two indexes, so that a push writes as little as possible:
// (queue, priority DESC, id) orders claims and is also the key by which
// settlements find a message (the lease carries the priority), standing in
// for a primary key on id (it is the replica identity too); (queue, task_id)
// enforces dedup ((queue, task_key) since step 11, which rebuilt the table
// with compact task IDs and bodies: layout.go). A claim, a renewal and a requeue change no indexed column,
// so they can be HOT updates; fillfactor (70 here, 50 since step 6) leaves
// room on each page for them.
// Names compare bytewise (COLLATE "C"): cheaper than a linguistic collation
// in every index lookup, and equality is all jobq needs.
var migrations = []migration{
	{1, "messages and dead letters", fmt.Sprintf(`
CREATE TABLE {{s}}.messages (
	id          bigint GENERATED ALWAYS AS IDENTITY,
	queue       text COLLATE "C" NOT NULL,
	task_id     text COLLATE "C",
	body        bytea NOT NULL,
	priority    integer NOT NULL DEFAULT 0
	            CONSTRAINT messages_priority_range CHECK (priority BETWEEN %d AND %d),
	visible_at  timestamptz NOT NULL DEFAULT now(),
	enqueued_at timestamptz NOT NULL DEFAULT now(),
	deliveries  integer NOT NULL DEFAULT 0,
	lease       uuid
) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_insert_scale_factor = 0.05);

CREATE UNIQUE INDEX messages_claim ON {{s}}.messages (queue, priority DESC, id);
ALTER TABLE {{s}}.messages REPLICA IDENTITY USING INDEX messages_claim;
CREATE UNIQUE INDEX messages_task_id ON {{s}}.messages (queue, task_id);

CREATE TABLE {{s}}.dead_letters (
	id          bigint PRIMARY KEY,
	queue       text NOT NULL,
	task_id     text,
	body        bytea NOT NULL,
	priority    integer NOT NULL,
	enqueued_at timestamptz NOT NULL,
	deliveries  integer NOT NULL,
	reason      text NOT NULL,
	detail      text NOT NULL,
	dead_at     timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX dead_letters_queue ON {{s}}.dead_letters (queue, dead_at, id);
`, driver.MinPriority, driver.MaxPriority), 0},
	{2, "queue policies", policyMigration, 0},
	{3, "claims under policies", claimFunctionKeyLocks, 0},
	{4, "claims under policies: a lock per key", claimFunctionKeyLocks, 0},
	{5, "held leases of capped keys in their own table; claims HOT again", heldMigration, 0},
	{6, "room on every page for its messages' claims", fillfactorMigration, 0},
	{7, "claims under policies never fail on a delivery count out of range", claimFunctionKeyLocks, 0},
	{8, "result records", resultsMigration, 0},
	{9, "worker registry", workerMigration, 0},
	// The producer's W3C trace context (driver.Message.TraceParent), NULL
	// when the push was not traced, so the body keeps ai4s-jobq's bytes.
	{10, "trace context of pushes", `ALTER TABLE {{s}}.messages ADD COLUMN IF NOT EXISTS trace_parent text`, 0},
	{11, "compact task keys and packed bodies", packedMigration, 0},
	{12, "a wake-up per waiting handle", wakeMigration, 0},
	{13, "task groups", groupsMigration, 0},
	{14, "claims under policies look their rows up; a push wakes as many handles as it pushed tasks whatever the plan", claimLookupFunction + wakeOnceFunction, 0},
	{15, "held tasks (dependencies, group steps)", heldTasksMigration, 0},
	{16, "claims under caps count their keys in fewer statements", claimCountFunction, 0},
	{17, "a waiting handle registers and looks for the next message in one statement; records notifications only while a process waits for records", awaitingMigration, 0},
	{18, "the result records' expiry index is a BRIN index", expiryMigration, 0},
	{19, "a bounded number of processes of a queue register as waiting and LISTEN", seatMigration, 0},
	{20, "settlements delete their held leases; claims check ended leases only near a cap", claimHeldFunction, 0},
	// A dead letter keeps its task's group, NULL for none, so that a
	// requeue from the dead letters puts the task back in its group
	// (queries.go: deadLetterSQL, requeueDead). Dead letters written
	// before the step have none: requeued, they come back without a group
	// and their group keeps counting them dead-lettered.
	{21, "dead letters keep their task's group", `ALTER TABLE {{s}}.dead_letters ADD COLUMN IF NOT EXISTS grp text COLLATE "C"`, 0},
	// Each step records the oldest release that may run beside it
	// (migration.minRelease), which releases from this step on read
	// when they open a schema newer than they know.
	{22, "steps record the releases they need", `ALTER TABLE {{s}}.schema_migrations ADD COLUMN IF NOT EXISTS min_release integer NOT NULL DEFAULT 0`, 0},
	{23, "claims far from every cap take their window as it comes; only claims that meet rate keys delete expired admissions", claimFarFunction, 0},
	{24, "claims insert the held rows of first deliveries without ON CONFLICT, and count each key on its own on a queue with many leases in flight", claimFirstFunction, 0},
	{25, "a claim past many tasks of full keys starts where the last such claim found work", claimCursorMigration + claimCursorFunction, 0},
	{26, "claims far from every cap lock and count their keys in fewer statements", claimFewerFunction, 0},
	{27, "claims under policies plan their statements as the driver does on any connection", claimPlannedFunction, 0},
	{28, "a push wakes the waiting handles of other processes: its own process's receivers it wakes itself", wakeOthersFunction, 0},
	{29, "held leases of capped keys skip the write-ahead log; a claim rebuilds them after a crash", heldUnloggedMigration + claimUnloggedFunction, 0},
}

// wakeMigration is schema step 12: waiting handles and the functions that
// register and wake them (listen.go). waiters is UNLOGGED: it is only
// wake-up state, and after a crash (which empties it) receivers register
// again at their next empty claim.
//
// A push calls wake in its own statement: under a shared lock of the queue,
// held until the push commits, it takes up to n registered handles, oldest
// first, and notifies each on its own channel (prefix || handle). A
// receiver calls await after a claim that found nothing, then claims once
// more before it sleeps: await registers the handle only under the queue's
// exclusive lock, so never while a push is in flight. Then either the push
// committed before the registration, and the claim that follows sees its
// messages, or it takes its lock after the registration, and wake's reads
// (each under a snapshot of its own, after the lock) see the handle. When a
// push is in flight await returns false without waiting, and the receiver
// looks again shortly.
const wakeMigration = `
CREATE UNLOGGED TABLE {{s}}.waiters (
	queue  text COLLATE "C" NOT NULL,
	handle text COLLATE "C" NOT NULL,
	since  timestamptz NOT NULL DEFAULT clock_timestamp(),
	PRIMARY KEY (queue, handle)
);

CREATE FUNCTION {{s}}.wake(q text, n integer, prefix text) RETURNS integer
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	h text;
	k integer := 0;
BEGIN
	PERFORM pg_advisory_xact_lock_shared(hashtextextended('jobq.wait.{{s}}.' || q, 0));
	FOR h IN
		DELETE FROM {{s}}.waiters w
		USING (SELECT handle FROM {{s}}.waiters WHERE queue = q ORDER BY since LIMIT greatest(n, 0) FOR UPDATE SKIP LOCKED) pick
		WHERE w.queue = q AND w.handle = pick.handle
		RETURNING w.handle
	LOOP
		PERFORM pg_notify(prefix || h, q);
		k := k + 1;
	END LOOP;
	RETURN k;
END
$$;

CREATE FUNCTION {{s}}.await(q text, h text) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
	IF NOT pg_try_advisory_xact_lock(hashtextextended('jobq.wait.{{s}}.' || q, 0)) THEN
		RETURN false;
	END IF;
	INSERT INTO {{s}}.waiters (queue, handle) VALUES (q, h) ON CONFLICT DO NOTHING;
	RETURN true;
END
$$;
`

// fillfactorMigration is schema step 6. A claim takes the oldest messages,
// which sit together on a page, and updates them all in one statement:
// their old versions cannot be pruned before it commits, so the page needs
// room for a second, slightly larger (leased) version of each. At
// fillfactor 70 about half the claims of a drain found none and went to
// another page, indexed anew; at 50 all of them stay. 40 was left out: it
// made some end-to-end runs collapse. Pages written before the step
// keep their packing until they are emptied.
const fillfactorMigration = `ALTER TABLE {{s}}.messages SET (fillfactor = 50);`

// SchemaVersion is the schema version this package creates and expects.
var SchemaVersion = migrations[len(migrations)-1].version

// migrate brings the schema up to date. Many processes may start at once, so
// the whole check-and-apply runs under a transaction-scoped advisory lock
// keyed by the schema name; the first one in applies the missing steps and
// the others then find nothing to do. A database at a newer version than this
// code knows is left alone (an older worker may run beside a newer one as
// long as the newer steps are additive), unless a newer step needs a newer
// release (checkNewer).
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	return migrateSteps(ctx, pool, schema, migrations)
}

// migrateSteps is migrate with the history steps (tests migrate part of it
// to make an older database).
func migrateSteps(ctx context.Context, pool *pgxpool.Pool, schema string, steps []migration) error {
	s := pgx.Identifier{schema}.Sanitize()
	known := steps[len(steps)-1].version
	if current, err := appliedVersion(ctx, pool, s); err == nil && current >= known {
		// Up to date: no DDL, so a role without CREATE can open it.
		return checkNewer(ctx, pool, schema, current, known)
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('jobq.migrate.' || $1, 0))`, schema); err != nil {
			return err
		}
		// CREATE SCHEMA needs CREATE on the database even when the
		// schema exists, so it runs only when it does not: a role given
		// a schema of its own by an administrator migrates it without.
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			if _, err := tx.Exec(ctx, `CREATE SCHEMA `+s); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+s+`.schema_migrations (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		var current int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+s+`.schema_migrations`).Scan(&current); err != nil {
			return err
		}
		for _, m := range steps {
			if m.version <= current {
				continue
			}
			if _, err := tx.Exec(ctx, strings.ReplaceAll(m.sql, "{{s}}", s)); err != nil {
				return fmt.Errorf("schema migration %d (%s): %w", m.version, m.name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO `+s+`.schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
				return err
			}
			if m.minRelease > 0 {
				if _, err := tx.Exec(ctx, `UPDATE `+s+`.schema_migrations SET min_release = $2 WHERE version = $1`, m.version, m.minRelease); err != nil {
					return err
				}
			}
		}
		// Another process may have applied newer steps meanwhile.
		return checkNewer(ctx, tx, schema, current, known)
	})
}

// checkNewer refuses schema, at step current, when a step newer than
// known (the newest this code has) needs a newer release
// (migration.minRelease): this code would misread or corrupt what that
// step changed. Newer additive steps are accepted. It reads q (a pool or a
// transaction) only when the schema is newer than this code.
func checkNewer(ctx context.Context, q rowQuerier, schema string, current, known int) error {
	if current <= known {
		return nil
	}
	var step, need int
	err := q.QueryRow(ctx, `SELECT version, min_release FROM `+pgx.Identifier{schema}.Sanitize()+`.schema_migrations
		WHERE version > $1 AND min_release > $1 ORDER BY version LIMIT 1`, known).Scan(&step, &need)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the releases schema %s needs: %w", schema, err)
	}
	return driver.Errorf(errcode.FailedPrecondition,
		"postgres: schema %q is at jobq schema step %d, written by a newer jobq whose step %d needs a release that knows step %d; this program knows steps up to %d: upgrade it (every process on the schema's queues must)",
		schema, current, step, need, known)
}

// migrateError explains err, a failed migration of schema, when the
// role lacked a right (SQLSTATE 42501): what it needs and the two ways an
// administrator can arrange it. Other errors are wrapped as they are.
func migrateError(ctx context.Context, pool *pgxpool.Pool, schema string, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" || ctx.Err() != nil {
		return wrap(ctx, "open: creating or migrating schema "+schema, err)
	}
	role, s := roleName(ctx, pool), pgx.Identifier{schema}.Sanitize()
	return driver.Errorf(errcode.PermissionDenied,
		"postgres open: %s may not create or migrate jobq's tables in schema %s (a push or worker creates them on first use, and upgrades them after a new jobq release). "+
			"Either have an administrator run `CREATE SCHEMA %s AUTHORIZATION %s` so that this role owns it, "+
			"or open the queue once as a role that may (the schema's owner) and then `GRANT USAGE ON SCHEMA %s TO %s; GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %s TO %s`: %w",
		role, s, s, role, s, role, s, role, err)
}

// checkReadable checks, for a read-only open, that the schema exists; it
// creates and migrates nothing. A schema older than this code is read as
// it is (a query of a newer column fails; a writing open migrates it).
func checkReadable(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	v, err := appliedVersion(ctx, pool, pgx.Identifier{schema}.Sanitize())
	if err != nil {
		return wrap(ctx, "open: reading the version of schema "+schema, err)
	}
	if v == 0 {
		return driver.Errorf(errcode.NotFound,
			"postgres: schema %q holds no jobq tables, so there is no queue to read (a push or a worker creates them)", schema)
	}
	return checkNewer(ctx, pool, schema, v, SchemaVersion)
}

// appliedVersion returns the newest step applied to the schema s (quoted),
// 0 when it has no migration history yet.
func appliedVersion(ctx context.Context, pool *pgxpool.Pool, s string) (int, error) {
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, s+".schema_migrations").Scan(&exists); err != nil || !exists {
		return 0, err
	}
	var v int
	err := pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+s+`.schema_migrations`).Scan(&v)
	return v, err
}
