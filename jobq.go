// Package jobq is a portable work queue: producers push tasks, any number of
// workers on any machines receive, run and settle them, and the queue lives on
// an engine the user already runs — Postgres, Redis, Azure Storage Queue,
// Azure Service Bus, or an embedded SQLite file.
//
// A Queue is built in one of two ways:
//
//   - New(d, Options{}) from a driver the program built, usually with a
//     backend's New function from a client it already holds (a pgx pool, a
//     go-redis client, an Azure client);
//   - Open(ctx, url) from a URL whose scheme picks the backend. Backends
//     register their schemes on the default URLMux when imported (import
//     github.com/jobq/jobq/backends/all for every one); a program or test can
//     keep its own URLMux instead.
//
// The Queue type is what users hold. Push and PushBatch queue tasks, PushTx
// queues them inside the application's own database transaction, and
// Receive/ReceiveBatch claim them as Envelopes, which are settled with
// Complete, Fail, Requeue or DeadLetter (package worker runs that loop). The
// Queue validates and encodes tasks in ai4s-jobq's wire format, applies each
// backend's declared fallbacks for features it cannot provide natively
// (warning once per queue and feature), wraps every error in an *Error with a
// Code, and batches settlements.
package jobq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/stash"
)

// defaultVisibility is the lease a Receive takes when ReceiveOptions does not
// say: ten minutes, as ai4s-jobq's worker.
const defaultVisibility = 10 * time.Minute

// WaitForever, as ReceiveOptions.Wait, makes Receive block until a message
// arrives or the context ends.
const WaitForever time.Duration = -1

// Options are the settings of New and Open. The zero value is valid: every
// field's comment says its default.
type Options struct {
	// Logger receives warnings (such as the one-time degradation warnings)
	// and debug logs. Defaults to slog.Default().
	Logger *slog.Logger
	// StashURL is where tasks too large for the backend's messages are
	// kept (gs://bucket/prefix or file:///dir; see docs/stash.md). With
	// Open it overrides the queue URL's stash= parameter. Defaults to no
	// stash: pushing an oversized task then fails with TooLarge.
	StashURL string
	// PushRetry is how long a push keeps retrying tasks the backend could
	// not reach (an Unavailable error: a refused or reset connection, a
	// server restarting or failing over), pausing 100 ms at first and up to
	// 5 s between attempts; the push's context bounds it too. Defaults to
	// 1 minute; negative turns retries off, so that the
	// first Unavailable error is returned. An attempt whose reply was lost
	// may have stored its tasks: on backends that dedup task IDs the retry
	// reports them as duplicates, on the others it may store them twice,
	// as at-least-once delivery allows.
	PushRetry time.Duration
	// ConnectionString is passed to the backend as
	// driver.OpenOptions.ConnectionString: the Azure backends use it before
	// their environment variables. Default "": the backend's own lookup.
	ConnectionString string
	// StashMux opens the stash stores (StashURL, and the stores received
	// tasks point at). Default stash.DefaultURLMux(); a program with its
	// own credentials registers configured openers on its own mux.
	StashMux *stash.URLMux
	// TracerProvider makes the queue's spans (push, receive, process,
	// settle; docs/observability.md). Defaults to otel.GetTracerProvider():
	// a no-op until the program installs one.
	TracerProvider trace.TracerProvider
	// MeterProvider makes the queue's metrics, and the worker's. Defaults
	// to otel.GetMeterProvider(): a no-op until the program installs one.
	MeterProvider metric.MeterProvider
	// ReadOnly opens the queue for reading only (Size, Stats, Peek, dead
	// letters, results): the backend creates and changes nothing to open
	// it, so that it opens where writes are impossible (a read-only file or
	// database role, a full disk), and a queue that does not exist is a
	// NotFound error. Writes through the queue may fail. Passed to the
	// backend as driver.OpenOptions.ReadOnly; Open only.
	ReadOnly bool
	// Concurrency is how many tasks the program will run at once from
	// this queue (a worker's Concurrency), passed to the backend as
	// driver.OpenOptions.Concurrency; Open only. Default 0: unknown. A
	// backend with a pool of server connections sizes it from this where
	// the URL does not: Postgres holds up to Concurrency + 1 connections, at
	// least 2 and at most 10 (docs/backends/postgres.md), so that a fleet
	// of narrow workers holds no more connections than it uses. The pool
	// is sized at Open: a worker.Worker built later does not change it.
	Concurrency int
}

