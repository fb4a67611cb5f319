-- A file made by jobq before schema 1 (commit 19a508b), dumped with sqlite3 .dump: queue "q" with
-- a dead letter (ID ...01), a message in flight (...02, lease below, until 2100), ready ones
-- (...03; "custom-id"; an upper-case hex ID; ...04 at priority 5, requeued once) and a delayed
-- one (...05, until 2100). The migration test loads it and opens it.
PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE jobq_messages (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	queue       TEXT    NOT NULL,
	task_id     TEXT    NOT NULL,
	body        BLOB    NOT NULL,
	priority    INTEGER NOT NULL DEFAULT 0,
	visible_at  INTEGER NOT NULL,
	enqueued_at INTEGER NOT NULL,
	deliveries  INTEGER NOT NULL DEFAULT 0,
	lease       TEXT
, concurrency_key TEXT NOT NULL DEFAULT '', rate_key TEXT NOT NULL DEFAULT '', trace_parent TEXT NOT NULL DEFAULT '');
INSERT INTO jobq_messages VALUES(2,'q','00000000000000000000000000000002',X'7b2276657273696f6e223a20312c20226b7761726773223a2022696e666c69676874222c20226964223a20223030303030303030303030303030303030303030303030303030303030303032227d',0,4102444800000000,1795691194745596,1,'c286ddbfdbb738c8012e17efaa9d991c','','','');
INSERT INTO jobq_messages VALUES(3,'q','00000000000000000000000000000003',X'7b2276657273696f6e223a20312c20226b7761726773223a20227265616479222c20226964223a20223030303030303030303030303030303030303030303030303030303030303033227d',0,0,1795691194745596,0,NULL,'','','');
INSERT INTO jobq_messages VALUES(4,'q','custom-id',X'7b226964223a2022637573746f6d2d6964227d',0,0,1795691194745596,0,NULL,'','','');
INSERT INTO jobq_messages VALUES(5,'q','0123456789ABCDEF0123456789ABCDEF',X'7570706572',0,0,1795691194745596,0,NULL,'','','');
INSERT INTO jobq_messages VALUES(6,'q','00000000000000000000000000000004',X'6e6f74206a736f6e2c206e6f206964',5,1795691194746247,1795691194745596,1,NULL,'','','');
INSERT INTO jobq_messages VALUES(7,'q','00000000000000000000000000000005',X'7b226964223a20223030303030303030303030303030303030303030303030303030303030303035227d',0,4102444800000000,1795691194745596,0,NULL,'','','');
CREATE TABLE jobq_dead (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	queue       TEXT    NOT NULL,
	task_id     TEXT    NOT NULL,
	body        BLOB    NOT NULL,
	priority    INTEGER NOT NULL DEFAULT 0,
	enqueued_at INTEGER NOT NULL,
	deliveries  INTEGER NOT NULL,
	reason      TEXT    NOT NULL,
	detail      TEXT    NOT NULL,
	dead_at     INTEGER NOT NULL
, concurrency_key TEXT NOT NULL DEFAULT '', rate_key TEXT NOT NULL DEFAULT '');
INSERT INTO jobq_dead VALUES(1,'q','00000000000000000000000000000001',X'7b2276657273696f6e223a20312c20226b7761726773223a202264656164222c20226964223a20223030303030303030303030303030303030303030303030303030303030303031227d',0,1795691194745596,1,'failed','on purpose',1795691194746305,'','');
CREATE TABLE jobq_policies (
	queue     TEXT    NOT NULL,
	kind      TEXT    NOT NULL,
	key       TEXT    NOT NULL,
	limit_n   INTEGER NOT NULL,
	period_us INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (queue, kind, key)
);
CREATE TABLE jobq_admissions (
	queue      TEXT    NOT NULL,
	key        TEXT    NOT NULL,
	expires_at INTEGER NOT NULL
);
CREATE TABLE jobq_results (
	queue      TEXT    NOT NULL,
	task_id    TEXT    NOT NULL,
	state      TEXT    NOT NULL,
	updated_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	data       BLOB    NOT NULL,
	PRIMARY KEY (queue, task_id)
);
CREATE TABLE jobq_workers (
	queue     TEXT    NOT NULL,
	id        TEXT    NOT NULL,
	heartbeat INTEGER NOT NULL,
	withdrawn INTEGER NOT NULL DEFAULT 0,
	data      BLOB    NOT NULL,
	PRIMARY KEY (queue, id)
);
DELETE FROM sqlite_sequence;
INSERT INTO sqlite_sequence VALUES('jobq_messages',7);
INSERT INTO sqlite_sequence VALUES('jobq_dead',1);
CREATE INDEX jobq_messages_order ON jobq_messages (queue, priority DESC, id, visible_at, lease);
CREATE UNIQUE INDEX jobq_messages_task ON jobq_messages (queue, task_id) WHERE task_id <> '';
CREATE INDEX jobq_dead_queue ON jobq_dead (queue, id);
CREATE INDEX jobq_admissions_expiry ON jobq_admissions (queue, expires_at);
CREATE INDEX jobq_messages_ckey ON jobq_messages (queue, concurrency_key, visible_at, lease)
	WHERE concurrency_key <> '';
CREATE INDEX jobq_results_expiry ON jobq_results (queue, expires_at);
COMMIT;
