package driver_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

func TestFanOut(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	for _, n := range []int{0, 1, 3} {
		errs := driver.FanOut(boom, n)
		if len(errs) != n {
			t.Fatalf("FanOut(_, %d) has %d errors", n, len(errs))
		}
		for i, err := range errs {
			if err != boom {
				t.Errorf("FanOut(_, %d)[%d] = %v; want boom", n, i, err)
			}
		}
	}
}

func TestClosing(t *testing.T) {
	t.Parallel()
	c := driver.NewClosing("test queue q")
	if err := c.Check(context.Background()); err != nil || c.Closed() || c.Err() != nil {
		t.Fatalf("open: Check = %v, Closed = %v, Err = %v", err, c.Closed(), c.Err())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Check(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Check with a canceled context = %v; want context.Canceled", err)
	}
	if !c.Close() {
		t.Error("the first Close reported the driver closed already")
	}
	if c.Close() {
		t.Error("a second Close reported that it closed the driver")
	}
	select {
	case <-c.Done():
	default:
		t.Error("Done is not closed after Close")
	}
	for name, err := range map[string]error{"Err": c.Err(), "Check": c.Check(context.Background())} {
		if errcode.Of(err) != errcode.FailedPrecondition || err.Error() != "test queue q is closed" {
			t.Errorf("%s after Close = %v (%v); want FailedPrecondition %q", name, err, errcode.Of(err), "test queue q is closed")
		}
	}
}

func TestCompletions(t *testing.T) {
	t.Parallel()
	reqs := driver.Completions(driver.Lease{MessageID: "1"}, driver.Lease{MessageID: "2"})
	if len(reqs) != 2 || reqs[0].Lease.MessageID != "1" || reqs[1].Lease.MessageID != "2" || reqs[0].Result != nil || reqs[1].Result != nil {
		t.Errorf("Completions = %+v", reqs)
	}
}