func (o Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.Default()
	}
	return o.Logger
}

// Queue is one open queue. Its methods may be called from many goroutines.
type Queue struct {
	drv    driver.Driver
	caps   driver.Capabilities
	scheme string
	url    string // redacted
	name   string
	log    *slog.Logger
	warned warnOnce
	// recordsRefused logs, once, that the record store refused the
	// credentials and settlements go on without records (presettle).
	recordsRefused sync.Once
	// pushRetry is Options.PushRetry with its default applied.
	pushRetry time.Duration

	closed    atomic.Bool
	closeOnce sync.Once
	closing   chan struct{}
	settle    *settler
	stash     *stashes
	// results is the driver's result store; nil when the backend keeps no
	// results (or declares Results unsupported).
	results driver.ResultStore
	// groups is the driver's group store; nil when the backend counts no
	// groups (or declares Groups unsupported).
	groups   driver.GroupStore
	policies policyCache
	tel      *telemetry
	// deadTest is what the tests change of waits' looks at the dead
	// letters (hooks.DeadLookTest); nil in use.
	deadTest atomic.Pointer[deadLookTest]
	// deadSweep is where sweeps are in the dead letters (sweepdead.go).
	deadSweep deadSweep
}

// Open opens the queue named by rawURL with default options, on the default
// mux (see URLMux.Open). The scheme picks the backend; an unknown scheme or
// query parameter is an InvalidArgument error that names it.
func Open(ctx context.Context, rawURL string) (*Queue, error) {
	return defaultMux.Open(ctx, rawURL, Options{})
}

// OpenWithOptions is Open with options.
func OpenWithOptions(ctx context.Context, rawURL string, opts Options) (*Queue, error) {
	return defaultMux.Open(ctx, rawURL, opts)
}

// New makes a Queue from a driver the caller built, such as one a backend's
// New function returns from a client the program already holds. The Queue
// owns d: its Close closes d (which, for a driver built from a caller's
// client, leaves that client open). A nil driver is an InvalidArgument
// error.
func New(d driver.Driver, opts Options) (*Queue, error) {
	if d == nil {
		return nil, errorf(errcode.InvalidArgument, "new", "the driver is nil: pass one a backend's New function returned")
	}
	stashes, err := openStashes(context.Background(), opts.StashMux, opts.StashURL, "")
	if err != nil {
		return nil, err
	}
	name := "default"
	if n, ok := d.(driver.Namer); ok {
		name = n.QueueName()
	}
	log := opts.logger().With("queue", name)
	return newQueue(d, opts, queueInfo{name: name, log: log, stash: stashes}), nil
}

// queueInfo is what New and URLMux.Open know of a queue besides its driver.
type queueInfo struct {
	scheme, url, name string
	log               *slog.Logger
	stash             *stashes
}

func newQueue(drv driver.Driver, opts Options, qi queueInfo) *Queue {
	q := &Queue{
		drv:       drv,
		caps:      drv.Capabilities(),
		scheme:    qi.scheme,
		url:       qi.url,
		name:      qi.name,
		log:       qi.log,
		closing:   make(chan struct{}),
		stash:     qi.stash,
		pushRetry: opts.PushRetry,
	}
	if q.pushRetry == 0 {
		q.pushRetry = defaultPushRetry
	}
	q.warned.seen = map[driver.Feature]bool{}
	if rs, ok := drv.(driver.ResultStore); ok && q.caps.Level(driver.Results) != driver.Unsupported {
		q.results = rs
	}
	if gs, ok := drv.(driver.GroupStore); ok && q.caps.Level(driver.Groups) != driver.Unsupported {
		q.groups = gs
	}
	q.policies.q = q
	q.settle = newSettler(q)
	q.tel = newTelemetry(q, opts)
	return q
}

// Name returns the queue's name: the driver's, or else the URL's queue=
// parameter or last path element.
func (q *Queue) Name() string { return q.name }

// Capabilities returns what the backend declares: a level per feature
// (driver.Priority, driver.Dedup, ...) and its limits. Most programs never
// need it: the queue applies the declared fallbacks itself.
func (q *Queue) Capabilities() driver.Capabilities { return q.caps }

