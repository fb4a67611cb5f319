// Command rediscost measures what the Redis backend's scripts cost the
// server, per message, in six workloads run one after another on one
// queue:
//
//   - batch push: PushBatch calls of 100 into an empty queue;
//   - claim and complete: claims of 32 completed two claims later, so that
//     about 80 leases are held at once, as a worker with prefetch holds;
//   - the same with records: each completion also stores a result record
//     of about 250 bytes (CompleteParams.Result), after a batch push;
//   - one push: Push calls of one task;
//   - steady: a PushBatch of 100 then up to three claims of 32, repeated,
//     as when a consumer keeps up with its producer (the queue stays short);
//   - asynq one push: asynq's Enqueue of one task, as many as one push
//     made, on a queue of asynq's: the same work in the job queue jobq's
//     benchmarks compare against (backends/redis/asynq_bench_test.go).
//
// It prints the EVALSHA time per message from INFO commandstats, which on a
// shared machine moves with everything else running. For figures that do
// not, run the server under valgrind's callgrind and give -hook a command
// that dumps its counters: the hook runs before and after each workload, so
// the dumps from the second on are the workloads' instruction counts, in
// order (docs/performance.md, "What bounds each figure"):
//
//	valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p redis-server --port 6391 --save '' &
//	go run ./tools/rediscost -addr 127.0.0.1:6391 -hook 'callgrind_control -d redis-server'
//
// The queue is cleared first and its keys deleted at the end; the tool is
// for a scratch server.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backends/redis"
	"github.com/jobq/jobq/driver"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "the Redis server, host:port")
	queue := flag.String("queue", "rediscost", "the queue to use (it is cleared)")
	n := flag.Int("n", 4000, "messages per workload (a multiple of 100)")
	hook := flag.String("hook", "", "shell command to run before and after each workload")
	flag.Parse()
	if err := run(context.Background(), *addr, *queue, *n/100*100, *hook); err != nil {
		fmt.Fprintln(os.Stderr, "rediscost:", err)
		os.Exit(1)
	}
}

// meter reads and resets the server's EVALSHA time and runs the hook.
type meter struct {
	client *goredis.Client
	hook   string
}

// lap ends one workload (and begins the next): it runs the hook and
// returns the EVALSHA microseconds since the last mark.
func (m meter) lap(ctx context.Context) (float64, error) {
	if m.hook != "" {
		if out, err := exec.Command("sh", "-c", m.hook).CombinedOutput(); err != nil {
			return 0, fmt.Errorf("hook %q: %w: %s", m.hook, err, out)
		}
	}
	info, err := m.client.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var usec float64
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:"); ok {
			var calls int
			if _, err := fmt.Sscanf(rest, "calls=%d,usec=%f", &calls, &usec); err != nil {
				return 0, fmt.Errorf("reading %q: %w", line, err)
			}
		}
	}
	return usec, m.client.ConfigResetStat(ctx).Err()
}

func run(ctx context.Context, addr, queue string, n int, hook string) error {
	if n <= 0 {
		return errors.New("-n must be at least 100")
	}
	q, err := jobq.OpenWithOptions(ctx, "redis://"+addr+"/0?queue="+queue, jobq.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer q.Close()
	var d *redis.Driver
	var client *goredis.Client
	if !q.As(&d) || !q.As(&client) {
		return errors.New("not a single-server Redis queue")
	}
	if _, err := q.Admin().Clear(ctx); err != nil {
		return err
	}
	tasks := make([]*jobq.Task, n)
	for i := range tasks {
		tasks[i] = &jobq.Task{Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))}
	}
	m := meter{client: client, hook: hook}
	if _, err := m.lap(ctx); err != nil {
		return err
	}
	c := &consumer{d: d}
	workloads := []struct {
		name string
		msgs int
		run  func() error
		// after, when set, runs once the workload is measured.
		after func() error
	}{
		{"batch push", n, func() error { return pushBatches(ctx, q, tasks, 0) }, nil},
		{"claim and complete", n, func() error { return c.drain(ctx) }, nil},
		{"... with records", n, func() error {
			if err := pushBatches(ctx, q, tasks, 0); err != nil {
				return err
			}
			rc := &consumer{d: d, records: true}
			return rc.drain(ctx)
		}, nil},
		{"one push", n / 4, func() error {
			for _, t := range tasks[:n/4] {
				if _, err := q.Push(ctx, t); err != nil {
					return err
				}
			}
			return nil
		}, func() error {
			_, err := q.Admin().Clear(ctx)
			return err
		}},
		{"steady", n, func() error {
			if err := pushBatches(ctx, q, tasks, 3, c); err != nil {
				return err
			}
			return c.drain(ctx)
		}, nil},
		{"asynq one push", n / 4, func() error { return enqueueAsynq(ctx, client, queue+"-asynq", tasks[:n/4]) },
			func() error { return deleteAsynqQueue(ctx, client, queue+"-asynq") }},
	}
	for _, w := range workloads {
		if err := w.run(); err != nil {
			return fmt.Errorf("%s: %w", w.name, err)
		}
		usec, err := m.lap(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("%-20s %7.2f µs of EVALSHA per message\n", w.name, usec/float64(w.msgs))
		if w.after != nil {
			if err := w.after(); err != nil {
				return fmt.Errorf("%s: %w", w.name, err)
			}
		}
	}
	// Clear leaves the queue's markers and counter (backends/redis.md), and
	// the records live on; this queue was the tool's own, so it leaves
	// nothing.
	keys := d.Keys()
	return deleteKeys(ctx, client, strings.TrimSuffix(keys[len(keys)-2], "m:")+"rb*", keys...)
}

