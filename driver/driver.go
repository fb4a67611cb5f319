// Package driver defines the contract a jobq backend implements.
//
// Users never call a driver directly: they hold a *jobq.Queue, which
// validates arguments, encodes tasks, applies capability fallbacks with their
// one-time warnings, wraps errors, and batches settlements before it calls
// the driver. A driver therefore stays thin: it maps each method onto its
// engine and reports what it can do through Capabilities.
//
// # Contract for implementers
//
//   - Every method that reaches the engine takes a context and must return
//     promptly when it is canceled, with an error whose code is Canceled or
//     DeadlineExceeded.
//   - A Driver is used by many goroutines at once: every method may be called
//     concurrently with every other, including Close.
//   - Methods should not retry; the portable layer decides about retries of
//     transient (Unavailable) errors. Exceptions are retries the engine's own
//     client performs (reconnects, throttling backoff inside an SDK).
//   - Delivery is at least once. No method may lose a message: where an
//     operation takes two steps on the engine (copy then delete), order them
//     so that a crash between them duplicates rather than loses.
//   - Each state change of one message must be atomic: a claim, a settlement
//     or a renewal either happens completely or not at all. Batch methods are
//     atomic per message, not per batch, unless a method says otherwise.
//   - Leases are fenced. Every claim issues a lease (a token, a lock, a pop
//     receipt) and Renew, Complete, Requeue and DeadLetter act only while the
//     caller still holds that lease. Otherwise they change nothing and return
//     an error with code LockLost. "Held" means: not expired, not settled, and
//     not re-claimed by anybody else.
//   - Settlements (Complete, Requeue, DeadLetter) take a batch and answer
//     per message: nil when every one succeeded, otherwise one error per
//     message. An error that fails the whole batch (the engine is
//     unreachable, a transaction rolled back) goes to every message:
//     FanOut builds that answer. The portable layer never sends an empty
//     batch, nor a body larger than MaxMessageBytes in a RequeueParams or
//     DeadLetterParams.
//   - A settlement carries what the engine must store with it: the task's
//     result record (CompleteParams.Result, DeadLetterParams.Result), set
//     only when the driver declares Results Native. The driver stores it
//     in the same statement, transaction or script as the settlement, so
//     that a record exists if and only if its message was settled. With
//     Results Emulated (records kept in another store) the portable layer
//     stores the records first, through ResultStore.PutResults, and sends
//     settlements without them. It renews a lease that nears its end while
//     PutResults runs and settles with the renewed lease; the envelope
//     keeps its older copy, so a renewal must leave that copy usable (the
//     same token, or a claim shared through Lease.Private).
//   - Calls after Close fail with FailedPrecondition. Closing is the
//     closed state drivers keep for that: Close marks it, and each method
//     starts with its Check.
//   - Errors are classified by ErrorCode. A message that exceeds the size
//     limit is TooLarge; a missing queue, message or dead letter is NotFound;
//     a lost lease is LockLost.
//   - Bodies are opaque bytes: the driver stores and returns them unchanged.
package driver

import (
	"context"
	"log/slog"
	"net/url"
	"time"

	"github.com/jobq/jobq/errcode"
)

// Message is one message to push.
type Message struct {
	// ID is the task's ID. Drivers that declare Dedup native use it as the
	// deduplication key; all drivers report it back as Received.ID.
	ID string
	// Body is the encoded task.
	Body []byte
	// Priority orders claims when the Priority feature is native: higher
	// values are received first; equal priorities keep push order.
	Priority int
	// NotBefore, when non-zero and in the future, keeps the message invisible
	// until that time (the DelayedPush feature). It is on this machine's
	// clock: a driver whose engine has a clock of its own keeps the message
	// invisible for NotBefore minus time.Now() on that clock.
	NotBefore time.Time
	// ConcurrencyKey and RateLimitKey name the policies that limit claims of
	// this message, for drivers that declare ConcurrencyLimit or RateLimit.
	ConcurrencyKey string
	RateLimitKey   string
	// TraceParent is the producer's W3C trace context (a traceparent
	// header value), empty when the push was not traced. Drivers keep it
	// in the engine's own metadata beside the body (a column, a hash
	// field, an application property), never in the body, and return it
	// as Received.TraceParent; one with nowhere to keep it drops it.
	TraceParent string
	// Group is the task's group (groups.go), empty for none. Drivers that
	// declare Groups keep it beside the body and count it; the others
	// never see one.
	Group string
}

