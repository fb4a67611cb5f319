package azqueue_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/jobq/jobq"
	azq "github.com/jobq/jobq/backends/azqueue"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/tools/testkit/faultproxy"
)

// The tests in this file put tools/testkit/faultproxy between the driver and
// Azurite, to produce the outcomes Azure shows under load: requests that
// were applied but whose answer was lost (500 OperationTimedOut, a reset
// connection), throttling and slow answers. A task may then run or exist
// twice, but must never be lost.

// faultScheme is a test-only scheme whose URLs reach Azurite through a
// fault proxy: faultScheme://devstoreaccount1/QUEUE?via=PORT[&...].
const faultScheme = "azqfault"

func init() {
	if err := jobq.Register(faultScheme, viaProxy{}); err != nil {
		panic(err)
	}
}

// viaProxy opens azqueue URLs with a connection string that points at the
// proxy named by the URL's via parameter.
type viaProxy struct{}

func (viaProxy) Capabilities() driver.Capabilities { return azq.DefaultOpener.Capabilities() }

func (viaProxy) Open(ctx context.Context, u *url.URL, opts driver.OpenOptions) (driver.Driver, error) {
	q := u.Query()
	port := q.Get("via")
	q.Del("via")
	v := *u
	v.RawQuery = q.Encode()
	// The result records go to Azurite's blob service directly: the
	// faults are the queue's.
	o := &azq.URLOpener{ConnectionString: strings.Replace(azq.DevelopmentConnectionString,
		"http://127.0.0.1:10001", "http://127.0.0.1:"+port, 1) + "BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;"}
	return o.Open(ctx, &v, opts)
}

// startProxy starts a fault proxy in front of Azurite for one test.
func startProxy(t testing.TB, seed uint64) *faultproxy.Proxy {
	t.Helper()
	if !strings.Contains(connStr, "127.0.0.1:10001") {
		t.Skip("needs Azurite: the fault proxy forwards to 127.0.0.1:10001")
	}
	p, err := faultproxy.Start("http://127.0.0.1:10001", seed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// viaURL turns a queue URL of newQueueURL into one that goes through p.
func viaURL(t testing.TB, p *faultproxy.Proxy, rawURL, params string) string {
	t.Helper()
	port := strings.TrimPrefix(p.URL(), "http://127.0.0.1:")
	u := strings.Replace(rawURL, azq.Scheme+"://", faultScheme+"://", 1) + "?via=" + port
	if params != "" {
		u += "&" + params
	}
	return u
}

// queueName is the queue name of a newQueueURL URL.
func queueName(rawURL string) string { return rawURL[strings.LastIndex(rawURL, "/")+1:] }

// onMessages matches requests with method on the messages of queue name
// (not of its dead-letter queue).
func onMessages(method, name string) func(*http.Request) bool {
	return faultproxy.All(faultproxy.Method(method), faultproxy.PathContains("/"+name+"/messages"))
}

// direct returns the SDK client of a queue, bypassing the proxy.
func direct(t testing.TB, name string) *azqueue.QueueClient {
	t.Helper()
	svc, err := azqueue.NewServiceClientFromConnectionString(connStr, nil)
	if err != nil {
		t.Fatal(err)
	}
	return svc.NewQueueClient(name)
}

// visibleCount peeks at a queue directly and counts its visible messages
// (up to 32).
func visibleCount(t testing.TB, name string) int {
	t.Helper()
	resp, err := direct(t, name).PeekMessages(context.Background(), &azqueue.PeekMessagesOptions{NumberOfMessages: to.Ptr(int32(32))})
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.Messages)
}

// afterApplied are the faults that lose the answer to an applied request.
var afterApplied = []faultproxy.Fault{faultproxy.TimeoutAfter, faultproxy.ResetAfter}

// TestDeadLetterDeleteUnanswered: the original's delete is applied but its
// answer lost; the SDK's retry gets 404. The dead letter must stay (the
// old rollback deleted it, and the task was gone from both queues).
func TestDeadLetterDeleteUnanswered(t *testing.T) {
	t.Parallel()
	for _, fault := range afterApplied {
		t.Run(fault.String(), func(t *testing.T) {
			t.Parallel()
			p := startProxy(t, 1)
			raw := newQueueURL(t)
			name := queueName(raw)
			d := openFaulty(t, viaURL(t, p, raw, "retry_delay=10ms"))
			rec := pushAndReceive(t, d, 30*time.Second)
			p.Add(faultproxy.Rule{Match: onMessages(http.MethodDelete, name), Fault: fault, Times: 1})
			errs := d.DeadLetter(t.Context(), []driver.DeadLetterParams{{Lease: rec.Lease, Reason: "test"}})
			if p.Injected(fault) != 1 {
				t.Fatalf("the fault was not injected")
			}
			t.Logf("dead-letter: %v", errs)
			if n := visibleCount(t, name+azq.FailedSuffix); n != 1 {
				t.Fatalf("%d dead letters after a dead-letter whose delete went unanswered, want 1 (the task is lost)", n)
			}
			if errs != nil {
				t.Errorf("dead-letter: %v, want success (the original is gone: deleted by the unanswered attempt)", errs[0])
			}
		})
	}
}

// TestRenewUnanswered: a renewal is applied but its answer lost; the SDK's
// retry gets PopReceiptMismatch. The task must not be cancelled (no
// LockLost), and the message must come back after the lease.
func TestRenewUnanswered(t *testing.T) {
	t.Parallel()
	for _, fault := range afterApplied {
		t.Run(fault.String(), func(t *testing.T) {
			t.Parallel()
			p := startProxy(t, 1)
			raw := newQueueURL(t)
			name := queueName(raw)
			d := openFaulty(t, viaURL(t, p, raw, "retry_delay=10ms"))
			rec := pushAndReceive(t, d, 2*time.Second)
			p.Add(faultproxy.Rule{Match: onMessages(http.MethodPut, name), Fault: fault, Times: 1})
			lease, err := d.Renew(t.Context(), rec.Lease, 2*time.Second)
			if p.Injected(fault) != 1 {
				t.Fatalf("the fault was not injected")
			}
			if err != nil {
				t.Fatalf("renew whose first attempt was applied unanswered: %v, want success (the task is healthy)", err)
			}
			// Its pop receipt is unknown now: completing cannot work, and
			// says so; the message is delivered again.
			if errs := d.Complete(t.Context(), driver.Completions(lease)); errs == nil || errcode.Of(errs[0]) != errcode.LockLost {
				t.Errorf("complete after the unanswered renewal: %v, want LockLost", errs)
			}
			recs, err := d.Receive(t.Context(), driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: 15 * time.Second})
			if err != nil || len(recs) != 1 {
				t.Fatalf("receive after the lease: %v, %d messages, want the task back", err, len(recs))
			}
		})
	}
}

