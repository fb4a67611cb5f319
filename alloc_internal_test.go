package jobq

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
)

// Each test here pins the allocations of one step that every task takes,
// so that one that comes back fails a test rather than hides in the
// end-to-end benchmarks' noise.

// unusedStore turns result records on for a queue built in a test; the
// tests here never reach it.
type unusedStore struct{ driver.ResultStore }

// recordingQueue is a queue that keeps every result, as a real one at the
// default policy.
func recordingQueue() *Queue {
	q := &Queue{results: unusedStore{}, closing: make(chan struct{}), tel: &telemetry{}}
	q.policies.fresh.Store(&policySnapshot{loaded: time.Now().Add(time.Hour), keep: time.Hour, mode: driver.ResultsAll})
	return q
}

// TestSuccessRecordAllocatesTwice: the record of a success costs its
// pending record (which holds the driver's record and the first attempt of
// its history) and its encoding, not an allocation for each part.
func TestSuccessRecordAllocatesTwice(t *testing.T) {
	q := recordingQueue()
	start := time.Now()
	e := &Envelope{q: q, Task: &Task{ID: "t-1"}, wire: &Task{}, DeliveryCount: 1,
		attempt: &Attempt{Delivery: 1, Worker: "w-1", Host: "h", Start: start, End: start.Add(time.Millisecond), Outcome: OutcomeSuccess}}
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		if e.recordOf(ctx, driver.ResultSucceeded, "", "").record() == nil {
			t.Fatal("no record with results on")
		}
	}); n != 2 {
		t.Errorf("a success's record took %v allocations, want 2", n)
	}
}

// TestTaskContextAllocations: the task's context costs what
// context.WithCancelCause does, and nothing for its registration to end at
// the lease's loss.
func TestTaskContextAllocations(t *testing.T) {
	q := recordingQueue()
	envs := make([]Envelope, 101) // AllocsPerRun calls once more than it counts
	for i := range envs {
		envs[i] = Envelope{q: q, lost: make(chan struct{})}
	}
	parent, stop := context.WithCancel(context.Background())
	defer stop()
	want := testing.AllocsPerRun(100, func() {
		_, cancel := context.WithCancelCause(parent)
		cancel(nil)
	})
	i := 0
	n := testing.AllocsPerRun(100, func() {
		_, cancel := envs[i].context(parent)
		cancel(nil)
		i++
	})
	if n != want {
		t.Errorf("a task context took %v allocations, want %v (context.WithCancelCause's)", n, want)
	}
	// A lost lease still ends every context, with its cause.
	e := &Envelope{q: q, lost: make(chan struct{}), MessageID: "m-1"}
	a, _ := e.context(parent)
	b, _ := e.context(parent)
	e.markLost()
	for _, ctx := range []context.Context{a, b} {
		if err := context.Cause(ctx); !errors.Is(err, errcode.LockLost) {
			t.Errorf("a context of a lost lease ended with %v, want a LockLost error", err)
		}
	}
}

// TestSettlerCompleteReusesItsChannel: a batched completion waits for its
// flush on a reused channel.
func TestSettlerCompleteReusesItsChannel(t *testing.T) {
	s := &settler{q: recordingQueue(), max: 2, ch: make(chan completeReq, 2)}
	go func() { // the flusher's answer, without a driver
		for r := range s.ch {
			r.done <- nil
		}
	}()
	defer close(s.ch)
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		if err := s.complete(ctx, driver.Lease{MessageID: "m"}, 0, nil, driver.GroupTally{}); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("a batched completion took %v allocations, want 0", n)
	}
}

// TestRecordAttemptKeepsItsAttempt: an attempt handed over by pointer is
// kept as it is (the worker's lives in its task's state), not copied.
func TestRecordAttemptKeepsItsAttempt(t *testing.T) {
	e := &Envelope{q: recordingQueue(), DeliveryCount: 2}
	a := Attempt{Worker: "w-1", Outcome: OutcomeSuccess}
	if n := testing.AllocsPerRun(100, func() { hooks.RecordAttempt(e, &a) }); n != 0 {
		t.Errorf("recording an attempt took %v allocations, want 0", n)
	}
	if e.attempt != &a || a.Delivery != 2 {
		t.Errorf("the envelope keeps %p (delivery %d), want the attempt handed over, %p, of delivery 2", e.attempt, a.Delivery, &a)
	}
	// An Attempt value, as the conformance suite hands over, is kept too.
	hooks.RecordAttempt(e, Attempt{Worker: "w-2"})
	if e.attempt.Worker != "w-2" || e.attempt.Delivery != 2 {
		t.Errorf("after an attempt passed by value the envelope keeps %+v", *e.attempt)
	}
}
