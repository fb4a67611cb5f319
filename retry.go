package jobq

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// defaultPushRetry is the default Options.PushRetry.
const defaultPushRetry = time.Minute

// Pauses between attempts of a push the backend could not reach.
const (
	pushRetryFirst = 100 * time.Millisecond
	pushRetryMax   = 5 * time.Second
)

// pushChunk hands msgs to the driver, retrying while it reports Unavailable
// (the engine could not be reached: a reset connection, a server that is
// restarting) for up to q.pushRetry. A failed attempt may have stored a
// prefix of msgs, which the driver reports; the next attempt resumes after
// it. An attempt that may have stored messages without saying so (its
// reply was lost: driver.AppliedOf says MaybeApplied) makes the messages
// after its prefix uncertain: those a later attempt stores are reported
// Resent (the backend answers them as duplicates where it dedups task
// IDs, and may hold them twice where it does not), and if the push fails
// in the end, it says so: the messages after the stored prefix may have
// been stored. It returns the results of the stored prefix, whether the
// rest may have been stored, and the last error.
func (q *Queue) pushChunk(ctx context.Context, msgs []*driver.Message) ([]driver.PushResult, bool, error) {
	var (
		out []driver.PushResult
		bo  *backoff.ExponentialBackOff
	)
	unsureFrom := -1 // the first message an unanswered attempt may have stored
	for {
		if err := ctx.Err(); err != nil {
			// Not sent: the context ended before this attempt.
			return out, unsureFrom >= 0, err
		}
		from := len(out)
		rs, err := q.drv.Push(ctx, msgs[from:])
		for i := range rs {
			if unsureFrom >= 0 && from+i >= unsureFrom {
				rs[i].Resent = true
			}
		}
		out = append(out, rs...)
		if err == nil {
			return out, false, nil
		}
		code := errcode.Of(q.wrap("push", err))
		if unsureFrom < 0 && driver.AppliedOf(err, code) == driver.MaybeApplied {
			unsureFrom = len(out)
		}
		if q.pushRetry <= 0 || code != errcode.Unavailable || ctx.Err() != nil {
			return out, unsureFrom >= 0, err
		}
		if bo == nil {
			bo = backoff.NewExponentialBackOff()
			bo.InitialInterval = pushRetryFirst
			bo.MaxInterval = pushRetryMax
			bo.MaxElapsedTime = q.pushRetry
			bo.Reset()
		}
		pause := bo.NextBackOff()
		if pause == backoff.Stop {
			return out, unsureFrom >= 0, err
		}
		q.log.Warn("push: the queue is unavailable; retrying", "pending", len(msgs)-len(out), "in", pause, "err", err)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return out, unsureFrom >= 0, err
		case <-t.C:
		}
	}
}
