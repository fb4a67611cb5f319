package sqlite

import (
	"strings"
	"sync"

	"github.com/jobq/jobq/driver"
)

// recordBatch gathers the result records of one settlement call and
// stores them with one multi-row statement per recordChunk records
// (upsertResults), instead of a statement each: in a drain, the statement
// per record was most of what records cost (CPU profiles: about 12 µs of
// the 15 µs a record added per task, most of it the statement's own
// overhead rather than its rows). A record replaces the one with the same
// task ID in its generation, as upsertResult does; within one statement
// the rows are applied in order, so the last record of a task ID wins, as
// when they were stored one by one.
type recordBatch struct {
	d    *Driver
	tx   wtx
	now  int64
	args []any
	n    int
}

// recordChunk is the most records one statement stores.
const recordChunk = 32

// add stores r, now or with the batch's next statement. A cancel request
// is stored at once, after the records before it, by putResult (it is
// stored only where the task has no live record).
func (b *recordBatch) add(r *driver.ResultRecord) error {
	if r.State == driver.ResultCancelRequested {
		if err := b.flush(); err != nil {
			return err
		}
		return b.d.putResult(b.tx, r, b.now)
	}
	if b.n == 0 {
		b.args = append(b.args[:0], b.d.cfg.queue)
	}
	b.args = append(b.args, b.d.cfg.queue, taskKey(r.ID), string(r.State), micros(r.UpdatedAt), micros(r.ExpiresAt), nonNil(r.Data))
	b.n++
	if b.n == recordChunk {
		return b.flush()
	}
	return nil
}

// flush stores the records added since the last flush.
func (b *recordBatch) flush() error {
	if b.n == 0 {
		return nil
	}
	_, err := b.tx.Exec(upsertResults(b.n), b.args...)
	b.n = 0
	return err
}

// upsertResultsSQL holds upsertResults' statements by row count.
var upsertResultsSQL [recordChunk + 1]struct {
	once sync.Once
	sql  string
}

// upsertResults is upsertResult for n records. Its parameters are the
// queue, then six per record (queue, task ID, state, updated, expires,
// data), all bare ?: modernc.org/sqlite looks each numbered parameter's
// name up in a list of them all when it binds, which for a statement of
// many rows took longer than running it. The statement reads the
// generation (currentGen) itself, once (a statement of its own for it was
// a third of what a record cost a settlement of one task): from a
// materialized common table expression when it stores several records,
// and as a scalar subquery, which takes the leading queue, when it stores
// one, where materializing it (an ephemeral table opened, filled and read
// back) cost a record more than the subquery's two lookups.
func upsertResults(n int) string {
	s := &upsertResultsSQL[n]
	s.once.Do(func() {
		var b strings.Builder
		row := "(?, (" + currentGen + "), ?, ?, ?, ?, ?)" // the queue, then the generation's queue
		if n > 1 {
			b.WriteString("WITH g(gen) AS MATERIALIZED (" + currentGen + ")\n")
			row = "(?, (SELECT gen FROM g), ?, ?, ?, ?, ?)"
		}
		b.WriteString("INSERT INTO jobq_results (queue, gen, task_id, state, updated_at, expires_at, data) VALUES ")
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(row)
		}
		b.WriteString(`
		ON CONFLICT (queue, gen, task_id) DO UPDATE SET
			state = excluded.state, updated_at = excluded.updated_at,
			expires_at = excluded.expires_at, data = excluded.data`)
		s.sql = b.String()
	})
	return s.sql
}
