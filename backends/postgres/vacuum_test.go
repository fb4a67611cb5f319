package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
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

// TestSelfVacuumKeepsTheGap: a queue does not vacuum its table within
// vacuumGap of the table's last vacuum, whoever ran it (here another
// session), and vacuums once the gap has passed.
func TestSelfVacuumKeepsTheGap(t *testing.T) {
	t.Parallel()
	// A schema of its own: no other test's queue vacuums this table.
	schema, _ := freshSchema(t)
	d := openDriver(t, "schema="+schema)
	d.statsChecked.Store(true) // no ANALYZE of checkStats in the background
	ctx := ctxT(t)
	vacuums := func() (n int64) {
		err := d.pool.QueryRow(ctx, `SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = $1::regclass`, d.sql.messagesTable).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Another session vacuums the table. start is no later than its end,
	// so the time since start bounds the time since the vacuum.
	start := time.Now()
	if _, err := d.pool.Exec(ctx, `VACUUM `+d.sql.messagesTable); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the server's statistics to count the VACUUM", func() bool { return vacuums() == 1 })
	d.deletedRows(vacuumEvery)
	waitUntil(t, "the queue's look at the table's last vacuum", func() bool { return !d.vacuuming.Load() })
	after := time.Unix(0, d.vacuumAfter.Load())
	n, elapsed := vacuums(), time.Since(start)
	if elapsed >= vacuumGap {
		t.Skipf("the look came up to %v after the vacuum, past the gap: this machine is too slow to test it", elapsed)
	}
	if n != 1 {
		t.Fatalf("the queue vacuumed its table within %v of another session's vacuum; want no vacuum within %v", elapsed, vacuumGap)
	}
	if after.Before(time.Now()) || after.After(time.Now().Add(vacuumGap)) {
		t.Fatalf("within %v of a vacuum of the table, the queue may vacuum again in %v; want within %v", elapsed, time.Until(after), vacuumGap)
	}
	d.deletedRows(1)
	if d.vacuuming.Load() {
		t.Fatal("a vacuum started within vacuumGap of the last")
	}
	time.Sleep(time.Until(after))
	// Deletions go on, as on a busy queue: the first after the gap vacuums.
	waitUntil(t, "the queue's own VACUUM once the gap has passed", func() bool {
		d.deletedRows(1)
		return vacuums() == 2
	})
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

// TestSelfVacuumCountsAGrownTable: a queue whose table has grown since its
// last vacuum counted the rows (a backlog pushed meanwhile) counts them
// again when a vacuum looks due, analyzes the grown table instead of
// vacuuming it, and vacuums once a tenth of the new count is deleted.
func TestSelfVacuumCountsAGrownTable(t *testing.T) {
	t.Parallel()
	// A schema of its own: no other test's rows or vacuums in its table.
	schema, _ := freshSchema(t)
	d := openDriver(t, "schema="+schema)
	// No ANALYZE of the push's stats check (checkStats) in the background:
	// one still running when the test's last vacuum starts makes that
	// VACUUM (SKIP_LOCKED) skip the table, and the test wait for it in
	// vain. The vacuums' own ANALYZE runs under d.vacuuming, which the test
	// waits out.
	d.statsChecked.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const queued = 30 * vacuumEvery
	msgs := make([]*driver.Message, queued)
	for i := range msgs {
		msgs[i] = msg(fmt.Sprintf("t%d", i))
	}
	if _, err := d.Push(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	// The server counts the pushed rows once the pushing connection
	// reports its statistics, within seconds.
	waitUntil(t, "the server's statistics to count the pushed rows", func() bool {
		var live int64
		if err := d.pool.QueryRow(ctx, `SELECT pg_stat_get_live_tuples($1::regclass)`, d.sql.messagesTable).Scan(&live); err != nil {
			t.Fatal(err)
		}
		return live >= queued
	})
	counts := func() (vacuums, analyzes int64) {
		err := d.pool.QueryRow(ctx, `SELECT vacuum_count, analyze_count FROM pg_stat_user_tables WHERE relid = $1::regclass`, d.sql.messagesTable).Scan(&vacuums, &analyzes)
		if err != nil {
			t.Fatal(err)
		}
		return vacuums, analyzes
	}
	vacuumsBefore, analyzesBefore := counts()

	d.tableRows.Store(0) // the last vacuum found the table empty
	d.deletedRows(vacuumEvery)
	if !d.vacuuming.Load() {
		t.Fatal("nothing started after vacuumEvery deletions in a table last counted empty")
	}
	waitUntil(t, "the background vacuum to end", func() bool { return !d.vacuuming.Load() })
	if got := d.tableRows.Load(); got < queued {
		t.Errorf("after vacuumEvery deletions the queue counts %d rows in its table; want at least the %d pushed", got, queued)
	}
	waitUntil(t, "an ANALYZE of the grown table", func() bool {
		_, analyzes := counts()
		return analyzes > analyzesBefore
	})
	if vacuums, _ := counts(); vacuums != vacuumsBefore {
		t.Errorf("the queue vacuumed a table of %d rows after %d deletions; want a vacuum after a tenth of them", queued, vacuumEvery)
	}

	// The next vacuum is due once a tenth of the rows counted are deleted.
	// The table is the schema's, shared with other tests running at the
	// same time: the count may hold their rows too.
	rows := d.tableRows.Load()
	d.deletedRows(rows/vacuumShare - vacuumEvery - 1)
	if d.vacuuming.Load() {
		t.Fatalf("vacuum started after %d deletions in a table of %d rows", rows/vacuumShare-1, rows)
	}
	d.deletedRows(1)
	if !d.vacuuming.Load() {
		t.Fatalf("no vacuum started after %d deletions in a table of %d rows", rows/vacuumShare, rows)
	}
	waitUntil(t, "a VACUUM of the table", func() bool {
		vacuums, _ := counts()
		return vacuums > vacuumsBefore
	})
}

// waitUntil polls cond until it holds, failing the test after 20 seconds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFirstPushAnalyzesNewTable: a queue whose table has no statistics of
// its queue column analyzes it after its first push, not only at its first
// vacuum (1,000 settlements later): settlements planned before then read
// every in-flight message of the queue for each one they settle.
func TestFirstPushAnalyzesNewTable(t *testing.T) {
	t.Parallel()
	schema, _ := freshSchema(t)
	d := openDriver(t, "schema="+schema)
	ctx := ctxT(t)
	hasStats := func() bool {
		var ok bool
		err := d.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stats WHERE schemaname = $1 AND tablename = 'messages' AND attname = 'queue')`, d.cfg.schema).Scan(&ok)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if hasStats() {
		t.Fatal("a new queue table already has statistics of its queue column")
	}
	if _, err := d.Push(ctx, []*driver.Message{msg("a"), msg("b"), msg("c")}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); !hasStats(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("20 s after the first push, the queue table has no statistics of its queue column")
		}
	}
}
