package postgres

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobq/jobq/driver"
)

// TestGenericPlansReadOnlyTheRowsTheyName sets the trap planSettings and
// the settlements' lookups guard against: the driver's hot statements are
// planned once, generically, while the queue is empty, and then run on a
// queue of 5,000 messages. Each must still read about the rows it claims
// or settles, not the whole queue. Without the settings the claim read and
// sorted the whole queue; with the earlier joins on (queue, priority, id)
// the claim scanned the queue once per claimed message and each settlement
// once per call.
func TestGenericPlansReadOnlyTheRowsTheyName(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	schema, pool := freshSchema(t)
	d := openURL(t, newQueueURL(t, "schema="+schema))
	conn := genericPlanConn(t, pool)

	q := quoteLiteral(d.cfg.queue)
	none := "'{}'::bigint[], '{}'::uuid[], '{}'::int[]"
	claim := "claim(" + q + ", 16, 60000000)"
	for _, p := range []struct{ name, sql, empty string }{
		{"claim", d.sql.claim, claim},
		{"complete", d.sql.complete, "complete(" + none + ", " + q + ")"},
		{"requeue", d.sql.requeue, "requeue(" + none + ", '{}'::bigint[], '{}'::bytea[], " + q + ")"},
		{"dead", d.sql.deadLetter, "dead(" + none + ", '{}'::text[], '{}'::text[], " + q + ", '{}'::bytea[])"},
	} {
		if _, err := conn.Exec(ctx, "PREPARE "+p.name+" AS "+p.sql); err != nil {
			t.Fatalf("prepare %s: %v", p.name, err)
		}
		// The generic plan is made now, on the empty queue.
		if _, err := conn.Exec(ctx, "EXECUTE "+p.empty); err != nil {
			t.Fatalf("execute %s on the empty queue: %v", p.empty, err)
		}
	}

	const queued, batch = 5000, 16
	msgs := make([]*driver.Message, queued)
	for i := range msgs {
		msgs[i] = msg(fmt.Sprintf("t%d", i))
	}
	if _, err := d.Push(ctx, msgs); err != nil {
		t.Fatal(err)
	}

	// explain runs stmt under EXPLAIN ANALYZE and returns the rows it
	// changed and the rows of messages it read.
	explain := func(stmt string) (changed, read int) {
		t.Helper()
		var out []byte
		if err := conn.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE "+stmt).Scan(&out); err != nil {
			t.Fatalf("explain %s: %v", stmt, err)
		}
		var plans []struct{ Plan planNode }
		if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
			t.Fatalf("explain %s: %v in %s", stmt, err, out)
		}
		return int(plans[0].Plan.ActualRows), plans[0].Plan.messageRowsRead()
	}
	if changed, read := explain(claim); changed != batch || read > 4*batch {
		t.Errorf("a claim of %d on a queue of %d claimed %d and read %d rows of messages", batch, queued, changed, read)
	}

	// Claim a batch to settle: a third completed, a third requeued, the
	// rest dead-lettered.
	rows, err := conn.Query(ctx, "EXECUTE "+claim)
	if err != nil {
		t.Fatal(err)
	}
	var held [][3]string // id, lease, priority
	for rows.Next() {
		var id int64
		var lease string
		var prio int32
		var taskID, body, deliveries, enqueued any
		if err := rows.Scan(&id, &taskID, &body, &deliveries, &enqueued, &lease, &prio); err != nil {
			t.Fatal(err)
		}
		held = append(held, [3]string{fmt.Sprint(id), lease, fmt.Sprint(prio)})
	}
	if err := rows.Err(); err != nil || len(held) != batch {
		t.Fatalf("claimed %d messages (%v), want %d", len(held), err, batch)
	}
	arrays := func(part [][3]string) string {
		var ids, leases, prios []string
		for _, h := range part {
			ids, leases, prios = append(ids, h[0]), append(leases, h[1]), append(prios, h[2])
		}
		return fmt.Sprintf("'{%s}'::bigint[], '{%s}'::uuid[], '{%s}'::int[]",
			strings.Join(ids, ","), strings.Join(leases, ","), strings.Join(prios, ","))
	}
	list := func(n int, v string) string { return "'{" + strings.TrimSuffix(strings.Repeat(v+",", n), ",") + "}'" }
	n := len(held) / 3
	dead := len(held) - 2*n
	for _, s := range []struct {
		name, stmt string
		want       int
	}{
		{"complete", "complete(" + arrays(held[:n]) + ", " + q + ")", n},
		{"requeue", "requeue(" + arrays(held[n:2*n]) + ", " + list(n, "0") + "::bigint[], NULL::bytea[], " + q + ")", n},
		{"dead-letter", "dead(" + arrays(held[2*n:]) + ", " + list(dead, "r") + "::text[], " + list(dead, "d") + "::text[], " + q + ", NULL::bytea[])", dead},
	} {
		if changed, read := explain(s.stmt); changed != s.want || read > 4*batch {
			t.Errorf("%s of %d held messages on a queue of %d changed %d and read %d rows of messages", s.name, s.want, queued, changed, read)
		}
	}
}

// genericPlanConn returns a connection of pool with the driver's plan
// settings, made to plan every prepared statement generically.
func genericPlanConn(t *testing.T, pool *pgxpool.Pool) *pgxpool.Conn {
	t.Helper()
	conn, err := pool.Acquire(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Prepared statements and settings stay with the connection.
		_ = conn.Conn().Close(ctxT(t))
		conn.Release()
	})
	set := []string{"SET plan_cache_mode = force_generic_plan"}
	for name, value := range planSettings {
		set = append(set, "SET "+name+" = "+value)
	}
	for _, s := range set {
		if _, err := conn.Exec(ctxT(t), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return conn
}

// planNode is a node of EXPLAIN (ANALYZE, FORMAT JSON).
type planNode struct {
	Relation     string     `json:"Relation Name"`
	Index        string     `json:"Index Name"`
	ActualRows   float64    `json:"Actual Rows"`
	ActualLoops  float64    `json:"Actual Loops"`
	Filtered     float64    `json:"Rows Removed by Filter"`
	JoinFiltered float64    `json:"Rows Removed by Join Filter"`
	Rechecked    float64    `json:"Rows Removed by Index Recheck"`
	Plans        []planNode `json:"Plans"`
}

// messageRowsRead sums, over the plan, the rows that scans of messages (or
// its indexes) returned or threw away, and the rows joins threw away.
func (p planNode) messageRowsRead() int {
	n := p.JoinFiltered
	if p.Relation == "messages" || strings.HasPrefix(p.Index, "messages_") {
		n += p.ActualRows*p.ActualLoops + p.Filtered + p.Rechecked
	}
	total := int(n)
	for _, c := range p.Plans {
		total += c.messageRowsRead()
	}
	return total
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
