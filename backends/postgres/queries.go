package postgres

import (
	"fmt"
	"strings"

	"github.com/jobq/jobq/driver"
)

// queries holds the SQL of every operation with the schema name filled in.
// They are built once per queue and run as prepared statements (pgx caches
// them per connection), so each operation is one round trip.
type queries struct {
	push                                 [2][2]pushStatements // by one row, async: see pushSQL
	existing, wake, awaitSeat            string
	claim, claimNext, nextVisible        string
	renew, complete, requeue, deadLetter string
	peek, stats, clear                   string
	listDead, requeueDead, purgeDead     string
	messagesTable                        string
}

// pushStatements are a push statement without and with ON CONFLICT: the
// first fails on a task id that is already queued, the second skips it;
// group is the second storing each message's group too (groups.go).
type pushStatements struct{ plain, dedup, group string }

// pushSQLFor returns the push statements for a batch of one row or more,
// committed durably or not.
func (q *queries) pushSQLFor(one, async bool) pushStatements {
	return q.push[boolIndex(one)][boolIndex(async)]
}

// boolIndex is 1 for true and 0 for false, to index queries.push.
func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// asyncCTE makes the statement's transaction commit without waiting for
// its WAL to reach disk (synchronous_commit off, for this transaction only).
// It is used for claims and settlements, never for pushes: if the server
// crashes, the last few hundred milliseconds of them may be undone, which
// only brings messages back (a claim or an acknowledgement is lost, never a
// message), exactly the at-least-once contract. Pushes keep the server's
// durable default unless the URL says sync_push=false. The CTE must be
// referenced (FROM async) to be evaluated.
const asyncCTE = `WITH async AS (SELECT set_config('synchronous_commit', 'off', true))`

// claimCTEs and claimUpdate are the claim statement (queries.claim) but
// for the UPDATE that begins it, between them.
const (
	claimCTEs = `,
c AS (
	SELECT ctid FROM {{s}}.messages
	WHERE queue = $1 AND visible_at <= now()
	ORDER BY priority DESC, id
	LIMIT $2
	FOR UPDATE SKIP LOCKED
)`
	claimUpdate = `
SET visible_at = now() + $3::bigint * interval '1 microsecond',
    lease = gen_random_uuid(),
    deliveries = ` + nextDelivery + `
FROM c, async
WHERE m.ctid = c.ctid
RETURNING m.id, m.task_key, m.packed_body, m.deliveries, m.enqueued_at, m.lease::text, m.priority, coalesce(m.trace_parent, ''), coalesce(m.grp, '')`
)

// nextVisibleUS is microseconds until the earliest visible_at of the rows
// s (see queries.nextVisible).
const nextVisibleUS = `(extract(epoch FROM min(visible_at) FILTER (WHERE isfinite(visible_at)) - now()) * 1e6)::bigint`

// nextDelivery is a claim's new delivery count: one more, unless the
// stored count is out of range (negative, or at the integer's limit), which
// it keeps, so that the claim cannot fail and the driver sees the damage.
const nextDelivery = `CASE WHEN m.deliveries BETWEEN 0 AND 2147483646 THEN m.deliveries + 1 ELSE m.deliveries END`

// clampedPriority brings a dead letter's priority (which no constraint
// bounds: another tool may have written it) into the messages table's
// range, so that requeuing dead letters cannot fail on one of them; an
// enqueue time that is not a time becomes now likewise.
var clampedPriority = fmt.Sprintf("greatest(%d, least(%d, priority))", driver.MinPriority, driver.MaxPriority)