// wrap turns a driver error into an *Error with the driver's code.
func (q *Queue) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var je *Error
	if errors.As(err, &je) {
		return err
	}
	code := q.drv.ErrorCode(err)
	if code == errcode.Unknown {
		code = errcode.Of(err)
	}
	return &Error{Code: code, Op: op, Queue: q.url, Err: err}
}

// wrapWrite is wrap for a call that changes the queue (a dead letter
// requeued, a policy set): an error that leaves its outcome unknown (the
// request may have reached the engine, driver.AppliedOf) is marked
// MaybeApplied, so that the caller is not told the change was not made
// when it may have been.
func (q *Queue) wrapWrite(op string, err error) error {
	werr := q.wrap(op, err)
	if werr != nil && !maybeApplied(werr) && driver.AppliedOf(err, errcode.Of(werr)) == driver.MaybeApplied {
		return markMaybeApplied(werr)
	}
	return werr
}

// checkLive is checkOpen, then ctx: a call whose context has ended before
// it began sends nothing, so its error is ctx's without MaybeApplied.
func (q *Queue) checkLive(ctx context.Context, op string) error {
	if err := q.checkOpen(op); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return q.wrap(op, notSent(ctx))
	}
	return nil
}

func (q *Queue) checkOpen(op string) error {
	if q.closed.Load() {
		return &Error{Code: errcode.FailedPrecondition, Op: op, Queue: q.url, Msg: "queue is closed", Err: errClosed}
	}
	return nil
}

// PushResult reports what happened to one pushed task.
type PushResult struct {
	// ID is the task's ID (the deterministic one when the task had none).
	ID string
	// MessageID is the backend's identity of the stored message.
	MessageID string
	// Duplicate is true when the backend found the same task ID already
	// queued and stored nothing new.
	Duplicate bool
	// Resent is true when an attempt to store the task went unanswered (a
	// reset connection, a lost reply) and the task was sent again: it is
	// stored, but on a backend that does not dedup task IDs (the Dedup
	// feature) the queue may hold it twice, and on one that does,
	// Duplicate may stand for the copy the unanswered attempt stored.
	Resent bool
	// Position is how many ready tasks were ahead of this one when it was
	// pushed, counted in push order (tasks of a lower priority among them
	// do not delay it where priority is native): only with
	// PushOptions.Position, on backends whose counts are exact, for a task
	// that is neither delayed nor a duplicate; -1 otherwise.
	Position int64
	// Skipped is true when PushOptions.SkipSucceeded left the task out,
	// as it had succeeded already: nothing was stored.
	Skipped bool
}

// Push queues one task. When t.ID is empty, Push sets it to the task's
// deterministic ID. It is PushBatch of one task with default options, with
// the task's error unwrapped from the *BatchError: an *Error whose
// MaybeApplied says whether the task may have been stored all the same.
func (q *Queue) Push(ctx context.Context, t *Task) (PushResult, error) {
	res, err := q.pushBatch(ctx, []*Task{t}, PushOptions{})
	if err != nil {
		var be *BatchError
		if errors.As(err, &be) && len(be.Errs) == 1 {
			err = be.Errs[0]
		}
		return PushResult{}, err
	}
	return res[0], nil
}

// BatchError is returned by PushBatch when not every task is known to be
// stored. Errs has one entry per task: nil where that task was stored;
// otherwise an error which, as an *Error, has MaybeApplied set when the
// task's outcome is unknown (an attempt to store it went unanswered, so it
// may be queued, perhaps twice) and clear when the task was not stored.
type BatchError struct {
	Errs []error
}

// Error implements error.
func (e *BatchError) Error() string {
	failed, unknown, first := 0, 0, error(nil)
	for _, err := range e.Errs {
		if err == nil {
			continue
		}
		if first == nil {
			first = err
		}
		if maybeApplied(err) {
			unknown++
		} else {
			failed++
		}
	}
	if unknown == 0 {
		return fmt.Sprintf("jobq: %d of %d tasks not stored; first error: %v", failed, len(e.Errs), first)
	}
	return fmt.Sprintf("jobq: %d of %d tasks may have been stored (outcome unknown) and %d were not stored; first error: %v",
		unknown, len(e.Errs), failed, first)
}

