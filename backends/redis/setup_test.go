package redis

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/driver"
)

// testBaseURL is the server the tests use; JOBQ_TEST_REDIS_URL overrides the
// local default.
func testBaseURL() string {
	if s := os.Getenv("JOBQ_TEST_REDIS_URL"); s != "" {
		return s
	}
	return "redis://127.0.0.1:6379/0"
}

// testPrefix keeps the tests' keys apart from real queues on the server.
const testPrefix = "jobqtest"

var queueSeq atomic.Int64

// newQueueURL returns the URL of a queue no other test uses, on base (the
// shared test server when empty), and deletes the queue's keys after the
// test.
func newQueueURL(t testing.TB, base string) string {
	t.Helper()
	if base == "" {
		base = testBaseURL()
	}
	name := fmt.Sprintf("%s-%d-%d", strings.ReplaceAll(t.Name(), "/", "."), time.Now().UnixNano(), queueSeq.Add(1))
	return keysURL(t, base, testPrefix, name)
}

// keysURL returns base with the queue and key prefix set, and deletes the
// queue's keys after the test.
func keysURL(t testing.TB, base, prefix, queue string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("JOBQ_TEST_REDIS_URL: %v", err)
	}
	q := u.Query()
	q.Set("queue", queue)
	q.Set("prefix", prefix)
	u.RawQuery = q.Encode()
	t.Cleanup(func() { deleteKeys(t, u, prefix+":{"+queue+"}:*") })
	return u.String()
}

// deleteKeys removes the keys matching pattern.
func deleteKeys(t testing.TB, u *url.URL, pattern string) {
	cfg, err := parseURL(u)
	if err != nil {
		t.Errorf("clean-up: %v", err)
		return
	}
	c := cfg.newClient()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A queue's keys share one hash tag, so on a cluster they are all on
	// the master that owns its slot; scanning every master finds them.
	scan := func(ctx context.Context, n *goredis.Client) error {
		iter := n.Scan(ctx, 0, pattern, 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return err
		}
		for len(keys) > 0 {
			k := min(len(keys), 1000)
			n.Del(ctx, keys[:k]...)
			keys = keys[k:]
		}
		return nil
	}
	switch c := c.(type) {
	case *goredis.ClusterClient:
		_ = c.ForEachMaster(ctx, scan)
	case *goredis.Client:
		_ = scan(ctx, c) // the server may be gone (restart tests)
	}
}

// openDriver opens a fresh queue on the shared test server.
func openDriver(t testing.TB) *Driver {
	t.Helper()
	return openURL(t, newQueueURL(t, ""))
}

// openURL opens raw with the driver directly and closes it after the test.
func openURL(t testing.TB, raw string) *Driver {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	drv, err := (&Opener{}).Open(ctx, u, driver.OpenOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("open %s: %v", raw, err)
	}
	d := drv.(*Driver)
	t.Cleanup(func() {
		if !d.closing.Closed() {
			_ = d.Close()
		}
	})
	return d
}

// server is a redis-server that a test starts for itself, for what must not
// touch the shared one: restarts and command statistics.
type server struct {
	t    testing.TB
	port int
	dir  string
	args []string
	cmd  *exec.Cmd
}

// startServer starts redis-server on a free port with extra arguments
// (for example "--appendonly", "yes") and stops it after the test.
func startServer(t testing.TB, extra ...string) *server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed (apt-get install redis-server)")
	}
	port := freePort(t)
	dir := t.TempDir()
	s := &server{t: t, port: port, dir: dir, args: append([]string{
		"--bind", "127.0.0.1", "--port", fmt.Sprint(port), "--dir", dir, "--save", "",
		"--logfile", filepath.Join(dir, "redis.log"),
	}, extra...)}
	s.start()
	t.Cleanup(func() { s.kill() })
	return s
}

// handedOut holds every port freePort has returned in this process, and
// the cluster bus port (port+10000) beside each.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// freePort returns a port free now whose bus port (port+10000, which a
// cluster node listens on) is free too, and which no other server of this
// process has had: a test that kills its server and starts it again on the
// same port, or a cluster that still gossips to a killed node's address,
// would otherwise meet another test's server there (a replica of a killed
// cluster master was seen taking a full sync from the new server on its
// master's port).
func freePort(t testing.TB) int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	for range 1000 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		if port+10000 > 65535 || handedOut.ports[port] || handedOut.ports[port+10000] {
			l.Close()
			continue
		}
		bus, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port+10000))
		l.Close()
		if err != nil {
			continue
		}
		bus.Close()
		handedOut.ports[port], handedOut.ports[port+10000] = true, true
		return port
	}
	t.Fatal("found no free port pair (port, port+10000) in 1000 tries")
	return 0
}

// url is the server's URL for database 0.
func (s *server) url() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.port) }

// start runs redis-server and waits until it answers PING, failing the
// test otherwise. From another goroutine than the test's, use launch.
func (s *server) start() {
	s.t.Helper()
	if err := s.launch(); err != nil {
		s.t.Fatal(err)
	}
}

// launch runs redis-server and waits until it answers PING.
func (s *server) launch() error {
	s.cmd = exec.Command("redis-server", s.args...)
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	c := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", s.port), MaxRetries: -1})
	defer c.Close()
	for range 100 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	return fmt.Errorf("redis-server on port %d did not answer PING within 5 s; its log:\n%s", s.port, log)
}

// kill stops the server with SIGKILL, as a crash would.
func (s *server) kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// client returns a plain client for the server, closed after the test.
func (s *server) client() *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", s.port)})
	s.t.Cleanup(func() { c.Close() })
	return c
}