func buildQueries(schema string) queries {
	r := strings.NewReplacer("{{s}}", schema)
	return queries{
		messagesTable: schema + ".messages",

		push: pushVariants(r),

		// A trailing wake-up of waiting handles, or one passed on
		// (listen.go): as a push's own, through schema step 28's
		// wake_others, past this process's handle ($4), committed without
		// waiting for the disk (NOTIFY gives its transaction an id, so it
		// commits like a write and would wait for the disk, beside the
		// pushes it announces, which have reached it already).
		wake: r.Replace(asyncCTE + `
SELECT {{s}}.wake_others($1, $2::int, $3, $4) FROM async`),

		// Registers a waiting handle (receive.go) if a seat is free,
		// LISTENs or UNLISTENs on its channel accordingly, and looks when
		// the next message comes due, in one round trip on the LISTEN
		// connection (schema step 19, seats.go). Its row is wake-up
		// state only: no need to wait for the disk.
		awaitSeat: r.Replace(asyncCTE + `
SELECT a.ok, a.seated, a.next_us FROM async, {{s}}.await_seat($1, $2, $3::int, $4, $5::float8) AS a`),

		existing: r.Replace(`
SELECT id, task_key FROM {{s}}.messages WHERE queue = $1 AND task_key = ANY($2::bytea[])`),

		// Claim: lock up to $2 visible candidates in claim order, skipping rows
		// other claimers hold, then update exactly those rows by join. Limiting
		// inside the locking CTE (not "WHERE id IN (SELECT ... LIMIT n)") is
		// what guarantees at most $2 rows. The join is on the locked rows'
		// ctid, which the planner can only do by looking each one up (see
		// planSettings). RETURNING has no order; the driver sorts.
		// A delivery count that cannot grow (written by another tool) is
		// left as it is rather than failing the whole claim; the driver
		// quarantines that message (claimCorruption).
		claim: r.Replace(asyncCTE + claimCTEs + `
UPDATE {{s}}.messages m` + claimUpdate),

		// claimNext is claim followed, when it claimed nothing, by one row
		// of NULLs but for a tenth column: nextVisible's answer (NULL for
		// an empty queue). A receiver that waits then needs no second
		// round trip to know how long to sleep. The look is a one-time
		// filter: a claim that takes messages does not run it.
		claimNext: r.Replace(asyncCTE + claimCTEs + `,
u AS (
UPDATE {{s}}.messages m` + claimUpdate + `
)
SELECT *, NULL::bigint FROM u
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, n.us
FROM (SELECT ` + nextVisibleUS + ` AS us FROM (SELECT visible_at FROM {{s}}.messages WHERE queue = $1 LIMIT 1000) AS s) AS n
WHERE NOT EXISTS (SELECT FROM u)`),

		// nextVisible: microseconds until the earliest message of the queue
		// becomes visible (a lease or delay ending; negative when one is
		// visible but locked by a concurrent claim; NULL when empty). Bounded to a
		// sample so that an idle receiver never scans a huge backlog; the poll
		// interval covers what the sample misses. An infinite time (which
		// no jobq writes) cannot be subtracted; it is left out.
		nextVisible: r.Replace(`
SELECT ` + nextVisibleUS + `
FROM (SELECT visible_at FROM {{s}}.messages WHERE queue = $1 LIMIT 1000) AS s`),

		// Renew: extend a lease only while it is held (token matches, not
		// expired).
		renew: r.Replace(asyncCTE + `
UPDATE {{s}}.messages
SET visible_at = now() + $3::bigint * interval '1 microsecond'
FROM async
WHERE queue = $4 AND priority = $5 AND id = $1 AND lease = $2::uuid AND visible_at > now()`),

		// Complete and DeadLetter: see completeSQL and deadLetterSQL.
		complete: r.Replace(completeSQL(nil)),

		// Requeue: release held messages, visible after their delay, with an
		// optional new body. Clearing the lease fences the old holder.
		requeue: r.Replace(asyncCTE + `
UPDATE {{s}}.messages m
SET visible_at = now() + x.delay * interval '1 microsecond',
    lease = NULL,
    packed_body = coalesce(x.body, m.packed_body)
FROM unnest($1::bigint[], $2::uuid[], $3::int[], $4::bigint[], $5::bytea[]) AS x(id, lease, priority, delay, body), async
WHERE m.queue = $6 AND m.priority = x.priority AND m.id = x.id AND m.lease = x.lease AND m.visible_at > now()
RETURNING m.id`),

		deadLetter: r.Replace(deadLetterSQL(nil)),

		// Peek: visible messages in claim order first, then the rest by when
		// they become visible.
		peek: r.Replace(`
SELECT id, task_key, packed_body, deliveries, enqueued_at, visible_at,
       lease IS NOT NULL AND visible_at > now(), priority
FROM {{s}}.messages
WHERE queue = $1
ORDER BY visible_at > now(), CASE WHEN visible_at > now() THEN visible_at END, priority DESC, id
LIMIT $2`),

		stats: r.Replace(`
SELECT count(*) FILTER (WHERE visible_at <= now()),
       count(*) FILTER (WHERE visible_at > now() AND lease IS NOT NULL),
       count(*) FILTER (WHERE visible_at > now() AND lease IS NULL),
       (SELECT count(*) FROM {{s}}.dead_letters WHERE queue = $1)
FROM {{s}}.messages WHERE queue = $1`),

		clear: r.Replace(`WITH h AS (DELETE FROM {{s}}.held WHERE queue = $1), c AS (DELETE FROM {{s}}.claim_cursors WHERE queue = $1)
DELETE FROM {{s}}.messages WHERE queue = $1`),

		listDead: r.Replace(`
SELECT id, task_key, packed_body, reason, detail, deliveries, dead_at
FROM {{s}}.dead_letters
WHERE queue = $1
ORDER BY dead_at, id
LIMIT $2`),

		// RequeueDead: delete the dead letters and queue them again, in one
		// statement. A requeued message keeps its delivery count (one out
		// of range restarts at 0), so that the next delivery counts on, and
		// the result records of the tasks requeued are deleted: they have
		// not ended. A dead letter whose task id is queued again already
		// merges into that message (dedup). A requeued task goes back to
		// its group (grp, schema step 21) as an open task: the group
		// counts one less dead-lettered for each message inserted (one
		// merged into a queued message is not open again), in the same
		// statement, as the settlements count (groups.go).
		requeueDead: r.Replace(`
WITH d AS (
	DELETE FROM {{s}}.dead_letters
	WHERE queue = $1 AND ($2::bigint[] IS NULL OR id = ANY($2::bigint[]))
	RETURNING id, queue, task_key, packed_body, priority, enqueued_at, dead_at, concurrency_key, rate_key, deliveries, grp
), ins AS (
	INSERT INTO {{s}}.messages (queue, task_key, packed_body, priority, enqueued_at, concurrency_key, rate_key, deliveries, grp)
	SELECT queue, task_key, packed_body, ` + clampedPriority + `, CASE WHEN isfinite(enqueued_at) THEN enqueued_at ELSE now() END, concurrency_key, rate_key,
		CASE WHEN deliveries BETWEEN 0 AND 2147483646 THEN deliveries ELSE 0 END, grp FROM d ORDER BY dead_at, id
	ON CONFLICT (queue, task_key) DO NOTHING
	RETURNING id, task_key, grp
), grp_count AS (
	UPDATE {{s}}.groups g SET dead_lettered = greatest(g.dead_lettered - x.n, 0), updated_at = now()
	FROM (SELECT grp, count(*) AS n FROM ins WHERE grp IS NOT NULL GROUP BY grp) x
	WHERE g.queue = $1 AND g.name = x.grp
), res AS (
	DELETE FROM {{s}}.results WHERE queue = $1 AND task_id IN (SELECT ` + idOfKeySQL("task_key") + ` FROM ins WHERE task_key IS NOT NULL)
), n AS (
	SELECT {{s}}.wake($1, (SELECT count(*) FROM ins)::int, $3) WHERE EXISTS (SELECT FROM ins)
)
SELECT (SELECT count(*) FROM d), (SELECT count(*) FROM n)`),

		purgeDead: r.Replace(`
DELETE FROM {{s}}.dead_letters
WHERE queue = $1 AND ($2::bigint[] IS NULL OR id = ANY($2::bigint[]))`),
	}
}