// PushResult reports what happened to one pushed message.
type PushResult struct {
	// MessageID is the engine's identity of the stored message. For a
	// duplicate it is the identity of the message already queued, when the
	// engine can tell.
	MessageID string
	// Duplicate is true when Dedup is native and a message with the same ID
	// was already queued, so nothing new was stored.
	Duplicate bool
	// Resent is true when the engine's client sent the message again after
	// an attempt whose answer was lost (an SDK retry after a reset
	// connection): it is stored, and unless Dedup is native it may be
	// stored twice. A driver that cannot see its client's retries leaves
	// it false.
	Resent bool
}

// Lease identifies one claim of one message. The portable layer passes it
// back unchanged to the settlement methods; only the driver interprets it.
type Lease struct {
	// MessageID is the engine's identity of the message.
	MessageID string
	// Token is the claim's fencing token: a lease UUID, a Service Bus lock
	// token, an Azure Storage pop receipt.
	Token string
	// Expiry is when the lease runs out unless renewed.
	Expiry time.Time
	// Private holds whatever else the driver needs to settle the message
	// (for example the SDK's received-message object). The portable layer
	// never reads it.
	Private any
}

// Received is one claimed message.
type Received struct {
	// ID is the task ID the message was pushed with, if the engine stores it
	// separately; otherwise empty and the portable layer reads it from Body.
	ID string
	// Body is the message body as pushed (or as last replaced by Requeue).
	Body []byte
	// DeliveryCount is how many times the message has been claimed,
	// including this claim (so 1 on the first delivery).
	DeliveryCount int
	// UncountedDeliveries is how many of the earlier deliveries ended in a
	// requeue that must not use up a retry (RequeueParams.Failed false).
	// Only drivers whose InPlaceUpdate is not native report it: the
	// portable layer counts the retry budget from DeliveryCount less these.
	UncountedDeliveries int
	// EnqueuedAt is when the message was first pushed, if known.
	EnqueuedAt time.Time
	// TraceParent is Message.TraceParent as pushed, where the driver keeps
	// it; empty otherwise.
	TraceParent string
	// Group is Message.Group as pushed, where the driver keeps it.
	Group string
	// Lease is this claim.
	Lease Lease
}

// ReceiveParams are the arguments of Driver.Receive.
type ReceiveParams struct {
	// Max is the most messages to return; at least 1, at most
	// Capabilities.MaxReceiveBatch when that is set.
	Max int
	// Visibility is how long the claimed messages stay invisible to other
	// receivers unless renewed. Positive, at most Capabilities.MaxVisibility
	// when that is set.
	Visibility time.Duration
	// Wait is how long Receive may block waiting for a first message when
	// none is visible. Zero means return at once. Returning early with no
	// messages is allowed (the portable layer calls again); returning after
	// Wait is not.
	Wait time.Duration
}

// CompleteParams are the arguments for completing one message.
type CompleteParams struct {
	Lease Lease
	// Result, when not nil, is the task's result record, to be stored if
	// and only if the message is deleted (see ResultStore). The portable
	// layer sets it only on drivers that declare Results Native.
	Result *ResultRecord
	// Tally is what the settlement adds to the task's group (groups.go);
	// zero for a task without one.
	Tally GroupTally
}

// RequeueParams are the arguments for requeuing one message.
type RequeueParams struct {
	Lease Lease
	// Delay keeps the message invisible for this long (DelayedRequeue).
	// Zero makes it visible at once.
	Delay time.Duration
	// Body, when non-nil, replaces the message body (InPlaceUpdate). The
	// portable layer only sets it when InPlaceUpdate is native.
	Body []byte
	// Failed is true when the requeue is a retry after a failed attempt
	// (Envelope.Fail), false when it puts back a task that did not fail (a
	// gate miss, a busy concurrency key, a rate limit, a stopping worker).
	// A driver whose InPlaceUpdate is not native counts the retry budget
	// from deliveries: it must let a failed attempt's delivery count, and
	// should report the others in Received.UncountedDeliveries.
	Failed bool
	// Tally is what the settlement adds to the task's group: a failed
	// attempt's requeue counts GroupFailed; zero otherwise.
	Tally GroupTally
}

