package postgres

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/driver"
)

// A task's group (driver.Message.Group) is the column grp of messages,
// beside the body, NULL for none. Its counters are the row of groups,
// changed in the transaction of the push or settlement that counts (the
// contract of driver/groups.go): a push or settlement batch with a group
// runs its usual statement and the counters' upsert in one transaction.
// A batch without one runs exactly as before: only grouped tasks pay.

// groupsMigration is schema step 13.
const groupsMigration = `
ALTER TABLE {{s}}.messages ADD COLUMN IF NOT EXISTS grp text COLLATE "C";
CREATE INDEX IF NOT EXISTS messages_grp ON {{s}}.messages (queue, grp) WHERE grp IS NOT NULL;
CREATE TABLE {{s}}.groups (
	queue         text COLLATE "C" NOT NULL,
	name          text COLLATE "C" NOT NULL,
	pushed        bigint NOT NULL DEFAULT 0,
	succeeded     bigint NOT NULL DEFAULT 0,
	failed        bigint NOT NULL DEFAULT 0,
	dead_lettered bigint NOT NULL DEFAULT 0,
	cancelled     bigint NOT NULL DEFAULT 0,
	created_at    timestamptz NOT NULL DEFAULT now(),
	updated_at    timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (queue, name)
);
CREATE INDEX groups_recent ON {{s}}.groups (queue, updated_at DESC);
`

// cancelGroupsSQL is the CTE of the remove statement (results.go) that
// counts the removed messages (d) of each group as cancelled.
const cancelGroupsSQL = `
	INSERT INTO {{s}}.groups AS g (queue, name, cancelled)
	SELECT $1, grp, count(*) FROM d WHERE grp IS NOT NULL GROUP BY grp
	ON CONFLICT (queue, name) DO UPDATE SET cancelled = g.cancelled + excluded.cancelled, updated_at = now()`

// groupQueries are the statements of groups.
type groupQueries struct {
	count, get, list, split string
}

func buildGroupQueries(schema string) groupQueries {
	r := strings.NewReplacer("{{s}}", schema)
	return groupQueries{
		// count adds each row of the arrays to its group's counters.
		count: r.Replace(`
INSERT INTO {{s}}.groups AS g (queue, name, pushed, succeeded, failed, dead_lettered, cancelled)
SELECT $1, name, sum(p), sum(s), sum(f), sum(dl), sum(c)
FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[]) AS x(name, p, s, f, dl, c)
GROUP BY name
ON CONFLICT (queue, name) DO UPDATE SET
	pushed = g.pushed + excluded.pushed, succeeded = g.succeeded + excluded.succeeded,
	failed = g.failed + excluded.failed, dead_lettered = g.dead_lettered + excluded.dead_lettered,
	cancelled = g.cancelled + excluded.cancelled, updated_at = now()`),
		get: r.Replace(`SELECT name, pushed, succeeded, failed, dead_lettered, cancelled, created_at, updated_at
FROM {{s}}.groups WHERE queue = $1 AND name = $2`),
		list: r.Replace(`SELECT name, pushed, succeeded, failed, dead_lettered, cancelled, created_at, updated_at
FROM {{s}}.groups WHERE queue = $1 ORDER BY updated_at DESC, name LIMIT $2`),
		// split counts the group's live messages off messages_grp: ready,
		// in flight, delayed.
		split: r.Replace(`SELECT
	count(*) FILTER (WHERE visible_at <= now()),
	count(*) FILTER (WHERE visible_at > now() AND lease IS NOT NULL),
	count(*) FILTER (WHERE visible_at > now() AND lease IS NULL)
FROM {{s}}.messages WHERE queue = $1 AND grp = $2`),
	}
}

// groupDeltas are the counter changes of a batch, by group, in the
// columns of groupQueries.count.
type groupDeltas struct {
	names                     []string
	pushed, succ, fail, dl, c []int64
	at                        map[string]int
}

func (g *groupDeltas) add(name string, st driver.GroupState, pushed bool) {
	if name == "" {
		return
	}
	if g.at == nil {
		g.at = map[string]int{}
	}
	i, ok := g.at[name]
	if !ok {
		i = len(g.names)
		g.at[name] = i
		g.names = append(g.names, name)
		g.pushed, g.succ, g.fail, g.dl, g.c = append(g.pushed, 0), append(g.succ, 0), append(g.fail, 0), append(g.dl, 0), append(g.c, 0)
	}
	switch {
	case pushed:
		g.pushed[i]++
	case st == driver.GroupSucceeded:
		g.succ[i]++
	case st == driver.GroupFailed:
		g.fail[i]++
	case st == driver.GroupDeadLettered:
		g.dl[i]++
	case st == driver.GroupCancelled:
		g.c[i]++
	}
}