// settleRecords is what a settlement statement adds to store the records
// of the messages it settles (results.go): the parameter arrays after the
// settlement's own, with their names in x, the columns d returns besides
// the settlement's, and the rest of the statement after d, which reads d
// (or, for a dead-letter, dl).
type settleRecords struct {
	params, names, returning string
	tail                     func(from string) string
}

// withOrdinality numbers x's rows (as ord) for the records, where the
// last record of a task ID in a batch wins.
const withOrdinality = "\n\t\tWITH ORDINALITY"

// heldRows is the fence of the settlements that delete: the rows of the
// relation x whose leases are held, in the queue {{q}}.
const heldRows = `
	DELETE FROM {{s}}.messages m USING x, async
	WHERE m.queue = {{q}} AND m.priority = x.priority AND m.id = x.id AND m.lease = x.lease AND m.visible_at > now()`

// completeSQL is the Complete statement: delete every message whose lease
// is held, in one statement (rows not returned had lost their lease), and
// with rec store their records in the same statement.
func completeSQL(rec *settleRecords) string {
	params, ord, names, returning, tail := "", "", "", "", "\n)\nSELECT id FROM d"
	if rec != nil {
		params, ord, names, returning, tail = rec.params, withOrdinality, rec.names, rec.returning, rec.tail("d")
	}
	return asyncCTE + `,
x AS (
	SELECT * FROM unnest($1::bigint[], $2::uuid[], $3::int[]` + params + `)` + ord + ` AS x(id, lease, priority` + names + `)
), d AS (` + strings.Replace(heldRows, "{{q}}", "$4", 1) + `
	RETURNING m.id` + returning + tail
}

