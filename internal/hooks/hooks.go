// Package hooks is how the root package jobq lends its worker-side and
// codec entry points to the packages of this module that need them (worker,
// cli, wire and the conformance suite) without making them public API.
//
// Package jobq sets every variable in its init; this package cannot import
// jobq, so values of jobq's types travel as any: q is a *jobq.Queue, e a
// *jobq.Envelope, w a *jobq.WorkerInfo, a a jobq.Attempt and t a
// *jobq.Task. Passing anything else panics.
package hooks

import (
	"context"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/recmarks"
	"github.com/jobq/jobq/stash"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// The task codec (package wire is its public face).
var (
	// MarshalTask validates t and returns its message body.
	MarshalTask func(t any) ([]byte, error)
	// UnmarshalTask decodes a message body into a *jobq.Task.
	UnmarshalTask func(body []byte) (any, error)
	// TaskID returns the deterministic ID of t.
	TaskID func(t any) (string, error)
)

// The worker's side of a queue: what package worker and the CLI need that
// a producer or an inspector does not.
var (
	// AnnounceWorker records (or refreshes) a worker in the queue's
	// registry.
	AnnounceWorker func(ctx context.Context, q, w any) error
	// WithdrawWorker marks a worker stopped in the queue's registry.
	WithdrawWorker func(ctx context.Context, q, w any) error
	// CancelRequested returns which of ids have a cancel requested.
	CancelRequested func(ctx context.Context, q any, ids []string) ([]string, error)
	// CancelRequestedOf is CancelRequested for the tasks of messages
	// pushed at pushed (zero when unknown), in the order of ids: a
	// request older than its message is ignored where Cancel is Native.
	CancelRequestedOf func(ctx context.Context, q any, ids []string, pushed []time.Time) ([]string, error)
	// BaseAttributes are the attributes every metric point of q carries.
	BaseAttributes func(q any) []attribute.KeyValue
	// MaybeApplied reports whether err is a *jobq.Error with MaybeApplied
	// set: the call may have taken effect although it failed.
	MaybeApplied func(err error) bool
	// MarkMaybeApplied returns a copy of err, a *jobq.Error, with
	// MaybeApplied set.
	MarkMaybeApplied func(err error) error
	// GoneTasks returns those of ids that are neither queued, running nor
	// held in q and have no record of an end (gone: cleared, their record
	// expired, or not pushed yet; with marks, also those whose record is
	// the one marks saw before the push), or, without marks, whose record
	// was written before since (early). ok is false when the backend
	// cannot look tasks up by ID.
	GoneTasks func(ctx context.Context, q any, ids []string, since time.Time, marks recmarks.Set) (gone, early []string, ok bool, err error)
	// MarkRecords adds to marks the records that the IDs of tasks (a
	// []*jobq.Task, about to be pushed) have in q now, reading them in
	// batches.
	MarkRecords func(ctx context.Context, q any, tasks any, marks recmarks.Set) error
	// MarkedWait returns the jobq.WaitOptions (as any) of a wait for tasks
	// pushed after marks were taken: it counts a task's end when its
	// record differs from the one marks saw, whatever the workers' clocks;
	// after bounds only the dead letters it reads.
	MarkedWait func(after time.Time, marks recmarks.Set) any
	// MeterProvider is the provider of q's metrics.
	MeterProvider func(q any) metric.MeterProvider
	// TracerProvider is the provider of q's spans.
	TracerProvider func(q any) trace.TracerProvider
	// URL is q's URL with credentials redacted; empty for a queue made by
	// New.
	URL func(q any) string
	// Scheme is the URL scheme that chose q's backend; empty for a queue
	// made by New.
	Scheme func(q any) string
	// Driver is the driver under q, for the conformance suite's checks
	// that a declared feature's optional interface is implemented.
	Driver func(q any) driver.Driver
	// FireSchedules is Admin.FireSchedules with a fault hook (nil: none)
	// called at each stage of a firing ("decided", "claimed", "pushed"):
	// an error it returns stops that schedule's firing there, as a crash
	// would, and one that blocks holds the scheduler there. It also
	// returns the earliest next slot of the schedules it looked at (zero
	// when none): a worker's background loop sleeps until then when it
	// has nothing else to watch.
	FireSchedules func(ctx context.Context, q any, now time.Time, fault func(stage, name string, slot time.Time) error) ([]driver.ScheduleRun, time.Time, error)
	// SweepHeld is Admin.SweepHeld that also returns how many held tasks
	// it read.
	SweepHeld func(ctx context.Context, q any) (released, cancelled []string, held int, err error)
	// HeldTask returns the held task with ID id (dependencies and group
	// steps), nil when none is held under it or the backend holds none,
	// for the CLI's show and result.
	HeldTask func(ctx context.Context, q any, id string) (*driver.HeldMessage, error)
	// Stash is q's configured stash (where pushes put large payloads and
	// workers their checkpoints); nil when it has none.
	Stash func(q any) stash.Store
	// Retention is how long q keeps result records (its retention policy).
	Retention func(q any) time.Duration
)

// The worker's side of a received message.
var (
	// RecordAttempt adds a (a jobq.Attempt, or a *jobq.Attempt that e
	// keeps, and its caller no longer changes) to the attempt history e's
	// next settlement writes.
	RecordAttempt func(e, a any)
	// TaskContext is e.Context(parent) with a cancel function that takes
	// the cause.
	TaskContext func(parent context.Context, e any) (context.Context, context.CancelCauseFunc)
	// LostDeliveries are the deliveries of e whose worker vanished without
	// settling.
	LostDeliveries func(e any) []int
	// StartSpan starts the span of processing e.
	StartSpan func(ctx context.Context, e any) (context.Context, trace.Span)
	// EndSpan ends the span StartSpan started, if any.
	EndSpan func(e any)
	// ProducerSpanContext is the span context of the push that queued e.
	ProducerSpanContext func(e any) trace.SpanContext
	// EnvelopeCancelRequested reports whether a cancel was requested for
	// e's task.
	EnvelopeCancelRequested func(ctx context.Context, e any) (bool, error)
)

// The parsers of the CLI's policy and backoff syntax.
var (
	// ParsePolicy parses a policy as the CLI writes it (see docs/policies.md).
	ParsePolicy func(kind, spec string) (driver.Policy, error)
	// ParseBackoff reads a retry backoff written "BASE,CAP" or "BASE"; the
	// result is a jobq.Backoff.
	ParseBackoff func(s string) (any, error)
)

// What the tests change of a queue's behaviour.
var (
	// DeadLookTest makes the waits of q that start from now on look at the
	// dead letters first after after and then every every (rather than
	// 10 s), read page letters a page, and call look, when not nil, as
	// each look begins, with its number from 1.
	DeadLookTest func(q any, after, every time.Duration, page int, look func(n int))
)
