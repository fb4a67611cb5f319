// Package spinconn wraps a client's connection to a nearby server so that
// one request at a time costs less: a read polls the socket briefly before
// parking the goroutine, and deadlines reach the runtime only when they
// have moved by more than a small fraction of the time left.
//
// Why: when a goroutine waits for a reply, the Go runtime parks it and
// hands the wait to its network poller; the reply then wakes one thread,
// which may wake another to run the goroutine, and every deadline a client
// library sets moves a runtime timer. On a small virtual machine this
// costs more than the server's work, several times what a C client pays
// for the same request, and polling recovers most of the difference.
//
// The cost is CPU while polling, and on a small machine the server may need
// that CPU, so a read polls only when that is likely to pay:
//
//   - only while fewer than GOMAXPROCS reads wait for replies, counting
//     those parked because others were polling (so never with GOMAXPROCS=1,
//     and on two cores only a lone request polls: many requests at once
//     keep the server busy, and a poller would take its CPU);
//   - for at most the budget, after which the read parks;
//   - and not on a connection whose replies keep arriving later than that
//     (a distant server, a slow command, an idle subscription): after a
//     miss it skips polling for a number of reads that doubles with each
//     miss, up to 1024; a reply that arrives while polling resets it.
//
// A client whose connections should poll for some requests only (the
// Postgres backend polls for a one-task push's commit, not for claims)
// wraps them with WrapQuiet, finds the wrapper again with Of, and sets a
// budget around those requests with SetBudget.
package spinconn

