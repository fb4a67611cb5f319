package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Each open queue vacuums the messages table itself after it has deleted
// (completed, dead-lettered, cleared) vacuumEvery rows, or a tenth of the
// table's rows when that is more, whether or not the server's autovacuum is
// on; but not within vacuumGap of the table's last vacuum, by any process.
//
// A queue table deletes every row it ever holds. Without vacuum the dead
// rows stay, at the head of the claim index, and every claim steps over
// them: claims get slower with every task run since the last vacuum, so
// vacuums come often (vacuumEvery keeps pickup latency flat, where a
// larger interval let it grow with the tasks run). A vacuum reads the
// whole table and its indexes, hence the tenth: a queue with a large
// backlog vacuums less often. Autovacuum is no substitute: it visits a
// database at most once a minute (autovacuum_naptime), and a busy queue
// leaves hundreds of thousands of dead rows in a minute, which more than
// halves its drain rate. Vacuums run
// in the background, one at a time, skipped when another session (or
// autovacuum) is vacuuming the table already, and without parallel
// workers (PARALLEL 0): with two indexes Postgres otherwise starts one for
// every vacuum, with shared memory sized for the table's dead rows (up to
// maintenance_work_mem, zeroed), which costs far more than the vacuum
// itself. They do not truncate the table (TRUNCATE false): to give back
// a busy table's empty last pages, VACUUM waits for an exclusive lock,
// trying again for up to 5 s, and while it waits no other vacuum of the
// queue starts, so dead rows piled up in front of the claims. The
// reclaim pass after a drain (reclaim.go) truncates, when the table is
// quiet.
//
// The gap: a vacuum changes the table's statistics in pg_class, which
// invalidates every plan of the table in every session, so each
// connection of every worker plans its statements again after it. On a
// busy queue (10,000 tasks/s, a vacuum every 100 ms) that re-planning was
// about a tenth of the server's CPU; with at most one vacuum per half
// second the end-to-end benchmark ran 1.04x as fast, the server spending
// 0.94x the CPU per task. A trickle of tasks (the pickup latency that
// vacuumEvery keeps flat) takes longer than the gap for vacuumEvery
// deletions, and is not affected. The gap is the table's, not the
// process's: a fleet vacuums no more often than one worker would.
const (
	vacuumEvery = 1000
	vacuumShare = 10 // vacuum after 1/vacuumShare of the table's rows
	vacuumGap   = 500 * time.Millisecond
)

// deletedRows counts rows this queue deleted and starts a vacuum when due;
// it also arms the space reclaim that follows a drain (reclaim.go).
func (d *Driver) deletedRows(n int64) {
	if n <= 0 {
		return
	}
	d.armReclaim()
	if d.deleted.Add(n) < d.vacuumThreshold() || time.Now().UnixNano() < d.vacuumAfter.Load() {
		return
	}
	if !d.vacuuming.CompareAndSwap(false, true) {
		return
	}
	d.spawn(func() {
		defer d.vacuuming.Store(false)
		ctx, cancel := d.backgroundCtx(10 * time.Minute)
		defer cancel()
		if d.notDue(ctx) {
			return
		}
		d.vacuumAfter.Store(time.Now().Add(vacuumGap).UnixNano())
		d.vacuum(ctx, "SKIP_LOCKED, TRUNCATE false")
	})
}

// vacuumThreshold is how many deletions make a vacuum due.
func (d *Driver) vacuumThreshold() int64 {
	return max(vacuumEvery, d.tableRows.Load()/vacuumShare)
}

// notDue runs before a vacuum that looks due and reports whether it is
// not due after all, for one of two reasons:
//
//   - The table was vacuumed within vacuumGap, by any session (autovacuum
//     too); d.vacuumAfter then says when to look again.
//   - The table has grown since its rows were last counted, so much that
//     a tenth of the new count has not been deleted; it is then analyzed
//     if analyzeDue says so. Pushes, here or in other processes, may have
//     filled the table: a queue that last vacuumed a few rows and then had
//     a million pushed would otherwise vacuum the whole table for its
//     first vacuumEvery dead rows, reading every page and setting its hint
//     bits, just as the drain began. The count is the server's own
//     (pg_stat_get_live_tuples), which commits keep current; when
//     statistics are off it is 0 and the vacuum goes ahead.
//
// The caller holds d.vacuuming.
func (d *Driver) notDue(ctx context.Context) bool {
	var live int64
	var since *float64 // seconds since the table's last vacuum; nil for none
	if err := d.pool.QueryRow(ctx, `SELECT pg_stat_get_live_tuples($1::regclass),
	extract(epoch FROM now() - greatest(pg_stat_get_last_vacuum_time($1::regclass), pg_stat_get_last_autovacuum_time($1::regclass)))::float8`,
		d.sql.messagesTable).Scan(&live, &since); err != nil {
		return false
	}
	if since != nil && *since >= 0 && *since < vacuumGap.Seconds() {
		left := vacuumGap - time.Duration(*since*float64(time.Second))
		d.vacuumAfter.Store(time.Now().Add(left).UnixNano())
		return true
	}
	prev := d.tableRows.Load()
	if live <= max(prev, 0) || d.deleted.Load() >= max(vacuumEvery, live/vacuumShare) {
		return false
	}
	d.tableRows.Store(live)
	if analyzeDue(prev, live) {
		d.analyze(ctx)
	}
	return true
}

