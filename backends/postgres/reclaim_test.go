package postgres

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

func TestRelationBloated(t *testing.T) {
	t.Parallel()
	const mb = 1 << 20
	tests := []struct {
		name string
		r    relation
		want bool
	}{
		{"small table", relation{bytes: 4 * mb, rows: 0}, false},
		{"empty table of 80 MB", relation{bytes: 80 * mb, rows: 0}, true},
		{"full table", relation{bytes: 80 * mb, rows: 200_000}, false},
		{"table a tenth full", relation{bytes: 80 * mb, rows: 20_000}, true},
		{"index of an empty table", relation{index: true, bytes: 20 * mb, rows: 0}, true},
		{"index of a full table", relation{index: true, bytes: 20 * mb, rows: 200_000}, false},
		{"index a tenth full", relation{index: true, bytes: 20 * mb, rows: 20_000}, true},
	}
	for _, tt := range tests {
		if got := tt.r.bloated(reclaimMinBytes); got != tt.want {
			t.Errorf("%s: bloated() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestReclaimAfterDrain runs the reclaim path on a drained table while
// another producer and consumer use the queue: the table and its indexes
// shrink, and every task pushed during the reclaim is delivered.
func TestReclaimAfterDrain(t *testing.T) {
	t.Parallel()
	schema, _ := freshSchema(t)
	d := openDriver(t, "schema="+schema)
	d.reclaim.minBytes = 256 << 10 // a test-sized backlog bloats its indexes past this
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const backlog = 30_000
	push := func(prefix string, from, n int) {
		t.Helper()
		msgs := make([]*driver.Message, n)
		for i := range msgs {
			msgs[i] = &driver.Message{ID: fmt.Sprintf("%s-%d", prefix, from+i), Body: []byte(`{"n": 1}`)}
		}
		if _, err := d.Push(ctx, msgs); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < backlog; i += 1000 {
		push("backlog", i, 1000)
	}
	size := func() map[string]int64 {
		t.Helper()
		rels, err := d.relations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]int64{}
		for _, r := range rels {
			m[r.name] = r.bytes
		}
		return m
	}
	peak := size()
	// While the table is full, a pass finds nothing bloated and does not
	// vacuum.
	if ok, err := d.reclaimPass(ctx); err != nil || !ok || d.reclaim.passes.Load() != 0 {
		t.Fatalf("pass on a full table: in shape %v, err %v, %d vacuums; want in shape, no vacuum", ok, err, d.reclaim.passes.Load())
	}

	// done counts completions per task ID.
	var mu sync.Mutex
	done := map[string]int{}
	claimAll := func() int {
		t.Helper()
		got, err := d.Receive(ctx, driver.ReceiveParams{Max: 100, Visibility: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		leases := make([]driver.Lease, len(got))
		for i, r := range got {
			leases[i] = r.Lease
		}
		for i, err := range d.Complete(ctx, driver.Completions(leases...)) {
			if err != nil {
				t.Fatalf("complete %s: %v", got[i].ID, err)
			}
		}
		mu.Lock()
		for _, r := range got {
			done[r.ID]++
		}
		mu.Unlock()
		return len(got)
	}
	for claimAll() > 0 {
	}

	// A producer and a consumer keep using the queue during the reclaim.
	const live = 3000
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; i < live; i += 10 {
			push("live", i, 10)
			time.Sleep(time.Millisecond)
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if claimAll() == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}()

	// Other tests' transactions may hold back the vacuum: the loop's
	// retries, by hand.
	var ok bool
	for try := 0; try < 10 && !ok; try++ {
		var err error
		if ok, err = d.reclaimPass(ctx); err != nil {
			t.Fatalf("reclaim pass: %v", err)
		}
		if !ok {
			time.Sleep(time.Second)
		}
	}
	close(stop)
	wg.Wait()
	for claimAll() > 0 {
	}

	after := size()
	for name, before := range peak {
		t.Logf("%s: %d bytes with %d queued, %d after the reclaim", name, before, backlog, after[name])
		// A relation of one page held nothing (the groups' partial
		// index, when no task has a group): nothing to reclaim.
		if before > 8192 && after[name] > before/4 {
			t.Errorf("%s: %d bytes after the reclaim, more than a quarter of its %d bytes with %d tasks queued", name, after[name], before, backlog)
		}
	}
	if !ok {
		t.Errorf("the reclaim passes did not report the table back in shape")
	}
	if got := d.reclaim.reindexes.Load(); got < 2 {
		t.Errorf("%d indexes rebuilt; want both", got)
	}
	for _, prefix := range []string{"backlog", "live"} {
		n := backlog
		if prefix == "live" {
			n = live
		}
		for i := range n {
			if id := fmt.Sprintf("%s-%d", prefix, i); done[id] == 0 {
				t.Fatalf("task %s was never delivered", id)
			}
		}
	}
	// The rebuilt claim index is still the replica identity, and no
	// invalid copy is left behind.
	var replident, invalid int
	err := d.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE indisreplident), count(*) FILTER (WHERE NOT indisvalid)
		FROM pg_index WHERE indrelid = $1::regclass`, d.sql.messagesTable).Scan(&replident, &invalid)
	if err != nil {
		t.Fatal(err)
	}
	if replident != 1 || invalid != 0 {
		t.Errorf("after the rebuild: %d replica identity indexes (want 1), %d invalid indexes (want 0)", replident, invalid)
	}
}

// TestReclaimNotOwner: a role that may use the queue but does not own its
// table cannot rebuild the indexes; the pass says so once, stops trying
// and leaves the queue working.
func TestReclaimNotOwner(t *testing.T) {
	t.Parallel()
	schema, pool := freshSchema(t)
	openDriver(t, "schema="+schema) // the owner creates the schema
	ctx := ctxT(t)
	role := fmt.Sprintf("jobq_not_owner_%d", time.Now().UnixNano())
	s := `"` + schema + `"`
	for _, stmt := range []string{
		`CREATE ROLE ` + role + ` LOGIN`,
		// Open runs CREATE SCHEMA and CREATE TABLE IF NOT EXISTS, which
		// ask for these even when there is nothing to create.
		`GRANT CREATE ON DATABASE ` + `"` + pool.Config().ConnConfig.Database + `"` + ` TO ` + role,
		`GRANT USAGE, CREATE ON SCHEMA ` + s + ` TO ` + role,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ` + s + ` TO ` + role,
		`GRANT USAGE ON ALL SEQUENCES IN SCHEMA ` + s + ` TO ` + role,
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, stmt := range []string{`DROP OWNED BY ` + role, `DROP ROLE ` + role} {
			if _, err := pool.Exec(ctx, stmt); err != nil {
				t.Logf("%s: %v", stmt, err)
			}
		}
	})
	d := openDriver(t, "schema="+schema, "user="+role)
	d.reclaim.minBytes = 64 << 10
	// Enough for indexes past the bloat estimate's 1,000-row margin.
	for b := range 30 {
		msgs := make([]*driver.Message, 1000)
		for i := range msgs {
			msgs[i] = &driver.Message{ID: fmt.Sprintf("t-%d-%d", b, i), Body: []byte(`{"n": 1}`)}
		}
		if _, err := d.Push(ctx, msgs); err != nil {
			t.Fatal(err)
		}
	}
	for {
		got := receive(t, d, 500, time.Minute)
		if len(got) == 0 {
			break
		}
		leases := make([]driver.Lease, len(got))
		for i, r := range got {
			leases[i] = r.Lease
		}
		for _, err := range d.Complete(ctx, driver.Completions(leases...)) {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// The drain's own vacuum may be running: the pass then waits its turn.
	for d.reclaim.passes.Load() == 0 {
		if _, err := d.reclaimPass(ctx); err != nil {
			t.Fatalf("reclaim pass by a role that does not own the table: %v; want the rebuild skipped", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !d.reclaim.noRebuild.Load() || d.reclaim.reindexes.Load() != 0 {
		t.Errorf("after a refused rebuild: noRebuild %v, %d rebuilds; want true, 0", d.reclaim.noRebuild.Load(), d.reclaim.reindexes.Load())
	}
	if _, err := d.Push(ctx, []*driver.Message{{ID: "after", Body: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, d, 1, time.Minute); len(got) != 1 || got[0].ID != "after" {
		t.Fatalf("after the pass: received %v; want the task pushed", ids(got))
	}
}

// TestReclaimByItself: after a drain, with nothing called by hand, the
// queue gives the space back once its deletions pause.
func TestReclaimByItself(t *testing.T) {
	t.Parallel()
	schema, _ := freshSchema(t)
	d := openDriver(t, "schema="+schema)
	d.reclaim.minBytes = 256 << 10
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for b := range 30 {
		msgs := make([]*driver.Message, 1000)
		for i := range msgs {
			msgs[i] = &driver.Message{ID: fmt.Sprintf("t-%d-%d", b, i), Body: []byte(`{"n": 1}`)}
		}
		if _, err := d.Push(ctx, msgs); err != nil {
			t.Fatal(err)
		}
	}
	total := func() int64 {
		var n int64
		if err := d.pool.QueryRow(ctx, `SELECT pg_total_relation_size($1::regclass)`, d.sql.messagesTable).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	peak := total()
	for {
		got := receive(t, d, 500, time.Minute)
		if len(got) == 0 {
			break
		}
		leases := make([]driver.Lease, len(got))
		for i, r := range got {
			leases[i] = r.Lease
		}
		for _, err := range d.Complete(ctx, driver.Completions(leases...)) {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// The pause is 10 to 20 s; other tests' transactions may cost a retry.
	deadline := time.Now().Add(90 * time.Second)
	for total() > peak/4 {
		if time.Now().After(deadline) {
			t.Fatalf("the table and its indexes take %d bytes, %d at the peak, after %d reclaim passes; want at most a quarter",
				total(), peak, d.reclaim.passes.Load())
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("%d bytes at the peak, %d after %d passes", peak, total(), d.reclaim.passes.Load())
}