// markMaybeApplied returns a copy of err, an error of Queue.wrap, that
// says the operation may have taken effect.
func markMaybeApplied(err error) error {
	var je *Error
	if !errors.As(err, &je) {
		return &Error{Code: errcode.Of(err), Err: err, MaybeApplied: true}
	}
	c := *je
	c.MaybeApplied = true
	return &c
}

// maybeApplied reports whether err is an *Error with MaybeApplied set.
func maybeApplied(err error) bool {
	var je *Error
	return errors.As(err, &je) && je.MaybeApplied
}

// Unwrap returns the per-task errors, so errors.Is and errors.As see them.
func (e *BatchError) Unwrap() []error { return e.Errs }

// PushBatch queues tasks, splitting them into as many backend calls as the
// backend's batch limit needs. Every task is validated and encoded before
// anything is sent, so an invalid task stores nothing. If the backend fails
// part-way, the results of the stored tasks (a prefix of tasks) are
// returned with a *BatchError, which tells the tasks that were not stored
// from those whose outcome is unknown. Delivery is at least once: a task
// sent again after an unanswered attempt is stored but may be stored
// twice (PushResult.Resent). Stash objects the push wrote for tasks that
// were certainly not stored are deleted; after an unknown outcome they are
// kept.
// With opts.WaitForRoom, a refusal by a max-depth policy is retried until
// the batch fits (see PushOptions).
func (q *Queue) PushBatch(ctx context.Context, tasks []*Task, opts PushOptions) ([]PushResult, error) {
	return q.waitForRoom(ctx, opts, func() ([]PushResult, error) { return q.pushBatch(ctx, tasks, opts) })
}

// PushTx queues tasks inside the application's own transaction tx, so that
// they are queued if and only if it commits: on Postgres, tx is the pgx.Tx of
// a transaction on the database that holds the queue. The tasks are
// validated and encoded exactly as PushBatch does them (same checks, same
// errors, same deterministic IDs) and stored in one backend call, which is
// not retried (a failed statement has aborted the transaction); a task
// stashed for its size (Options.StashURL) leaves its stash object behind if
// tx rolls back. opts are PushBatch's. A backend that cannot join a transaction (see the
// transactional-push feature) fails with Unimplemented; a tx of the wrong
// type with InvalidArgument.
func (q *Queue) PushTx(ctx context.Context, tx any, tasks []*Task, opts PushOptions) ([]PushResult, error) {
	const op = "push-tx"
	if err := q.checkOpen(op); err != nil {
		return nil, err
	}
	txp, ok := q.drv.(driver.TxPusher)
	if !ok {
		return nil, &Error{Code: errcode.Unimplemented, Op: op, Queue: q.url,
			Msg: "backend " + q.backend() + " cannot push inside an application's transaction: push after the commit (run `jobq backends` to see which backends can)"}
	}
	if tx == nil {
		return nil, errorf(errcode.InvalidArgument, op, "the transaction is nil: pass the one your writes use")
	}
	if opts.UniqueFor != 0 || opts.SkipSucceeded {
		return nil, errorf(errcode.InvalidArgument, op, "PushOptions.UniqueFor and SkipSucceeded are not available inside a transaction: push with PushBatch after the commit")
	}
	if hasDeps(tasks) {
		return nil, errorf(errcode.InvalidArgument, op, "a task with After or AfterGroups cannot be pushed inside a transaction: push it with PushBatch after the commit")
	}
	return q.waitForRoom(ctx, opts, func() (out []PushResult, err error) {
		ctx, span := q.startPush(ctx, len(tasks))
		defer func() { q.endPush(ctx, span, out, err) }()
		msgs, created, err := q.prepareAll(ctx, tasks)
		if err != nil || len(msgs) == 0 {
			return nil, err
		}
		stampTrace(ctx, msgs)
		rs, err := txp.PushTx(ctx, tx, msgs)
		if err != nil {
			werr := q.wrap(op, err)
			if pushRefused(werr) {
				q.dropRefused(ctx, created...)
			}
			return nil, werr
		}
		out = make([]PushResult, len(rs))
		for i, r := range rs {
			out[i] = PushResult{ID: msgs[i].ID, MessageID: r.MessageID, Duplicate: r.Duplicate}
		}
		positions(out, msgs, q.readyAhead(ctx, PushOptions{}))
		return out, nil
	})
}

