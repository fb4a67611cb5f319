package jobq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backends/mem"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// flakyPush wraps a mem queue and makes its first Push calls fail the way
// a dropped connection does. A fault injector beneath a unit test of the
// portable layer's retry logic; TestPushRetriesAcrossRestart (Redis) does
// the same against a real server.
type flakyPush struct {
	driver.Driver
	mu    sync.Mutex
	fault     // guarded by mu
	calls int // Push calls seen
}

// fault says how the first Push calls fail.
type fault struct {
	fails int          // calls left to fail
	store int          // how many of a failing call's messages are stored first (-1: all, the reply was lost)
	code  errcode.Code // the failure's code
	// refused makes the failure a refused connection (nothing sent)
	// rather than a reset one.
	refused bool
}

func (f *flakyPush) Push(ctx context.Context, msgs []*driver.Message) ([]driver.PushResult, error) {
	f.mu.Lock()
	f.calls++
	fail := f.fails > 0
	if fail {
		f.fails--
	}
	f.mu.Unlock()
	if !fail {
		return f.Driver.Push(ctx, msgs)
	}
	failure := driver.Errorf(f.code, "write tcp 127.0.0.1:1234: connection reset by peer")
	if f.refused {
		failure = driver.Errorf(f.code, "push: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
	}
	switch {
	case f.store < 0:
		if _, err := f.Driver.Push(ctx, msgs); err != nil {
			return nil, err
		}
		return nil, failure
	case f.store > 0:
		rs, err := f.Driver.Push(ctx, msgs[:f.store])
		if err != nil {
			return rs, err
		}
		return rs, failure
	}
	return nil, failure
}

// flakyOpener opens flaky://NAME: a mem queue behind the flakyPush made
// for NAME by the test.
type flakyOpener struct{}

var flaky = struct {
	sync.Mutex
	m map[string]*flakyPush
}{m: map[string]*flakyPush{}}

func (flakyOpener) Capabilities() driver.Capabilities { return mem.URLOpener{}.Capabilities() }

func (flakyOpener) Open(ctx context.Context, u *url.URL, o driver.OpenOptions) (driver.Driver, error) {
	d, err := mem.URLOpener{}.Open(ctx, &url.URL{Scheme: "mem", Host: "flaky-" + u.Host}, o)
	if err != nil {
		return nil, err
	}
	flaky.Lock()
	defer flaky.Unlock()
	f := flaky.m[u.Host]
	f.Driver = d
	return f, nil
}

// flakyMux opens flaky:// URLs; the tests need no scheme on the default mux.
var flakyMux = func() *jobq.URLMux {
	m := new(jobq.URLMux)
	if err := m.Register("flaky", flakyOpener{}); err != nil {
		panic(err)
	}
	return m
}()

func TestPushRetriesUnavailable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		f         fault
		retry     time.Duration
		wantCalls int
		wantCode  errcode.Code // when the push fails; ignored when it succeeds
		fails     bool
		wantDups  int
		// A reset after the request was sent leaves the outcome unknown:
		// the tasks sent again are Resent, the failed ones MaybeApplied.
		wantResent int
		wantMaybe  bool
	}{
		{name: "two failures", f: fault{fails: 2, code: errcode.Unavailable}, wantCalls: 3, wantResent: 5},
		{name: "stored prefix resumes after it", f: fault{fails: 1, store: 2, code: errcode.Unavailable}, wantCalls: 2, wantResent: 3},
		{name: "lost reply reports duplicates", f: fault{fails: 1, store: -1, code: errcode.Unavailable}, wantCalls: 2, wantDups: 5, wantResent: 5},
		{name: "retries off", f: fault{fails: 1, code: errcode.Unavailable}, retry: -1, wantCalls: 1, fails: true, wantCode: errcode.Unavailable, wantMaybe: true},
		{name: "gives up after PushRetry", f: fault{fails: 1000, code: errcode.Unavailable}, retry: 300 * time.Millisecond, wantCalls: -1, fails: true, wantCode: errcode.Unavailable, wantMaybe: true},
		{name: "other errors are not retried", f: fault{fails: 1, code: errcode.PermissionDenied}, wantCalls: 1, fails: true, wantCode: errcode.PermissionDenied},
		{name: "refused connection stored nothing", f: fault{fails: 1, code: errcode.Unavailable, refused: true}, retry: -1, wantCalls: 1, fails: true, wantCode: errcode.Unavailable},
		{name: "retry after a refused connection", f: fault{fails: 2, code: errcode.Unavailable, refused: true}, wantCalls: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			host := fmt.Sprintf("t%p", &tc)
			f := &flakyPush{fault: tc.f}
			flaky.Lock()
			flaky.m[host] = f
			flaky.Unlock()
			ctx := context.Background()
			q, err := flakyMux.Open(ctx, "flaky://"+host, jobq.Options{PushRetry: tc.retry, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			var tasks []*jobq.Task
			for i := range 5 {
				tasks = append(tasks, &jobq.Task{Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))})
			}
			res, pushErr := q.PushBatch(ctx, tasks, jobq.PushOptions{})
			if (pushErr != nil) != tc.fails || (tc.fails && errcode.Of(pushErr) != tc.wantCode) {
				t.Fatalf("PushBatch error %v, want failure %v with code %v", pushErr, tc.fails, tc.wantCode)
			}
			f.mu.Lock()
			calls := f.calls
			f.mu.Unlock()
			if tc.wantCalls > 0 && calls != tc.wantCalls {
				t.Errorf("%d Push calls, want %d", calls, tc.wantCalls)
			}
			if tc.wantCalls < 0 && calls < 2 {
				t.Errorf("%d Push calls in %v, want a retry before it gave up", calls, tc.retry)
			}
			st, err := q.Admin().Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if tc.fails {
				if st.Ready != int64(tc.f.store) && tc.f.store >= 0 {
					t.Errorf("%d tasks stored after a failed push, want %d", st.Ready, tc.f.store)
				}
				var be *jobq.BatchError
				if !errors.As(pushErr, &be) || len(be.Errs) != len(tasks) {
					t.Fatalf("PushBatch error %v, want a *BatchError with one error per task", pushErr)
				}
				for i, e := range be.Errs[len(res):] {
					var je *jobq.Error
					if !errors.As(e, &je) || je.MaybeApplied != tc.wantMaybe {
						t.Errorf("task %d: error %v, want MaybeApplied %v", len(res)+i, e, tc.wantMaybe)
					}
				}
				return
			}
			if st.Ready != 5 {
				t.Errorf("%d tasks stored, want 5, each once", st.Ready)
			}
			dups, resent := 0, 0
			for i, r := range res {
				if r.MessageID == "" || r.ID != tasks[i].ID {
					t.Errorf("result %d = %+v, want the task's ID and a message ID", i, r)
				}
				if r.Duplicate {
					dups++
				}
				if r.Resent {
					resent++
				}
			}
			if len(res) != 5 || dups != tc.wantDups || resent != tc.wantResent {
				t.Errorf("%d results with %d duplicates and %d resent, want 5 with %d and %d", len(res), dups, resent, tc.wantDups, tc.wantResent)
			}
		})
	}
}

func TestPushRetryEndsWithContext(t *testing.T) {
	t.Parallel()
	flaky.Lock()
	flaky.m["ctx"] = &flakyPush{fault: fault{fails: 1000, code: errcode.Unavailable}}
	flaky.Unlock()
	q, err := flakyMux.Open(context.Background(), "flaky://ctx", jobq.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = q.Push(ctx, &jobq.Task{Payload: json.RawMessage(`{}`)})
	// The last attempt's Unavailable, or, when the context ended during an
	// attempt, DeadlineExceeded (its outcome unknown).
	if c := errcode.Of(err); c != errcode.Unavailable && c != errcode.DeadlineExceeded {
		t.Fatalf("Push error %v, want Unavailable or DeadlineExceeded once the context ends", err)
	}
	// Without the context the default PushRetry would keep it going for
	// a minute.
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Push returned after %v, want soon after its context ended", d)
	}
}