// deleteKeys deletes the keys matching pattern, and keys.
func deleteKeys(ctx context.Context, client *goredis.Client, pattern string, keys ...string) error {
	iter := client.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil || len(keys) == 0 {
		return err
	}
	return client.Del(ctx, keys...).Err()
}

// enqueueAsynq enqueues one asynq task per task, one at a time, with the
// task's payload, on asynq's queue named queue.
func enqueueAsynq(ctx context.Context, client *goredis.Client, queue string, tasks []*jobq.Task) error {
	ac := asynq.NewClientFromRedisClient(client)
	for _, t := range tasks {
		if _, err := ac.EnqueueContext(ctx, asynq.NewTask("noop", t.Payload), asynq.Queue(queue)); err != nil {
			return err
		}
	}
	return nil
}

// deleteAsynqQueue deletes asynq's queue with its tasks, and the counters
// that asynq's DeleteQueue leaves behind.
func deleteAsynqQueue(ctx context.Context, client *goredis.Client, queue string) error {
	if err := asynq.NewInspectorFromRedisClient(client).DeleteQueue(queue, true); err != nil {
		return err
	}
	return deleteKeys(ctx, client, "asynq:{"+queue+"}:*")
}

// pushBatches pushes tasks 100 at a time; after each batch the consumers
// claim up to claims times.
func pushBatches(ctx context.Context, q *jobq.Queue, tasks []*jobq.Task, claims int, consumers ...*consumer) error {
	for lo := 0; lo < len(tasks); lo += 100 {
		if _, err := q.PushBatch(ctx, tasks[lo:lo+100], jobq.PushOptions{}); err != nil {
			return err
		}
		for _, c := range consumers {
			for range claims {
				if got, err := c.claim(ctx); err != nil || got == 0 {
					break
				}
			}
		}
	}
	return nil
}

// consumer claims 32 at a time and completes each claim two claims later,
// with a result record per task when records is set.
type consumer struct {
	d       *redis.Driver
	records bool
	window  [][]driver.Lease
	ids     [][]string
}

// recordData is a result record's details of a typical size.
var recordData = []byte(`{"v": 1, "delivery_count": 1, "output": "` + strings.Repeat("x", 120) +
	`", "started": "2026-01-01T00:00:00.000000001Z", "finished": "2026-01-01T00:00:00.000000002Z", "worker": "w-1", "host": "h"}`)

// claim claims once and reports how many messages it got.
func (c *consumer) claim(ctx context.Context) (int, error) {
	recs, err := c.d.Receive(ctx, driver.ReceiveParams{Max: 32, Visibility: time.Minute})
	if err != nil || len(recs) == 0 {
		return 0, err
	}
	leases := make([]driver.Lease, len(recs))
	ids := make([]string, len(recs))
	for i, r := range recs {
		leases[i], ids[i] = r.Lease, r.ID
	}
	c.window = append(c.window, leases)
	c.ids = append(c.ids, ids)
	if len(c.window) > 2 {
		return len(recs), c.completeOldest(ctx)
	}
	return len(recs), nil
}

func (c *consumer) completeOldest(ctx context.Context) error {
	oldest, ids := c.window[0], c.ids[0]
	c.window, c.ids = c.window[1:], c.ids[1:]
	reqs := driver.Completions(oldest...)
	if c.records {
		now := time.Now()
		for i, id := range ids {
			reqs[i].Result = &driver.ResultRecord{ID: id, State: driver.ResultSucceeded, UpdatedAt: now, ExpiresAt: now.Add(time.Hour), Data: recordData}
		}
	}
	return errors.Join(c.d.Complete(ctx, reqs)...)
}

// drain claims until the queue is empty and completes everything held.
func (c *consumer) drain(ctx context.Context) error {
	for {
		got, err := c.claim(ctx)
		if err != nil {
			return err
		}
		if got == 0 {
			break
		}
	}
	for len(c.window) > 0 {
		if err := c.completeOldest(ctx); err != nil {
			return err
		}
	}
	return nil
}
