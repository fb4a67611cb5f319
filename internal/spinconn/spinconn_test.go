package spinconn

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestCoarse(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 123_456_789)
	tests := []struct {
		name string
		left time.Duration
	}{
		{"10ns", 10},
		{"16ns", 16},
		{"1µs", time.Microsecond},
		{"1ms", time.Millisecond},
		{"3s", 3 * time.Second},
		{"1h", time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := now.Add(tt.left)
			got := coarse(d, now)
			if got.Before(d) {
				t.Fatalf("coarse moved the deadline %s ahead earlier, to %s ahead", tt.left, got.Sub(now))
			}
			if late := got.Sub(d); tt.left >= 16 && late >= tt.left/16 {
				t.Fatalf("coarse made a deadline %s ahead %s late; the limit is a sixteenth", tt.left, late)
			}
			if tt.left < 16 && !got.Equal(d) {
				t.Fatalf("coarse changed a deadline %s ahead", tt.left)
			}
			// Any deadline between the previous grain boundary and got
			// rounds to got: that is what spares the timer updates.
			if tt.left >= time.Microsecond && !coarse(got.Add(-1), now).Equal(got) {
				t.Fatalf("a deadline 1ns before %s rounds elsewhere", got.Sub(now))
			}
		})
	}
	if got := coarse(time.Time{}, now); !got.IsZero() {
		t.Fatalf("the zero deadline became %v", got)
	}
	past := now.Add(-time.Second)
	if got := coarse(past, now); !got.Equal(past) {
		t.Fatalf("a past deadline became %v", got)
	}
	// A deadline from time.Now keeps its monotonic clock reading (which
	// String prints as m=...), so a wall-clock step does not move it.
	if got := coarse(time.Now().Add(3*time.Second), time.Now()); !strings.Contains(got.String(), " m=") {
		t.Fatalf("coarse dropped the monotonic clock reading: %v", got)
	}
}

// countingConn counts the deadlines that reach it.
type countingConn struct {
	net.Conn
	reads, writes atomic.Int32
}

func (c *countingConn) SetReadDeadline(t time.Time) error {
	c.reads.Add(1)
	return c.Conn.SetReadDeadline(t)
}

func (c *countingConn) SetWriteDeadline(t time.Time) error {
	c.writes.Add(1)
	return c.Conn.SetWriteDeadline(t)
}

func TestDeadlinesPassOnOnlyWhenMoved(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	defer b.Close()
	inner := &countingConn{Conn: a}
	c := &Conn{Conn: inner}
	defer c.Close()

	first := time.Now().Add(3 * time.Second)
	rounded := coarse(first, time.Now())
	steps := []struct {
		name          string
		set           func() error
		reads, writes int32
	}{
		{"first read deadline", func() error { return c.SetReadDeadline(first) }, 1, 0},
		{"same rounded read deadline", func() error { return c.SetReadDeadline(rounded.Add(-1)) }, 1, 0},
		{"write deadline", func() error { return c.SetWriteDeadline(first) }, 1, 1},
		{"both, unmoved", func() error { return c.SetDeadline(first) }, 1, 1},
		{"zero clears", func() error { return c.SetReadDeadline(time.Time{}) }, 2, 1},
		{"later read deadline", func() error { return c.SetReadDeadline(rounded.Add(time.Second)) }, 3, 1},
		{"past deadline", func() error { return c.SetDeadline(time.Now().Add(-time.Millisecond)) }, 4, 2},
	}
	for _, s := range steps {
		if err := s.set(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if r, w := inner.reads.Load(), inner.writes.Load(); r != s.reads || w != s.writes {
			t.Fatalf("after %s: %d read and %d write deadlines reached the connection, want %d and %d", s.name, r, w, s.reads, s.writes)
		}
	}
	// The past deadline that was passed on is in force.
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want a deadline error", err)
	}
}

func TestWrapLeavesOtherConnsAlone(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if got := Wrap(a, DefaultBudget); got != a {
		t.Fatalf("Wrap wrapped a connection without a file descriptor: %T", got)
	}
	client, _ := dialPair(t)
	if got := Wrap(client, 0); got != client {
		t.Fatalf("Wrap with budget 0 wrapped the connection: %T", got)
	}
	if _, ok := Wrap(client, DefaultBudget).(*Conn); !ok {
		t.Fatal("Wrap left a TCP connection unwrapped")
	}
}

// dialPair returns both ends of a loopback TCP connection.
func dialPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		s, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- s
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// wrapped returns a wrapped loopback client allowed to poll whatever
// GOMAXPROCS is, and the server's end.
func wrapped(t *testing.T) (*Conn, net.Conn) {
	client, server := dialPair(t)
	c := Wrap(client, DefaultBudget).(*Conn)
	c.maxWaiting = 1 << 20
	return c, server
}

