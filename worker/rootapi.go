package worker

import (
	"context"

	"github.com/jobq/jobq"
)

// The queue's result and cancel entry points the worker uses. TEMPORARY:
// they reach the root package's methods through interface assertions until
// the r-core branch that builds them is merged; then they become direct
// calls.

// outcomeCancelled is the attempt outcome of a task stopped by a cancel.
const outcomeCancelled = jobq.AttemptOutcome("cancelled")

func unbuilt(op string) error {
	return &jobq.Error{Code: jobq.Unimplemented, Op: op, Msg: "not built in this version of package jobq"}
}

// cancelRequested returns those of ids whose cancel was requested.
func cancelRequested(ctx context.Context, q *jobq.Queue, ids []string) ([]string, error) {
	c, ok := any(q).(interface {
		CancelRequested(context.Context, []string) ([]string, error)
	})
	if !ok {
		return nil, unbuilt("cancel-requested")
	}
	return c.CancelRequested(ctx, ids)
}

// settleCancelled settles env as cancelled: deleted, recorded Cancelled.
func settleCancelled(ctx context.Context, env *jobq.Envelope, reason string) error {
	c, ok := any(env).(interface {
		Cancel(context.Context, string) error
	})
	if !ok {
		return unbuilt("cancel")
	}
	return c.Cancel(ctx, reason)
}

// purgeResults deletes the queue's expired result records.
func purgeResults(ctx context.Context, q *jobq.Queue) (int64, error) {
	c, ok := any(q).(interface {
		PurgeResults(context.Context) (int64, error)
	})
	if !ok {
		return 0, unbuilt("purge-results")
	}
	return c.PurgeResults(ctx)
}
