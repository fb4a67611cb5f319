package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// TestPolicyClaimReadsOnlyWhatItClaims: a claim under caps on a queue that
// the statistics believe to hold about one row (analyzed among a thousand
// queues of one message each, then filled) reads about the rows it
// claims. Before schema step 14 the claim function joined its batch to
// messages by scanning the whole queue, and the claim statement did so
// once more for the trace context: 5,000 queued messages cost about
// 20,000 rows read per claim of 16.
func TestPolicyClaimReadsOnlyWhatItClaims(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	schema, pool := freshSchema(t)
	d := openURL(t, newQueueURL(t, "schema="+schema))
	others := make([]any, 0, 1000)
	for i := range cap(others) {
		others = append(others, fmt.Sprintf("other-%d", i))
	}
	messages := d.sql.messagesTable
	if _, err := pool.Exec(ctx, `INSERT INTO `+messages+` (queue, packed_body) SELECT q, '\x00' FROM unnest($1::text[]) AS q`, others); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE `+messages); err != nil {
		t.Fatal(err)
	}
	for k := range 10 {
		if err := d.SetPolicy(ctx, driver.Policy{Kind: driver.ConcurrencyPolicy, Key: fmt.Sprintf("k%d", k), Limit: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	const queued, batch = 5000, 16
	msgs := make([]*driver.Message, queued)
	for i := range msgs {
		msgs[i] = msg(fmt.Sprintf("t%d", i))
		msgs[i].ConcurrencyKey = fmt.Sprintf("k%d", i%10)
	}
	if _, err := d.Push(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off"); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, d.psql.claim, d.cfg.queue, batch, time.Minute.Microseconds())
	if err != nil {
		t.Fatal(err)
	}
	claimed := 0
	for rows.Next() {
		claimed++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var read int64
	// Index scans count their rows on the index, TID scans on the table.
	err = tx.QueryRow(ctx, `SELECT sum(pg_stat_get_xact_tuples_returned(r) + pg_stat_get_xact_tuples_fetched(r)) FROM (
	SELECT CAST($1::text AS regclass)::oid AS r UNION ALL SELECT indexrelid FROM pg_index WHERE indrelid = CAST($1::text AS regclass)) AS x`,
		messages).Scan(&read)
	if err != nil {
		t.Fatal(err)
	}
	if claimed != batch || read > 10*batch {
		t.Errorf("a claim of %d under caps on a queue of %d claimed %d and read %d rows of messages", batch, queued, claimed, read)
	}
}