// TestRenewFailedUnanswered: a renewal is applied, its answer lost, and
// with retries off it fails; the next renewal finds the receipt changed.
// That is the first one's doing, not another receiver's: no LockLost.
func TestRenewFailedUnanswered(t *testing.T) {
	t.Parallel()
	p := startProxy(t, 1)
	raw := newQueueURL(t)
	name := queueName(raw)
	d := openFaulty(t, viaURL(t, p, raw, "retries=0"))
	rec := pushAndReceive(t, d, 2*time.Second)
	p.Add(faultproxy.Rule{Match: onMessages(http.MethodPut, name), Fault: faultproxy.TimeoutAfter, Times: 1})
	if _, err := d.Renew(t.Context(), rec.Lease, 2*time.Second); errcode.Of(err) != errcode.Unavailable {
		t.Fatalf("renew answered 500 OperationTimedOut without retries: %v, want Unavailable", err)
	}
	if _, err := d.Renew(t.Context(), rec.Lease, 2*time.Second); err != nil {
		t.Fatalf("the next renewal: %v, want success (the failed one was applied; the task is healthy)", err)
	}
	recs, err := d.Receive(t.Context(), driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: 15 * time.Second})
	if err != nil || len(recs) != 1 {
		t.Fatalf("receive after the lease: %v, %d messages, want the task back", err, len(recs))
	}
}

// TestSettleUnanswered: a Complete or Requeue applied but unanswered is a
// success, not a lost lease, and loses nothing.
func TestSettleUnanswered(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		method string
		settle func(context.Context, driver.Driver, driver.Lease) []error
		back   bool // the message comes back
	}{
		{"complete", http.MethodDelete, func(ctx context.Context, d driver.Driver, l driver.Lease) []error {
			return d.Complete(ctx, driver.Completions(l))
		}, false},
		{"requeue", http.MethodPut, func(ctx context.Context, d driver.Driver, l driver.Lease) []error {
			return d.Requeue(ctx, []driver.RequeueParams{{Lease: l, Delay: time.Second}})
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := startProxy(t, 1)
			raw := newQueueURL(t)
			name := queueName(raw)
			d := openFaulty(t, viaURL(t, p, raw, "retry_delay=10ms"))
			rec := pushAndReceive(t, d, 30*time.Second)
			p.Add(faultproxy.Rule{Match: onMessages(c.method, name), Fault: faultproxy.TimeoutAfter, Times: 1})
			if errs := c.settle(t.Context(), d, rec.Lease); errs != nil {
				t.Errorf("%s applied but unanswered: %v, want success", c.name, errs[0])
			}
			if c.back {
				recs, err := d.Receive(t.Context(), driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: 10 * time.Second})
				if err != nil || len(recs) != 1 {
					t.Fatalf("receive after the requeue: %v, %d messages, want the task back", err, len(recs))
				}
			}
		})
	}
}

