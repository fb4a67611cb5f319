package postgres

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// lockLost is the error for a lease that is no longer held.
func lockLost(op string, l driver.Lease) error {
	return driver.Errorf(errcode.LockLost,
		"postgres %s: lease on message %s is no longer held (it expired, was settled, or the message was claimed again)", op, l.MessageID)
}

// Renew implements driver.Driver.
func (d *Driver) Renew(ctx context.Context, lease driver.Lease, visibility time.Duration) (driver.Lease, error) {
	if err := d.closing.Err(); err != nil {
		return lease, err
	}
	k, err := parseLease("renew", lease)
	if err != nil {
		return lease, err
	}
	expiry := time.Now().Add(visibility) // this machine's clock, as in claim
	tag, err := d.pool.Exec(ctx, d.sql.renew, k.id, k.token, micros(visibility), d.cfg.queue, k.priority)
	if err != nil {
		return lease, wrap(ctx, "renew", err)
	}
	if tag.RowsAffected() == 0 {
		return lease, lockLost("renew", lease)
	}
	lease.Expiry = expiry
	return lease, nil
}

// settleBatch runs one settlement statement for a batch and turns the ids it
// returned into per-lease results: a lease whose message is not returned is
// LockLost, and so is a second lease for the same message in one batch
// (only one of them can have been the holder's).
type settleBatch struct {
	op     string
	leases []driver.Lease
	// The leases' message ids, tokens and priorities, the statements'
	// first three arguments.
	ids    int8Array
	tokens valuerArray[pgtype.UUID]
	prios  int4Array
	// deletes is set for settlements that delete the message (complete,
	// dead-letter), which count towards the next vacuum.
	deletes bool
	errs    []error
	failed  bool
	// tally is the batch's group tallies by message id (groups.go), nil
	// when it has none: the grouped variant of the statement then counts
	// them.
	tally map[int64]driver.GroupTally
}

func newSettleBatch(op string, n int) *settleBatch {
	return &settleBatch{op: op, errs: make([]error, n), leases: make([]driver.Lease, 0, n),
		ids: make(int8Array, 0, n), tokens: make(valuerArray[pgtype.UUID], 0, n), prios: make(int4Array, 0, n)}
}

// add records lease i; it returns false when the lease is malformed.
func (b *settleBatch) add(i int, l driver.Lease) bool {
	b.leases = append(b.leases, l)
	k, err := parseLease(b.op, l)
	if err != nil {
		b.errs[i], b.failed = err, true
		k = leaseKey{token: pgtype.UUID{Valid: true}} // the nil UUID matches nothing
	}
	b.ids = append(b.ids, k.id)
	b.tokens = append(b.tokens, k.token)
	b.prios = append(b.prios, k.priority)
	return err == nil
}

// run executes sql with the batch's arrays (plus extra arguments after them)
// and fills the per-lease errors.
func (b *settleBatch) run(ctx context.Context, d *Driver, sql string, args ...any) []error {
	done, err := b.query(ctx, d, sql, args...)
	if err != nil {
		return b.failAll(wrap(ctx, b.op, err))
	}
	return b.finish(d, done)
}

// query executes sql and returns the ids it returned; with tallies, its
// grouped variant, which counts them.
func (b *settleBatch) query(ctx context.Context, d *Driver, sql string, args ...any) (map[int64]bool, error) {
	if b.tally != nil {
		// The statement's grouped variant counts the tallies (groups.go).
		grouped, err := d.groupedSQL(sql)
		if err != nil {
			return nil, err
		}
		sql, args = grouped, append(args, settlementTallies(b.tally, d.cfg.queue)...)
	}
	if d.keyedPolicies() {
		// Under key policies, the statement deletes the held rows of
		// the leases it ends (claimheld.go).
		held, err := d.heldSettledSQL(sql)
		if err != nil {
			return nil, err
		}
		sql = held
	}
	return b.queryOn(ctx, d.pool, sql, args...)
}

// queryOn executes sql through q and returns the ids it returned.
func (b *settleBatch) queryOn(ctx context.Context, q querier, sql string, args ...any) (map[int64]bool, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	done := make(map[int64]bool, len(b.ids))
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		done[id] = true
	}
	return done, rows.Err()
}

// finish fills the per-lease errors from the ids a settlement returned.
func (b *settleBatch) finish(d *Driver, done map[int64]bool) []error {
	if len(done) > 0 && d.keyedPolicies() {
		// Each lease ended may have freed a slot of its key's cap: as
		// many receivers of this process that found the messages held
		// back look again now (receive.go), rather than at their next
		// look.
		d.heldBack.Notify(len(done))
	}
	if b.deletes {
		d.deletedRows(int64(len(done)))
	}
	for i, id := range b.ids {
		if b.errs[i] != nil {
			continue
		}
		if done[id] {
			delete(done, id) // a second lease for the same message is not the holder
			continue
		}
		b.errs[i], b.failed = lockLost(b.op, b.leases[i]), true
	}
	if !b.failed {
		return nil
	}
	return b.errs
}

