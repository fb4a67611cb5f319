package confsuite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// checkConcurrentReceivers: many receivers on several handles claim each
// of many messages exactly once.
func checkConcurrentReceivers(c *C) {
	const handles, perHandle, m = 2, 4, 60
	url := c.newQueue()
	qs := make([]*handle, handles)
	for i := range qs {
		qs[i] = c.openQueue(url)
	}
	ts := make([]*jobq.Task, m)
	for i := range ts {
		ts[i] = task(fmt.Sprintf("concurrent %d", i))
	}
	if _, err := qs[0].PushBatch(c.ctx(), ts, jobq.PushOptions{}); err != nil {
		c.Fatalf("push batch: %v", err)
	}
	var (
		mu    sync.Mutex
		got   = map[string]int{}
		total int
		errs  []error
		wg    sync.WaitGroup
	)
	deadline := time.Now().Add(2 * c.patience())
	vis := c.longVis(qs[0])
	for i := range handles * perHandle {
		q := qs[i%handles]
		wg.Go(func() {
			for time.Now().Before(deadline) {
				mu.Lock()
				done := total >= m || len(errs) > 0
				mu.Unlock()
				if done {
					return
				}
				envs, err := q.ReceiveBatch(c.ctx(), 1+i%3, jobq.ReceiveOptions{Visibility: vis, Wait: 200 * time.Millisecond})
				for _, e := range envs {
					if cerr := e.Complete(c.ctx()); cerr != nil && err == nil {
						err = cerr
					}
				}
				mu.Lock()
				for _, e := range envs {
					got[e.Task.ID]++
					total++
				}
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		c.Errorf("receiver: %v", err)
	}
	if total != m {
		c.Errorf("%d receivers claimed %d messages in all, want %d", handles*perHandle, total, m)
	}
	for _, t := range ts {
		if got[t.ID] != 1 {
			c.Errorf("task %s was claimed %d times, want exactly once", t.ID, got[t.ID])
		}
	}
	c.receiveNone(qs[0], time.Time{}, "every message was claimed and completed")
}

// checkClosedQueue: every operation on a closed queue fails with
// FailedPrecondition, and closing loses nothing.
func checkClosedQueue(c *C) {
	url := c.newQueue()
	q := c.openQueue(url)
	id := c.push(q, task("closed"))[0]
	e := c.receive(q, c.vis())
	if err := q.Close(); err != nil {
		c.Fatalf("close: %v", err)
	}
	ctx := c.ctx()
	ops := map[string]func() error{
		"Push": func() error { _, err := q.Push(ctx, task("after close")); return err },
		"PushBatch": func() error {
			_, err := q.PushBatch(ctx, []*jobq.Task{task("after close 2")}, jobq.PushOptions{})
			return err
		},
		"Receive": func() error { _, err := q.Receive(ctx, jobq.ReceiveOptions{}); return err },
		"ReceiveBatch": func() error {
			_, err := q.ReceiveBatch(ctx, 2, jobq.ReceiveOptions{})
			return err
		},
		"Peek":                func() error { _, err := q.Admin().Peek(ctx, 1); return err },
		"Stats":               func() error { _, err := q.Admin().Stats(ctx); return err },
		"Size":                func() error { _, err := q.Admin().Size(ctx); return err },
		"Clear":               func() error { _, err := q.Admin().Clear(ctx); return err },
		"DeadLetters.List":    func() error { _, err := q.Admin().DeadLetters(ctx, 1); return err },
		"DeadLetters.Purge":   func() error { _, err := q.Admin().PurgeDeadLetters(ctx); return err },
		"Envelope.Complete":   func() error { return e.Complete(ctx) },
		"Envelope.Renew":      func() error { return e.Renew(ctx, 0) },
		"Envelope.Requeue":    func() error { return e.Requeue(ctx, 0) },
		"DeadLetters.Requeue": func() error { _, err := q.Admin().RequeueDeadLetters(ctx); return err },
	}
	for name, op := range ops {
		c.expectCode(op(), errcode.FailedPrecondition, name+" after Close")
	}
	_ = q.Close() // a second Close must not panic
	// The message held by the closed handle comes back to another.
	q2 := c.openQueue(url)
	e2 := c.receive(q2, c.longVis(q2))
	c.expectDelivery(e2, id, 2, "after the holder closed")
	c.complete(e2)
}

// checkCanceledContext: a canceled context fails every call with code
// Canceled, without MaybeApplied, and changes nothing; a deadline ends a
// waiting Receive.
func checkCanceledContext(c *C) {
	q := c.open()
	ready := c.push(q, task("canceled ready"))[0]
	held := c.receive(q, c.longVis(q))
	c.push(q, task("canceled ready 2"))
	ctx, cancel := context.WithCancel(c.ctx())
	cancel()
	ops := []struct {
		name string
		do   func() error
	}{
		{"Push", func() error { _, err := q.Push(ctx, task("canceled push")); return err }},
		{"PushBatch", func() error {
			_, err := q.PushBatch(ctx, []*jobq.Task{task("canceled batch")}, jobq.PushOptions{})
			return err
		}},
		{"Receive", func() error { _, err := q.Receive(ctx, jobq.ReceiveOptions{Wait: time.Second}); return err }},
		{"ReceiveBatch", func() error { _, err := q.ReceiveBatch(ctx, 3, jobq.ReceiveOptions{}); return err }},
		{"Stats", func() error { _, err := q.Admin().Stats(ctx); return err }},
		{"Clear", func() error { _, err := q.Admin().Clear(ctx); return err }},
		{"Envelope.Complete", func() error { return held.Complete(ctx) }},
		{"Envelope.Requeue", func() error { return held.Requeue(ctx, 0) }},
	}
	if level(q, driver.Peek) != driver.Unsupported {
		ops = append(ops, struct {
			name string
			do   func() error
		}{"Peek", func() error { _, err := q.Admin().Peek(ctx, 1); return err }})
	}
	if level(q, driver.LeaseRenewal) != driver.Unsupported {
		ops = append(ops, struct {
			name string
			do   func() error
		}{"Envelope.Renew", func() error { return held.Renew(ctx, 0) }})
	}
	if level(q, driver.DeadLetter) != driver.Unsupported {
		ops = append(ops, struct {
			name string
			do   func() error
		}{"DeadLetters.List", func() error { _, err := q.Admin().DeadLetters(ctx, 1); return err }})
	}
	if level(q, driver.Results) != driver.Unsupported {
		ops = append(ops, []struct {
			name string
			do   func() error
		}{
			{"Result", func() error { _, err := q.Result(ctx, ready); return err }},
			{"Wait", func() error { _, err := q.Wait(ctx, ready); return err }},
		}...)
		if level(q, driver.Cancel) != driver.Unsupported {
			ops = append(ops, struct {
				name string
				do   func() error
			}{"Cancel", func() error { _, err := q.Admin().Cancel(ctx, ready); return err }})
		}
	}
	for _, op := range ops {
		err := op.do()
		c.expectCode(err, errcode.Canceled, op.name+" with a canceled context")
		// The context ended before the call began: nothing was sent, so
		// the outcome is known.
		var je *jobq.Error
		if errors.As(err, &je) && je.MaybeApplied {
			c.Errorf("%s with a canceled context: %v; want no MaybeApplied (nothing was sent)", op.name, err)
		}
	}
	// Nothing changed: the held message is still held, the ready one and
	// only it is still there.
	c.complete(held)
	e := c.receive(q, c.longVis(q))
	if e.Task.ID == ready {
		c.Errorf("received the completed task %s again", ready)
	}
	c.complete(e)
	c.receiveNone(q, time.Time{}, "the canceled pushes must have stored nothing")

	dctx, dcancel := context.WithTimeout(c.ctx(), 300*time.Millisecond)
	defer dcancel()
	done := make(chan error, 1)
	go func() {
		_, err := q.Receive(dctx, jobq.ReceiveOptions{Wait: jobq.WaitForever})
		done <- err
	}()
	select {
	case err := <-done:
		c.expectCode(err, errcode.DeadlineExceeded, "Receive(WaitForever) on an empty queue past its context deadline")
	case <-time.After(c.patience()):
		c.Errorf("Receive(WaitForever) did not return within %v of its context deadline", c.patience())
	}
}
