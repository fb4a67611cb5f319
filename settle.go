package jobq

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// settler batches Complete calls from many goroutines into few driver calls,
// as a database groups commits: one flusher, which never waits to fill a
// batch but takes whatever queued up while its previous call was in flight.
// An idle queue completes with one round trip of latency; a busy one sends
// batches as large as the load makes them, so the engine's work per message
// falls as the rate rises. (Several flushers would split the same load
// into more, smaller calls: more transactions for a slower drain.) Drivers
// whose settlements are one request per message run a batch's requests in
// parallel themselves; those that declare CompleteBatch 1 skip the batching
// altogether: each completion is its own concurrent call, so none waits for
// a batch in flight.
type settler struct {
	q *Queue
	// max is the largest batch: settleMaxBatch, or the backend's
	// CompleteBatch when smaller; 1 means no batching.
	max int
	ch  chan completeReq
	// one is held for reading by each unbatched completion; shut, under
	// it, is set once Close has waited for them.
	one  sync.RWMutex
	shut bool
	wg   sync.WaitGroup
	// reqs and live are flush's buffers, reused from batch to batch (only
	// the loop goroutine flushes).
	reqs []driver.CompleteParams
	vis  []time.Duration
	live []completeReq
}

type completeReq struct {
	ctx   context.Context
	lease driver.Lease
	vis   time.Duration  // the lease's visibility, for renewals (leaseGuard)
	rec   *pendingRecord // stored with the completion; nil for none
	tally driver.GroupTally
	done  chan error
}

// settleMaxBatch bounds the leases of one driver call for backends without
// a limit of their own.
const settleMaxBatch = 512

// settleTimeout bounds one batch's driver call: one that hung would hold up
// every completion queued behind it, and callers may wait with a context
// that has no deadline (the worker does).
const settleTimeout = 30 * time.Second

func newSettler(q *Queue) *settler {
	s := &settler{q: q, max: settleMaxBatch}
	if n := q.caps.CompleteBatch; n > 0 && n < s.max {
		s.max = n
	}
	if s.max == 1 {
		return s
	}
	s.ch = make(chan completeReq, s.max)
	s.wg.Add(1)
	go s.loop()
	return s
}

// complete queues one lease, received with visibility vis, with the result
// record to store with it (nil for none) and its group tally, and waits for
// its result.
func (s *settler) complete(ctx context.Context, lease driver.Lease, vis time.Duration, rec *pendingRecord, tally driver.GroupTally) error {
	if s.max == 1 {
		return s.completeOne(ctx, lease, vis, rec, tally)
	}
	if ctx.Err() != nil {
		return notSent(ctx) // a send could win the select below
	}
	done := doneChans.Get().(chan error)
	req := completeReq{ctx: ctx, lease: lease, vis: vis, rec: rec, tally: tally, done: done}
	select {
	case s.ch <- req:
	case <-s.q.closing:
		doneChans.Put(done)
		return errClosed
	case <-ctx.Done():
		doneChans.Put(done)
		return notSent(ctx)
	}
	select {
	case err := <-done:
		doneChans.Put(done) // empty again: the flush sends once
		return err
	case <-ctx.Done():
		// The flush may still happen (so done is not reused); the caller
		// only stops waiting.
		return stoppedWaiting(ctx)
	}
}

// notSent is the error of a completion whose caller's context ended before
// it was sent: it was not applied.
func notSent(ctx context.Context) error {
	return &driver.Error{Code: errcode.Of(ctx.Err()), Err: ctx.Err(), Applied: driver.NotApplied}
}

// stoppedWaiting is the error of a completion whose caller's context ended
// after it was handed over: it may be applied all the same.
func stoppedWaiting(ctx context.Context) error {
	return &driver.Error{Code: errcode.Of(ctx.Err()), Err: ctx.Err(), Applied: driver.MaybeApplied,
		Msg: "stopped waiting for the completion (" + ctx.Err().Error() + "); it may still be applied"}
}

// doneChans are the channels on which batched completions wait for their
// flush, reused: a channel of errors is two allocations.
var doneChans = sync.Pool{New: func() any { return make(chan error, 1) }}

