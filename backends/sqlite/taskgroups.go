package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// A task's group (driver.Message.Group) is the column grp of jobq_messages
// and jobq_dead, beside the body, '' for none. Its counters are the row of
// jobq_groups, changed in the transaction of the push or settlement that
// counts (the driver contract of driver/groups.go). Only grouped tasks
// touch jobq_groups or the partial index jobq_messages_grp, so a queue
// without groups writes nothing more than before.

const groupTable = `
CREATE TABLE IF NOT EXISTS jobq_groups (
	queue         TEXT    NOT NULL,
	name          TEXT    NOT NULL,
	pushed        INTEGER NOT NULL DEFAULT 0,
	succeeded     INTEGER NOT NULL DEFAULT 0,
	failed        INTEGER NOT NULL DEFAULT 0,
	dead_lettered INTEGER NOT NULL DEFAULT 0,
	cancelled     INTEGER NOT NULL DEFAULT 0,
	created_at    INTEGER NOT NULL,
	updated_at    INTEGER NOT NULL,
	PRIMARY KEY (queue, name)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS jobq_groups_recent ON jobq_groups (queue, updated_at);
`

// groupIndex serves the split of a group's open tasks; only grouped rows
// are in it.
const groupIndex = `CREATE INDEX IF NOT EXISTS jobq_messages_grp ON jobq_messages (queue, grp) WHERE grp <> ''`

// migrateGroups adds the grp columns, the counters and the index. It runs
// inside migrate's transaction.
func migrateGroups(ctx context.Context, tx *sql.Tx) error {
	for _, table := range []string{"jobq_messages", "jobq_dead"} {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info('`+table+`') WHERE name = 'grp'`).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			if _, err := tx.ExecContext(ctx, `ALTER TABLE `+table+` ADD COLUMN grp TEXT NOT NULL DEFAULT ''`); err != nil {
				return err
			}
		}
	}
	if _, err := tx.ExecContext(ctx, groupTable); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, groupIndex)
	return err
}

// countGroupSQL adds ?3 to counter COL ('pushed', 'succeeded', ...) of
// group ?2, creating the group.
const countGroupSQL = `INSERT INTO jobq_groups (queue, name, COL, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4)
	ON CONFLICT (queue, name) DO UPDATE SET COL = COL + excluded.COL, updated_at = excluded.updated_at`

// countGroupStmts is countGroupSQL for each counter column.
var countGroupStmts = func() map[string]string {
	m := map[string]string{}
	for _, col := range []string{"pushed", "succeeded", "failed", "dead_lettered", "cancelled"} {
		m[col] = strings.ReplaceAll(countGroupSQL, "COL", col)
	}
	return m
}()

// groupColumn is the counter column of a tally's state.
func groupColumn(st driver.GroupState) (string, error) {
	switch st {
	case driver.GroupSucceeded:
		return "succeeded", nil
	case driver.GroupFailed:
		return "failed", nil
	case driver.GroupDeadLettered:
		return "dead_lettered", nil
	case driver.GroupCancelled:
		return "cancelled", nil
	}
	return "", driver.Errorf(errcode.InvalidArgument, "sqlite: group tally of unknown state %q", st)
}

// countGroup adds n to col of group in tx.
func (d *Driver) countGroup(tx wtx, group, col string, n, now int64) error {
	if group == "" || n == 0 {
		return nil
	}
	_, err := tx.Exec(countGroupStmts[col], d.cfg.queue, group, n, now)
	return err
}

// tally counts t, a settlement's tally, in tx.
func (d *Driver) tally(tx wtx, t driver.GroupTally, now int64) error {
	if t.Group == "" {
		return nil
	}
	col, err := groupColumn(t.State)
	if err != nil {
		return err
	}
	return d.countGroup(tx, t.Group, col, 1, now)
}

var _ driver.GroupStore = (*Driver)(nil)

const (
	selectGroup = `SELECT name, pushed, succeeded, failed, dead_lettered, cancelled, created_at, updated_at
		FROM jobq_groups WHERE queue = ? AND name = ?`
	recentGroups = `SELECT name, pushed, succeeded, failed, dead_lettered, cancelled, created_at, updated_at
		FROM jobq_groups WHERE queue = ? ORDER BY updated_at DESC, name LIMIT ?`
	// splitGroup counts the group's live messages: ready, in flight,
	// delayed (see schema).
	splitGroup = `SELECT
		COALESCE(SUM(visible_at <= ?3), 0),
		COALESCE(SUM(visible_at > ?3 AND lease IS NOT NULL), 0),
		COALESCE(SUM(visible_at > ?3 AND lease IS NULL), 0)
		FROM jobq_messages WHERE queue = ?1 AND grp = ?2`
)

type rowScanner interface{ Scan(dest ...any) error }

func scanGroup(r rowScanner) (*driver.GroupCounters, error) {
	var c driver.GroupCounters
	var created, updated int64
	if err := r.Scan(&c.Name, &c.Pushed, &c.Succeeded, &c.Failed, &c.DeadLettered, &c.Cancelled, &created, &updated); err != nil {
		return nil, err
	}
	c.Created, c.Updated = fromMicros(created), fromMicros(updated)
	return &c, nil
}

// GroupCounts implements driver.GroupStore: the counters and the split of
// the open tasks, read in one snapshot.
func (d *Driver) GroupCounts(ctx context.Context, name string) (*driver.GroupCounters, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	tx, err := d.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, d.wrap(ctx, "group", err)
	}
	defer func() { _ = tx.Rollback() }()
	c, err := scanGroup(tx.QueryRowContext(ctx, selectGroup, d.cfg.queue, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, d.wrap(ctx, "group", err)
	}
	now := micros(time.Now())
	if err := tx.QueryRowContext(ctx, splitGroup, d.cfg.queue, name, now).Scan(&c.Queued, &c.Running, &c.Delayed); err != nil {
		return nil, d.wrap(ctx, "group", err)
	}
	c.Split = true
	return c, nil
}

// ListGroups implements driver.GroupStore.
func (d *Driver) ListGroups(ctx context.Context, limit int) ([]*driver.GroupCounters, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	rows, err := d.db.QueryContext(ctx, recentGroups, d.cfg.queue, limit)
	if err != nil {
		return nil, d.wrap(ctx, "groups", err)
	}
	defer rows.Close()
	var out []*driver.GroupCounters
	for rows.Next() {
		c, err := scanGroup(rows)
		if err != nil {
			return nil, d.wrap(ctx, "groups", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, d.wrap(ctx, "groups", err)
	}
	return out, nil
}
