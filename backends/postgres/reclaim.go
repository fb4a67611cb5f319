package postgres

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Space given back after a drain. A drained table keeps its size, for
// four reasons:
//
//   - The self-vacuum (vacuum.go) runs after every tenth of the table's
//     rows is deleted, so the last deletions of a drain are never vacuumed
//     (autovacuum visits rarely, or is off). A drain deletes in claim
//     order, so those last dead rows sit in the table's last pages, and
//     VACUUM truncates only empty pages at the end of the table.
//   - A VACUUM that finds dead rows on fewer than 2 % of the table's pages
//     (as after the self-vacuums of a drain) skips the indexes, and so
//     leaves the dead rows' line pointers in their pages, which are then
//     not empty and are not truncated, however few such pointers there
//     are. With INDEX_CLEANUP ON the same VACUUM truncates the table.
//   - A VACUUM run while any transaction in the database holds an older
//     snapshot finds the rows "dead but not yet removable" and keeps them
//     all: a manual VACUUM right after a drain, beside other work, can
//     give back nothing, where the same VACUUM a few seconds later gives
//     back every page.
//   - VACUUM never shrinks an index: emptied B-tree pages are kept for
//     reuse, so a drained table's indexes keep their size.
//
// So once a queue has deleted rows and then gone quiet (reclaimQuiet to
// twice that without a deletion, or reclaimEvery while deletions go on), the driver
// runs a reclaim pass in the background: a VACUUM (INDEX_CLEANUP ON),
// which truncates the empty tail of the table (Postgres takes the
// exclusive lock for that only if it is free at once, and gives it up as
// soon as another session waits for it), then REINDEX INDEX CONCURRENTLY
// of each index much larger than its rows need, one at a time (it blocks
// neither pushes nor claims). A pass that leaves the table much larger
// than its rows need (old snapshots, a busy lock, live rows in the last
// pages) is tried again, up to reclaimTries times, each wait twice the
// one before.
const (
	reclaimQuiet = 10 * time.Second
	reclaimEvery = time.Minute
	reclaimTries = 5
	// A relation is bloated when it is larger than reclaimMinBytes and
	// more than bloatFactor times what its rows need, estimated at
	// heapRowBytes per row in the table (a small task takes about 240 at
	// fillfactor 50; the estimate leaves room for larger bodies, so that a
	// queue of them is not reclaimed in vain) and indexRowBytes per index
	// entry.
	reclaimMinBytes = 8 << 20
	bloatFactor     = 4
	heapRowBytes    = 512
	indexRowBytes   = 128
)

// reclaimState is the driver's reclaim bookkeeping.
type reclaimState struct {
	lastDelete atomic.Int64 // Unix ns of the last deletion
	armed      atomic.Bool  // a reclaim loop is running
	// passes counts the reclaim passes this driver ran, and reindexes the
	// indexes it rebuilt (for tests and logs).
	passes, reindexes atomic.Int64
	// noRebuild is set once a rebuild was refused for want of the
	// index's ownership: the passes then only vacuum.
	noRebuild atomic.Bool
	// minBytes, when set, replaces reclaimMinBytes (tests set it before
	// the driver deletes anything).
	minBytes int64
}

// armReclaim records a deletion and starts the reclaim loop if it is not
// running.
func (d *Driver) armReclaim() {
	d.reclaim.lastDelete.Store(time.Now().UnixNano())
	if d.reclaim.armed.CompareAndSwap(false, true) {
		d.spawn(d.reclaimLoop)
	}
}

// reclaimLoop waits for the deletions to pause, runs reclaim passes until
// the table is back in shape or reclaimTries passes have failed, and
// ends; the next deletion starts it again.
func (d *Driver) reclaimLoop() {
	defer func() {
		d.reclaim.armed.Store(false)
		// A deletion that came while the loop was ending found it armed.
		if time.Since(time.Unix(0, d.reclaim.lastDelete.Load())) < reclaimQuiet && d.reclaim.armed.CompareAndSwap(false, true) {
			d.spawn(d.reclaimLoop)
		}
	}()
	// The pause waited for is reclaimQuiet and a random part of it more,
	// so that the processes of a fleet, which all see the drain end at
	// once, take turns: the later ones find the indexes rebuilt.
	pause := reclaimQuiet + rand.N(reclaimQuiet)
	started := time.Now()
	for {
		since := time.Since(time.Unix(0, d.reclaim.lastDelete.Load()))
		if since >= pause || time.Since(started) >= reclaimEvery {
			break
		}
		if !d.sleep(pause - since) {
			return
		}
	}
	wait := reclaimQuiet
	for try := 0; ; try++ {
		ctx, cancel := d.backgroundCtx(10 * time.Minute)
		done, err := d.reclaimPass(ctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			d.log.Warn("jobq postgres: giving space back after a drain failed; the queue works the same, its table stays large",
				"table", d.sql.messagesTable, "err", err)
		}
		if done || err != nil || try+1 >= reclaimTries || !d.sleep(wait) {
			return
		}
		wait *= 2
	}
}

// sleep waits for dur; false when the driver closed meanwhile.
func (d *Driver) sleep(dur time.Duration) bool {
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-d.closing.Done():
		return false
	case <-t.C:
		return true
	}
}

// relation is the size of the messages table or one of its indexes.
type relation struct {
	name  string // qualified and quoted
	index bool
	bytes int64
	rows  int64 // the table's rows (at least; see liveRows)
}

// rowBytes is the estimate of what one row needs in r.
func (r relation) rowBytes() int64 {
	if r.index {
		return indexRowBytes
	}
	return heapRowBytes
}

