// Package faultproxy is an HTTP proxy for tests that injects the faults a
// cloud service shows under load: throttling before a request is applied,
// and server errors, connection resets and slow answers after it was.
//
// It listens on a loopback port and forwards every request to one target
// (for example Azurite at http://127.0.0.1:10001). Rules decide, request by
// request, which fault to inject; they can be changed while the proxy runs,
// and random rules draw from a seeded source, so a run can be repeated.
//
//	p, err := faultproxy.Start("http://127.0.0.1:10001", 1)
//	defer p.Close()
//	p.Add(faultproxy.Rule{Match: faultproxy.Method("DELETE"), Fault: faultproxy.TimeoutAfter, Times: 1})
//	// point the client at p.URL()
package faultproxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Fault is what the proxy does to one request.
type Fault int

// The faults. Busy is never applied by the target; the others are
// forwarded first, so the target applies the request and only its answer is
// lost or late.
const (
	// None forwards the request and its answer.
	None Fault = iota
	// Busy answers 503 ServerBusy without forwarding, as a throttled
	// storage account does.
	Busy
	// TimeoutAfter forwards the request, drops the answer and answers 500
	// OperationTimedOut instead.
	TimeoutAfter
	// ResetAfter forwards the request, drops the answer and resets the
	// client's connection.
	ResetAfter
	// Slow forwards the request and holds the answer back for the rule's
	// Delay.
	Slow
	numFaults
)

var faultNames = [...]string{"None", "Busy", "TimeoutAfter", "ResetAfter", "Slow"}

// String returns the fault's name.
func (f Fault) String() string {
	if f >= 0 && f < numFaults {
		return faultNames[f]
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// Rule injects Fault into requests that Match accepts: into the next Times
// of them when Times > 0, else into each with probability Rate.
type Rule struct {
	// Match selects the requests; nil selects every request.
	Match func(*http.Request) bool
	Fault Fault
	// Times, when positive, injects the fault into that many matching
	// requests, then the rule is spent.
	Times int
	// Rate is the probability of the fault per matching request when Times
	// is zero.
	Rate float64
	// Delay is how long a Slow fault holds the answer back. Zero means one
	// second.
	Delay time.Duration
}

// Proxy is a running fault-injecting proxy. Its methods may be called
// concurrently.
type Proxy struct {
	target *url.URL
	ln     net.Listener
	srv    *http.Server
	client *http.Transport

	mu    sync.Mutex
	rules []*Rule
	rng   *rand.Rand

	injected [numFaults]atomic.Int64
	requests atomic.Int64
}

// Start starts a proxy on a free loopback port that forwards to target (a
// URL such as "http://127.0.0.1:10001"); seed seeds the random rules.
func Start(target string, seed uint64) (*Proxy, error) {
	t, err := url.Parse(target)
	if err != nil || t.Host == "" {
		return nil, fmt.Errorf("faultproxy: target %q is not a URL with a host", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{
		target: t,
		ln:     ln,
		client: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second},
		rng:    rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL is the proxy's base URL, "http://127.0.0.1:PORT".
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Add appends a rule. Rules are tried in the order added; the first that
// fires decides the request's fault.
func (p *Proxy) Add(r Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, &r)
}

// Clear removes every rule: requests are forwarded untouched.
func (p *Proxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = nil
}

// Injected returns how many requests got fault f so far.
func (p *Proxy) Injected(f Fault) int64 {
	if f < 0 || f >= numFaults {
		return 0
	}
	return p.injected[f].Load()
}

// Requests returns how many requests the proxy has received.
func (p *Proxy) Requests() int64 { return p.requests.Load() }

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() error {
	err := p.srv.Close()
	p.client.CloseIdleConnections()
	return err
}

// decide picks the fault for r.
func (p *Proxy) decide(r *http.Request) (Fault, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, rule := range p.rules {
		if rule.Match != nil && !rule.Match(r) {
			continue
		}
		if rule.Times > 0 {
			rule.Times--
			if rule.Times == 0 {
				p.rules = append(p.rules[:i:i], p.rules[i+1:]...)
			}
			return rule.Fault, rule.Delay
		}
		if rule.Rate > 0 && p.rng.Float64() < rule.Rate {
			return rule.Fault, rule.Delay
		}
	}
	return None, 0
}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	fault, delay := p.decide(r)
	p.injected[fault].Add(1)
	if fault == Busy {
		writeError(w, http.StatusServiceUnavailable, "ServerBusy", "The server is busy (injected by faultproxy).")
		return
	}
	resp, body, err := p.forward(r)
	if err != nil {
		writeError(w, http.StatusBadGateway, "ProxyError", err.Error())
		return
	}
	switch fault {
	case TimeoutAfter:
		writeError(w, http.StatusInternalServerError, "OperationTimedOut", "Operation could not be completed within the specified time (injected by faultproxy after the request was applied).")
		return
	case ResetAfter:
		reset(w)
		return
	case Slow:
		if delay <= 0 {
			delay = time.Second
		}
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}

// forward sends r to the target and reads the whole answer.
func (p *Proxy) forward(r *http.Request) (*http.Response, []byte, error) {
	u := *p.target
	u.Path = strings.TrimSuffix(u.Path, "/") + r.URL.Path
	u.RawPath = ""
	u.RawQuery = r.URL.RawQuery
	// The request goes on even if the client gives up: an answer that
	// nobody reads is exactly what the faults model.
	out, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, u.String(), r.Body)
	if err != nil {
		return nil, nil, err
	}
	out.ContentLength = r.ContentLength
	for k, vs := range r.Header {
		out.Header[k] = vs
	}
	out.Host = r.Host
	resp, err := p.client.RoundTrip(out)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	return resp, body, nil
}

// writeError answers as Azure Storage does: the code in x-ms-error-code
// and in an XML body.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	var b bytes.Buffer
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="utf-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, msg)
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("x-ms-error-code", code)
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// reset closes the client's connection with a TCP reset.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = conn.Close()
}

// Method matches requests with the given HTTP method.
func Method(method string) func(*http.Request) bool {
	return func(r *http.Request) bool { return r.Method == method }
}

// All matches requests that every one of ms matches.
func All(ms ...func(*http.Request) bool) func(*http.Request) bool {
	return func(r *http.Request) bool {
		for _, m := range ms {
			if !m(r) {
				return false
			}
		}
		return true
	}
}

// PathContains matches requests whose URL path contains s.
func PathContains(s string) func(*http.Request) bool {
	return func(r *http.Request) bool { return strings.Contains(r.URL.Path, s) }
}
