package faultproxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq/tools/testkit/faultproxy"
)

// backend counts the requests that reach it and answers "ok".
func backend(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("X-Backend", "yes")
		_, _ = io.WriteString(w, "ok "+r.URL.Path+"?"+r.URL.RawQuery)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func start(t *testing.T, target string, seed uint64) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start(target, seed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestFaults(t *testing.T) {
	t.Parallel()
	cases := []struct {
		fault      faultproxy.Fault
		wantStatus int    // 0: a transport error
		wantCode   string // x-ms-error-code
		forwarded  bool
	}{
		{faultproxy.None, 200, "", true},
		{faultproxy.Busy, 503, "ServerBusy", false},
		{faultproxy.TimeoutAfter, 500, "OperationTimedOut", true},
		{faultproxy.ResetAfter, 0, "", true},
		{faultproxy.Slow, 200, "", true},
	}
	for _, c := range cases {
		t.Run(c.fault.String(), func(t *testing.T) {
			t.Parallel()
			srv, hits := backend(t)
			p := start(t, srv.URL, 1)
			p.Add(faultproxy.Rule{Match: faultproxy.Method(http.MethodPut), Fault: c.fault, Times: 1, Delay: time.Millisecond})
			req, _ := http.NewRequest(http.MethodPut, p.URL()+"/acct/q/messages?x=1", nil)
			resp, err := http.DefaultClient.Do(req)
			switch {
			case c.wantStatus == 0 && err == nil:
				resp.Body.Close()
				t.Fatalf("status %d, want a connection reset", resp.StatusCode)
			case c.wantStatus != 0 && err != nil:
				t.Fatal(err)
			case c.wantStatus != 0:
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != c.wantStatus || resp.Header.Get("x-ms-error-code") != c.wantCode {
					t.Errorf("status %d code %q, want %d %q", resp.StatusCode, resp.Header.Get("x-ms-error-code"), c.wantStatus, c.wantCode)
				}
				if c.wantStatus == 200 && string(body) != "ok /acct/q/messages?x=1" {
					t.Errorf("body %q: path or query not forwarded", body)
				}
			}
			if got := hits.Load() == 1; got != c.forwarded {
				t.Errorf("forwarded = %v, want %v", got, c.forwarded)
			}
			if p.Injected(c.fault) != 1 {
				t.Errorf("Injected(%v) = %d, want 1", c.fault, p.Injected(c.fault))
			}
			// The rule is spent: the next request goes through untouched.
			resp, err = http.Get(p.URL() + "/again")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("after the rule: %v", err)
			}
			resp.Body.Close()
		})
	}
}

// TestSeeded: a random rule draws the same faults for the same seed.
func TestSeeded(t *testing.T) {
	t.Parallel()
	srv, _ := backend(t)
	run := func(seed uint64) []int {
		p := start(t, srv.URL, seed)
		p.Add(faultproxy.Rule{Fault: faultproxy.Busy, Rate: 0.5})
		var got []int
		for range 40 {
			resp, err := http.Get(p.URL() + "/x")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			got = append(got, resp.StatusCode)
		}
		return got
	}
	a, b := run(7), run(7)
	busy := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("request %d: %d then %d with the same seed", i, a[i], b[i])
		}
		if a[i] == 503 {
			busy++
		}
	}
	if busy == 0 || busy == len(a) {
		t.Errorf("%d of %d requests throttled at rate 0.5", busy, len(a))
	}
}
