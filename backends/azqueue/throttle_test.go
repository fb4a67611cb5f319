package azqueue_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	azq "github.com/jobq/jobq/backends/azqueue"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// throttlingProxy forwards to the queue service but answers the first
// `throttle` message requests with 503 ServerBusy, as a throttled storage
// account does. It counts the dequeues (Get Messages) it forwards.
func throttlingProxy(t *testing.T, throttle int64) (srv *httptest.Server, throttled, dequeues *atomic.Int64) {
	t.Helper()
	target, err := url.Parse("http://127.0.0.1:10001")
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	throttled, dequeues = new(atomic.Int64), new(atomic.Int64)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/messages") && r.URL.Query().Get("peekonly") == "" {
			dequeues.Add(1)
		}
		if strings.HasSuffix(r.URL.Path, "/messages") && throttled.Load() < throttle {
			throttled.Add(1)
			w.Header().Set("x-ms-error-code", "ServerBusy")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, throttled, dequeues
}

// openThrough opens rawURL with a connection string that points at srv.
func openThrough(t *testing.T, srv *httptest.Server, rawURL string) driver.Driver {
	t.Helper()
	if strings.Contains(connStr, "core.windows.net") || !strings.Contains(connStr, "127.0.0.1:10001") {
		t.Skip("needs Azurite: the proxy forwards to 127.0.0.1:10001")
	}
	opener := &azq.URLOpener{ConnectionString: strings.Replace(azq.DevelopmentConnectionString,
		"http://127.0.0.1:10001", srv.URL, 1)}
	u, _ := url.Parse(rawURL)
	d, err := opener.Open(t.Context(), u, driver.OpenOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestThrottlingIsRetried(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		params   string
		throttle int64
		wantCode errcode.Code // Unknown: the push succeeds
	}{
		{"retried with backoff", "?retry_delay=10ms", 3, errcode.Unknown},
		{"retries exhausted", "?retries=1&retry_delay=10ms", 5, errcode.ResourceExhausted},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv, throttled, _ := throttlingProxy(t, c.throttle)
			d := openThrough(t, srv, newQueueURL(t)+c.params)
			start := time.Now()
			_, err := d.Push(t.Context(), []*driver.Message{{ID: "t", Body: []byte(`{"x": 1}`)}})
			switch {
			case c.wantCode == errcode.Unknown && err != nil:
				t.Fatalf("push through %d throttled responses: %v", c.throttle, err)
			case c.wantCode != errcode.Unknown && errcode.Of(err) != c.wantCode:
				t.Fatalf("push: %v (code %v), want %v", err, errcode.Of(err), c.wantCode)
			}
			t.Logf("%d throttled responses, %v", throttled.Load(), time.Since(start))
			if c.wantCode == errcode.Unknown && throttled.Load() != c.throttle {
				t.Errorf("%d requests throttled, want %d", throttled.Load(), c.throttle)
			}
		})
	}
}

// TestIdleReceiversTakeTurns: receivers of an idle queue share one polling
// pace, so many of them cost no more requests than one.
func TestIdleReceiversTakeTurns(t *testing.T) {
	t.Parallel()
	srv, _, dequeues := throttlingProxy(t, 0)
	d := openThrough(t, srv, newQueueURL(t)+"?poll_min=200ms&poll_max=200ms")
	const receivers, wait = 8, 2 * time.Second
	done := make(chan error, receivers)
	for range receivers {
		go func() {
			recs, err := d.Receive(t.Context(), driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: wait})
			if err == nil && len(recs) > 0 {
				err = fmt.Errorf("received %d messages from an empty queue", len(recs))
			}
			done <- err
		}()
	}
	for range receivers {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	// Alone, each receiver would poll every 200 ms: about 80 dequeues.
	// Taking turns: one every 200 ms, plus each receiver's first.
	t.Logf("%d receivers, %v idle: %d dequeues", receivers, wait, dequeues.Load())
	if n := dequeues.Load(); n > receivers+int64(wait/(200*time.Millisecond))+5 {
		t.Errorf("%d receivers made %d dequeues in %v of an idle queue; want about %d",
			receivers, n, wait, receivers+int64(wait/(200*time.Millisecond)))
	}

	// A push ends the idle state: a waiting receiver gets it.
	got := make(chan error, 1)
	go func() {
		recs, err := d.Receive(t.Context(), driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: 10 * time.Second})
		if err == nil && len(recs) != 1 {
			err = fmt.Errorf("received %d messages, want 1", len(recs))
		}
		got <- err
	}()
	if _, err := d.Push(t.Context(), []*driver.Message{{ID: "t", Body: []byte(`{"x": 1}`)}}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}
