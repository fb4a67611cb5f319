package redis

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// Renew implements driver.Driver. The lease keeps its token.
func (d *Driver) Renew(ctx context.Context, lease driver.Lease, visibility time.Duration) (driver.Lease, error) {
	if err := d.closing.Check(ctx); err != nil {
		return lease, err
	}
	if visibility <= 0 {
		return lease, driver.Errorf(errcode.InvalidArgument, "redis renew on queue %s: visibility %v must be positive", d.queue, visibility)
	}
	start := time.Now()
	ok, err := d.run(ctx, renewScript, lease.MessageID, lease.Token, ms(visibility)).Int()
	if err != nil {
		return lease, d.fail(ctx, "renew", err)
	}
	if ok != 1 {
		return lease, d.lockLost("renew", lease)
	}
	lease.Expiry = start.Add(visibility)
	return lease, nil
}

// Complete implements driver.Driver. With records, one script call stores
// each record with its settlement (completeResultsScript).
func (d *Driver) Complete(ctx context.Context, reqs []driver.CompleteParams) []error {
	script, extra := completeScript, (func(lo, hi int) (head, tail []any))(nil)
	rs := prepare(len(reqs), func(i int) *driver.ResultRecord { return reqs[i].Result })
	if rs.n > 0 {
		script, extra = completeResultsScript, rs.args
	}
	return d.settle(ctx, "complete", script, d.writes(rs, "inflight", "ids"), len(reqs), extra, func(i int) driver.GroupTally { return reqs[i].Tally },
		func(i int) driver.Lease { return reqs[i].Lease },
		func(args []any, i int) []any { return completeArgs(args, &reqs[i].Lease) })
}

// Requeue implements driver.Driver. A zero delay makes the message ready at
// once (behind others of its priority); a positive one moves it to the
// delayed set. A non-nil Body replaces the stored body in the same script.
func (d *Driver) Requeue(ctx context.Context, reqs []driver.RequeueParams) []error {
	return d.settle(ctx, "requeue", requeueScript, d.writes(recordSet{}, "inflight", "ready", "due"), len(reqs), nil, func(i int) driver.GroupTally { return reqs[i].Tally },
		func(i int) driver.Lease { return reqs[i].Lease },
		func(args []any, i int) []any {
			r := reqs[i]
			replace, body := "0", []byte(nil)
			if r.Body != nil {
				replace, body = "1", r.Body
			}
			var delay int64
			if r.Delay > 0 {
				delay = ms(r.Delay)
			}
			return append(args, r.Lease.MessageID, r.Lease.Token, delay, replace, body)
		})
}

// DeadLetter implements driver.Driver. The message keeps its hash, which
// gains the reason, detail and time; it moves from the in-flight set to the
// dead set in one script, so it is never in neither.
func (d *Driver) DeadLetter(ctx context.Context, reqs []driver.DeadLetterParams) []error {
	script, extra := deadLetterScript, (func(lo, hi int) (head, tail []any))(nil)
	rs := prepare(len(reqs), func(i int) *driver.ResultRecord { return reqs[i].Result })
	if rs.n > 0 {
		script, extra = deadLetterResultsScript, rs.args
	}
	return d.settle(ctx, "dead-letter", script, d.writes(rs, "inflight", "ids", "dead"), len(reqs), extra, func(i int) driver.GroupTally { return reqs[i].Tally },
		func(i int) driver.Lease { return reqs[i].Lease },
		func(args []any, i int) []any { return append(args, deadLetterArgs(reqs[i])...) })
}

// deadLetterArgs are a dead-letter settlement's arguments for the scripts.
// A new body goes behind a "=", so that an empty one still replaces the
// stored body (the empty string keeps it).
func deadLetterArgs(r driver.DeadLetterParams) []any {
	var body []byte
	if r.Body != nil {
		body = append(append(make([]byte, 0, 1+len(r.Body)), '='), r.Body...)
	}
	return []any{r.Lease.MessageID, r.Lease.Token, r.Reason, r.Detail, body}
}