// backend names the backend in messages.
func (q *Queue) backend() string {
	if q.scheme == "" {
		return "of this queue"
	}
	return q.scheme
}

// prepareAll validates and encodes tasks for a push; an invalid task fails
// the whole push before anything is sent, and deletes the stash objects
// written for the tasks before it. created has, by index, the stash
// objects this push wrote (nil when it wrote none), for the caller to
// delete should the backend refuse their messages.
func (q *Queue) prepareAll(ctx context.Context, tasks []*Task) (msgs []*driver.Message, created []*StashRef, err error) {
	msgs = make([]*driver.Message, len(tasks))
	defer func() {
		if err != nil {
			q.dropRefused(ctx, created...)
			msgs, created = nil, nil
		}
	}()
	for i, t := range tasks {
		m, obj, err := q.prepare(ctx, t)
		if err != nil {
			if len(tasks) > 1 {
				err = fmt.Errorf("task %d of %d: %w", i+1, len(tasks), err)
			}
			return msgs, created, err
		}
		msgs[i] = m
		if obj != nil {
			if created == nil {
				created = make([]*StashRef, len(tasks))
			}
			created[i] = obj
		}
	}
	// Deterministic IDs make duplicate detection useful; say once where the
	// backend cannot provide it.
	if err := q.degrade("push", driver.Dedup); err != nil {
		return msgs, created, err
	}
	return msgs, created, nil
}

func (q *Queue) pushBatch(ctx context.Context, tasks []*Task, opts PushOptions) (results []PushResult, err error) {
	const op = "push"
	if err := q.checkOpen(op); err != nil {
		return nil, err
	}
	ctx, span := q.startPush(ctx, len(tasks))
	defer func() { q.endPush(ctx, span, results, err) }()
	if hasDeps(tasks) {
		return q.pushDeps(ctx, tasks, opts, driver.RequireSucceeded)
	}
	ended, err := q.checkUniqueFor(ctx, op, opts)
	if err != nil {
		return nil, err
	}
	msgs, created, err := q.prepareAll(ctx, tasks)
	if err != nil {
		return nil, err
	}
	if ended != nil {
		return q.pushUnique(ctx, ended, msgs, created, opts)
	}
	return q.pushMsgs(ctx, msgs, created, opts)
}

// pushMsgs stores msgs, prepared by prepareAll, in chunks of the backend's
// batch limit: the results of the stored prefix, with a *BatchError (one
// entry per message) when not every message is known to be stored.
func (q *Queue) pushMsgs(ctx context.Context, msgs []*driver.Message, created []*StashRef, opts PushOptions) (results []PushResult, err error) {
	const op = "push"
	stampTrace(ctx, msgs)
	ahead := q.readyAhead(ctx, opts)
	results = make([]PushResult, len(msgs))
	defer func() { positions(results, msgs, ahead) }()
	chunk := len(msgs)
	if q.caps.MaxPushBatch > 0 && chunk > q.caps.MaxPushBatch {
		chunk = q.caps.MaxPushBatch
	}
	for start := 0; start < len(msgs); start += chunk {
		end := min(start+chunk, len(msgs))
		rs, unsure, err := q.pushChunk(ctx, msgs[start:end])
		for i, r := range rs {
			results[start+i] = PushResult{ID: msgs[start+i].ID, MessageID: r.MessageID, Duplicate: r.Duplicate, Resent: r.Resent}
		}
		if err != nil {
			errs := make([]error, len(msgs))
			werr := q.wrap(op, err)
			sent := werr
			if unsure {
				sent = markMaybeApplied(werr)
			}
			for i := start + len(rs); i < end; i++ {
				errs[i] = sent
			}
			// The chunks after this one were never sent.
			for i := end; i < len(msgs); i++ {
				errs[i] = werr
			}
			if created != nil {
				if !unsure && pushRefused(werr) {
					q.dropRefused(ctx, created[start+len(rs):end]...)
				}
				q.dropRefused(ctx, created[end:]...)
			}
			return results[:start+len(rs)], &BatchError{Errs: errs}
		}
	}
	return results, nil
}