func (b *settleBatch) failAll(err error) []error {
	for i := range b.errs {
		if b.errs[i] == nil {
			b.errs[i] = err
		}
	}
	return b.errs
}

// Complete implements driver.Driver: one DELETE for the whole batch, which
// also stores the records of the messages it deletes (results.go).
func (d *Driver) Complete(ctx context.Context, reqs []driver.CompleteParams) []error {
	if err := d.closing.Err(); err != nil {
		return driver.FanOut(err, len(reqs))
	}
	if len(reqs) == 0 {
		return nil
	}
	b := newSettleBatch("complete", len(reqs))
	b.deletes = true
	recs := resultsOf(len(reqs), func(i int) *driver.ResultRecord { return reqs[i].Result })
	tally := func(i int) driver.GroupTally { return reqs[i].Tally }
	if recs == nil {
		for i, r := range reqs {
			b.add(i, r.Lease)
		}
		b.tally = tallies(b.ids, tally)
		return b.run(ctx, d, d.sql.complete, b.ids, b.tokens, b.prios, d.cfg.queue)
	}
	c := recordArrays(recs, b.errs)
	for i, r := range reqs {
		b.addWithRecord(i, r.Lease)
	}
	b.tally = tallies(b.ids, tally)
	return d.runWithRecords(ctx, b, &d.rsql.complete, c, b.ids, b.tokens, b.prios, d.cfg.queue)
}

// Requeue implements driver.Driver: one UPDATE for the whole batch.
func (d *Driver) Requeue(ctx context.Context, reqs []driver.RequeueParams) []error {
	if err := d.closing.Err(); err != nil {
		return driver.FanOut(err, len(reqs))
	}
	if len(reqs) == 0 {
		return nil
	}
	b := newSettleBatch("requeue", len(reqs))
	delays := make([]int64, len(reqs))
	bodies := make([][]byte, len(reqs))
	immediate := false
	for i, r := range reqs {
		b.add(i, r.Lease)
		delays[i] = micros(max(r.Delay, 0))
		bodies[i] = replacementBody(r.Body, r.Lease)
		immediate = immediate || r.Delay <= 0
	}
	b.tally = tallies(b.ids, func(i int) driver.GroupTally { return reqs[i].Tally })
	errs := b.run(ctx, d, d.sql.requeue, b.ids, b.tokens, b.prios, delays, bodies, d.cfg.queue)
	if immediate {
		// Idle receivers elsewhere should pick the message up now.
		if d.notif.inline() {
			go d.sendNotify()
		} else {
			d.notif.committed()
		}
		d.wake.Notify(-1)
	}
	return errs
}

// DeadLetter implements driver.Driver: one statement that moves the whole
// batch to dead_letters and stores the records of the messages it moves.
func (d *Driver) DeadLetter(ctx context.Context, reqs []driver.DeadLetterParams) []error {
	if err := d.closing.Err(); err != nil {
		return driver.FanOut(err, len(reqs))
	}
	if len(reqs) == 0 {
		return nil
	}
	b := newSettleBatch("dead-letter", len(reqs))
	b.deletes = true
	recs := resultsOf(len(reqs), func(i int) *driver.ResultRecord { return reqs[i].Result })
	var c recordColumns
	if recs != nil {
		c = recordArrays(recs, b.errs)
	}
	reasons := make([]string, len(reqs))
	details := make([]string, len(reqs))
	bodies := make([][]byte, len(reqs)) // nil keeps the stored body
	for i, r := range reqs {
		if recs != nil && !b.addWithRecord(i, r.Lease) || recs == nil && !b.add(i, r.Lease) {
			continue
		}
		reasons[i] = textColumn(r.Reason)
		details[i] = textColumn(r.Detail)
		bodies[i] = replacementBody(r.Body, r.Lease)
	}
	b.tally = tallies(b.ids, func(i int) driver.GroupTally { return reqs[i].Tally })
	if recs == nil {
		return b.run(ctx, d, d.sql.deadLetter, b.ids, b.tokens, b.prios, reasons, details, d.cfg.queue, bodies)
	}
	return d.runWithRecords(ctx, b, &d.rsql.deadLetter, c, b.ids, b.tokens, b.prios, reasons, details, d.cfg.queue, bodies)
}

// textColumn makes s storable in a text column, which refuses NUL and
// invalid UTF-8: each such byte becomes U+FFFD. (The portable layer sends
// clean text already; this keeps a dead letter from being refused, and its
// message from coming back forever, whoever calls.)
func textColumn(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