import (
	"io"
	"math/bits"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultBudget is how long a read polls before it parks, unless Wrap is
// told otherwise: a loopback round trip plus a few tens of microseconds of
// server work.
const DefaultBudget = 100 * time.Microsecond

// maxSkip caps the number of reads a connection makes without polling
// after its polls missed.
const maxSkip = 1024

// waiting counts, across all connections, the reads polling now and those
// parked because others were (see Read).
var waiting atomic.Int32

// Conn is a connection wrapped by Wrap. Its methods other than Read,
// SetDeadline, SetReadDeadline, SetWriteDeadline and SyscallConn are the
// wrapped connection's.
type Conn struct {
	net.Conn
	raw        syscall.RawConn
	budget     atomic.Int64 // nanoseconds; reads do not poll while it is 0
	maxWaiting int32        // poll only while no more reads than this wait

	skip     atomic.Int32 // reads left to make without polling
	lastSkip atomic.Int32 // the skip the last miss set; the next doubles it

	polls, hits atomic.Int64 // reads that polled, and those that got their reply so

	mu     sync.Mutex // guards rd and wd
	rd, wd time.Time  // the deadlines last passed on
}

// Wrap returns c wrapped so that its reads poll for up to budget before
// parking. It returns c itself when budget is not positive or c is not a
// socket whose descriptor can be read directly (a TLS connection, say).
func Wrap(c net.Conn, budget time.Duration) net.Conn {
	if budget <= 0 {
		return c
	}
	w := WrapQuiet(c)
	if sc, ok := w.(*Conn); ok {
		sc.SetBudget(budget)
	}
	return w
}

// WrapQuiet returns c wrapped so that its deadlines reach the runtime only
// when they move, as Wrap does, but with polling off until SetBudget turns
// it on. It returns c itself when c is not a socket whose descriptor can be
// read directly.
func WrapQuiet(c net.Conn) net.Conn {
	sc, ok := c.(syscall.Conn)
	if !ok || !canPoll {
		return c
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	return &Conn{Conn: c, raw: raw, maxWaiting: int32(runtime.GOMAXPROCS(0) - 1)}
}

// Of returns the Conn that c is or that lies beneath it, seeing through a
// TLS connection made over one (anything with a NetConn method), or nil.
func Of(c net.Conn) *Conn {
	for c != nil {
		switch t := c.(type) {
		case *Conn:
			return t
		case interface{ NetConn() net.Conn }:
			c = t.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// Stats counts a connection's polling.
type Stats struct {
	Polls int64 // reads that polled
	Hits  int64 // polls that got their reply (or an error, or the end) before the budget ran out
}

// Stats returns the connection's counts since it was wrapped.
func (c *Conn) Stats() Stats { return Stats{Polls: c.polls.Load(), Hits: c.hits.Load()} }

// Budget returns how long the connection's reads poll now.
func (c *Conn) Budget() time.Duration { return time.Duration(c.budget.Load()) }

// SetBudget sets how long the connection's next reads poll before they
// park; 0 turns polling off. It may be called while a read is under way,
// which keeps the budget it started with.
func (c *Conn) SetBudget(budget time.Duration) {
	c.budget.Store(int64(max(budget, 0)))
}

// SyscallConn returns the wrapped connection's, so that a pool's health
// probe sees through the wrapper.
func (c *Conn) SyscallConn() (syscall.RawConn, error) { return c.raw, nil }

// Read reads like the wrapped connection's Read, polling first when
// allowed to.
func (c *Conn) Read(b []byte) (int, error) {
	budget := time.Duration(c.budget.Load())
	if len(b) == 0 || c.maxWaiting <= 0 || budget <= 0 {
		return c.Conn.Read(b)
	}
	if s := c.skip.Load(); s > 0 {
		c.skip.Store(s - 1)
		return c.Conn.Read(b)
	}
	// Count this read as waiting until its reply comes, whether it polls
	// or parks, so that no other read polls beside it while the server
	// is working for both: on a small machine the server needs that CPU.
	if waiting.Add(1) > c.maxWaiting {
		defer waiting.Add(-1)
		return c.Conn.Read(b)
	}
	n, got, err, rawErr := c.poll(b, budget)
	waiting.Add(-1)
	c.polls.Add(1)
	if got {
		c.hits.Add(1)
	}
	switch {
	case rawErr != nil:
		// Closed, or past the read deadline: the wrapped Read reports it
		// in its own words.
		return c.Conn.Read(b)
	case !got:
		// A slow reply (or a subscription's next message) is not a
		// reason to keep others from polling: park uncounted.
		c.missed()
		return c.Conn.Read(b)
	}
	if c.lastSkip.Load() != 0 {
		c.lastSkip.Store(0)
	}
	if err != nil {
		return 0, &net.OpError{Op: "read", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("read", err)}
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// poll reads from the socket until data, an error or the end of the stream
// comes (got), or budget passes. rawErr is set when the connection
// could not be read at all.
func (c *Conn) poll(b []byte, budget time.Duration) (n int, got bool, err, rawErr error) {
	rawErr = c.raw.Read(func(fd uintptr) bool {
		until := time.Now().Add(budget)
		for {
			var empty bool
			n, empty, err = readFD(fd, b)
			switch {
			case !empty:
				got = true
				return true
			case time.Now().After(until):
				return true
			}
		}
	})
	return n, got, err, rawErr
}

// missed makes the connection skip polling for twice as many reads as the
// last miss did, up to maxSkip.
func (c *Conn) missed() {
	s := min(max(2*c.lastSkip.Load(), 1), maxSkip)
	c.lastSkip.Store(s)
	c.skip.Store(s)
}

// SetDeadline sets both deadlines, as SetReadDeadline and SetWriteDeadline
// do.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetReadDeadline passes t on rounded up by coarse, unless that is the
// deadline already set.
func (c *Conn) SetReadDeadline(t time.Time) error {
	return c.setDeadline(t, &c.rd, c.Conn.SetReadDeadline)
}

// SetWriteDeadline is SetReadDeadline for writes.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	return c.setDeadline(t, &c.wd, c.Conn.SetWriteDeadline)
}

// setDeadline spares the runtime's timer an update, which a client library
// makes twice per command, when the rounded deadline has not moved.
func (c *Conn) setDeadline(t time.Time, last *time.Time, set func(time.Time) error) error {
	t = coarse(t, time.Now())
	c.mu.Lock()
	defer c.mu.Unlock()
	if !t.IsZero() && t.Equal(*last) {
		return nil
	}
	if err := set(t); err != nil {
		return err
	}
	*last = t
	return nil
}

// coarse rounds a future deadline t up to a multiple of the largest power
// of two nanoseconds not above a sixteenth of the time left, so that it is
// late by less than 1/16 of it: a 3 s timeout set thousands of times a
// second lands on the same deadline for 134 ms at a time. A zero deadline,
// or one less than 16 ns away, is kept as it is.
func coarse(t, now time.Time) time.Time {
	left := t.Sub(now)
	if t.IsZero() || left < 16 {
		return t
	}
	grain := int64(1) << (bits.Len64(uint64(left/16)) - 1)
	ns := t.UnixNano()
	// Add, not time.Unix, keeps t's monotonic clock reading, so that a
	// step of the wall clock does not move the deadline.
	return t.Add(time.Duration((ns+grain-1)/grain*grain - ns))
}