// prepare validates and encodes one task, applying capability fallbacks.
// stashed is the stash object it wrote for a task too large for a
// message, nil when it wrote none.
func (q *Queue) prepare(ctx context.Context, t *Task) (m *driver.Message, stashed *StashRef, err error) {
	const op = "push"
	if t == nil {
		return nil, nil, errorf(errcode.InvalidArgument, op, "task is nil")
	}
	if t.Priority != 0 {
		if err := q.degrade(op, driver.Priority); err != nil {
			return nil, nil, err
		}
	}
	if !t.NotBefore.IsZero() && time.Until(t.NotBefore) > 0 {
		if err := q.degrade(op, driver.DelayedPush); err != nil {
			return nil, nil, err
		}
	}
	if err := q.checkKeys(op, t); err != nil {
		return nil, nil, err
	}
	if t.Group != "" {
		if err := q.checkGroup(op, t.Group); err != nil {
			return nil, nil, err
		}
	}
	body, err := q.marshal(t)
	if err != nil {
		return nil, nil, err
	}
	if q.caps.MaxMessageBytes > 0 && len(body) > q.caps.MaxMessageBytes {
		body, stashed, err = q.oversized(ctx, t, body)
		if err != nil {
			return nil, nil, err
		}
		q.warnV2([]string{"stash"})
	}
	return &driver.Message{
		ID:             t.ID,
		Body:           body,
		Priority:       t.Priority,
		NotBefore:      t.NotBefore,
		ConcurrencyKey: t.ConcurrencyKey,
		RateLimitKey:   t.RateLimitKey,
		Group:          t.Group,
	}, stashed, nil
}

// ReceiveOptions are the settings of Receive and ReceiveBatch. The zero value
// takes a ten-minute lease and does not wait.
type ReceiveOptions struct {
	// Visibility is the lease: how long the message stays hidden from other
	// receivers unless renewed. Defaults to 10 minutes,
	// or the backend's MaxVisibility when that is shorter.
	Visibility time.Duration
	// Wait is how long to wait for a message when none is visible. Zero
	// returns at once; WaitForever waits until the context ends; any other
	// negative wait is refused (InvalidArgument).
	Wait time.Duration
}

// ErrEmpty is returned by Receive when no message arrived within
// ReceiveOptions.Wait. It has code NotFound.
var ErrEmpty = &Error{Code: errcode.NotFound, Op: "receive", Msg: "no message available"}

// Receive claims one message. See ReceiveBatch.
func (q *Queue) Receive(ctx context.Context, opts ReceiveOptions) (*Envelope, error) {
	envs, err := q.ReceiveBatch(ctx, 1, opts)
	if err != nil {
		return nil, err
	}
	if len(envs) == 0 {
		return nil, ErrEmpty
	}
	return envs[0], nil
}

// ReceiveBatch claims up to limit messages, leasing each for opts.Visibility.
// It returns an empty slice when nothing arrived within opts.Wait. Messages
// that cannot be decoded are dead-lettered as poison (with the decode error
// as the reason) and never returned. An error with MaybeApplied says the
// claim's answer was lost: messages may have been claimed all the same,
// and are delivered again when their lease expires.
func (q *Queue) ReceiveBatch(ctx context.Context, limit int, opts ReceiveOptions) ([]*Envelope, error) {
	const op = "receive"
	limit, vis, err := q.receiveSettings(op, limit, opts.Visibility)
	if err != nil {
		return nil, err
	}
	if opts.Wait < 0 && opts.Wait != WaitForever {
		// A wait computed from a deadline that has passed, say: it would
		// otherwise wait forever.
		return nil, errorf(errcode.InvalidArgument, op, "wait is %v; use 0 to return at once, a positive wait, or WaitForever", opts.Wait)
	}
	if err := q.checkLive(ctx, op); err != nil {
		return nil, err
	}
	w := newReceiveWait(opts.Wait)
	for {
		began := time.Now()
		recs, err := q.drv.Receive(ctx, driver.ReceiveParams{Max: limit, Visibility: vis, Wait: w.driverWait()})
		if err != nil {
			return nil, q.wrapWrite(op, err)
		}
		if envs := q.envelopes(ctx, recs, vis); len(envs) > 0 {
			q.receiveSpan(ctx, began, envs)
			q.observeWait(ctx, envs)
			return envs, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, q.wrap(op, err)
		}
		if w.over() {
			return nil, nil
		}
		if err := w.backOff(ctx); err != nil {
			return nil, q.wrap(op, err)
		}
	}
}

