package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// throwaway is a private PostgreSQL cluster for tests that must disturb the
// server, so that the shared one on :5432 is never restarted.
type throwaway struct {
	t    *testing.T
	bin  string // directory of initdb and pg_ctl
	dir  string
	port int
}

// startThrowaway creates and starts a cluster in a temporary directory on a
// free port. It skips the test when no PostgreSQL server binaries are
// installed. As root it runs the server as the postgres user (PostgreSQL
// refuses to run as root).
func startThrowaway(t *testing.T) *throwaway {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		if p, err := exec.LookPath("initdb"); err == nil {
			bins = []string{p}
		} else {
			t.Skip("no initdb found: install the PostgreSQL server to run the restart test")
		}
	}
	c := &throwaway{t: t, bin: filepath.Dir(bins[len(bins)-1])}
	dir, err := os.MkdirTemp("", "jobq-pg-restart-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		pg, err := user.Lookup("postgres")
		if err != nil {
			t.Skip("running as root without a postgres user: cannot start a private cluster")
		}
		uid, _ := strconv.Atoi(pg.Uid)
		gid, _ := strconv.Atoi(pg.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.port = l.Addr().(*net.TCPAddr).Port
	l.Close()

	c.run("initdb", "-D", dir+"/data", "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
	c.start()
	t.Cleanup(func() {
		cmd := c.cmd("pg_ctl", "-D", dir+"/data", "-m", "immediate", "-w", "stop")
		cmd.Run()
	})
	return c
}

// start starts the server.
func (c *throwaway) start() {
	c.run("pg_ctl", "-D", c.dir+"/data", "-l", c.dir+"/log", "-w", "-t", "60", "-o",
		fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", c.port, c.dir), "start")
}

func (c *throwaway) cmd(name string, args ...string) *exec.Cmd {
	path := filepath.Join(c.bin, name)
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.WaitDelay = 5 * time.Second // never hang on a pipe a child keeps open
	return cmd
}

func (c *throwaway) run(name string, args ...string) {
	c.t.Helper()
	if out, err := c.cmd(name, args...).CombinedOutput(); err != nil {
		log, _ := os.ReadFile(c.dir + "/log")
		c.t.Fatalf("%s %v: %v\n%s\nserver log:\n%s", name, args, err, out, log)
	}
}

// restart stops the server (disconnecting every client, as a failover or
// an upgrade does) and starts it again.
func (c *throwaway) restart() {
	// -l: without it the server inherits pg_ctl's output, and waiting for
	// that pipe to close would wait for the server to exit.
	c.run("pg_ctl", "-D", c.dir+"/data", "-l", c.dir+"/log", "-m", "fast", "-w", "-t", "60", "restart")
}

// disturbedServer starts a parallel test that disturbs a server (what
// names the disturbance): it skips under -short, and returns a private
// cluster and a context that ends with the test, after 2 minutes at most.
func disturbedServer(t *testing.T, what string) (*throwaway, context.Context) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping the server " + what + " test")
	}
	t.Parallel()
	srv := startThrowaway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return srv, ctx
}

// crash stops the server at once, as a power cut would, and starts it
// again: it recovers from its write-ahead log and empties unlogged tables.
func (c *throwaway) crash() {
	c.run("pg_ctl", "-D", c.dir+"/data", "-m", "immediate", "-w", "-t", "60", "stop")
	c.start()
}

func (c *throwaway) url(queue string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&queue=%s&poll=1h", c.port, url.QueryEscape(queue))
}

// TestSurvivesServerRestart pushes and consumes tasks while the server
// restarts. Every task must be processed, nothing may be left behind, every
// error seen meanwhile must be classified Unavailable (so that callers know
// to retry), and afterwards an idle receiver must still be woken by a push:
// the LISTEN connection re-established itself. Receivers poll only once an
// hour, so only notifications (and the wake-up after the listener
// reconnects) can move them along. It runs on a private cluster; -short
// skips it.
func TestSurvivesServerRestart(t *testing.T) {
	srv, ctx := disturbedServer(t, "restart")

	open := func() *jobq.Queue {
		q, err := jobq.Open(ctx, srv.url("restart"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { q.Close() })
		return q
	}
	producer, consumer := open(), open()

	var mu sync.Mutex
	seen := map[string]bool{}
	var transient []error
	retry := func(err error) {
		mu.Lock()
		transient = append(transient, err)
		mu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}

	const total = 1000
	workCtx, stopWork := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for workCtx.Err() == nil {
				envs, err := consumer.ReceiveBatch(workCtx, 20, jobq.ReceiveOptions{Visibility: 2 * time.Second, Wait: time.Second})
				if err != nil {
					if workCtx.Err() == nil {
						retry(err)
					}
					continue
				}
				for _, e := range envs {
					if err := e.Complete(workCtx); err != nil && workCtx.Err() == nil {
						retry(err) // redelivered after its visibility
						continue
					}
					mu.Lock()
					seen[e.Task.ID] = true
					mu.Unlock()
				}
			}
		})
	}

	var pushed []string
	for i := 0; i < total; i += 50 {
		if i == total/2 {
			srv.restart()
		}
		batch := make([]*jobq.Task, 50)
		for j := range batch {
			batch[j] = &jobq.Task{Command: fmt.Sprintf("echo %d", i+j)}
		}
		// The push retries by itself (Options.PushRetry) on the
		// connections the restart broke.
		res, err := producer.PushBatch(ctx, batch, jobq.PushOptions{})
		if err != nil {
			t.Fatalf("push after the restart: %v", err)
		}
		for _, r := range res {
			pushed = append(pushed, r.ID)
		}
		time.Sleep(10 * time.Millisecond)
	}

	deadline := time.Now().Add(90 * time.Second)
	for {
		mu.Lock()
		done := len(seen)
		mu.Unlock()
		if done == total {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d tasks processed after the restart", done, total)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopWork()
	wg.Wait()
	for _, id := range pushed {
		if !seen[id] {
			t.Errorf("task %s was pushed but never processed", id)
		}
	}
	st, err := consumer.Admin().Stats(ctx)
	if err != nil || st.Ready+st.InFlight+st.Delayed != 0 {
		t.Errorf("after the run: stats %+v, %v; want an empty queue", st, err)
	}
	t.Logf("%d transient errors during the restart", len(transient))
	for _, err := range transient {
		if !errors.Is(err, errcode.Unavailable) {
			t.Errorf("error during the restart not classified Unavailable (%v): %v", errcode.Of(err), err)
		}
	}

	// The consumer's listener reconnected: a push from the other queue wakes
	// an idle receive that would otherwise wait for an hour.
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		e, err := consumer.Receive(wctx, jobq.ReceiveOptions{Visibility: time.Minute, Wait: jobq.WaitForever})
		if err == nil {
			err = e.Complete(wctx)
		}
		got <- err
	}()
	time.Sleep(200 * time.Millisecond)
	if _, err := producer.Push(ctx, &jobq.Task{Command: "echo after"}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("idle receiver after the restart was not woken by a push: %v", err)
	}
}

