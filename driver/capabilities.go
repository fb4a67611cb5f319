package driver

import "time"

// Level says how a backend provides a feature.
type Level int

const (
	// Unsupported: the backend cannot provide the feature. The portable
	// layer either ignores the request with a warning (when that is safe, as
	// for priority) or fails the call with code Unimplemented.
	Unsupported Level = iota
	// Emulated: the backend provides the feature by other means, with a
	// difference the user should know about (Support.Fallback says which).
	// The portable layer warns once per queue the first time it is used.
	Emulated
	// Native: the engine provides the feature as specified.
	Native
)

// String returns "native", "emulated" or "unsupported".
func (l Level) String() string {
	switch l {
	case Native:
		return "native"
	case Emulated:
		return "emulated"
	default:
		return "unsupported"
	}
}

// Feature names one optional behaviour of a backend.
type Feature string

// The features a driver declares. Every driver must declare every feature;
// an undeclared feature counts as Unsupported.
const (
	// DelayedRequeue: Requeue with a delay keeps the message invisible for the
	// delay.
	DelayedRequeue Feature = "delayed-requeue"
	// DelayedPush: a message pushed with NotBefore in the future is invisible
	// until then.
	DelayedPush Feature = "delayed-push"
	// LeaseRenewal: Renew extends a held lease.
	LeaseRenewal Feature = "lease-renewal"
	// DeadLetter: DeadLetter moves a message aside with a reason, and the
	// dead-letter store can be listed, requeued and purged.
	DeadLetter Feature = "dead-letter"
	// Priority: higher-priority messages are received first.
	Priority Feature = "priority"
	// Peek: messages can be read without being received.
	Peek Feature = "peek"
	// ExactCount: Stats counts are exact rather than approximate.
	ExactCount Feature = "exact-count"
	// Dedup: pushing a message whose ID is already queued is a no-op that the
	// push result reports.
	Dedup Feature = "dedup"
	// InPlaceUpdate: Requeue can replace the message body (used to decrement
	// the retry budget).
	InPlaceUpdate Feature = "in-place-update"
	// ConcurrencyLimit: claims honour per-key concurrency caps globally.
	ConcurrencyLimit Feature = "concurrency-limit"
	// RateLimit: claims honour per-key rate limits globally.
	RateLimit Feature = "rate-limit"
	// TransactionalPush: messages can be pushed inside the application's own
	// database transaction (reached through the driver's As method).
	TransactionalPush Feature = "transactional-push"
	// Results: the outcome of every task that ends is kept as a result
	// record for the queue's retention (ResultStore), so producers can
	// read and wait for it.
	Results Feature = "results"
	// Cancel: a queued or delayed task can be removed by its ID and
	// recorded as cancelled in one step (TaskRemover), and a running one
	// is told to stop.
	Cancel Feature = "cancel"
	// WorkerRegistry: workers announce themselves, heartbeat and withdraw
	// in the engine, so live and vanished workers can be listed.
	WorkerRegistry Feature = "worker-registry"
	// Pause: a pause (PausePolicy) is kept in the engine with the other
	// policies, so every worker on every machine stops taking the paused
	// tasks within PauseRefresh of it being set, and starts again as soon
	// after a resume. Emulated: the engine keeps it, but workers see it
	// later (Support.Fallback says how much); Unsupported: the backend
	// keeps no policies, and Pause is refused.
	Pause Feature = "pause"
	// BulkActions: the queued messages and the dead letters can be paged
	// through whole with a cursor (Pager), so that the bulk actions by
	// filter (requeue, cancel, purge) reach every match, one short page
	// and one short batch at a time. Emulated: the portable layer sees
	// only the window that Peek and ListDead return (at most BulkWindow;
	// Support.Fallback says how much), and a run may leave matches beyond
	// it.
	BulkActions Feature = "bulk-actions"
	// Schedules: recurring schedules (SchedulePolicy) are kept in the
	// engine with the other policies, and schedulers claim each slot with
	// an atomic swap (PolicySwapper), so a slot's task is pushed once
	// however many workers and schedulers run. Emulated: the engine keeps
	// them but has no atomic swap (Support.Fallback says what can then
	// happen); Unsupported: the backend keeps no policies, and schedules
	// are refused.
	Schedules Feature = "schedules"
	// ResultHistory: a window of result records can be added up (the
	// dashboard's history panels): Native in the engine
	// (ResultAggregator), Emulated by a paged scan the portable layer adds
	// up (ResultLister; resulthistory.go says what each costs).
	ResultHistory Feature = "result-history"
	// Groups: tasks pushed with a group are counted by state (GroupStore)
	// in the same transaction or script as their pushes and settlements,
	// so the counts are exact and a group's end is decided by one
	// settlement. Emulated: counted from the result records' store, with
	// the delay Support.Fallback names.
	Groups Feature = "groups"
	// Dependencies: a task can be held, unclaimable, until the tasks it
	// names have succeeded or the groups it names have ended (HeldStore,
	// held.go): dependencies and a group's step at its end. Unsupported:
	// a push with After, AfterGroups or a group step is refused.
	Dependencies Feature = "dependencies"
)

