package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// TestSettlementsDeleteHeldLeases: under a cap, the held rows of a key are
// its leases in flight after every kind of settlement (complete, requeue,
// dead-letter; with and without records; in a group or not), without a
// claim to forget the ended ones (before schema step 20, the rows of
// settled leases stayed until the next claim that met the key); a
// renewal keeps its row, and a lease settled twice is deleted once.
func TestSettlementsDeleteHeldLeases(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	d := openDriver(t)
	setCap(t, d, "k", 100)
	pushKeyed(t, d, "k", 20)
	want := func(what string, n int64) {
		t.Helper()
		if got := heldRowsOf(t, d, "k"); got != n {
			t.Fatalf("%s: %d held rows; want %d", what, got, n)
		}
	}
	got := receive(t, d, 12, time.Minute)
	if len(got) != 12 {
		t.Fatalf("claimed %d; want 12", len(got))
	}
	want("12 claimed", 12)
	if _, err := d.Renew(ctx, got[0].Lease, time.Minute); err != nil {
		t.Fatal(err)
	}
	want("one renewed", 12)
	if errs := d.Complete(ctx, driver.Completions(got[0].Lease, got[1].Lease)); errs != nil {
		t.Fatal(errs)
	}
	want("two completed", 10)
	rec := func(id string) *driver.ResultRecord {
		now := time.Now()
		return &driver.ResultRecord{ID: id, State: driver.ResultSucceeded, UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}
	}
	if errs := d.Complete(ctx, []driver.CompleteParams{{Lease: got[2].Lease, Result: rec(got[2].ID)}}); errs != nil {
		t.Fatal(errs)
	}
	want("one completed with a record", 9)
	if errs := d.Complete(ctx, []driver.CompleteParams{{Lease: got[3].Lease, Tally: driver.GroupTally{Group: "g", State: driver.GroupSucceeded}}}); errs != nil {
		t.Fatal(errs)
	}
	want("one completed in a group", 8)
	if errs := d.Requeue(ctx, []driver.RequeueParams{{Lease: got[4].Lease}, {Lease: got[5].Lease, Delay: time.Hour}}); errs != nil {
		t.Fatal(errs)
	}
	want("two requeued", 6)
	if errs := d.Requeue(ctx, []driver.RequeueParams{{Lease: got[6].Lease, Tally: driver.GroupTally{Group: "g", State: driver.GroupFailed}}}); errs != nil {
		t.Fatal(errs)
	}
	want("one requeued in a group", 5)
	if errs := d.DeadLetter(ctx, []driver.DeadLetterParams{{Lease: got[7].Lease, Reason: "r"}}); errs != nil {
		t.Fatal(errs)
	}
	want("one dead-lettered", 4)
	if errs := d.DeadLetter(ctx, []driver.DeadLetterParams{{Lease: got[8].Lease, Reason: "r", Result: rec(got[8].ID)}}); errs != nil {
		t.Fatal(errs)
	}
	want("one dead-lettered with a record", 3)
	if errs := d.Complete(ctx, driver.Completions(got[0].Lease)); errs == nil {
		t.Fatal("a second completion of a lease succeeded")
	}
	want("a lease completed again", 3)
}

// TestHeldSettledStatementsParse: every settlement statement, grouped or
// not, has a variant that deletes the held rows of the leases it ends,
// and Postgres accepts each.
func TestHeldSettledStatementsParse(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	stmts := map[string]string{"complete": d.sql.complete, "requeue": d.sql.requeue, "dead-letter": d.sql.deadLetter}
	for v := range d.rsql.complete {
		for n := range d.rsql.complete[v] {
			stmts[fmt.Sprintf("complete with records %d/%d", v, n)] = d.rsql.complete[v][n]
			stmts[fmt.Sprintf("dead-letter with records %d/%d", v, n)] = d.rsql.deadLetter[v][n]
		}
	}
	ctx := context.Background()
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for name, stmt := range stmts {
		g, err := d.groupedSQL(stmt)
		if err != nil {
			t.Fatal(err)
		}
		for form, s := range map[string]string{"": stmt, " grouped": g} {
			c, err := d.heldSettledSQL(s)
			if err != nil {
				t.Errorf("%s%s: %v", name, form, err)
				continue
			}
			if _, err := conn.Conn().Prepare(ctx, "", c); err != nil {
				t.Errorf("%s%s: the statement does not parse: %v\n%s", name, form, err, c)
			}
		}
	}
}