func readString(t *testing.T, c net.Conn, n int) string {
	t.Helper()
	buf := make([]byte, n)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("read: %v", err)
	}
	return string(buf)
}

// TestReadPollsThenParks follows a connection's polling state through
// replies that are already there (a hit), and replies that come long after
// the budget (a miss: the read parks and skips polling next time, for
// twice as many reads after each miss).
func TestReadPollsThenParks(t *testing.T) {
	t.Parallel()
	c, server := wrapped(t)
	replyAfter := func(d time.Duration, s string) {
		go func() {
			time.Sleep(d)
			_, _ = server.Write([]byte(s))
		}()
	}
	steps := []struct {
		name     string
		delay    time.Duration // before the server replies
		wait     time.Duration // before the client reads
		skip     int32         // skip and lastSkip after the read
		lastSkip int32
	}{
		{"reply already there", 0, 20 * time.Millisecond, 0, 0},
		{"late reply", 50 * time.Millisecond, 0, 1, 1},
		{"skipped poll", 0, 20 * time.Millisecond, 0, 1},
		{"late again", 50 * time.Millisecond, 0, 2, 2},
		{"skipped", 0, 20 * time.Millisecond, 1, 2},
		{"skipped", 0, 20 * time.Millisecond, 0, 2},
		{"late a third time", 50 * time.Millisecond, 0, 4, 4},
		{"skipped", 0, 0, 3, 4},
		{"skipped", 0, 0, 2, 4},
		{"skipped", 0, 0, 1, 4},
		{"skipped", 0, 0, 0, 4},
		{"hit resets", 0, 20 * time.Millisecond, 0, 0},
	}
	for i, s := range steps {
		msg := string(rune('a' + i))
		replyAfter(s.delay, msg)
		time.Sleep(s.wait)
		if got := readString(t, c, 1); got != msg {
			t.Fatalf("%s: read %q, want %q", s.name, got, msg)
		}
		if sk, ls := c.skip.Load(), c.lastSkip.Load(); sk != s.skip || ls != s.lastSkip {
			t.Fatalf("after %s: skip %d, last skip %d; want %d and %d", s.name, sk, ls, s.skip, s.lastSkip)
		}
	}
}

