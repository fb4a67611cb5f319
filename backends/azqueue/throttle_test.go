package azqueue_test

import (
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
)

// throttlingProxy forwards to the queue service but answers the first
// `throttle` message requests with 503 ServerBusy, as a throttled storage
// account does.
func throttlingProxy(t *testing.T, throttle int64) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	target, err := url.Parse("http://127.0.0.1:10001")
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var throttled atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/messages") && throttled.Load() < throttle {
			throttled.Add(1)
			w.Header().Set("x-ms-error-code", "ServerBusy")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &throttled
}

func TestThrottlingIsRetried(t *testing.T) {
	t.Parallel()
	if strings.Contains(connStr, "core.windows.net") || !strings.Contains(connStr, "127.0.0.1:10001") {
		t.Skip("needs Azurite: the proxy forwards to 127.0.0.1:10001")
	}
	cases := []struct {
		name     string
		params   string
		throttle int64
		wantCode driver.Code // Unknown: the push succeeds
	}{
		{"retried with backoff", "?retry_delay=10ms", 3, driver.Unknown},
		{"retries exhausted", "?retries=1&retry_delay=10ms", 5, driver.ResourceExhausted},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv, throttled := throttlingProxy(t, c.throttle)
			opener := &azq.URLOpener{ConnectionString: strings.Replace(azq.DevelopmentConnectionString,
				"http://127.0.0.1:10001", srv.URL, 1)}
			u, _ := url.Parse(newQueueURL(t) + c.params)
			d, err := opener.Open(t.Context(), u, driver.OpenOptions{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			start := time.Now()
			_, err = d.Push(t.Context(), []*driver.Message{{ID: "t", Body: []byte(`{"x": 1}`)}})
			switch {
			case c.wantCode == driver.Unknown && err != nil:
				t.Fatalf("push through %d throttled responses: %v", c.throttle, err)
			case c.wantCode != driver.Unknown && driver.CodeOf(err) != c.wantCode:
				t.Fatalf("push: %v (code %v), want %v", err, driver.CodeOf(err), c.wantCode)
			}
			t.Logf("%d throttled responses, %v", throttled.Load(), time.Since(start))
			if c.wantCode == driver.Unknown && throttled.Load() != c.throttle {
				t.Errorf("%d requests throttled, want %d", throttled.Load(), c.throttle)
			}
		})
	}
}
