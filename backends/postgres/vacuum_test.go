package postgres

import (
	"testing"
	"time"
)

// TestSelfVacuum: a queue vacuums its table itself once it has deleted
// enough rows.
func TestSelfVacuum(t *testing.T) {
	t.Parallel()
	// A schema of its own: no other test's queue vacuums this table.
	schema, _ := freshSchema(t)
	d := openDriver(t, "schema="+schema)
	ctx := ctxT(t)
	count := func() int64 {
		var n int64
		err := d.pool.QueryRow(ctx, `SELECT vacuum_count FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'messages'`, d.cfg.schema).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()
	d.deletedRows(vacuumEvery - 1)
	if d.vacuuming.Load() {
		t.Fatal("vacuum started before vacuumEvery deletions")
	}
	d.deletedRows(1)
	if !d.vacuuming.Load() {
		t.Fatal("no vacuum started after vacuumEvery deletions")
	}
	deadline := time.Now().Add(20 * time.Second)
	for count() == before {
		if time.Now().After(deadline) {
			t.Fatal("no VACUUM of the messages table after vacuumEvery deletions")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSelfVacuumScalesWithTable: a queue whose table held many rows at the
// last vacuum waits for a tenth of them to be deleted, not vacuumEvery.
func TestSelfVacuumScalesWithTable(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	d.tableRows.Store(50 * vacuumEvery)
	d.deletedRows(5*vacuumEvery - 1)
	if d.vacuuming.Load() {
		t.Fatalf("vacuum started after %d deletions in a table of %d rows; want it after a tenth of them", 5*vacuumEvery-1, 50*vacuumEvery)
	}
	d.deletedRows(1)
	if !d.vacuuming.Load() {
		t.Fatalf("no vacuum after %d deletions in a table of %d rows", 5*vacuumEvery, 50*vacuumEvery)
	}
}