// deadLetterSQL is the DeadLetter statement: move held messages to
// dead_letters in one statement, so that each move is atomic (the copy and
// the delete commit together), and with rec store their records in the
// same statement. A dead letter keeps its task's group (grp, schema step
// 21), so that RequeueDead puts the task back in it.
func deadLetterSQL(rec *settleRecords) string {
	params, ord, names, returning := "", "", "", ""
	if rec != nil {
		params, ord, names, returning = rec.params, withOrdinality, rec.names, rec.returning
	}
	stmt := asyncCTE + `,
x AS (
	SELECT * FROM unnest($1::bigint[], $2::uuid[], $3::int[], $4::text[], $5::text[], $7::bytea[]` + params + `)` + ord + `
		AS x(id, lease, priority, reason, detail, body` + names + `)
), d AS (` + strings.Replace(heldRows, "{{q}}", "$6", 1) + `
	RETURNING m.id, m.queue, m.task_key, coalesce(x.body, m.packed_body) AS packed_body, m.priority, m.enqueued_at, m.deliveries, x.reason, x.detail,
		m.concurrency_key, m.rate_key, m.grp` + returning + `
)`
	move := `
INSERT INTO {{s}}.dead_letters (id, queue, task_key, packed_body, priority, enqueued_at, deliveries, reason, detail, concurrency_key, rate_key, grp)
SELECT id, queue, task_key, packed_body, priority, enqueued_at, deliveries, reason, detail, concurrency_key, rate_key, grp FROM d
RETURNING id`
	if rec == nil {
		return stmt + move
	}
	return stmt + `, dl AS (` + strings.ReplaceAll(move, "\n", "\n\t") + `
)` + strings.TrimPrefix(rec.tail("dl"), "\n)")
}

// pushVariants builds every push statement, indexed as queries.push is.
func pushVariants(r *strings.Replacer) (v [2][2]pushStatements) {
	for _, one := range []bool{false, true} {
		for _, async := range []bool{false, true} {
			v[boolIndex(one)][boolIndex(async)] = pushStatements{
				plain: r.Replace(pushSQL(async, one, false)),
				dedup: r.Replace(pushSQL(async, one, true)),
				group: r.Replace(groupedPushSQL(pushSQL(async, false, true))),
			}
		}
	}
	return v
}

