// Package tcpfault is a TCP proxy for tests that breaks connections to an
// engine (Postgres, Redis) in the middle of a call: it cuts a request
// after some of its bytes, drops the reply to a request the engine got,
// or holds the reply back until the client gives up.
//
//	p, err := tcpfault.Start("127.0.0.1:5432")
//	defer p.Close()
//	p.Arm(tcpfault.Rule{Fault: tcpfault.DropReply, Match: tcpfault.Contains("EVALSHA")})
//	// point the client at p.Addr()
package tcpfault

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fault is what the proxy does to the request an armed rule matches.
type Fault int

// The faults.
const (
	// None forwards everything.
	None Fault = iota
	// CutRequest forwards the first N bytes of the request, then resets
	// the client's connection and closes the engine's: the engine never
	// gets the whole request.
	CutRequest
	// DropReply forwards the request, waits Settle for the engine to act
	// on it, then resets both connections: the reply is lost.
	DropReply
	// StallReply forwards the request and holds every later reply on that
	// connection back, until the client closes it.
	StallReply
)

// Rule is the fault for the next client write that Match accepts.
type Rule struct {
	Fault Fault
	// Match selects the write (a chunk as read from the client); nil
	// selects the next one.
	Match func([]byte) bool
	// N is how many bytes CutRequest forwards.
	N int
	// Settle is how long DropReply waits before the reset; 0 means 200ms.
	Settle time.Duration
	// Times is how many writes the rule fires on; 0 means one.
	Times int
}

// Contains matches a write that contains s.
func Contains(s string) func([]byte) bool {
	return func(b []byte) bool { return bytes.Contains(b, []byte(s)) }
}

// Proxy is a running proxy. Its methods may be called concurrently.
type Proxy struct {
	target string
	ln     net.Listener

	mu    sync.Mutex
	watch func([]byte)
	rule  *Rule
	fired int
	pairs map[*pair]struct{}
	// out is set while the engine is out (SetOut): connections are
	// reset as they come.
	out bool
}

type pair struct {
	client, server net.Conn
	mu             sync.Mutex
	stalled        bool
}

// Start listens on a free loopback port and forwards to target
// ("host:port").
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("tcpfault: listen: %w", err)
	}
	p := &Proxy{target: target, ln: ln, pairs: map[*pair]struct{}{}}
	go p.serve()
	return p, nil
}

// Addr is the proxy's "127.0.0.1:PORT".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Arm sets the rule for the next matching writes, replacing any other.
func (p *Proxy) Arm(r Rule) {
	if r.Times <= 0 {
		r.Times = 1
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rule = &r
}

// Watch calls f with every client write, before any rule sees it.
func (p *Proxy) Watch(f func([]byte)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.watch = f
}

// Disarm removes the rule.
func (p *Proxy) Disarm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rule = nil
}

// Fired is how many writes got a fault so far.
func (p *Proxy) Fired() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fired
}

// ResetAll resets every open connection now.
func (p *Proxy) ResetAll() {
	p.mu.Lock()
	ps := make([]*pair, 0, len(p.pairs))
	for c := range p.pairs {
		ps = append(ps, c)
	}
	p.mu.Unlock()
	for _, c := range ps {
		c.reset()
	}
}

// Close stops the proxy and resets its connections.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.ResetAll()
	return err
}

// SetOut makes the engine look down (out true: the open connections are
// reset and new ones reset as they come, as in a restart) or back up.
func (p *Proxy) SetOut(out bool) {
	p.mu.Lock()
	p.out = out
	p.mu.Unlock()
	if out {
		p.ResetAll()
	}
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		out := p.out
		p.mu.Unlock()
		if out {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		pr := &pair{client: c, server: s}
		p.mu.Lock()
		p.pairs[pr] = struct{}{}
		p.mu.Unlock()
		go p.up(pr)
		go p.down(pr)
	}
}

