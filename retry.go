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
// it. An attempt that stored messages without saying so (its reply was
// lost) is answered on the next one with duplicates, where the backend
// dedups task IDs. It returns the results of the stored prefix and the
// last error.
func (q *Queue) pushChunk(ctx context.Context, msgs []*driver.Message) ([]driver.PushResult, error) {
	var (
		out []driver.PushResult
		bo  *backoff.ExponentialBackOff
	)
	for {
		rs, err := q.drv.Push(ctx, msgs[len(out):])
		out = append(out, rs...)
		if err == nil || q.pushRetry <= 0 || errcode.Of(q.wrap("push", err)) != errcode.Unavailable || ctx.Err() != nil {
			return out, err
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
			return out, err
		}
		q.log.Warn("push: the queue is unavailable; retrying", "pending", len(msgs)-len(out), "in", pause, "err", err)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return out, err
		case <-t.C:
		}
	}
}