// settle runs a batch settlement script over n items in chunks, each call
// with extra's head arguments after the count, then each item's arguments
// (item appends them to the call's), then extra's tail ones (for the items
// lo to hi of the chunk), and turns its
// 1/0 results into the driver's error convention: nil when every item
// succeeded, else one error per item. On a cluster each call declares
// fixed, the keys of its messages and of their groups (declared).
func (d *Driver) settle(ctx context.Context, op string, s *goredis.Script, fixed []string, n int, extra func(lo, hi int) (head, tail []any),
	tally func(int) driver.GroupTally, lease func(int) driver.Lease, item func(args []any, i int) []any) []error {
	if n == 0 {
		return nil
	}
	if err := d.closing.Check(ctx); err != nil {
		return driver.FanOut(err, n)
	}
	errs := make([]error, n)
	bounds := chunkBounds(n)
	chunks := make([][]any, len(bounds))
	grouped, tallies := false, make([][]any, len(bounds))
	var keys [][]string
	if fixed != nil {
		keys = make([][]string, len(bounds))
	}
	for c, b := range bounds {
		chunks[c] = d.chunkArgs(b[0], b[1], extra, item)
		tallies[c] = tallyArgs(b[0], b[1], tally)
		grouped = grouped || tallies[c] != nil
		if keys != nil {
			keys[c] = d.declared(b[0], b[1], fixed, lease, tally)
		}
	}
	if grouped {
		// The grouped variant counts the tallies (groups.go); a chunk
		// without any passes empty ones.
		s = groupedScripts[s]
		for c, b := range bounds {
			if tallies[c] == nil {
				tallies[c] = make([]any, 2*(b[1]-b[0]))
				for i := range tallies[c] {
					tallies[c][i] = ""
				}
			}
			chunks[c] = append(chunks[c], tallies[c]...)
		}
	}
	failed := false
	for c, cmd := range d.runChunks(ctx, s, chunks, keys) {
		b := bounds[c]
		res, err := cmd.Int64Slice()
		if err == nil && len(res) != b[1]-b[0] {
			err = driver.Errorf(errcode.Internal, "%s script returned %d results for %d messages", op, len(res), b[1]-b[0])
		}
		for i := b[0]; i < b[1]; i++ {
			switch {
			case err != nil:
				errs[i] = d.fail(ctx, op, err)
			case res[i-b[0]] != 1:
				errs[i] = d.lockLost(op, lease(i))
			default:
				continue
			}
			failed = true
		}
	}
	if !failed {
		return nil
	}
	return errs
}

// chunkArgs are the arguments of settle's script call for the items lo to
// hi: the count, extra's head, each item's, then extra's tail.
func (d *Driver) chunkArgs(lo, hi int, extra func(lo, hi int) (head, tail []any), item func(args []any, i int) []any) []any {
	var head, tail []any
	if extra != nil {
		head, tail = extra(lo, hi)
	}
	args := append(append(d.scriptArgs(1+len(head)), hi-lo), head...)
	for i := lo; i < hi; i++ {
		args = item(args, i)
	}
	return append(args, tail...)
}

// completeArgs appends a completion's arguments for the scripts: pointers
// to the lease's strings, which go-redis writes as it writes strings, and
// which box without an allocation where a string allocates its header.
// The lease must stay unchanged until the call returns.
func completeArgs(args []any, l *driver.Lease) []any { return append(args, &l.MessageID, &l.Token) }

// lockLost is the error for a lease that is no longer held.
func (d *Driver) lockLost(op string, l driver.Lease) error {
	return driver.Errorf(errcode.LockLost,
		"redis %s on queue %s: the lease on message %s is no longer held (it expired, the message was settled, or another receiver claimed it)",
		op, d.queue, l.MessageID)
}
