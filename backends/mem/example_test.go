package mem_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backends/mem"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// A producer pushes a task; a worker receives it, runs it and completes it.
func Example() {
	ctx := context.Background()
	q, err := jobq.Open(ctx, "mem://example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()

	if _, err := q.Push(ctx, &jobq.Task{Command: "echo hello"}); err != nil {
		fmt.Println(err)
		return
	}

	e, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute, Wait: time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("run %q (delivery %d)\n", e.Task.Command, e.DeliveryCount)
	if err := e.Complete(ctx); err != nil {
		fmt.Println(err)
		return
	}

	_, err = q.Receive(ctx, jobq.ReceiveOptions{})
	fmt.Println("queue empty:", errors.Is(err, jobq.ErrEmpty))
	// Output:
	// run "echo hello" (delivery 1)
	// queue empty: true
}

// Fail spends the task's retry budget, each retry after the task's retry
// backoff (here 10ms doubling up to 100ms, with jitter; the default is 10s
// up to 10m), then dead-letters it with the cause.
func Example_retries() {
	ctx := context.Background()
	q, err := jobq.Open(ctx, "mem://example-retries")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()

	t := &jobq.Task{Command: "false", NumRetries: 1, RetryBackoff: jobq.Backoff{Base: 10 * time.Millisecond, Cap: 100 * time.Millisecond}}
	if _, err := q.Push(ctx, t); err != nil {
		fmt.Println(err)
		return
	}
	for {
		e, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute, Wait: time.Second})
		if err != nil {
			break // empty: the task was dead-lettered
		}
		res, err := e.Fail(ctx, errors.New("exit status 1"), "")
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("attempt %d failed: retried=%v, retries left %d\n", e.DeliveryCount, res.Retried, res.RetriesLeft)
	}
	dead, err := q.Admin().DeadLetters(ctx, 10)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("dead letter:", dead[0].Reason)
	// Output:
	// attempt 1 failed: retried=true, retries left 0
	// attempt 2 failed: retried=false, retries left 0
	// dead letter: exit status 1
}

// A feature the backend cannot provide is degraded with one warning per
// queue; here mem is told to declare priority unsupported.
func Example_degraded() {
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // keep the output stable
			}
			return a
		},
	}))
	q, err := jobq.OpenWithOptions(ctx, "mem://example-degraded?unsupported=priority", jobq.Options{Logger: logger})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	for i := range 3 {
		if _, err := q.Push(ctx, &jobq.Task{Command: fmt.Sprintf("echo %d", i), Priority: 10}); err != nil {
			fmt.Println(err)
			return
		}
	}
	n, _ := q.Admin().Size(ctx)
	fmt.Println("queued:", n)
	// Output:
	// level=WARN msg="jobq: feature degraded on this backend" queue="mem://example-degraded?unsupported=priority" feature=priority level=unsupported backend=mem instead="priority is ignored; tasks are received in push order"
	// queued: 3
}

// Work done under Envelope.Context stops when the lease is lost: here the
// work outlasts a short lease that nobody renews.
func Example_leaseContext() {
	ctx := context.Background()
	q, err := jobq.Open(ctx, "mem://example-lease")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	if _, err := q.Push(ctx, &jobq.Task{Command: "sleep 60"}); err != nil {
		fmt.Println(err)
		return
	}
	e, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: 200 * time.Millisecond, Wait: time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	work, stop := e.Context(ctx)
	defer stop()
	select {
	case <-work.Done():
		fmt.Println("work stopped; lease lost:", errors.Is(context.Cause(work), errcode.LockLost))
	case <-time.After(time.Minute):
		fmt.Println("work finished")
	}
	// Output:
	// work stopped; lease lost: true
}

// New builds an in-process queue without a URL; drivers with the same Name
// share it.
func ExampleNew() {
	ctx := context.Background()
	d, err := mem.New(mem.Options{Queue: "example-new"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	if _, err := d.Push(ctx, []*driver.Message{{ID: "greet-1", Body: []byte("hello")}}); err != nil {
		fmt.Println(err)
		return
	}
	got, err := d.Receive(ctx, driver.ReceiveParams{Max: 10, Visibility: time.Minute})
	if err != nil || len(got) == 0 {
		fmt.Println("receive:", got, err)
		return
	}
	fmt.Printf("received %s: %s\n", got[0].ID, got[0].Body)
	if errs := d.Complete(ctx, driver.Completions(got[0].Lease)); errs != nil {
		fmt.Println(errs)
		return
	}
	st, err := d.Stats(ctx)
	fmt.Println("left in the queue:", st.Ready+st.InFlight, err)
	// Output:
	// received greet-1: hello
	// left in the queue: 0 <nil>
}