// bloated says whether r is larger than minBytes and much larger than its
// rows need.
func (r relation) bloated(minBytes int64) bool {
	return r.bytes > minBytes && r.bytes > bloatFactor*r.rowBytes()*(max(r.rows, 0)+vacuumEvery)
}

// liveRows counts the table's rows, up to limit: enough to tell whether a
// relation is bloated without reading a large backlog. (reltuples will not
// do: a vacuum that skips pages it finds all-visible, such as the emptied
// ones, extrapolates their rows from the table's earlier density.)
func (d *Driver) liveRows(ctx context.Context, limit int64) (int64, error) {
	var n int64
	err := d.pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM `+d.sql.messagesTable+` LIMIT $1) t`, limit).Scan(&n)
	return n, err
}

// relations returns the size of the messages table and of each of its
// valid indexes.
func (d *Driver) relations(ctx context.Context) ([]relation, error) {
	rows, err := d.pool.Query(ctx, `
SELECT n.nspname, c.relname, c.relkind = 'i', pg_relation_size(c.oid)
FROM pg_class t
JOIN pg_class c ON c.oid = t.oid OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = t.oid AND indisvalid)
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE t.oid = $1::regclass
ORDER BY c.relkind DESC, c.relname`, d.sql.messagesTable)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (relation, error) {
		var schema, name string
		var r relation
		err := row.Scan(&schema, &name, &r.index, &r.bytes)
		r.name = pgx.Identifier{schema, name}.Sanitize()
		return r, err
	})
}

// reclaimMinBytes is reclaimMinBytes, or the test's replacement.
func (d *Driver) reclaimMinBytes() int64 {
	if d.reclaim.minBytes > 0 {
		return d.reclaim.minBytes
	}
	return reclaimMinBytes
}

// bloatedRelations returns the table and indexes much larger than the
// table's rows need.
func (d *Driver) bloatedRelations(ctx context.Context) ([]relation, error) {
	rels, err := d.relations(ctx)
	if err != nil {
		return nil, err
	}
	minBytes := d.reclaimMinBytes()
	// Count the rows up to the most that would still leave a relation
	// bloated.
	var limit int64
	for _, r := range rels {
		limit = max(limit, r.bytes/(bloatFactor*r.rowBytes()))
	}
	rows, err := d.liveRows(ctx, limit+1)
	if err != nil {
		return nil, err
	}
	var out []relation
	for _, r := range rels {
		r.rows = rows
		if r.bloated(minBytes) {
			out = append(out, r)
		}
	}
	return out, nil
}

// reclaimPass vacuums the table and rebuilds its bloated indexes, one at a
// time, if the table or an index is bloated. It reports whether the table
// and its indexes are back in shape. (A table full of queued tasks is not
// bloated, and a vacuum could not shorten it: the self-vacuum is enough.)
func (d *Driver) reclaimPass(ctx context.Context) (bool, error) {
	if bloated, err := d.bloatedRelations(ctx); err != nil || len(bloated) == 0 {
		return err == nil, err
	}
	if !d.vacuuming.CompareAndSwap(false, true) {
		return false, nil // a vacuum is running: try again later
	}
	d.reclaim.passes.Add(1)
	d.vacuum(ctx, "SKIP_LOCKED, INDEX_CLEANUP ON")
	d.vacuuming.Store(false)
	bloated, err := d.bloatedRelations(ctx)
	if err != nil {
		return false, err
	}
	minBytes := d.reclaimMinBytes()
	done := true
	for _, r := range bloated {
		if !r.index {
			done = false // the table's tail could not be truncated yet
			continue
		}
		if d.reclaim.noRebuild.Load() {
			continue
		}
		// Another process of the fleet may be rebuilding it, or have
		// rebuilt it since the sizes were read.
		var busy bool
		if err := d.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_progress_create_index WHERE relid = $1::regclass), pg_relation_size($2::regclass)`,
			d.sql.messagesTable, r.name).Scan(&busy, &r.bytes); err != nil {
			return false, err
		}
		if busy {
			done = false
			continue
		}
		if !r.bloated(minBytes) {
			continue
		}
		if _, err := d.pool.Exec(ctx, `REINDEX INDEX CONCURRENTLY `+r.name); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "42501" { // insufficient_privilege
				d.reclaim.noRebuild.Store(true)
				d.log.Warn("jobq postgres: this role does not own the queue table, so its indexes stay at their peak size after a drain; "+
					"run REINDEX INDEX CONCURRENTLY as the owner, or open the queue as the owner", "index", r.name)
				continue
			}
			// A failed concurrent rebuild leaves an invalid copy behind,
			// which every write would still maintain.
			d.dropInvalidIndexes(context.WithoutCancel(ctx))
			return false, err
		}
		d.reclaim.reindexes.Add(1)
	}
	return done, nil
}

// dropInvalidIndexes drops the invalid indexes a failed REINDEX
// CONCURRENTLY left on the messages table (named *_ccnew*), best effort.
func (d *Driver) dropInvalidIndexes(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rows, err := d.pool.Query(ctx, `
SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname)
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE i.indrelid = $1::regclass AND NOT i.indisvalid AND c.relname LIKE '%\_ccnew%'`, d.sql.messagesTable)
	if err != nil {
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	for _, name := range names {
		if _, err := d.pool.Exec(ctx, `DROP INDEX CONCURRENTLY IF EXISTS `+name); err != nil {
			d.log.Warn("jobq postgres: dropping an index left by a failed rebuild failed; drop it by hand", "index", name, "err", err)
		}
	}
}
