package postgres

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/bodypack"
	"github.com/jobq/jobq/internal/taskkey"
)

// How a message's task ID and body are stored (schema step 11).
//
// task_key holds the task ID: jobq's default ID (and ai4s-jobq's), 32
// lowercase hex digits, as its 16 bytes; any other ID as its UTF-8 bytes,
// with a NUL byte added when they are 16 long, so that no other key is 16
// bytes long. Task IDs never hold a NUL (push refuses one, as the text
// column before did), so each ID has exactly one key and dedup is
// unchanged. NULL is no ID.
//
// packed_body holds the body with a header byte (internal/bodypack): an
// ai4s-jobq envelope without its fixed opening and ending and the task ID
// in it, or the header bodypack.Plain and the body whole. A reader rebuilds
// the body byte for byte.
//
// A typical ai4s-jobq task takes about 110 bytes of row instead of 250,
// and its dedup index entry 32 bytes instead of 48.

// packedMigration is schema step 11. It rebuilds messages with the new
// columns, the fixed-width ones first so that no alignment padding is
// lost between them (Postgres cannot reorder the columns of a table), and
// converts dead_letters in place. Rows written before keep their bodies
// whole (bodypack.Plain). The table keeps its message ids (dead letters and
// held leases name them) and its identity continues where it was; its
// owner, grants, storage parameters and publications are carried over.
// Both tables are locked first, so that no write of an older release is
// lost between the copy and the drop.
//
// Older releases then fail on the queue: task_id and body are gone from
// both tables and claim_with_policies is dropped (its successor,
// claim_packed, returns the new columns), so their pushes, claims,
// requeues, dead-lettering, peeks and dead-letter listings fail with
// "column ... does not exist" or "function ... does not exist"; what they
// can still do (renew, complete, stats, clear) means the same on the new
// table.
var packedMigration = fmt.Sprintf(`
LOCK TABLE {{s}}.messages, {{s}}.dead_letters IN ACCESS EXCLUSIVE MODE;

CREATE TABLE {{s}}.messages_packed (
	id              bigint GENERATED ALWAYS AS IDENTITY,
	visible_at      timestamptz NOT NULL DEFAULT now(),
	enqueued_at     timestamptz NOT NULL DEFAULT now(),
	priority        integer NOT NULL DEFAULT 0
	                CONSTRAINT messages_priority_range CHECK (priority BETWEEN %d AND %d),
	deliveries      integer NOT NULL DEFAULT 0,
	lease           uuid,
	queue           text COLLATE "C" NOT NULL,
	task_key        bytea,
	packed_body     bytea NOT NULL,
	concurrency_key text COLLATE "C",
	rate_key        text COLLATE "C",
	trace_parent    text
) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_insert_scale_factor = 0.05);

INSERT INTO {{s}}.messages_packed (id, visible_at, enqueued_at, priority, deliveries, lease, queue, task_key, packed_body,
	concurrency_key, rate_key, trace_parent)
OVERRIDING SYSTEM VALUE
SELECT id, visible_at, enqueued_at, priority, deliveries, lease, queue, %[3]s, %[4]s,
	concurrency_key, rate_key, trace_parent
FROM {{s}}.messages ORDER BY queue, priority DESC, id;

SELECT setval(pg_get_serial_sequence('{{s}}.messages_packed', 'id'), nextval(pg_get_serial_sequence('{{s}}.messages', 'id')));

DO $carry$
DECLARE
	old regclass := '{{s}}.messages'::regclass;
	new regclass := '{{s}}.messages_packed'::regclass;
	r record;
BEGIN
	FOR r IN SELECT o FROM pg_class c, unnest(c.reloptions) AS o WHERE c.oid = old LOOP
		EXECUTE format('ALTER TABLE %%s SET (%%s)', new, r.o);
	END LOOP;
	FOR r IN SELECT a.grantee, a.privilege_type, a.is_grantable FROM pg_class c, aclexplode(c.relacl) AS a
		WHERE c.oid = old AND a.grantee <> c.relowner LOOP
		EXECUTE format('GRANT %%s ON %%s TO %%s%%s', r.privilege_type, new,
			CASE WHEN r.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(r.grantee)) END,
			CASE WHEN r.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
	END LOOP;
	FOR r IN SELECT p.pubname FROM pg_publication_rel pr JOIN pg_publication p ON p.oid = pr.prpubid WHERE pr.prrelid = old LOOP
		EXECUTE format('ALTER PUBLICATION %%I ADD TABLE %%s', r.pubname, new);
	END LOOP;
	FOR r IN SELECT pg_get_userbyid(o.relowner) AS owner FROM pg_class o, pg_class n
		WHERE o.oid = old AND n.oid = new AND o.relowner <> n.relowner LOOP
		EXECUTE format('ALTER TABLE %%s OWNER TO %%I', new, r.owner);
	END LOOP;
END
$carry$;

DROP TABLE {{s}}.messages;
ALTER TABLE {{s}}.messages_packed RENAME TO messages;
ALTER SEQUENCE {{s}}.messages_packed_id_seq RENAME TO messages_id_seq;
CREATE UNIQUE INDEX messages_claim ON {{s}}.messages (queue, priority DESC, id);
ALTER TABLE {{s}}.messages REPLICA IDENTITY USING INDEX messages_claim;
CREATE UNIQUE INDEX messages_task_key ON {{s}}.messages (queue, task_key);
ANALYZE {{s}}.messages;

ALTER TABLE {{s}}.dead_letters ADD COLUMN task_key bytea, ADD COLUMN packed_body bytea;
UPDATE {{s}}.dead_letters SET task_key = %[3]s, packed_body = %[4]s;
ALTER TABLE {{s}}.dead_letters ALTER COLUMN packed_body SET NOT NULL, DROP COLUMN task_id, DROP COLUMN body;

DROP FUNCTION IF EXISTS {{s}}.claim_with_policies(text, int, bigint);
`, driver.MinPriority, driver.MaxPriority, keyOfSQL("task_id"), `'a'::bytea || body`) + claimPackedFunction

