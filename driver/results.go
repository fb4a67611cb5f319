package driver

import (
	"context"
	"time"

	"github.com/jobq/jobq/errcode"
)

// ResultState is where a task's result record says it is.
type ResultState string

// The states a result record holds.
const (
	// ResultSucceeded: the task ran and succeeded; its message is gone.
	ResultSucceeded ResultState = "succeeded"
	// ResultDeadLettered: the task failed for the last time (or could not
	// be decoded) and was moved to the dead-letter store.
	ResultDeadLettered ResultState = "dead-lettered"
	// ResultCancelled: the task was cancelled (Admin.Cancel) and will not
	// run (again).
	ResultCancelled ResultState = "cancelled"
	// ResultCancelRequested: a cancel was asked for a task that had not
	// ended; a worker that holds or receives the task stops it and records
	// ResultCancelled. It is the only state that is not an end.
	ResultCancelRequested ResultState = "cancel-requested"
)

// Final reports whether s is an end state (everything but
// ResultCancelRequested).
func (s ResultState) Final() bool {
	return s == ResultSucceeded || s == ResultDeadLettered || s == ResultCancelled
}

// ResultRecord is the stored outcome of one task, keyed by its task ID.
// The portable layer encodes the details (exit code, output tail, times,
// worker, attempts, a handler's return value) into Data; the driver stores
// and returns the record unchanged, like a message body.
type ResultRecord struct {
	// ID is the task's ID.
	ID string
	// State is the record's state.
	State ResultState
	// UpdatedAt is when the record was written.
	UpdatedAt time.Time
	// ExpiresAt is when the record may be purged (the queue's retention
	// after UpdatedAt). A driver must not return a record after it
	// expired, even if it has not purged it yet.
	ExpiresAt time.Time
	// Data is the portable layer's encoding of the details; opaque.
	Data []byte
}

// ResultStore is implemented by drivers that keep result records, which
// they declare with the Results feature (Native when the records live in
// the queue's own engine, Emulated when they live in another store the
// user already has, such as a blob container beside an Azure queue).
//
// Records are written by workers when a task ends and by Admin.Cancel; they
// are read by Queue.Result and Queue.Wait. A driver that declares Results
// Native stores the record of a task that ends with its settlement
// (CompleteParams.Result, DeadLetterParams.Result), atomically; with
// Results Emulated the portable layer stores it through PutResults before
// the settlement, so that a crash between the two duplicates a record
// rather than losing it; a dead letter that no jobq worker settled (the
// engine's own, or another kind of worker's) then has none, and
// Queue.Wait finds it through PageDead or ListDead. A record lives until ExpiresAt;
// expired records are purged by the engine (a TTL) or by PurgeResults,
// which workers call now and then, so the store never grows without bound.
type ResultStore interface {
	// PutResults stores records. A record replaces the one with the same ID,
	// with one exception that makes cancel race-free: a record whose State
	// is ResultCancelRequested is stored only where no unexpired record with
	// that ID exists (insert if absent), so it never hides an end.
	PutResults(ctx context.Context, recs []*ResultRecord) error
	// GetResults returns the records of ids, in order: nil where there is
	// none or it has expired.
	GetResults(ctx context.Context, ids []string) ([]*ResultRecord, error)
	// PurgeResults deletes the records that expired before now and returns
	// how many it deleted. A driver whose engine expires records by itself
	// returns 0 and nil.
	PurgeResults(ctx context.Context, now time.Time) (int64, error)
}

// ResultWaiter is implemented by ResultStore drivers whose engine can wake
// a waiter when a record is stored (LISTEN/NOTIFY, Redis pub/sub or a
// blocking read), so that Queue.Wait does not poll.
type ResultWaiter interface {
	// WaitResults blocks until a record may have been stored for one of
	// ids, wait has passed, or ctx is done. Returning early is allowed (the
	// portable layer reads the records and calls again); returning later
	// than wait is not.
	WaitResults(ctx context.Context, ids []string, wait time.Duration) error
}

// TaskRemover is implemented by ResultStore drivers that can delete a
// queued message by its task ID without holding a lease, which
// Admin.Cancel uses to remove a task that is ready or delayed (Cancel
// Native). The removal stores the task's cancelled record with it, as a
// settlement stores its Result, and the cancel request of a task
// in flight likewise. Without it a cancelled task is dropped, unrun, by
// the worker that next receives it (Cancel Emulated).
type TaskRemover interface {
	// RemoveTasks deletes the ready and delayed messages (not in flight,
	// not dead) whose task ID is the ID of one of cancelled, and looks up
	// the others' messages. In the same transaction, script or lock as
	// the removal it stores, per task ID:
	//
	//   - removed (its message deleted): its record in cancelled, a
	//     ResultCancelled one, which replaces any record the task has;
	//   - held (its message in flight: claimed under a lease that has
	//     not expired): its record in requested, a ResultCancelRequested
	//     one, under PutResults' rule (only where the task has no
	//     unexpired record, so it never hides an end);
	//   - neither (no message: never pushed, ended, or dead): nothing.
	//
	// So neither a crash nor a lost answer leaves a removed task without
	// its end (a wait would hang on it), a running task without the
	// request its worker polls for, or an unknown ID with a record; a
	// RemoveTasks asked again answers for the state it left. requested
	// is nil (store nothing for held tasks) or has the length of
	// cancelled, requested[i] for the task of cancelled[i].
	//
	// It returns the IDs it removed and the IDs held. A record that
	// CheckResultRecord rejects, or a requested record for another task
	// or state, fails the call (InvalidArgument) before anything is
	// removed.
	RemoveTasks(ctx context.Context, cancelled, requested []*ResultRecord) (removed, held []string, err error)
}

// CheckRemoveRecords checks RemoveTasks' arguments: every record passes
// CheckResultRecord, cancelled ones are ResultCancelled, and requested is
// nil or pairs each of cancelled with a ResultCancelRequested record of
// the same task.
func CheckRemoveRecords(cancelled, requested []*ResultRecord) error {
	if requested != nil && len(requested) != len(cancelled) {
		return Errorf(errcode.InvalidArgument, "remove tasks: %d cancel requests for %d tasks", len(requested), len(cancelled))
	}
	for i, r := range cancelled {
		if err := CheckResultRecord(r); err != nil {
			return err
		}
		if r.State != ResultCancelled {
			return Errorf(errcode.InvalidArgument, "remove tasks: the record of removed task %q is %s; want %s", r.ID, r.State, ResultCancelled)
		}
		if requested == nil {
			continue
		}
		q := requested[i]
		if err := CheckResultRecord(q); err != nil {
			return err
		}
		if q.ID != r.ID || q.State != ResultCancelRequested {
			return Errorf(errcode.InvalidArgument, "remove tasks: cancel request %d is a %s record of task %q; want a %s record of task %q", i, q.State, q.ID, ResultCancelRequested, r.ID)
		}
	}
	return nil
}

// DefaultRetention is how long result records are kept when the queue has
// no retention policy.
const DefaultRetention = 7 * 24 * time.Hour