// insertMessages begins both push statements: the columns a push sets.
const insertMessages = `INSERT INTO {{s}}.messages (queue, task_key, packed_body, priority, visible_at, concurrency_key, rate_key, trace_parent)`

// pushSQL is the push statement: one multi-row insert from arrays, or with
// one, a single row from plain parameters (pushOneSQL). ON CONFLICT skips
// tasks whose id is already queued (dedup); they are missing from
// RETURNING. The wake-up, when asked for, is sent by the same statement
// (schema step 28's wake_others: one waiting handle per message stored,
// past the handle $11) and delivered when it commits. (The WHERE clause is
// what makes Postgres evaluate the otherwise unused CTE n.) async commits
// without waiting for the disk (sync_push=false). Without dedup the
// statement has no ON CONFLICT and fails on a task id that is already
// queued: an ON CONFLICT insert checks the index before each row, a
// sizeable share of a push's server time, so a push through the pool tries
// that first and falls back (push.go). A message's delay ($5, microseconds;
// NULL for none) counts from the database's clock (see pushColumns.delays).
func pushSQL(async, one, dedup bool) string {
	conflict := ""
	if dedup {
		conflict = `
	ON CONFLICT (queue, task_key) DO NOTHING`
	}
	if one {
		return pushOneSQL(async, conflict)
	}
	with, from := "WITH ", ""
	if async {
		with, from = asyncCTE+",\n", ", async"
	}
	return with + `ins AS (
	` + insertMessages + `
	SELECT $1, m.task_key, m.body, m.priority, coalesce(now() + m.delay * interval '1 microsecond', now()), NULLIF(m.ckey, ''), NULLIF(m.rkey, ''), NULLIF(m.trace, '')
	FROM unnest($2::bytea[], $3::bytea[], $4::int[], $5::bigint[], $8::text[], $9::text[], $10::text[]) AS m(task_key, body, priority, delay, ckey, rkey, trace)` + from + `
	WHERE ` + notHeld("m.task_key", true) + conflict + `
	RETURNING id, task_key
), n AS (
	SELECT {{s}}.wake_others($1, (SELECT count(*) FROM ins)::int, $7, $11) WHERE $6::bool AND EXISTS (SELECT FROM ins)
)
SELECT id, task_key FROM ins WHERE (SELECT count(*) FROM n) >= 0`
}

// notHeld is the push statements' condition that the task key key is not
// held (held.go): an ID held is a duplicate, as it is for Hold, so that a
// plain push of a held task's ID does not run it ahead of its parents
// (and again when it is released). With gate the rows are looked up only
// when the queue holds a task at all: one lookup per statement, not per
// task, for queues without held tasks.
func notHeld(key string, gate bool) string {
	probe := `NOT EXISTS (SELECT FROM {{s}}.held_tasks h WHERE h.queue = $1 AND h.task_id = ` + idOfKeySQL(key) + `)`
	if !gate {
		return probe
	}
	return `(NOT EXISTS (SELECT FROM {{s}}.held_tasks h WHERE h.queue = $1) OR ` + probe + `)`
}

// pushOneSQL is the push statement for one task: a single-row INSERT, whose
// RETURNING sends the wake-up, once, when it stores the row (a third
// column, the handles woken, that readInserted skips): without the batch
// statement's CTEs it runs faster.
func pushOneSQL(async bool, conflict string) string {
	row := `$1, $2::bytea, $3::bytea, $4::int, coalesce(now() + $5::bigint * interval '1 microsecond', now()), NULLIF($8::text, ''), NULLIF($9::text, ''), NULLIF($10::text, '')`
	with, source := "", `
	SELECT `+row+` WHERE `+notHeld("$2::bytea", false)
	if async {
		with, source = asyncCTE+"\n", `
	SELECT `+row+` FROM async WHERE `+notHeld("$2::bytea", false)
	}
	return with + insertMessages + source + conflict + `
RETURNING id, task_key, CASE WHEN $6::bool THEN {{s}}.wake_others($1, 1, $7, $11) END`
}
