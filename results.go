package jobq

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jobq/jobq/driver"
)

// ResultState is where a task's result record says it is.
type ResultState = driver.ResultState

// The states of a Result.
const (
	// Succeeded: the task ran and succeeded.
	Succeeded = driver.ResultSucceeded
	// DeadLettered: the task failed for the last time and was moved to the
	// dead-letter store.
	DeadLettered = driver.ResultDeadLettered
	// Cancelled: the task was cancelled and will not run (again).
	Cancelled = driver.ResultCancelled
	// CancelRequested: a cancel was asked for a task that had not ended yet;
	// the worker that holds or next receives it stops it.
	CancelRequested = driver.ResultCancelRequested
)

// Result is the kept outcome of one task: what Queue.Result returns and
// Queue.Wait waits for. Records are kept for the queue's retention (a
// queue policy; 7 days by default).
type Result struct {
	// ID is the task's ID.
	ID string
	// State is how the task ended (or CancelRequested).
	State ResultState
	// ExitCode is a shell task's exit status on its last attempt; nil for a
	// Go handler or when the process did not exit by itself.
	ExitCode *int
	// Error is why the task did not succeed: the failure that
	// dead-lettered it, or what cancelled it. Empty on success.
	Error string
	// Output is the tail of the task's output on its last attempt.
	Output string
	// Value is what a Go handler returned (worker.HandleResult), as JSON;
	// nil for shell tasks.
	Value json.RawMessage
	// Started and Finished bound the last attempt; zero when unknown.
	Started, Finished time.Time
	// Worker and Host name who ran the last attempt; empty when unknown.
	Worker, Host string
	// DeliveryCount is how many times the task was delivered.
	DeliveryCount int
	// Attempts is the attempt history, oldest first.
	Attempts []Attempt
	// ExpiresAt is when the record will be purged.
	ExpiresAt time.Time
}

// CancelOutcome says what Cancel did to one task.
type CancelOutcome string

// The outcomes of Cancel.
const (
	// CancelRemoved: the task was queued or delayed; it was removed and
	// recorded as Cancelled.
	CancelRemoved CancelOutcome = "removed"
	// CancelPending: the task is running, or the backend cannot remove a
	// queued task by ID, or the ID is unknown: a CancelRequested record
	// tells the worker that holds or next receives it to stop it.
	CancelPending CancelOutcome = "requested"
	// CancelTooLate: the task had already ended; its record is unchanged.
	CancelTooLate CancelOutcome = "already-ended"
)

// CancelResult reports what Cancel did to one task.
type CancelResult struct {
	ID      string
	Outcome CancelOutcome
	// State is the task's recorded state after the cancel.
	State ResultState
}

// Backoff is a retry delay that doubles with every failed attempt, from
// Base up to Cap, with jitter.
type Backoff struct {
	Base time.Duration
	Cap  time.Duration
}

// Result returns the result record of task id. It fails with NotFound when
// the task has no record (it has not ended, or its record expired), and
// with Unimplemented when the backend keeps no results.
func (q *Queue) Result(ctx context.Context, id string) (*Result, error) {
	return nil, errorf(Unimplemented, "result", "not built yet")
}

// Wait waits until every task in ids has ended and returns their results
// in the order of ids. It is WaitFunc collecting the results.
func (q *Queue) Wait(ctx context.Context, ids ...string) ([]*Result, error) {
	return nil, errorf(Unimplemented, "wait", "not built yet")
}

// WaitFunc waits until every task in ids has ended, calling each with its
// result as soon as it is known (in the order they end). A task already
// ended when WaitFunc starts is reported at once. It returns each's first
// error, or ctx's when ctx ends first; tasks keep running either way.
func (q *Queue) WaitFunc(ctx context.Context, ids []string, each func(*Result) error) error {
	return errorf(Unimplemented, "wait", "not built yet")
}

// Cancel cancels the tasks ids: a queued or delayed task is removed (where
// the backend can remove by ID) and recorded as Cancelled; a running one is
// stopped by its worker, terminated then killed as at a time limit, and not
// retried.
func (q *Queue) Cancel(ctx context.Context, ids ...string) ([]CancelResult, error) {
	return nil, errorf(Unimplemented, "cancel", "not built yet")
}

// ResultDetails are what a worker tells the result record about a task's
// last attempt, beyond its attempt history: the shell command's output
// tail and exit code, or a Go handler's return value.
type ResultDetails struct {
	ExitCode *int
	Output   string
	Value    json.RawMessage
}

// SetResult attaches d to the result record this envelope's settlement
// writes (Complete, DeadLetter, or Fail when it dead-letters). Call it
// before settling; the last call wins.
func (e *Envelope) SetResult(d ResultDetails) {}
