package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// TestGroupedStatementsParse: every settlement statement has a grouped
// variant (groupedSettleSQL finds where its counters go), and Postgres
// accepts each of them and the grouped push statements. The conformance
// checks run the common ones; the others (records off, notifying or not,
// upserting records) run only under load, so each is parsed here.
func TestGroupedStatementsParse(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	stmts := map[string]string{"complete": d.sql.complete, "requeue": d.sql.requeue, "dead-letter": d.sql.deadLetter}
	for v := range d.rsql.complete {
		for n := range d.rsql.complete[v] {
			stmts["complete with records "+string(rune('0'+v))+string(rune('0'+n))] = d.rsql.complete[v][n]
			stmts["dead-letter with records "+string(rune('0'+v))+string(rune('0'+n))] = d.rsql.deadLetter[v][n]
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
			t.Errorf("%s: %v", name, err)
			continue
		}
		if _, err := conn.Conn().Prepare(ctx, "", g); err != nil {
			t.Errorf("%s: the grouped statement does not parse: %v\n%s", name, err, g)
		}
	}
	for one := range 2 {
		for async := range 2 {
			if _, err := conn.Conn().Prepare(ctx, "", d.sql.push[one][async].group); err != nil {
				t.Errorf("grouped push %d/%d does not parse: %v", one, async, err)
			}
		}
	}
}

// TestRequeueDeadReopensGroup: a dead letter keeps its task's group, and
// RequeueDead puts the task back in it, one dead-lettered less, in the
// statement that requeues. A dead letter whose task ID is queued again
// merges into that message (dedup): it is not open again, so its group
// still counts it dead-lettered (the message queued counts as its own
// push).
func TestRequeueDeadReopensGroup(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := ctxT(t)
	grouped := func(id string) *driver.Message {
		m := msg(id)
		m.Group = "g"
		return m
	}
	if _, err := d.Push(ctx, []*driver.Message{grouped("x"), grouped("y")}); err != nil {
		t.Fatal(err)
	}
	got := receive(t, d, 2, time.Minute)
	dead := driver.GroupTally{Group: "g", State: driver.GroupDeadLettered}
	if errs := d.DeadLetter(ctx, []driver.DeadLetterParams{{Lease: got[0].Lease, Tally: dead}, {Lease: got[1].Lease, Tally: dead}}); errs != nil {
		t.Fatal(errs)
	}
	if _, err := d.Push(ctx, []*driver.Message{grouped("x")}); err != nil {
		t.Fatal(err)
	}
	if n, err := d.RequeueDead(ctx, nil); err != nil || n != 2 {
		t.Fatalf("requeue dead = %d, %v; want 2 (one of them merged into the queued x)", n, err)
	}
	c, err := d.GroupCounts(ctx, "g")
	if err != nil || c == nil || c.Pushed != 3 || c.DeadLettered != 1 || c.Queued != 2 || c.Done() {
		t.Fatalf("group after the requeue = %+v, %v; want 3 pushed, 1 dead-lettered (x merged), 2 queued", c, err)
	}
	back := receive(t, d, 10, time.Minute)
	if len(back) != 2 {
		t.Fatalf("received %v after the requeue; want x and y", ids(back))
	}
	for _, r := range back {
		if r.Group != "g" {
			t.Errorf("task %s came back with group %q; want g", r.ID, r.Group)
		}
	}
}