// TestCapHoldsAcrossCrash: a server crash empties held, the unlogged table
// of the leases in flight on capped keys (schema step 29); the leases
// themselves survive, and the key stays at its cap until one is settled.
// It runs on a private cluster; -short skips it.
func TestCapHoldsAcrossCrash(t *testing.T) {
	srv, ctx := disturbedServer(t, "crash")
	q, err := jobq.Open(ctx, srv.url("crash"))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := q.Admin().SetPolicy(ctx, driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "k", Limit: 2}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := q.Push(ctx, &jobq.Task{Command: fmt.Sprintf("echo %d", i), ConcurrencyKey: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	opts := jobq.ReceiveOptions{Visibility: time.Minute, Wait: 200 * time.Millisecond}
	taken, err := q.ReceiveBatch(ctx, 5, opts)
	if err != nil || len(taken) != 2 {
		t.Fatalf("claim under a cap of 2: %d tasks, %v; want 2", len(taken), err)
	}

	// Claims commit without waiting for their log to reach the disk
	// (a claim lost to a crash only delivers its tasks again); a
	// checkpoint writes it, as the server's log writer soon would.
	admin := func() *pgx.Conn {
		conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", srv.port))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		return conn
	}
	if _, err := admin().Exec(ctx, "CHECKPOINT"); err != nil {
		t.Fatal(err)
	}
	srv.crash()
	conn := admin()
	var rows int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM jobq.held`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("held after the crash: %d rows, %v; want none (the crash empties an unlogged table)", rows, err)
	}

	// Connections broken by the crash fail with Unavailable; retry those.
	receive := func() []*jobq.Envelope {
		for {
			envs, err := q.ReceiveBatch(ctx, 5, opts)
			if err == nil {
				return envs
			}
			if !errors.Is(err, errcode.Unavailable) || ctx.Err() != nil {
				t.Fatalf("claim after the crash: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if got := receive(); len(got) != 0 {
		t.Fatalf("claim after the crash with both leases in flight: %d tasks; want none", len(got))
	}
	if err := taken[0].Complete(ctx); err != nil {
		t.Fatalf("completion after the crash: %v", err)
	}
	if got := receive(); len(got) != 1 {
		t.Fatalf("claim after one lease was completed: %d tasks; want 1", len(got))
	}
}
