package jobq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
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
	}{
		{name: "two failures", f: fault{fails: 2, code: errcode.Unavailable}, wantCalls: 3},
		{name: "stored prefix resumes after it", f: fault{fails: 1, store: 2, code: errcode.Unavailable}, wantCalls: 2},
		{name: "lost reply reports duplicates", f: fault{fails: 1, store: -1, code: errcode.Unavailable}, wantCalls: 2, wantDups: 5},
		{name: "retries off", f: fault{fails: 1, code: errcode.Unavailable}, retry: -1, wantCalls: 1, fails: true, wantCode: errcode.Unavailable},
		{name: "gives up after PushRetry", f: fault{fails: 1000, code: errcode.Unavailable}, retry: 300 * time.Millisecond, wantCalls: -1, fails: true, wantCode: errcode.Unavailable},
		{name: "other errors are not retried", f: fault{fails: 1, code: errcode.PermissionDenied}, wantCalls: 1, fails: true, wantCode: errcode.PermissionDenied},
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
			res, err := q.PushBatch(ctx, tasks, jobq.PushOptions{})
			if (err != nil) != tc.fails || (tc.fails && errcode.Of(err) != tc.wantCode) {
				t.Fatalf("PushBatch error %v, want failure %v with code %v", err, tc.fails, tc.wantCode)
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
				return
			}
			if st.Ready != 5 {
				t.Errorf("%d tasks stored, want 5, each once", st.Ready)
			}
			dups := 0
			for i, r := range res {
				if r.MessageID == "" || r.ID != tasks[i].ID {
					t.Errorf("result %d = %+v, want the task's ID and a message ID", i, r)
				}
				if r.Duplicate {
					dups++
				}
			}
			if len(res) != 5 || dups != tc.wantDups {
				t.Errorf("%d results with %d duplicates, want 5 with %d", len(res), dups, tc.wantDups)
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
	if errcode.Of(err) != errcode.Unavailable {
		t.Fatalf("Push error %v, want Unavailable once the context ends", err)
	}
	// Without the context the default PushRetry would keep it going for
	// a minute.
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Push returned after %v, want soon after its context ended", d)
	}
}
