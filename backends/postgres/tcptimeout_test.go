//go:build linux

package postgres

import (
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// TestConnectionsBoundUnansweredRequests: the connections of a queue opened
// by URL carry TCP_USER_TIMEOUT, so a request the server's machine never
// acknowledges (it vanished: a preempted VM, a failover that moved its
// address) fails after tcp_user_timeout, not after the system's 15 minutes
// of retransmissions. 0 leaves the system's.
func TestConnectionsBoundUnansweredRequests(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		params []string
		wantMS int
	}{
		{nil, 30000},
		{[]string{"tcp_user_timeout=5s"}, 5000},
		{[]string{"tcp_user_timeout=0"}, 0},
	} {
		// spin=0: the connection is the TCP one itself, not spinconn's
		// wrapper of it.
		d := openDriver(t, append(tc.params, "spin=0")...)
		c, err := d.pool.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		conn := c.Conn().PgConn().Conn()
		if tl, ok := conn.(interface{ NetConn() net.Conn }); ok {
			conn = tl.NetConn() // TLS, when the server offers it and the URL allows it
		}
		tcp, ok := conn.(*net.TCPConn)
		if !ok {
			c.Release()
			t.Fatalf("%v: the connection is a %T, not TCP", tc.params, conn)
		}
		raw, err := tcp.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var got int
		var gerr error
		if err := raw.Control(func(fd uintptr) {
			got, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
		}); err != nil || gerr != nil {
			t.Fatal(err, gerr)
		}
		c.Release()
		if got != tc.wantMS {
			t.Errorf("%v: TCP_USER_TIMEOUT = %d ms; want %d", tc.params, got, tc.wantMS)
		}
	}
}
