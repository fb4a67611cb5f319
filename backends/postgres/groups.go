package postgres

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
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

// settlementTallies are the tally arrays of a settlement batch (tallies),
// the last four parameters of its grouped statement (groupedSettleSQL).
func settlementTallies(t map[int64]driver.GroupTally, queue string) []any {
	ids := make([]int64, 0, len(t))
	groups := make([]string, 0, len(t))
	states := make([]string, 0, len(t))
	for id, tl := range t {
		ids = append(ids, id)
		groups = append(groups, tl.Group)
		states = append(states, string(tl.State))
	}
	return []any{ids, groups, states, queue}
}

// groupCountSQL is the CTE of a grouped settlement statement: it adds the
// tallies ($T: message ids, $T+1: groups, $T+2: states) of the messages
// the settlement changed (CTE from, with their ids) to the groups of
// queue $T+3.
const groupCountSQL = `, grp_count AS (
	INSERT INTO {{s}}.groups AS g (queue, name, succeeded, failed, dead_lettered, cancelled)
	SELECT $%[4]d, t.grp, count(*) FILTER (WHERE t.st = 'succeeded'), count(*) FILTER (WHERE t.st = 'failed'),
		count(*) FILTER (WHERE t.st = 'dead-lettered'), count(*) FILTER (WHERE t.st = 'cancelled')
	FROM unnest($%[1]d::bigint[], $%[2]d::text[], $%[3]d::text[]) AS t(id, grp, st) JOIN %[5]s ON %[5]s.id = t.id
	GROUP BY t.grp
	ON CONFLICT (queue, name) DO UPDATE SET
		succeeded = g.succeeded + excluded.succeeded, failed = g.failed + excluded.failed,
		dead_lettered = g.dead_lettered + excluded.dead_lettered, cancelled = g.cancelled + excluded.cancelled,
		updated_at = now()
)`

// paramRE finds a statement's parameters.
var paramRE = regexp.MustCompile(`\$(\d+)`)

// groupedSettleSQL returns settlement statement stmt (schema filled in)
// with groupCountSQL, so that one statement settles and counts. The
// statements end in one of three ways: a final SELECT from the CTE d of
// the deleted rows (complete; dead-letter with records), an INSERT of d's
// rows into dead_letters (dead-letter), or an UPDATE (requeue), which
// becomes the CTE u.
func groupedSettleSQL(stmt, schema string) (string, error) {
	t := 0
	for _, m := range paramRE.FindAllStringSubmatch(stmt, -1) {
		n, _ := strconv.Atoi(m[1])
		t = max(t, n)
	}
	t++
	cte := func(from string) string {
		return strings.ReplaceAll(fmt.Sprintf(groupCountSQL, t, t+1, t+2, t+3, from), "{{s}}", schema)
	}
	if i := strings.LastIndex(stmt, "\nSELECT id FROM "); i >= 0 {
		return stmt[:i] + cte("d") + stmt[i:], nil
	}
	if i := strings.LastIndex(stmt, "\nINSERT INTO "+schema+".dead_letters"); i >= 0 {
		return stmt[:i] + cte("d") + stmt[i:], nil
	}
	if i := strings.Index(stmt, "\nUPDATE "+schema+".messages m"); i >= 0 && strings.HasSuffix(stmt, "RETURNING m.id") {
		return stmt[:i] + ",\nu AS (" + stmt[i:] + "\n)" + cte("u") + "\nSELECT id FROM u", nil
	}
	return "", fmt.Errorf("postgres: no place for the group counters in the statement %q", stmt)
}

// groupedSQL returns the grouped variant of settlement statement stmt,
// built once per statement.
func (d *Driver) groupedSQL(stmt string) (string, error) {
	if v, ok := d.grouped.Load(stmt); ok {
		return v.(string), nil
	}
	g, err := groupedSettleSQL(stmt, pgx.Identifier{d.cfg.schema}.Sanitize())
	if err != nil {
		return "", err
	}
	d.grouped.Store(stmt, g)
	return g, nil
}

// groupedPushSQL turns the multi-row push statement with ON CONFLICT
// (pushSQL) into the one that also stores each message's group, from
// $12, and adds the messages it stored to their groups' pushed counters.
func groupedPushSQL(stmt string) string {
	return strings.NewReplacer(
		"trace_parent)", "trace_parent, grp)",
		"NULLIF(m.trace, '')", "NULLIF(m.trace, ''), NULLIF(m.grp, '')",
		"$10::text[])", "$10::text[], $12::text[])",
		"rkey, trace)", "rkey, trace, grp)",
		"RETURNING id, task_key\n), n AS (", `RETURNING id, task_key, grp
), grp_count AS (
	INSERT INTO {{s}}.groups AS g (queue, name, pushed)
	SELECT $1, grp, count(*) FROM ins WHERE grp IS NOT NULL GROUP BY grp
	ON CONFLICT (queue, name) DO UPDATE SET pushed = g.pushed + excluded.pushed, updated_at = now()
), n AS (`,
	).Replace(stmt)
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