// store runs the counters' upsert in tx.
func (g *groupDeltas) store(ctx context.Context, d *Driver, tx pgx.Tx) error {
	if len(g.names) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, d.gsql.count, d.cfg.queue, g.names, g.pushed, g.succ, g.fail, g.dl, g.c)
	return err
}

// grouped reports whether any of msgs has a group.
func grouped(msgs []*driver.Message) bool {
	for _, m := range msgs {
		if m.Group != "" {
			return true
		}
	}
	return false
}

// pushGrouped is pushBounded for a batch with a group: the push and its
// counters in one transaction (a savepoint inside PushTx's).
func (d *Driver) pushGrouped(ctx context.Context, db pushDB, msgs []*driver.Message, notify bool) ([]driver.PushResult, error) {
	var res []driver.PushResult
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var err error
		res, err = d.pushBoundedIn(ctx, tx, msgs, notify)
		if err != nil {
			return err
		}
		var g groupDeltas
		for i, m := range msgs {
			if !res[i].Duplicate {
				g.add(m.Group, "", true)
			}
		}
		return g.store(ctx, d, tx)
	})
	return res, err
}

// tallies are the group tallies of a settlement batch by message id, nil
// when it has none.
func tallies(ids []int64, tally func(i int) driver.GroupTally) map[int64]driver.GroupTally {
	var m map[int64]driver.GroupTally
	for i, id := range ids {
		t := tally(i)
		if t.Group == "" {
			continue
		}
		if m == nil {
			m = map[int64]driver.GroupTally{}
		}
		if _, ok := m[id]; !ok {
			m[id] = t
		}
	}
	return m
}

// countSettled runs the counters' upsert for the tallies of the messages
// a settlement returned (done), in its transaction.
func (d *Driver) countSettled(ctx context.Context, tx pgx.Tx, t map[int64]driver.GroupTally, done map[int64]bool) error {
	var g groupDeltas
	for id := range done {
		if tl, ok := t[id]; ok {
			g.add(tl.Group, tl.State, false)
		}
	}
	return g.store(ctx, d, tx)
}

var _ driver.GroupStore = (*Driver)(nil)

func scanGroup(row pgx.Row) (*driver.GroupCounters, error) {
	var c driver.GroupCounters
	var created, updated pgtype.Timestamptz
	if err := row.Scan(&c.Name, &c.Pushed, &c.Succeeded, &c.Failed, &c.DeadLettered, &c.Cancelled, &created, &updated); err != nil {
		return nil, err
	}
	c.Created, c.Updated = created.Time, updated.Time
	return &c, nil
}

// GroupCounts implements driver.GroupStore: the counters and the split of
// the open tasks in one snapshot (a repeatable-read transaction).
func (d *Driver) GroupCounts(ctx context.Context, name string) (*driver.GroupCounters, error) {
	if err := d.closing.Err(); err != nil {
		return nil, err
	}
	var c *driver.GroupCounters
	err := pgx.BeginTxFunc(ctx, d.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		c, err = scanGroup(tx.QueryRow(ctx, d.gsql.get, d.cfg.queue, name))
		if errors.Is(err, pgx.ErrNoRows) {
			c = nil
			return nil
		}
		if err != nil {
			return err
		}
		c.Split = true
		return tx.QueryRow(ctx, d.gsql.split, d.cfg.queue, name).Scan(&c.Queued, &c.Running, &c.Delayed)
	})
	if err != nil {
		return nil, wrap(ctx, "group", err)
	}
	return c, nil
}

// ListGroups implements driver.GroupStore.
func (d *Driver) ListGroups(ctx context.Context, limit int) ([]*driver.GroupCounters, error) {
	if err := d.closing.Err(); err != nil {
		return nil, err
	}
	rows, err := d.pool.Query(ctx, d.gsql.list, d.cfg.queue, limit)
	if err != nil {
		return nil, wrap(ctx, "groups", err)
	}
	defer rows.Close()
	var out []*driver.GroupCounters
	for rows.Next() {
		c, err := scanGroup(rows)
		if err != nil {
			return nil, wrap(ctx, "groups", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(ctx, "groups", err)
	}
	return out, nil
}

// groupedPushSQL turns a push statement (pushSQL) into the one that also
// stores each message's group, from $11.
func groupedPushSQL(stmt string) string {
	return strings.NewReplacer(
		"trace_parent)", "trace_parent, grp)",
		"NULLIF(m.trace, '')", "NULLIF(m.trace, ''), NULLIF(m.grp, '')",
		"$10::text[])", "$10::text[], $11::text[])",
		"rkey, trace)", "rkey, trace, grp)",
		"NULLIF($10::text, '')", "NULLIF($10::text, ''), NULLIF($11::text, '')",
	).Replace(stmt)
}