// TestReadEnds checks the ways a read ends other than with data: the end
// of the stream, a deadline, and Close from another goroutine.
func TestReadEnds(t *testing.T) {
	t.Parallel()
	t.Run("end of stream", func(t *testing.T) {
		t.Parallel()
		c, server := wrapped(t)
		_ = server.Close()
		time.Sleep(10 * time.Millisecond)
		if n, err := c.Read(make([]byte, 8)); n != 0 || err != io.EOF {
			t.Fatalf("read after the server closed: %d, %v; want 0, io.EOF", n, err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		c, _ := wrapped(t)
		if err := c.SetReadDeadline(time.Now().Add(30 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		_, err := c.Read(make([]byte, 8))
		var ne net.Error
		if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("read past its deadline: %v; want a timeout", err)
		}
	})
	t.Run("closed while reading", func(t *testing.T) {
		t.Parallel()
		c, _ := wrapped(t)
		go func() {
			time.Sleep(30 * time.Millisecond)
			_ = c.Close()
		}()
		if _, err := c.Read(make([]byte, 8)); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read on a connection closed under it: %v; want net.ErrClosed", err)
		}
	})
}

// TestNoPollingBesideWaitingReads checks that a read does not poll while
// another read waits for its reply, and that a read that did not poll
// counts as waiting until its reply comes.
func TestNoPollingBesideWaitingReads(t *testing.T) {
	// Not parallel: it sets the package's count of waiting reads.
	c, server := wrapped(t)
	c.maxWaiting = 1
	waiting.Add(1) // another read is waiting
	done := make(chan string)
	go func() {
		buf := make([]byte, 1)
		_, _ = io.ReadFull(c, buf)
		done <- string(buf)
	}()
	eventually(t, "the read to count as waiting", func() bool { return waiting.Load() == 2 })
	waiting.Add(-1) // the other read ends; this one still waits
	time.Sleep(20 * time.Millisecond)
	if n := waiting.Load(); n != 1 {
		t.Fatalf("%d reads counted as waiting, want 1 (the parked one)", n)
	}
	_, _ = server.Write([]byte("x"))
	if got := <-done; got != "x" {
		t.Fatalf("read %q, want x", got)
	}
	// Had it polled, the late reply would have been a miss.
	if sk, ls := c.skip.Load(), c.lastSkip.Load(); sk != 0 || ls != 0 {
		t.Fatalf("the read polled beside another: skip %d, last skip %d", sk, ls)
	}
	if n := waiting.Load(); n != 0 {
		t.Fatalf("%d reads counted as waiting after all ended", n)
	}

	// Alone, a read polls; when it misses it parks uncounted, so that it
	// keeps no one else from polling.
	go func() {
		buf := make([]byte, 1)
		_, _ = io.ReadFull(c, buf)
		done <- string(buf)
	}()
	eventually(t, "the read to miss", func() bool { return c.skip.Load() == 1 })
	if n := waiting.Load(); n != 0 {
		t.Fatalf("a read parked after a miss counts as waiting (%d)", n)
	}
	_, _ = server.Write([]byte("y"))
	if got := <-done; got != "y" {
		t.Fatalf("read %q, want y", got)
	}

	// With maxWaiting 0 (GOMAXPROCS=1) nothing polls: a late reply is no miss.
	c.maxWaiting = 0
	c.skip.Store(0)
	c.lastSkip.Store(0)
	replyLate(server, "z")
	if got := readString(t, c, 1); got != "z" {
		t.Fatalf("read %q, want z", got)
	}
	if sk := c.skip.Load(); sk != 0 {
		t.Fatal("a connection with maxWaiting 0 polled")
	}
}

func replyLate(server net.Conn, s string) {
	go func() {
		time.Sleep(30 * time.Millisecond)
		_, _ = server.Write([]byte(s))
	}()
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestQuietPollsOnlyWithBudget checks WrapQuiet and SetBudget: a quiet
// connection's reads do not poll until a budget is set, poll while it is,
// and stop when it is set back to 0; Stats counts the polls and their hits.
func TestQuietPollsOnlyWithBudget(t *testing.T) {
	t.Parallel()
	client, server := dialPair(t)
	c, ok := WrapQuiet(client).(*Conn)
	if !ok {
		t.Fatal("WrapQuiet left a TCP connection unwrapped")
	}
	c.maxWaiting = 1 << 20
	steps := []struct {
		name   string
		budget time.Duration
		delay  time.Duration // before the server replies
		wait   time.Duration // before the client reads
		want   Stats
	}{
		{"quiet, late reply", 0, 30 * time.Millisecond, 0, Stats{}},
		{"quiet, reply there", 0, 0, 20 * time.Millisecond, Stats{}},
		{"budget, reply there", DefaultBudget, 0, 20 * time.Millisecond, Stats{Polls: 1, Hits: 1}},
		{"budget, late reply", DefaultBudget, 30 * time.Millisecond, 0, Stats{Polls: 2, Hits: 1}},
		{"quiet again", 0, 0, 20 * time.Millisecond, Stats{Polls: 2, Hits: 1}},
	}
	for i, s := range steps {
		c.SetBudget(s.budget)
		if got := c.Budget(); got != s.budget {
			t.Fatalf("%s: Budget() = %v after SetBudget(%v)", s.name, got, s.budget)
		}
		msg := string(rune('a' + i))
		go func() {
			time.Sleep(s.delay)
			_, _ = server.Write([]byte(msg))
		}()
		time.Sleep(s.wait)
		if got := readString(t, c, 1); got != msg {
			t.Fatalf("%s: read %q, want %q", s.name, got, msg)
		}
		if got := c.Stats(); got != s.want {
			t.Fatalf("after %s: %+v, want %+v", s.name, got, s.want)
		}
	}
	c.SetBudget(-time.Second)
	if got := c.Budget(); got != 0 {
		t.Fatalf("a negative budget was kept as %v, want 0", got)
	}
}

// TestOfFindsTheWrapper checks that Of finds the wrapper on its own, beneath
// a TLS connection, and nowhere else.
func TestOfFindsTheWrapper(t *testing.T) {
	t.Parallel()
	client, _ := dialPair(t)
	w := WrapQuiet(client)
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	cases := []struct {
		name string
		conn net.Conn
		want net.Conn
	}{
		{"the wrapper", w, w},
		{"under TLS", tls.Client(w, &tls.Config{InsecureSkipVerify: true}), w},
		{"TLS over a pipe", tls.Client(a, &tls.Config{InsecureSkipVerify: true}), nil},
		{"a pipe", a, nil},
		{"nil", nil, nil},
	}
	for _, c := range cases {
		got := Of(c.conn)
		if (got == nil && c.want != nil) || (got != nil && net.Conn(got) != c.want) {
			t.Errorf("Of(%s) = %v, want %v", c.name, got, c.want)
		}
	}
}
