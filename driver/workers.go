package driver

import (
	"context"
	"time"
)

// WorkerRecord is one worker's entry in a queue's worker registry. The
// portable layer encodes what it knows about the worker (host, process ID,
// start time, version, current tasks, CPU and memory use) into Data; the
// driver stores and returns the record unchanged, like a message body.
type WorkerRecord struct {
	// ID is the worker's ID, unique among the queue's workers.
	ID string
	// Heartbeat is when the worker last wrote the record (announce,
	// heartbeat or withdraw), on the caller's clock: PutWorker gets it
	// from the worker's clock and ListWorkers returns it on the lister's.
	// A driver whose engine has a clock stores it on that clock (the
	// write's time less how long before it the worker stamped it) and
	// lists it as long ago as it was, so that clocks that disagree do not
	// make a live worker look silent, or a silent one live.
	Heartbeat time.Time
	// Withdrawn is true once the worker has said it is leaving.
	Withdrawn bool
	// Data is the portable layer's encoding of the details; opaque.
	Data []byte
}

// WorkerStore is implemented by drivers that keep a registry of the
// workers of a queue, which they declare with the WorkerRegistry feature
// (Native when the records live in the queue's own engine, Emulated when
// they live in another store the user already has, such as a blob
// container beside an Azure queue).
//
// A worker announces itself by writing its record, writes it again at
// every heartbeat, and writes it a last time with Withdrawn set when it
// exits. A worker that stops writing without withdrawing (killed, its
// machine preempted) has vanished; the portable layer decides that from
// Heartbeat. Records are kept for a while after their last heartbeat, so
// that churn and lifetimes can be shown, then purged by the engine (a TTL)
// or by PurgeWorkers, which workers call now and then.
type WorkerStore interface {
	// PutWorker stores rec, replacing the record with the same ID.
	PutWorker(ctx context.Context, rec *WorkerRecord) error
	// ListWorkers returns the queue's records whose Heartbeat is not before
	// since (both on the caller's clock), in any order. It may also return older ones that were not
	// purged yet; the portable layer drops them.
	ListWorkers(ctx context.Context, since time.Time) ([]*WorkerRecord, error)
	// PurgeWorkers deletes the records whose Heartbeat is before before and
	// returns how many it deleted. A driver whose engine expires records by
	// itself returns 0 and nil.
	PurgeWorkers(ctx context.Context, before time.Time) (int64, error)
}

// WorkerRetention is how long a worker's record is kept after its last
// heartbeat, so that churn and lifetimes can be shown; older records are
// purged.
const WorkerRetention = 24 * time.Hour

// DefaultWorkerHeartbeat is how often a worker writes its record unless
// it says otherwise (worker.Options.HeartbeatInterval).
const DefaultWorkerHeartbeat = 10 * time.Second