// backgroundCtx is the context of a background statement: it ends after
// timeout or when the driver closes.
func (d *Driver) backgroundCtx(timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	go func() {
		select {
		case <-d.closing.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// vacuum vacuums the messages table with options and analyzes it when
// due. The caller holds d.vacuuming.
func (d *Driver) vacuum(ctx context.Context, options string) {
	d.deleted.Store(0)
	if _, err := d.pool.Exec(ctx, `VACUUM (PARALLEL 0, `+options+`) `+d.sql.messagesTable); err != nil && ctx.Err() == nil {
		d.log.Warn("jobq postgres: VACUUM of the queue table failed; claims will slow down as dead rows pile up. "+
			"Vacuum the table regularly (autovacuum alone visits it too rarely for a busy queue)", "table", d.sql.messagesTable, "err", err)
		return
	}
	// VACUUM has just counted the table's rows.
	var rows float64
	if err := d.pool.QueryRow(ctx, `SELECT reltuples FROM pg_class WHERE oid = $1::regclass`, d.sql.messagesTable).Scan(&rows); err != nil {
		return
	}
	n := int64(max(rows, 0))
	if !analyzeDue(d.tableRows.Swap(n), n) {
		return
	}
	d.analyze(ctx)
}

// analyzeTarget is the statistics target of the queue's own ANALYZE:
// ANALYZE reads 300 times as many rows, one page each for a table of
// queued tasks. What matters is the row count and that Postgres plans
// again; a sample of 3,000 rows gives the count closely enough, and reads
// far fewer pages than the default target of 100 (pages whose hint bits
// it also sets).
const analyzeTarget = 10

// analyze analyzes the messages table's queue column (one column is
// enough: the other columns' statistics would cost more, the bodies most,
// and change no plan) with a sample of analyzeTarget.
func (d *Driver) analyze(ctx context.Context) {
	err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf(`SET LOCAL default_statistics_target = %d`, analyzeTarget)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `ANALYZE `+d.sql.messagesTable+` (queue)`)
		return err
	})
	if err != nil && ctx.Err() == nil {
		d.log.Warn("jobq postgres: ANALYZE of the queue table failed; plans made while the queue was empty may read the whole queue",
			"table", d.sql.messagesTable, "err", err)
	}
}

// checkStats, once per driver, makes sure the queue table has statistics
// of its queue column, and analyzes it in the background when it has none
// (a new table, or one analyzed while empty). Without them Postgres
// estimates one row for the queue, and the settlements a connection plans
// then (once, plans.go) join by reading every in-flight message of the
// queue for each message they settle, until the first vacuum's ANALYZE
// makes it plan them again: 1,000 settlements in. Called after a push
// that stored messages and after a claim that took some, off their path.
func (d *Driver) checkStats() {
	if d.statsChecked.Load() || !d.statsChecked.CompareAndSwap(false, true) {
		return
	}
	d.spawn(func() {
		ctx, cancel := d.backgroundCtx(time.Minute)
		defer cancel()
		var missing bool
		err := d.pool.QueryRow(ctx, `SELECT NOT EXISTS (SELECT FROM pg_stats WHERE schemaname = $1 AND tablename = 'messages' AND attname = 'queue')`,
			d.cfg.schema).Scan(&missing)
		if err != nil || !missing {
			return
		}
		d.analyze(ctx)
	})
}

// analyzeDue says whether the queue should ANALYZE its table now that it
// counts rows messages in it, when it counted prev before (-1: this is the
// queue's first count). The rows are counted by each vacuum, and by grown
// before a vacuum. New statistics make Postgres plan the driver's
// statements again: a generic plan made while the queue was empty or small
// reads the whole queue on every settlement (plans.go). So a queue
// analyzes at its first count and whenever its table has more than
// doubled (give or take vacuumEvery rows) since the count before; a
// shrinking queue does not, since plans made for more rows stay good.
// Analyzing after every vacuum cost a draining worker a third more
// Postgres CPU.
func analyzeDue(prev, rows int64) bool {
	return prev < 0 || rows > 2*prev+vacuumEvery
}
