package servicebus_test

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
)

// proxy forwards TCP connections to target and can cut them all, as a
// network failure would.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
}

func newProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, target: target}
	go p.serve()
	return p, nil
}

func (p *proxy) close() {
	_ = p.ln.Close()
	p.cut()
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(u, c); _ = u.Close() }()
		go func() { _, _ = io.Copy(c, u); _ = c.Close() }()
	}
}

// cut closes every open connection.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// TestConnectionLoss cuts the AMQP connection while a message is held and
// checks that the SDK's reconnection settles it exactly once: the
// completion goes through (on the management link, by lock token), and the
// message is neither redelivered nor lost; a push after the cut is stored.
func TestConnectionLoss(t *testing.T) {
	// Not parallel: cutting the connection would disturb other tests.
	if env.proxy == nil {
		t.Skip("needs the emulator (it cuts the connection through a local proxy)")
	}
	p := env.proxy
	ctx := ctxT(t)
	// The SDK needs a few seconds to recover; real lock durations are
	// 30s to 5m.
	q, _ := open(t, newQueueURL(t, "lock_duration=30s"))
	if _, err := q.PushBatch(ctx, []*jobq.Task{{Command: "one"}, {Command: "two"}}, jobq.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	e := receive(t, q)
	p.cut()
	if err := e.Complete(ctx); err != nil {
		t.Fatalf("complete after the connection was cut: %v", err)
	}
	p.cut()
	if _, err := q.Push(ctx, &jobq.Task{Command: "three"}); err != nil {
		t.Fatalf("push after the connection was cut: %v", err)
	}
	got := map[string]int{}
	for {
		next, err := q.Receive(ctx, jobq.ReceiveOptions{Wait: 2 * time.Second})
		if errors.Is(err, jobq.ErrEmpty) {
			break
		}
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		got[next.Task.Command]++
		if err := next.Complete(ctx); err != nil {
			t.Fatalf("complete: %v", err)
		}
	}
	want := map[string]int{"two": 1, "three": 1}
	if e.Task.Command == "two" {
		want = map[string]int{"one": 1, "three": 1}
	}
	if len(got) != len(want) || got["one"] != want["one"] || got["two"] != want["two"] || got["three"] != want["three"] {
		t.Fatalf("after completing %q across a cut connection the queue held %v, want %v", e.Task.Command, got, want)
	}
}
