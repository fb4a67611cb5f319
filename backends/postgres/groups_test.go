package postgres

import (
	"context"
	"testing"
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
