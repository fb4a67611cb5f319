package postgres

import (
	"context"
	"time"
)

// vacuumEvery is how many deleted rows (completions, dead-letterings,
// clears) of one open queue trigger a VACUUM of the messages table when the
// server's autovacuum is off.
//
// A queue table deletes every row it ever holds. Without vacuum the dead
// rows stay, at the head of the claim index, and every claim steps over
// them: claims get slower with every task ever run. Where autovacuum is on
// (the default, and the table's settings make it vacuum early) the driver
// does nothing; where it is off, each open queue vacuums after this many
// deletions, in the background, one vacuum at a time, skipping it when
// another session is vacuuming the table already.
const vacuumEvery = 20000

// deletedRows counts rows this queue deleted and starts a vacuum when due.
func (d *pgDriver) deletedRows(n int64) {
	if !d.selfVacuum || n <= 0 || d.deleted.Add(n) < vacuumEvery {
		return
	}
	if !d.vacuuming.CompareAndSwap(false, true) {
		return
	}
	d.deleted.Store(0)
	d.spawn(func() {
		defer d.vacuuming.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		go func() {
			select {
			case <-d.done:
				cancel()
			case <-ctx.Done():
			}
		}()
		if _, err := d.pool.Exec(ctx, `VACUUM (SKIP_LOCKED) `+d.sql.messagesTable); err != nil && ctx.Err() == nil {
			d.log.Warn("jobq postgres: VACUUM of the queue table failed; claims will slow down as dead rows pile up. "+
				"Turn autovacuum on, or vacuum the table regularly", "table", d.sql.messagesTable, "err", err)
		}
	})
}