// completeOne settles one lease with a driver call of its own. As in a
// batch, the call runs without the caller's cancellation (bounded by
// settleTimeout): a caller that gives up only stops waiting.
func (s *settler) completeOne(ctx context.Context, lease driver.Lease, vis time.Duration, rec *pendingRecord, tally driver.GroupTally) error {
	if ctx.Err() != nil {
		return notSent(ctx) // as a batch skips it
	}
	// Close's wait takes the write lock: it waits for the calls in
	// flight, and later ones see the queue closing.
	s.one.RLock()
	closing := s.shut
	select {
	case <-s.q.closing:
		closing = true
	default:
	}
	if closing {
		s.one.RUnlock()
		return errClosed
	}
	done := make(chan error, 1)
	go func() {
		defer s.one.RUnlock()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		defer cancel()
		var err error
		if errs := s.q.completeWith(cctx, []driver.CompleteParams{{Lease: lease, Result: rec.record(), Tally: tally}}, []time.Duration{vis}); errs != nil {
			err = errs[0]
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return stoppedWaiting(ctx)
	}
}

func (s *settler) loop() {
	defer s.wg.Done()
	batch := make([]completeReq, 0, s.max)
	for {
		select {
		case req := <-s.ch:
			batch = append(batch[:0], req)
		case <-s.q.closing:
			// Flush what is still queued, then stop.
			for {
				select {
				case req := <-s.ch:
					s.flush([]completeReq{req})
				default:
					return
				}
			}
		}
	fill:
		for len(batch) < s.max {
			select {
			case req := <-s.ch:
				batch = append(batch, req)
			default:
				break fill
			}
		}
		s.flush(batch)
	}
}

func (s *settler) flush(batch []completeReq) {
	reqs, vis, live := s.reqs[:0], s.vis[:0], s.live[:0]
	defer func() {
		// Keep the buffers, but not the requests' contexts, channels and
		// records.
		clear(live)
		clear(reqs)
		s.reqs, s.vis, s.live = reqs[:0], vis[:0], live[:0]
	}()
	for _, r := range batch {
		if r.ctx.Err() != nil {
			r.done <- notSent(r.ctx)
			continue
		}
		// The record is encoded here, on the flusher's stack: see
		// pendingRecord.
		reqs = append(reqs, driver.CompleteParams{Lease: r.lease, Result: r.rec.record(), Tally: r.tally})
		vis = append(vis, r.vis)
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	// The callers' contexts may differ; the batch runs under the first live
	// one, without its cancellation, so one caller giving up does not fail
	// the others' completions.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(live[0].ctx), settleTimeout)
	defer cancel()
	errs := s.q.completeWith(ctx, reqs, vis)
	for i, r := range live {
		var err error
		if errs != nil {
			err = errs[i]
		}
		r.done <- err
	}
}

// wait waits for the flusher and for the unbatched completions in flight;
// call it after closing q.closing.
func (s *settler) wait() {
	s.wg.Wait()
	s.one.Lock()
	defer s.one.Unlock()
	s.shut = true
}

// completeWith completes reqs, each with its Result (see presettle); vis
// holds the leases' visibilities.
func (q *Queue) completeWith(ctx context.Context, reqs []driver.CompleteParams, vis []time.Duration) []error {
	if len(reqs) == 0 {
		return nil
	}
	if errs := q.presettle(ctx, "completed", len(reqs), func(i int) **driver.ResultRecord { return &reqs[i].Result },
		func(i int) *driver.Lease { return &reqs[i].Lease }, func(i int) time.Duration { return vis[i] }); errs != nil {
		return errs
	}
	return q.drv.Complete(ctx, reqs)
}

// deadLetter dead-letters reqs, each with its Result, as completeWith
// completes; vis is the visibility the leases were received with.
func (q *Queue) deadLetter(ctx context.Context, reqs []driver.DeadLetterParams, vis time.Duration) []error {
	if len(reqs) == 0 {
		return nil
	}
	if errs := q.presettle(ctx, "dead-lettered", len(reqs), func(i int) **driver.ResultRecord { return &reqs[i].Result },
		func(i int) *driver.Lease { return &reqs[i].Lease }, func(int) time.Duration { return vis }); errs != nil {
		return errs
	}
	return q.drv.DeadLetter(ctx, reqs)
}

// presettle does the portable part of a settlement batch of n messages
// whose records rec(i) and leases lease(i) point to (vis(i) is a lease's
// visibility). A driver that declares Results Native
// stores each record with its settlement (the driver contract); for one
// that keeps records in another store (Emulated), the batch's records are
// stored here first, in one call, and taken out of the params, so that a
// crash between the two duplicates a record rather than losing it. When
// they cannot be stored, nothing is settled: the error, naming done (what
// the settlement would have done), goes to every message. The exception is
// a store that refuses the credentials (PermissionDenied: queue rights
// only, which is all ai4s-jobq needs on Azure): the messages are settled
// without their records, with one error logged, rather than run again
// after every lease without end. While the records are written, a lease
// that comes near its end is renewed (leaseGuard), so that a slow write
// does not make a finished task run again.
func (q *Queue) presettle(ctx context.Context, done string, n int, rec func(i int) **driver.ResultRecord,
	lease func(i int) *driver.Lease, vis func(i int) time.Duration) []error {
	if q.results == nil || q.caps.Level(driver.Results) == driver.Native {
		return nil
	}
	var first []*driver.ResultRecord
	for i := range n {
		if r := rec(i); *r != nil {
			first = append(first, *r)
			*r = nil
		}
	}
	if len(first) == 0 {
		return nil
	}
	stop := q.guardLeases(ctx, n, lease, vis)
	err := q.results.PutResults(ctx, first)
	stop()
	if err != nil {
		if errcode.Of(err) == errcode.PermissionDenied {
			q.recordsRefused.Do(func() {
				q.log.Error("jobq: the credentials may not write the result records: tasks are settled without them, so result, wait and push --wait do not see them; "+
					"give the identity write rights on the record store (on Azure: \"Storage Blob Data Contributor\" on the results container, or a SAS for the blob service)", "error", err)
			})
			return nil
		}
		return driver.FanOut(fmt.Errorf("the result records could not be stored, so the tasks were not %s: %w", done, err), n)
	}
	return nil
}
