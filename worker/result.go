package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/jobq/jobq"
)

// SetResult keeps v, encoded as JSON, as the value of the task's result
// record (jobq.Result.Value), which the producer reads with Queue.Result or
// Queue.Wait. The record is written when the task ends; while it is retried
// the value of its last attempt counts. It fails when v does not encode as
// JSON. HandleResult and HandleJSONResult call it with their function's
// value.
func (j *Job) SetResult(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("the task's result value (a %T) does not encode as JSON: %w", v, err)
	}
	if j.Envelope != nil {
		j.Envelope.SetResult(jobq.ResultDetails{Value: b})
	}
	return nil
}

// HandleResult registers fn on m for tasks of kind, as Mux.Handle does, and
// keeps what fn returns, encoded as JSON, as the value of the task's result
// record (see Job.SetResult): a producer waiting with Queue.Wait, or `jobq
// QUEUE push --wait`, gets it. A nil value is not kept. A value that does
// not encode as JSON is a permanent failure (the task is dead-lettered at
// once). fn's errors are handled as any Handler's, and its value is then
// not kept. fn reaches the rest of the Job through JobFrom(ctx).
// HandleResult panics as Mux.Handle does.
func HandleResult(m *Mux, kind string, fn func(ctx context.Context, task *jobq.Task) (any, error)) {
	if fn == nil {
		panic("worker: HandleResult(" + strconv.Quote(kind) + ") with a nil function")
	}
	m.Handle(kind, HandlerFunc(func(ctx context.Context, job *Job) error {
		v, err := fn(context.WithValue(ctx, jobKey{}, job), job.Task)
		if err != nil || v == nil {
			return err
		}
		return keepResult(job, kind, v)
	}))
}

// HandleJSONResult is HandleJSON for a function that returns a value: the
// task's payload is decoded into a T, and the R that fn returns is kept,
// encoded as JSON, as the value of the task's result record (see
// HandleResult). It panics as Mux.Handle does.
func HandleJSONResult[T, R any](m *Mux, kind string, fn func(ctx context.Context, task *jobq.Task, payload T) (R, error)) {
	if fn == nil {
		panic("worker: HandleJSONResult(" + strconv.Quote(kind) + ") with a nil function")
	}
	HandleResult(m, kind, func(ctx context.Context, task *jobq.Task) (any, error) {
		var p T
		if err := decodePayload(task.Payload, &p); err != nil {
			return nil, payloadError(kind, p, err)
		}
		r, err := fn(ctx, task, p)
		if err != nil {
			return nil, err
		}
		return r, nil
	})
}

// keepResult sets v as job's result value; a value that cannot be encoded
// fails the task permanently, since running it again cannot fix that.
func keepResult(job *Job, kind string, v any) error {
	if err := job.SetResult(v); err != nil {
		return Permanent(fmt.Errorf("task of kind %q: %w", kind, err))
	}
	return nil
}
