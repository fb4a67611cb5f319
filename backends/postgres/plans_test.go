package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobq/jobq/driver"
)

// TestGenericClaimPlanReadsOnlyWhatItClaims sets the trap planSettings
// guards against: the claim is planned once, generically, while the queue
// is empty, and then run on a queue of 5,000 messages. It must still read
// about the rows it claims, not the whole queue. Without the settings the
// plan read every message of the queue and sorted them (10,032 rows read
// for a claim of 16); with the earlier join on (queue, priority, id) it
// also scanned the queue once per claimed message (159,768). So must the
// claim that also looks when the next message comes due (claimNext),
// whose look runs only when it claims nothing.
func TestGenericClaimPlanReadsOnlyWhatItClaims(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	schema, pool := freshSchema(t)
	d := openURL(t, newQueueURL(t, "schema="+schema))
	conn := genericPlanConn(t, ctx, pool)
	stmts := map[string]string{"claim": d.sql.claim, "claim_next": d.sql.claimNext}
	for name, sql := range stmts {
		if _, err := conn.Exec(ctx, "PREPARE "+name+" AS "+sql); err != nil {
			t.Fatal(err)
		}
		// The generic plan is made now, on the empty queue.
		if _, err := conn.Exec(ctx, "EXECUTE "+name+"("+quoteLiteral(d.cfg.queue)+", 16, 60000000)"); err != nil {
			t.Fatal(err)
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
	for name := range stmts {
		claim := name + "(" + quoteLiteral(d.cfg.queue) + ", 16, 60000000)"
		var out []byte
		if err := conn.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE "+claim).Scan(&out); err != nil {
			t.Fatal(err)
		}
		var plans []struct{ Plan planNode }
		if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
			t.Fatalf("EXPLAIN output: %v in %s", err, out)
		}
		if claimed, read := int(plans[0].Plan.ActualRows), plans[0].Plan.messageRowsRead(); claimed != batch || read > 4*batch {
			t.Errorf("%s: a claim of %d on a queue of %d claimed %d and read %d rows of messages; plan: %s", name, batch, queued, claimed, read, out)
		}
	}
}

// genericPlanConn returns a connection of pool with the driver's plan
// settings, made to plan every prepared statement generically.
func genericPlanConn(t *testing.T, ctx context.Context, pool *pgxpool.Pool) *pgxpool.Conn {
	t.Helper()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Prepared statements and settings stay with the connection.
		_ = conn.Conn().Close(context.Background())
		conn.Release()
	})
	set := []string{"SET plan_cache_mode = force_generic_plan"}
	for name, value := range planSettings {
		set = append(set, "SET "+name+" = "+value)
	}
	for _, s := range set {
		if _, err := conn.Exec(ctx, s); err != nil {
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

// TestClaimIsPlannedOnce: the driver's statements run from one generic plan
// per connection (planSettings' plan_cache_mode). Left to choose, Postgres
// planned the claim anew at every execution, because the custom plans of a
// queue that was empty looked cheaper than the generic one.
func TestClaimIsPlannedOnce(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	d := openURL(t, newQueueURL(t))
	msgs := make([]*driver.Message, 40)
	for i := range msgs {
		msgs[i] = msg(fmt.Sprintf("t%d", i))
	}
	if _, err := d.Push(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var custom, generic int64
	for range 10 {
		rows, err := conn.Query(ctx, d.sql.claim, d.cfg.queue, 2, int64(60_000_000))
		if err != nil {
			t.Fatal(err)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	err = conn.QueryRow(ctx, `SELECT coalesce(sum(custom_plans), 0), coalesce(sum(generic_plans), 0) FROM pg_prepared_statements WHERE statement = $1`,
		d.sql.claim).Scan(&custom, &generic)
	if err != nil {
		t.Fatal(err)
	}
	if custom != 0 || generic != 10 {
		t.Errorf("10 claims on one connection made %d custom and %d generic plans; want 0 and 10", custom, generic)
	}
}

// TestClaimFunctionCarriesPlanSettings: claim_lookup sets the driver's
// planSettings for its own statements (schema step 27), so that on a
// connection without them (through PgBouncer, or from an application's
// pool) they are planned as on the driver's own.
func TestClaimFunctionCarriesPlanSettings(t *testing.T) {
	t.Parallel()
	d := openURL(t, newQueueURL(t))
	var config []string
	err := d.pool.QueryRow(ctxT(t), `SELECT coalesce(p.proconfig, '{}') FROM pg_proc p
		JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.proname = 'claim_lookup'`, d.cfg.schema).Scan(&config)
	if err != nil {
		t.Fatal(err)
	}
	for name, value := range planSettings {
		if !slices.Contains(config, name+"="+value) {
			t.Errorf("claim_lookup's settings %v lack %s=%s", config, name, value)
		}
	}
}