// DeadLetterParams are the arguments for dead-lettering one message.
type DeadLetterParams struct {
	Lease Lease
	// Reason is a short, human-readable cause; Detail may be longer (for
	// example the tail of a task's output).
	Reason string
	Detail string
	// Body, when non-nil, replaces the message body in the dead-letter
	// store (the attempt history with the final attempt). The portable
	// layer only sets it when InPlaceUpdate is native; drivers that cannot
	// store it keep the old body.
	Body []byte
	// Result, when not nil, is the task's result record, to be stored if
	// and only if the message is moved, as CompleteParams.Result.
	Result *ResultRecord
	// Tally is what the settlement adds to the task's group; zero for a
	// task without one.
	Tally GroupTally
}

// PeekedMessage is one message read by Peek without being claimed.
type PeekedMessage struct {
	MessageID     string
	ID            string
	Body          []byte
	DeliveryCount int
	EnqueuedAt    time.Time
	// VisibleAt is when the message becomes (or became) visible; zero when
	// the engine cannot say.
	VisibleAt time.Time
	// InFlight is true when the message is currently leased.
	InFlight bool
	Priority int
}

// DeadMessage is one message in the dead-letter store.
type DeadMessage struct {
	// MessageID identifies the dead letter for RequeueDead and PurgeDead.
	MessageID     string
	ID            string
	Body          []byte
	Reason        string
	Detail        string
	DeliveryCount int
	DeadAt        time.Time
}

// Stats are a queue's counts. Drivers that declare ExactCount unsupported
// return their best approximation.
type Stats struct {
	// Ready messages are visible and can be claimed now.
	Ready int64
	// InFlight messages are leased by a receiver.
	InFlight int64
	// Delayed messages are waiting for a NotBefore time or a requeue delay.
	Delayed int64
	// Dead messages are in the dead-letter store.
	Dead int64
	// Known says which of the counts above the backend can measure; a false
	// field's count is zero and must not be shown as a number.
	Known KnownCounts
}

// KnownCounts says which Stats counts a backend can measure.
type KnownCounts struct {
	Ready, InFlight, Delayed, Dead bool
}

// Driver is one open queue on one backend.
type Driver interface {
	// Capabilities reports what the backend can do. It must return the same
	// value every time.
	Capabilities() Capabilities

	// Push stores messages. It returns one result per message, in order.
	// A batch may be stored partly: on error, the results of the stored
	// prefix of msgs are returned with the error, and the portable layer
	// reports which ones failed. Whether the messages after that prefix
	// may have been stored is read from the error by AppliedOf: its code
	// decides (an engine's refusal stored nothing; a lost answer, a
	// timeout or an unclassified error may have stored them) unless an
	// *Error in its chain sets Applied. A driver must set MaybeApplied
	// when it knows that a message after the prefix may be stored (one
	// sent in parallel that succeeded, or whose client retried a request
	// after a lost answer), and may set NotApplied when it knows none was.
	// Messages larger than MaxMessageBytes never reach Push (the portable
	// layer rejects them).
	Push(ctx context.Context, msgs []*Message) ([]PushResult, error)

	// Receive claims up to p.Max visible messages, highest priority first
	// when Priority is native, and leases each for p.Visibility. Claimed
	// messages become visible again when their lease expires, with
	// DeliveryCount one higher on the next claim. An empty result with a nil
	// error means nothing was visible within p.Wait.
	Receive(ctx context.Context, p ReceiveParams) ([]*Received, error)

	// Renew extends a held lease to now+visibility and returns the updated
	// lease (its Token may change, as Azure pop receipts do). LockLost if
	// the lease is no longer held.
	Renew(ctx context.Context, lease Lease, visibility time.Duration) (Lease, error)

	// Complete deletes messages whose leases are held, storing each one's
	// Result with it. It returns nil or a slice of len(reqs) errors, one per
	// request (nil where that one succeeded). A lease no longer held is
	// LockLost: its message is left alone and its Result not stored.
	Complete(ctx context.Context, reqs []CompleteParams) []error

	// Requeue releases held messages back to the queue, visible after each
	// one's Delay, optionally with a new body. Same error convention as
	// Complete. A driver whose DelayedRequeue is Emulated performs its
	// declared fallback here.
	Requeue(ctx context.Context, reqs []RequeueParams) []error

	// DeadLetter moves held messages to the dead-letter store with a reason,
	// storing each one's Result with it. Same error convention as Complete.
	// Where this takes two steps, the copy must be written before the
	// original is deleted.
	DeadLetter(ctx context.Context, reqs []DeadLetterParams) []error

	// Peek returns up to max messages without claiming them, in the order
	// they would be received where the engine can tell.
	Peek(ctx context.Context, max int) ([]*PeekedMessage, error)

	// Stats counts the queue's messages.
	Stats(ctx context.Context) (Stats, error)

	// Clear deletes every message that is ready or delayed and returns how
	// many it deleted (or -1 when the engine cannot say). Dead letters are
	// left alone. In-flight messages may be deleted too; their holders then
	// get LockLost.
	Clear(ctx context.Context) (int64, error)

	// ListDead returns up to max dead letters, oldest first.
	ListDead(ctx context.Context, max int) ([]*DeadMessage, error)

	// RequeueDead moves the named dead letters (all when ids is nil) back to
	// the queue, visible at once, and returns how many it moved. Unknown ids
	// are skipped. A driver that keeps result records (ResultStore) deletes
	// the record of each task it requeues in the same step, so that waiting
	// for the task waits for its new run; and where InPlaceUpdate is native
	// and the engine lets a delivery count be set (not Storage Queue's
	// dequeue count) it keeps the message's delivery count, so that the
	// next delivery counts on from the dead letter's (the attempt history
	// and the record then count deliveries across runs).
	RequeueDead(ctx context.Context, ids []string) (int64, error)

	// PurgeDead deletes the named dead letters (all when ids is nil) and
	// returns how many it deleted.
	PurgeDead(ctx context.Context, ids []string) (int64, error)

	// ErrorCode classifies an error returned by this driver. Start with
	// errcode.Of(err) and map engine errors where it returns Unknown.
	ErrorCode(err error) errcode.Code

	// As lets users reach the engine's client or backend-only features (the
	// escape hatch). It sets *target and returns true if target is a pointer
	// to a type the driver supports. Each driver documents its types.
	As(target any) bool

	// Close releases the driver's resources. Calls after Close fail with
	// FailedPrecondition; the portable layer guarantees Close is called once.
	Close() error
}