// keyOfSQL is taskKey in SQL: the key of the task ID in the text
// expression x.
func keyOfSQL(x string) string {
	return fmt.Sprintf(`CASE WHEN %[1]s COLLATE "C" ~ '^[0-9a-f]{32}$' THEN decode(%[1]s, 'hex')
		WHEN octet_length(%[1]s) = 16 THEN convert_to(%[1]s, 'UTF8') || decode('00', 'hex')
		ELSE convert_to(%[1]s, 'UTF8') END`, x)
}

// idOfKeySQL is taskIDOf in SQL: the task ID (text) of the key in the
// bytea expression x; NULL for NULL.
func idOfKeySQL(x string) string {
	return fmt.Sprintf(`CASE WHEN octet_length(%[1]s) = 16 THEN encode(%[1]s, 'hex')
		WHEN octet_length(%[1]s) = 17 AND get_byte(%[1]s, 16) = 0 THEN convert_from(substring(%[1]s from 1 for 16), 'UTF8')
		ELSE convert_from(%[1]s, 'UTF8') END`, x)
}

// claimPackedFunction is claim_with_policies (claimFunctionKeyLocks) under
// the name claim_packed, returning the task key and the stored body. It
// is derived from that text so that the two cannot drift apart.
var claimPackedFunction = mustReplace(claimFunctionKeyLocks,
	`CREATE OR REPLACE FUNCTION {{s}}.claim_with_policies(`, `CREATE OR REPLACE FUNCTION {{s}}.claim_packed(`,
	`r_task_id text, r_body bytea`, `r_task_key bytea, r_body bytea`,
	`RETURNING m.id, m.task_id, m.body,`, `RETURNING m.id, m.task_key, m.packed_body,`,
	`SELECT u.id, coalesce(u.task_id, ''), u.body,`, `SELECT u.id, u.task_key, u.packed_body,`,
)

// mustReplace replaces each old string of s, which must occur exactly
// once, by its new one.
func mustReplace(s string, oldNew ...string) string {
	for i := 0; i < len(oldNew); i += 2 {
		if n := strings.Count(s, oldNew[i]); n != 1 {
			panic(fmt.Sprintf("postgres: %q occurs %d times in the text to rewrite", oldNew[i], n))
		}
		s = strings.Replace(s, oldNew[i], oldNew[i+1], 1)
	}
	return s
}

// checkTaskID refuses a task ID that no key can hold: one with a NUL byte
// or invalid UTF-8 (which the text column of earlier schemas refused too).
func checkTaskID(id string) error {
	if utf8.ValidString(id) && strings.IndexByte(id, 0) < 0 {
		return nil
	}
	return driver.Errorf(errcode.InvalidArgument, "postgres push: task ID %q holds a NUL byte or is not valid UTF-8", id)
}

// taskKey is the task_key column value of id: nil (NULL) for no ID.
func taskKey(id string) []byte {
	switch {
	case id == "":
		return nil
	case taskkey.Canonical(id):
		b, _ := hex.DecodeString(id) // canonical: cannot fail
		return b
	case len(id) == 16:
		return append([]byte(id), 0)
	}
	return []byte(id)
}

// taskKeys is taskKey of each id.
func taskKeys(ids []string) [][]byte {
	keys := make([][]byte, len(ids))
	for i, id := range ids {
		keys[i] = taskKey(id)
	}
	return keys
}

// taskIDOf is the task ID whose key is key ("" for NULL).
func taskIDOf(key []byte) string {
	switch {
	case len(key) == 16:
		var id [32]byte
		hex.Encode(id[:], key)
		return string(id[:])
	case len(key) == 17 && key[16] == 0:
		return string(key[:16])
	}
	return string(key)
}

// loadBody is the body of a message stored as stored, for the task ID id.
// ok is false when stored does not begin with a header jobq writes
// (another tool wrote it); body is then stored as it is, for peek and the
// dead letters to show.
func loadBody(stored []byte, id string) (body []byte, ok bool) {
	if b, ok := bodypack.Decode(stored, id); ok {
		return b, true
	}
	return stored, false
}

// loadBodyCopy is loadBody for a stored value that is a view of a row
// (pgtype.DriverBytes): the body it returns never shares stored's memory.
func loadBodyCopy(stored []byte, id string) (body []byte, ok bool) {
	body, ok = loadBody(stored, id)
	if !ok || len(stored) > 0 && stored[0] == bodypack.Plain {
		body = bytes.Clone(body) // stored[1:] or stored itself; Unpack made a copy
	}
	return body, ok
}

// leasedTask is a claim's Lease.Private: the task ID of the message, which
// bodypack.Encode needs to pack a replacement body.
type leasedTask string

// replacementBody is the packed_body column value of a requeue's or a
// dead-lettering's new body under lease l: nil (keep the stored one) stays
// nil. Packed when the lease carries the task ID; a lease made elsewhere
// does not, and the body is then stored whole.
func replacementBody(body []byte, l driver.Lease) []byte {
	if body == nil {
		return nil
	}
	if id, ok := l.Private.(leasedTask); ok {
		return bodypack.Encode(body, string(id))
	}
	return bodypack.EncodePlain(body)
}