// receiveSettings checks a receive's limit and visibility, capping limit
// at the backend's largest batch and filling in the default lease.
func (q *Queue) receiveSettings(op string, limit int, vis time.Duration) (int, time.Duration, error) {
	if err := q.checkOpen(op); err != nil {
		return 0, 0, err
	}
	if limit < 1 {
		return 0, 0, errorf(errcode.InvalidArgument, op, "limit is %d; receive at least 1 message", limit)
	}
	if q.caps.MaxReceiveBatch > 0 && limit > q.caps.MaxReceiveBatch {
		limit = q.caps.MaxReceiveBatch
	}
	if vis == 0 {
		vis = defaultVisibility
		if mv := q.caps.MaxVisibility; mv > 0 && vis > mv {
			vis = mv // the default must not fail on a backend with shorter leases
		}
	}
	if err := q.checkVisibility(op, vis); err != nil {
		return 0, 0, err
	}
	return limit, vis, nil
}

// receiveWait paces the loop of ReceiveBatch through ReceiveOptions.Wait.
type receiveWait struct {
	wait     time.Duration // as given: < 0 forever, 0 not at all
	deadline time.Time     // when wait > 0
	pause    time.Duration // the last back-off
}

func newReceiveWait(wait time.Duration) receiveWait {
	w := receiveWait{wait: wait}
	if wait > 0 {
		w.deadline = time.Now().Add(wait)
	}
	return w
}

// driverWait is how long the next driver call may wait for a message.
func (w *receiveWait) driverWait() time.Duration {
	switch {
	case w.wait < 0:
		return 5 * time.Second
	case w.wait > 0:
		return max(time.Until(w.deadline), 0)
	}
	return 0
}

// over reports whether the wait has ended.
func (w *receiveWait) over() bool {
	return w.wait == 0 || (w.wait > 0 && !time.Now().Before(w.deadline))
}