func (pr *pair) reset() {
	if tc, ok := pr.client.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = pr.client.Close()
	_ = pr.server.Close()
}

// take returns the rule that fires on b, if any.
func (p *Proxy) take(b []byte) *Rule {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.watch != nil {
		p.watch(b)
	}
	r := p.rule
	if r == nil || (r.Match != nil && !r.Match(b)) {
		return nil
	}
	r.Times--
	if r.Times <= 0 {
		p.rule = nil
	}
	p.fired++
	return r
}

// up copies the client's writes to the engine, applying the rule.
func (p *Proxy) up(pr *pair) {
	defer func() {
		p.mu.Lock()
		delete(p.pairs, pr)
		p.mu.Unlock()
		pr.reset()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := pr.client.Read(buf)
		if n > 0 {
			b := buf[:n]
			r := p.take(b)
			switch {
			case r == nil:
			case r.Fault == CutRequest:
				if r.N < len(b) {
					_, _ = pr.server.Write(b[:r.N])
				}
				time.Sleep(50 * time.Millisecond)
				return
			case r.Fault == DropReply:
				pr.mu.Lock()
				pr.stalled = true
				pr.mu.Unlock()
				_, _ = pr.server.Write(b)
				d := r.Settle
				if d <= 0 {
					d = 200 * time.Millisecond
				}
				time.Sleep(d)
				return
			case r.Fault == StallReply:
				pr.mu.Lock()
				pr.stalled = true
				pr.mu.Unlock()
			}
			if _, werr := pr.server.Write(b); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// down copies the engine's replies to the client, unless stalled.
func (p *Proxy) down(pr *pair) {
	buf := make([]byte, 64<<10)
	for {
		n, err := pr.server.Read(buf)
		if n > 0 {
			pr.mu.Lock()
			st := pr.stalled
			pr.mu.Unlock()
			if !st {
				if _, werr := pr.client.Write(buf[:n]); werr != nil {
					pr.reset()
					return
				}
			}
		}
		if err != nil {
			if err != io.EOF {
				pr.reset()
			}
			_ = pr.client.Close()
			return
		}
	}
}

// ForTest starts a proxy for test t to the engine that a queue URL names:
// environment variable env's URL, or fallback. It returns the proxy, the
// URL through it and the URL straight to the engine, both with a queue
// named after t, without TLS (sslmode=disable for Postgres) and with params
// set where the URL has none of them. t is skipped when the engine does not
// answer, or when the URL asks for TLS; the proxy closes when t ends.
func ForTest(t testing.TB, env, fallback string, params map[string]string) (p *Proxy, proxied, direct string) {
	t.Helper()
	base := os.Getenv(env)
	if base == "" {
		base = fallback
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("tcpfault: %s: %v", env, err)
	}
	if c, err := net.DialTimeout("tcp", u.Host, time.Second); err != nil {
		t.Skipf("needs an engine at %s", u.Host)
	} else {
		_ = c.Close()
	}
	p, err = Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	v := u.Query()
	// The proxy's rules read the protocol's bytes, which TLS would hide:
	// Postgres clients use TLS whenever the server offers it unless the
	// URL says otherwise.
	switch u.Scheme {
	case "postgres", "postgresql":
		if m := v.Get("sslmode"); m != "" && m != "disable" {
			t.Skipf("tcpfault reads the protocol, which TLS hides: %s has sslmode=%s; use sslmode=disable", env, m)
		}
		v.Set("sslmode", "disable")
	case "rediss":
		t.Skipf("tcpfault reads the protocol, which TLS hides: %s is a rediss:// URL; use redis://", env)
	}
	v.Set("queue", fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "."), time.Now().UnixNano()))
	for k, val := range params {
		if !v.Has(k) {
			v.Set(k, val)
		}
	}
	u.RawQuery = v.Encode()
	direct = u.String()
	u.Host = p.Addr()
	return p, u.String(), direct
}
