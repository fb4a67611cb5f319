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
	counts := func() (vacuums, analyzes int64) {
		err := d.pool.QueryRow(ctx, `SELECT vacuum_count, analyze_count FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'messages'`, d.cfg.schema).Scan(&vacuums, &analyzes)
		if err != nil {
			t.Fatal(err)
		}
		return vacuums, analyzes
	}
	vacuumsBefore, analyzesBefore := counts()
	d.deletedRows(vacuumEvery - 1)
	if d.vacuuming.Load() {
		t.Fatal("vacuum started before vacuumEvery deletions")
	}
	d.deletedRows(1)
	if !d.vacuuming.Load() {
		t.Fatal("no vacuum started after vacuumEvery deletions")
	}
	// The first vacuum of a queue also analyzes the table (analyzeDue).
	deadline := time.Now().Add(20 * time.Second)
	for {
		vacuums, analyzes := counts()
		if vacuums > vacuumsBefore && analyzes > analyzesBefore {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after vacuumEvery deletions: %d VACUUMs and %d ANALYZEs of the messages table; want one of each",
				vacuums-vacuumsBefore, analyzes-analyzesBefore)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestAnalyzeDue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		prev, rows int64
		want       bool
	}{
		{-1, 0, true}, // the queue's first vacuum
		{0, vacuumEvery, false},
		{0, vacuumEvery + 1, true},
		{1000, 2*1000 + vacuumEvery, false},
		{1000, 2*1000 + vacuumEvery + 1, true},
		{20000, 9000, false}, // shrinking: plans made for more rows stay good
		{20000, 0, false},
	}
	for _, tt := range tests {
		if got := analyzeDue(tt.prev, tt.rows); got != tt.want {
			t.Errorf("analyzeDue(previous vacuum's rows %d, rows %d) = %v, want %v", tt.prev, tt.rows, got, tt.want)
		}
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
