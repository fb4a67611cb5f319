package redis

import (
	"context"
	"net"
	"net/url"
	"strconv"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/internal/spinconn"
)

// TestQuietProbe checks that the pool's probe runs on a connection only
// when it has not read for probeAfter.
func TestQuietProbe(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		s, err := ln.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		_, _ = s.Write([]byte("+OK\r\n"))
		time.Sleep(time.Second)
	}()
	dial := probeOnlyQuietConns((&net.Dialer{}).DialContext, spinconn.DefaultBudget)
	c, err := dial(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc, ok := c.(*recentConn)
	if !ok {
		t.Fatalf("a TCP connection was not wrapped: %T", c)
	}
	probed := func() bool {
		raw, err := c.(syscall.Conn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		called := false
		if err := raw.Read(func(uintptr) bool { called = true; return true }); err != nil {
			t.Fatal(err)
		}
		return called
	}
	if !probed() {
		t.Error("a connection that never read was not probed")
	}
	if _, err := c.Read(make([]byte, 5)); err != nil {
		t.Fatal(err)
	}
	if probed() {
		t.Error("a connection that has just read was probed")
	}
	rc.lastRead.Store(time.Now().Add(-probeAfter - time.Millisecond).UnixNano())
	if !probed() {
		t.Errorf("a connection quiet for more than %v was not probed", probeAfter)
	}
}

// TestPoolDropsConnKilledWhileQuiet: a pooled connection the server closed
// while it sat idle is probed and replaced, so the next command succeeds
// (the driver's client does not retry commands).
func TestPoolDropsConnKilledWhileQuiet(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(testBaseURL())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_size", "1")
	u.RawQuery = q.Encode()
	cfg, err := parseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.newClient().(*goredis.Client)
	defer c.Close()
	ctx := context.Background()
	id, err := c.ClientID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	admin := goredis.NewClient(cfg.options)
	defer admin.Close()
	if err := admin.ClientKillByFilter(ctx, "ID", strconv.FormatInt(id, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(probeAfter + 100*time.Millisecond)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("first command after the server closed an idle connection: %v", err)
	}
}
