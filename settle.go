package jobq

import (
	"context"
	"sync"
	"time"

	"github.com/jobq/jobq/driver"
)

// settler batches Complete calls from many goroutines into few driver calls,
// as a database groups commits: one flusher, which never waits to fill a
// batch but takes whatever queued up while its previous call was in flight.
// An idle queue completes with one round trip of latency; a busy one sends
// batches as large as the load makes them, so the engine's work per message
// falls as the rate rises. (Several flushers split the same load into more,
// smaller calls: measured on Postgres, four flushers drained 15k tasks/s
// with three times the transactions one flusher needed for 18k/s.) Drivers
// whose settlements are one request per message run a batch's requests in
// parallel themselves.
type settler struct {
	q  *Queue
	ch chan completeReq
	wg sync.WaitGroup
	// leases and live are flush's buffers, reused from batch to batch
	// (only the loop goroutine flushes).
	leases []driver.Lease
	live   []completeReq
}

type completeReq struct {
	ctx   context.Context
	lease driver.Lease
	done  chan error
}

// settleMaxBatch bounds the leases of one driver call.
const settleMaxBatch = 512

// settleTimeout bounds one batch's driver call: one that hung would hold up
// every completion queued behind it, and callers may wait with a context
// that has no deadline (the worker does).
const settleTimeout = 30 * time.Second

func newSettler(q *Queue) *settler {
	s := &settler{q: q, ch: make(chan completeReq, settleMaxBatch)}
	s.wg.Add(1)
	go s.loop()
	return s
}

// complete queues one lease and waits for its result.
func (s *settler) complete(ctx context.Context, lease driver.Lease) error {
	req := completeReq{ctx: ctx, lease: lease, done: make(chan error, 1)}
	select {
	case s.ch <- req:
	case <-s.q.closing:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		// The flush may still happen; the caller only stops waiting.
		return ctx.Err()
	}
}

func (s *settler) loop() {
	defer s.wg.Done()
	batch := make([]completeReq, 0, settleMaxBatch)
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
		for len(batch) < settleMaxBatch {
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
	leases, live := s.leases[:0], s.live[:0]
	defer func() {
		// Keep the buffers, but not the requests' contexts and channels.
		clear(live)
		s.leases, s.live = leases[:0], live[:0]
	}()
	for _, r := range batch {
		if r.ctx.Err() != nil {
			r.done <- r.ctx.Err()
			continue
		}
		leases = append(leases, r.lease)
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
	errs := s.q.drv.Complete(ctx, leases)
	for i, r := range live {
		var err error
		if errs != nil {
			err = errs[i]
		}
		r.done <- err
	}
}

func (s *settler) wait() { s.wg.Wait() }