func openFaulty(t *testing.T, rawURL string) driver.Driver {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	d, err := viaProxy{}.Open(t.Context(), u, driver.OpenOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func pushAndReceive(t *testing.T, d driver.Driver, vis time.Duration) *driver.Received {
	t.Helper()
	if _, err := d.Push(t.Context(), []*driver.Message{{ID: "t", Body: []byte(`{"x": 1}`)}}); err != nil {
		t.Fatal(err)
	}
	recs, err := d.Receive(t.Context(), driver.ReceiveParams{Max: 1, Visibility: vis, Wait: 5 * time.Second})
	if err != nil || len(recs) != 1 {
		t.Fatalf("receive: %v, %d messages", err, len(recs))
	}
	return recs[0]
}

// TestStashKeptWhenPushUnanswered: a stashed task's push is applied but
// its answer lost, with retries off. The push fails with an unknown
// outcome, so its stash object is kept: the queued message refers to it,
// and the task is received whole.
func TestStashKeptWhenPushUnanswered(t *testing.T) {
	t.Parallel()
	for _, fault := range afterApplied {
		t.Run(fault.String(), func(t *testing.T) {
			t.Parallel()
			p := startProxy(t, 1)
			raw := newQueueURL(t)
			name := queueName(raw)
			dir := t.TempDir()
			q, err := jobq.OpenWithOptions(t.Context(), viaURL(t, p, raw, "retries=0"), jobq.Options{
				StashURL: "file://" + dir, PushRetry: -1, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = q.Close() })
			big := &jobq.Task{Command: "echo " + strings.Repeat("x", 100<<10)}
			p.Add(faultproxy.Rule{Match: onMessages(http.MethodPost, name), Fault: fault, Times: 1})
			_, err = q.Push(t.Context(), big)
			if p.Injected(fault) != 1 {
				t.Fatalf("the fault was not injected")
			}
			if err == nil || errcode.Of(err) == errcode.InvalidArgument || errcode.Of(err) == errcode.ResourceExhausted {
				t.Fatalf("push whose answer was lost, without retries: %v, want an error of unknown outcome", err)
			}
			if ents, err := os.ReadDir(dir); err != nil || len(ents) != 1 {
				t.Fatalf("stash after the unanswered push: %d objects, %v; want the one the queued message refers to", len(ents), err)
			}
			e, err := q.Receive(t.Context(), jobq.ReceiveOptions{Visibility: time.Minute, Wait: 15 * time.Second})
			if err != nil {
				t.Fatalf("receive: %v, want the pushed task (its message was stored)", err)
			}
			if e.Task.Command != big.Command {
				t.Fatalf("received %.40q, want the stashed task", e.Task.Command)
			}
		})
	}
}

// TestThrottledSettleThroughLostLease: a settlement through a lease that
// another receiver took over (while this driver still counted it held) is
// first throttled (503 ServerBusy: the service did not apply it), and the
// retry finds the receipt changed. Throttling is no lost answer: the
// settlement fails with LockLost and changes nothing (it was taken as
// done: Complete and Requeue succeeded, and DeadLetter left a dead letter
// beside the running task).
func TestThrottledSettleThroughLostLease(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		method string
		settle func(d driver.Driver, l driver.Lease) error
	}{
		{"complete", http.MethodDelete, func(d driver.Driver, l driver.Lease) error {
			return firstErr(d.Complete(t.Context(), driver.Completions(l)))
		}},
		{"requeue", http.MethodPut, func(d driver.Driver, l driver.Lease) error {
			return firstErr(d.Requeue(t.Context(), []driver.RequeueParams{{Lease: l}}))
		}},
		{"dead-letter", http.MethodDelete, func(d driver.Driver, l driver.Lease) error {
			return firstErr(d.DeadLetter(t.Context(), []driver.DeadLetterParams{{Lease: l, Reason: "test"}}))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := startProxy(t, 1)
			raw := newQueueURL(t)
			name := queueName(raw)
			d := openFaulty(t, viaURL(t, p, raw, "retry_delay=10ms"))
			// The first dequeue's answer comes late, so that the driver
			// holds the lease until well after the service ended it: the
			// settlement below goes to the service.
			p.Add(faultproxy.Rule{Match: onMessages(http.MethodGet, name), Fault: faultproxy.Slow, Delay: 2 * time.Second, Times: 1})
			old := pushAndReceive(t, d, time.Second)
			recs, err := d.Receive(t.Context(), driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: 15 * time.Second})
			if err != nil || len(recs) != 1 {
				t.Fatalf("receive after the first lease: %v, %d messages, want the task back", err, len(recs))
			}
			p.Add(faultproxy.Rule{Match: onMessages(c.method, name), Fault: faultproxy.Busy, Times: 1})
			err = c.settle(d, old.Lease)
			if p.Injected(faultproxy.Busy) != 1 {
				t.Fatalf("the fault was not injected")
			}
			if errcode.Of(err) != errcode.LockLost {
				t.Errorf("%s through the lost lease, throttled once: %v, want LockLost", c.name, err)
			}
			if n := visibleCount(t, name+azq.FailedSuffix); n != 0 {
				t.Errorf("%d dead letters, want none (the task runs under the new lease)", n)
			}
			if errs := d.Complete(t.Context(), driver.Completions(recs[0].Lease)); errs != nil {
				t.Errorf("the current holder's complete: %v, want success", errs[0])
			}
		})
	}
}

// firstErr is the error of a one-request settlement.
func firstErr(errs []error) error {
	if errs == nil {
		return nil
	}
	return errs[0]
}