// Opener opens a Driver for a URL. Backends register one per scheme on a
// jobq.URLMux (on the default one with jobq.Register, usually in an init
// function). An opener is a thin adapter: it parses the URL, builds the
// engine's client and hands it to the backend's constructor.
type Opener interface {
	// Open opens the queue named by u. u's query holds only the driver's own
	// parameters (the portable layer removed its own, such as stash=); the
	// driver must reject any parameter it does not know with an
	// InvalidArgument error that names it. Use Params for that.
	Open(ctx context.Context, u *url.URL, opts OpenOptions) (Driver, error)
	// Capabilities returns what a queue opened by this opener declares,
	// without connecting (for `jobq backends` and the documentation).
	Capabilities() Capabilities
}

// OpenOptions carries the portable layer's settings into a driver.
type OpenOptions struct {
	// Logger is the portable layer's logger, annotated with the queue; never
	// nil. Drivers log through it and never print credentials.
	Logger *slog.Logger
	// ConnectionString is a connection string the program holds for the
	// queue's engine (the CLI's --conn-str), given as a value so that no
	// credential travels through the environment. Backends that take
	// connection strings (azqueue, servicebus) use it before any
	// environment variable; the others ignore it. Never logged.
	ConnectionString string
	// ReadOnly says the caller only reads the queue (sizes, stats, peeks,
	// dead-letter and result listings): Open must then create, migrate or
	// change nothing, and should succeed where writing is impossible (a
	// read-only file or role, a full disk). A queue that does not exist is
	// a NotFound error, not created. Writes through such a driver may fail.
	ReadOnly bool
	// Concurrency is how many tasks the caller will run at once from the
	// queue (a worker's handlers), 0 when unknown. A driver that pools
	// server connections may size its pool from it where the URL sets no
	// size; it is a hint, never a limit on calls.
	Concurrency int
}

// TxPusher is implemented by drivers that can push messages inside the
// application's own database transaction, so that they are stored if and
// only if it commits. Such a driver declares TransactionalPush Native.
// Queue.PushTx validates, encodes and checks the tasks exactly as a push
// does, then calls PushTx once; the driver only stores the messages.
type TxPusher interface {
	// PushTx stores msgs through tx, in order and atomically with the rest
	// of the transaction, and returns one result per message, as Push does.
	// tx is the engine client's transaction type, which the driver
	// documents (pgx.Tx for Postgres); any other value is an
	// InvalidArgument error. The messages become visible to receivers when
	// tx commits and vanish if it rolls back. PushTx must not retry: an
	// engine error has usually aborted the transaction. An error that
	// concerns only the push (such as QueueFull under a max-depth bound)
	// must leave the transaction usable.
	PushTx(ctx context.Context, tx any, msgs []*Message) ([]PushResult, error)
}