// PauseRefresh is how often a worker rereads the queue's pauses: the
// longest a Native backend's workers keep taking paused tasks.
const PauseRefresh = 2 * time.Second

// AllFeatures lists every feature in the order tables show them.
var AllFeatures = []Feature{
	DelayedRequeue, DelayedPush, LeaseRenewal, DeadLetter, Priority, Peek,
	ExactCount, Dedup, InPlaceUpdate, ConcurrencyLimit, RateLimit, TransactionalPush,
	Results, Cancel, WorkerRegistry, Pause, BulkActions, Schedules, ResultHistory, Groups,
	Dependencies,
}

// Support is a driver's declaration for one feature.
type Support struct {
	Level Level
	// Fallback says, for a user, what happens instead when Level is not
	// Native, for example "Requeue(delay) redelivers immediately". The
	// portable layer prints it in its one-time warning.
	Fallback string
}

// Capabilities is what a driver declares about itself. The conformance suite
// checks every declaration against the engine, and the capability matrix in
// the documentation is generated from it.
type Capabilities struct {
	// Features maps each feature to its support. A missing feature is
	// Unsupported.
	Features map[Feature]Support
	// MaxMessageBytes is the largest encoded message body the backend
	// accepts. Zero means no limit the portable layer needs to know about.
	MaxMessageBytes int
	// MaxVisibility is the longest visibility timeout (lease) one Receive or
	// Renew can ask for, and the longest delay of a requeue: the portable
	// layer shortens a longer requeue delay (a retry backoff, a snooze) to
	// it, with a one-time warning. Zero means no limit.
	MaxVisibility time.Duration
	// MaxPeek is the most messages one Peek returns. Zero means no limit.
	MaxPeek int
	// MaxReceiveBatch is the most messages one Receive returns. Zero means no
	// limit.
	MaxReceiveBatch int
	// MaxPushBatch is the most messages one Push call takes. The portable
	// layer splits larger batches. Zero means no limit.
	MaxPushBatch int
	// CompleteBatch is how many leases one Complete call settles together,
	// in one request or transaction. 1 declares that every lease costs a
	// request of its own: the portable layer then calls Complete for each
	// settlement at once, concurrently, rather than queueing it behind a
	// batch in flight (which would only add a round trip, and leave more
	// finished tasks unacknowledged if the process dies). Zero means no
	// limit: the portable layer batches as it sees fit.
	CompleteBatch int
	// SharedWithAI4SJobq is true for backends whose queues ai4s-jobq workers
	// may share: the portable layer then never rewrites a schema-v1 message
	// into v2 (for example to add an attempt history), because ai4s-jobq
	// reads only v1.
	SharedWithAI4SJobq bool
	// PushConcurrency is how many push batches are worth sending at once.
	// 1 declares a single writer (batches in flight only queue for its
	// lock); zero means no hint, and callers choose.
	PushConcurrency int
}

// Level returns the declared level of f.
func (c Capabilities) Level(f Feature) Level { return c.Features[f].Level }

// NativeExcept returns a feature map in which every feature is Native except
// those in overrides, which keep their given support. Backends that provide
// almost everything declare themselves with it, so that a feature added to
// AllFeatures later is not silently missing from their declaration.
func NativeExcept(overrides map[Feature]Support) map[Feature]Support {
	m := make(map[Feature]Support, len(AllFeatures))
	for _, f := range AllFeatures {
		m[f] = Support{Level: Native}
	}
	for f, s := range overrides {
		m[f] = s
	}
	return m
}

// portableFallbacks are the features the portable layer itself can do
// without when a driver declares them Unsupported, because ignoring the
// request is safe; each says what happens instead. Calls that need any other
// unsupported feature fail with Unimplemented, because doing nothing would be
// a silent change of meaning.
var portableFallbacks = map[Feature]string{
	Priority:      "priority is ignored; tasks are received in roughly push order",
	ExactCount:    "counts are approximate",
	Dedup:         "a task whose ID is already queued is queued again (at-least-once delivery still holds)",
	InPlaceUpdate: "the retry budget is counted from the delivery count instead of a decremented num_retries, so a lease that expires also uses up a retry",
}

// PortableFallback says what the portable layer does instead when a driver
// declares f Unsupported and ignoring the request is safe. ok is false for
// the features without such a fallback: the portable layer then fails calls
// that need f with Unimplemented.
func PortableFallback(f Feature) (instead string, ok bool) {
	instead, ok = portableFallbacks[f]
	return instead, ok
}