// backOff sleeps before the next driver call. A driver may return early
// with nothing; the pause, doubling up to 100 ms, keeps one which always
// does from turning the loop into a busy poll.
func (w *receiveWait) backOff(ctx context.Context) error {
	w.pause = min(max(2*w.pause, time.Millisecond), 100*time.Millisecond)
	if w.wait > 0 {
		w.pause = min(w.pause, time.Until(w.deadline))
	}
	select {
	case <-time.After(w.pause):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (q *Queue) checkVisibility(op string, vis time.Duration) error {
	if vis < 0 {
		return errorf(errcode.InvalidArgument, op, "visibility timeout %v is negative", vis)
	}
	if q.caps.MaxVisibility > 0 && vis > q.caps.MaxVisibility {
		return errorf(errcode.InvalidArgument, op, "visibility timeout %v exceeds this backend's maximum of %v; use a shorter timeout (the worker's heartbeat renews it)", vis, q.caps.MaxVisibility)
	}
	return nil
}

// envelopes decodes received messages; poison ones are dead-lettered.
func (q *Queue) envelopes(ctx context.Context, recs []*driver.Received, vis time.Duration) []*Envelope {
	envs := make([]*Envelope, 0, len(recs))
	var poison []driver.DeadLetterParams
	for _, r := range recs {
		wire, err := unmarshalTask(r.Body)
		var task *Task
		if err == nil {
			task, err = q.resolve(ctx, wire)
			if err != nil && !stashPoison(err) {
				q.log.Warn("jobq: could not fetch a stashed task; the message will be redelivered when its lease expires", "message_id", r.Lease.MessageID, "error", err)
				continue
			}
		}
		if err != nil {
			reason := settleText("poison message: "+err.Error(), maxReasonBytes, false)
			poison = append(poison, driver.DeadLetterParams{Lease: r.Lease, Reason: reason, Detail: settleText(string(r.Body), 4096, false),
				Result: q.poisonRecord(ctx, r, wire, reason), Tally: tallyOf(r.Group, driver.GroupDeadLettered)})
			continue
		}
		if task.ID == "" {
			task.ID = r.ID
		}
		task.Group = r.Group
		task = q.withGroupEnv(ctx, task)
		envs = append(envs, newEnvelope(q, r, wire, task, vis))
	}
	if len(poison) > 0 {
		errs := q.deadLetter(ctx, poison, vis)
		for i, p := range poison {
			if errs != nil && errs[i] != nil {
				q.log.Error("jobq: could not dead-letter a poison message; it will be redelivered when its lease expires",
					"message_id", p.Lease.MessageID, "reason", p.Reason, "error", errs[i])
				continue
			}
			q.log.Warn("jobq: poison message dead-lettered", "message_id", p.Lease.MessageID, "reason", p.Reason)
			q.tel.dead.Add(ctx, 1, q.tel.add...)
		}
	}
	return envs
}

// PeekedTask is one message read by Peek.
type PeekedTask struct {
	MessageID string
	// Task is the decoded task; nil when the message cannot be decoded, in
	// which case DecodeErr says why.
	Task      *Task
	DecodeErr error
	// Body is the raw message body.
	Body          []byte
	DeliveryCount int
	EnqueuedAt    time.Time
	VisibleAt     time.Time
	InFlight      bool
	Priority      int
}

// Peek returns up to n messages without claiming them, in the order they
// would be received where the backend can tell. Nothing changes.
func (a *Admin) Peek(ctx context.Context, n int) ([]*PeekedTask, error) {
	q := a.q
	const op = "peek"
	if err := q.checkOpen(op); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, errorf(errcode.InvalidArgument, op, "peek count is %d; ask for at least 1", n)
	}
	if err := q.degrade(op, driver.Peek); err != nil {
		return nil, err
	}
	if q.caps.MaxPeek > 0 && n > q.caps.MaxPeek {
		n = q.caps.MaxPeek
	}
	ms, err := q.drv.Peek(ctx, n)
	if err != nil {
		return nil, q.wrap(op, err)
	}
	out := make([]*PeekedTask, len(ms))
	for i, m := range ms {
		p := &PeekedTask{MessageID: m.MessageID, Body: m.Body, DeliveryCount: m.DeliveryCount,
			EnqueuedAt: m.EnqueuedAt, VisibleAt: m.VisibleAt, InFlight: m.InFlight, Priority: m.Priority}
		p.Task, p.DecodeErr = unmarshalTask(m.Body)
		out[i] = p
	}
	return out, nil
}

// Stats counts the queue's messages. Counts are approximate on backends
// whose ExactCount feature is not native.
func (a *Admin) Stats(ctx context.Context) (driver.Stats, error) {
	q := a.q
	const op = "stats"
	if err := q.checkOpen(op); err != nil {
		return driver.Stats{}, err
	}
	if err := q.degrade(op, driver.ExactCount); err != nil {
		return driver.Stats{}, err
	}
	st, err := q.drv.Stats(ctx)
	return st, q.wrap(op, err)
}

// Size returns the number of messages in the queue that are not dead: ready,
// in flight and delayed.
func (a *Admin) Size(ctx context.Context) (int64, error) {
	st, err := a.Stats(ctx)
	if err != nil {
		// Stats names itself; the caller asked for the size.
		var e *Error
		if errors.As(err, &e) && e.Op == "stats" {
			c := *e
			c.Op = "size"
			err = &c
		}
		return 0, err
	}
	return st.Ready + st.InFlight + st.Delayed, nil
}

// Clear deletes every ready and delayed message (in-flight ones may go too;
// their holders then get LockLost) and returns how many it deleted, or -1
// when the backend cannot say. Dead letters are kept.
func (a *Admin) Clear(ctx context.Context) (int64, error) {
	q := a.q
	const op = "clear"
	if err := q.checkLive(ctx, op); err != nil {
		return 0, err
	}
	n, err := q.drv.Clear(ctx)
	return n, q.wrapWrite(op, err)
}

// As exposes the backend's own types (the escape hatch); each backend
// documents which it supports. It returns false for unsupported targets.
func (q *Queue) As(target any) bool { return q.drv.As(target) }

// Close waits for pending settlements, then releases the backend's
// resources. Operations after Close fail with code FailedPrecondition.
func (q *Queue) Close() error {
	err := error(errClosed)
	q.closeOnce.Do(func() {
		q.closed.Store(true)
		close(q.closing)
		q.settle.wait()
		q.tel.close()
		err = q.wrap("close", q.drv.Close())
		q.stash.close()
	})
	return err
}
