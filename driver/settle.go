package driver

import (
	"context"
	"sync"

	"github.com/jobq/jobq/errcode"
)

// FanOut returns err for each of n messages of a batch: the answer of a
// settlement (Complete, Requeue, DeadLetter) that failed as a whole.
func FanOut(err error, n int) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// Closing is the closed state of a driver, for the contract's rule that
// calls after Close fail with FailedPrecondition. Close marks it once;
// methods start with Check, and waits select on Done. Make it with
// NewClosing; it is safe for concurrent use.
type Closing struct {
	err  error
	done chan struct{}
	once sync.Once
}

// NewClosing returns an open Closing whose error names what is closed,
// for example "postgres queue jobs".
func NewClosing(what string) *Closing {
	return &Closing{
		err:  Errorf(errcode.FailedPrecondition, "%s is closed", what),
		done: make(chan struct{}),
	}
}

// Close marks the driver closed. It reports whether this call closed it
// (false when it was closed already).
func (c *Closing) Close() bool {
	first := false
	c.once.Do(func() {
		close(c.done)
		first = true
	})
	return first
}

// Done is closed when the driver is.
func (c *Closing) Done() <-chan struct{} { return c.done }

// Closed reports whether the driver is closed.
func (c *Closing) Closed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Err returns the FailedPrecondition error of a closed driver, or nil
// while it is open.
func (c *Closing) Err() error {
	if c.Closed() {
		return c.err
	}
	return nil
}

// Check returns Err, or else ctx's error when ctx has ended (a method
// should not start work for a caller that has gone).
func (c *Closing) Check(ctx context.Context) error {
	if err := c.Err(); err != nil {
		return err
	}
	return ctx.Err()
}

// Completions returns the params that complete leases without records.
func Completions(leases ...Lease) []CompleteParams {
	reqs := make([]CompleteParams, len(leases))
	for i, l := range leases {
		reqs[i].Lease = l
	}
	return reqs
}
