package redis

import (
	"context"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jobq/jobq/internal/spinconn"
)

// probeAfter is how long a connection may go without reading a reply
// before go-redis's pool probes it again when handing it out.
const probeAfter = time.Second

// probeOnlyQuietConns wraps go-redis's dialer so that its connection pool
// skips its health probe on a connection that read a reply within the last
// probeAfter. The pool probes every connection it hands out with a
// non-blocking recvfrom(MSG_PEEK), one system call per command, a
// noticeable share of a one-at-a-time push. A connection that has just read a reply was alive
// then; one idle for longer (say, across a server restart) is probed as
// before and dropped if dead. TLS connections are left alone: the pool
// never probes them.
//
// Beneath that, spinconn makes reads poll for up to spin before parking
// (the spin= URL parameter; 0 turns it off).
func probeOnlyQuietConns(dial func(context.Context, string, string) (net.Conn, error), spin time.Duration) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		c = spinconn.Wrap(c, spin)
		sc, ok := c.(syscall.Conn)
		if !ok {
			return c, nil
		}
		raw, err := sc.SyscallConn()
		if err != nil {
			return c, nil
		}
		rc := &recentConn{Conn: c}
		rc.probe = quietProbe{raw, rc}
		return rc, nil
	}
}

// recentConn is a connection that remembers when it last read.
type recentConn struct {
	net.Conn
	// probe is what SyscallConn returns, made once: the pool asks for it
	// before every command.
	probe    syscall.RawConn
	lastRead atomic.Int64 // unix nanoseconds
}

func (c *recentConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.lastRead.Store(time.Now().UnixNano())
	}
	return n, err
}

// SyscallConn is what the pool's probe looks for; its Read runs the probe
// only when the connection has been quiet for probeAfter.
func (c *recentConn) SyscallConn() (syscall.RawConn, error) {
	return c.probe, nil
}

// SetDeadline is called by go-redis only in its probe, to clear both
// deadlines before peeking. When the probe will be skipped, so is the
// clearing: it would make the command's own read and write deadlines,
// set just after, reach the runtime every time (spinconn keeps them when
// they barely move). The margin of half of probeAfter makes sure the
// probe, which follows at once, is skipped too.
func (c *recentConn) SetDeadline(t time.Time) error {
	if t.IsZero() && time.Now().UnixNano()-c.lastRead.Load() < int64(probeAfter/2) {
		return nil
	}
	return c.Conn.SetDeadline(t)
}

type quietProbe struct {
	syscall.RawConn
	c *recentConn
}

func (p quietProbe) Read(f func(fd uintptr) bool) error {
	if time.Now().UnixNano()-p.c.lastRead.Load() < int64(probeAfter) {
		return nil
	}
	return p.RawConn.Read(f)
}
