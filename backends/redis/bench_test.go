package redis

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/tools/testkit/benchkit"
	"github.com/jobq/jobq/tools/testkit/settletest"
)

// The benchmarks run against JOBQ_TEST_REDIS_URL (default the local server)
// with default settings and a no-op handler. Run them with:
//
//	go test -run '^$' -bench . -benchtime 20000x ./backends/redis/
//
// Each reports tasks/s; BenchmarkPickupLatency reports the median and p99.

// openBenchQueue opens a fresh queue through the portable API.
func openBenchQueue(b *testing.B) *jobq.Queue {
	b.Helper()
	return benchkit.Open(b, benchURL(b))
}

// benchURL is a queue URL with short key names, as users' queues have
// (jobq:{etl}:...): a prefix of its own keeps the benchmark's keys apart
// and is what its cleanup deletes, so the queue can be named "bench"
// rather than after the test. Every key a script touches carries both.
func benchURL(b *testing.B) string {
	b.Helper()
	return keysURL(b, testBaseURL(), "jb"+strconv.FormatInt(time.Now().UnixNano()+queueSeq.Add(1), 36), "bench")
}

// handlers is how many tasks the benchmark worker runs at once.
const handlers = benchkit.Handlers

// reportRate reports tasks/s (the asynq comparison benchmarks use it too).
var reportRate = benchkit.ReportRate

// BenchmarkEndToEnd: one producer pushes b.N tasks in batches of 100
// (PushBatch, pipelined) while a worker with 16 handlers consumes them.
func BenchmarkEndToEnd(b *testing.B) {
	benchkit.EndToEnd(b, openBenchQueue(b))
}

// BenchmarkEndToEndRecords is BenchmarkEndToEnd with result records off
// (the driver declares Results unsupported, so the portable layer writes
// none) and on (the default: every task leaves a record, stored by the
// complete script). Compare them in alternated runs:
//
//	for i in 1 2 3 4 5; do for r in false true; do
//	  go test -count=1 -run '^$' -bench "EndToEndRecords/records=$r" -benchtime 20000x ./backends/redis/
//	done; done
func BenchmarkEndToEndRecords(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("records=%t", on), func(b *testing.B) {
			var d driver.Driver = openURL(b, benchURL(b))
			if !on {
				d = withoutRecords{d.(*Driver)}
			}
			q, err := jobq.New(d, jobq.Options{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = q.Close() })
			benchkit.EndToEnd(b, q)
			if on {
				rd := d.(*Driver)
				n, err := rd.client.Eval(context.Background(),
					`local t = 0 for _, b in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do t = t + redis.call('HLEN', ARGV[1] .. b) end return t`,
					[]string{rd.prefix + "rbs"}, rd.prefix+"rb:").Int()
				if err != nil || n < b.N {
					b.Fatalf("%d result records for %d tasks (%v)", n, b.N, err)
				}
			}
		})
	}
}

// withoutRecords is a Redis driver that declares Results unsupported, so
// that the portable layer keeps no result records.
type withoutRecords struct{ *Driver }

func (w withoutRecords) Capabilities() driver.Capabilities {
	c := w.Driver.Capabilities()
	c.Features[driver.Results] = driver.Support{Level: driver.Unsupported, Fallback: "records off for the benchmark"}
	c.Features[driver.Cancel] = driver.Support{Level: driver.Unsupported, Fallback: "records off for the benchmark"}
	return c
}

// BenchmarkDrain: a worker with 16 handlers drains b.N pre-pushed tasks and
// exits when the queue is empty.
func BenchmarkDrain(b *testing.B) {
	benchkit.Drain(b, openBenchQueue(b))
}

// BenchmarkPushOne: producers (1 or 8, as BenchmarkAsynqPushOne) push
// tasks one Push call at a time.
func BenchmarkPushOne(b *testing.B) {
	for _, p := range pushProducers {
		b.Run(fmt.Sprintf("producers=%d", p), func(b *testing.B) {
			benchkit.PushOneFrom(b, openBenchQueue(b), p)
		})
	}
}

// pushProducers are the producer counts of the one-task push benchmarks.
var pushProducers = []int{1, 8}

// BenchmarkRoundTrip measures one client's PING round trip, the floor under
// any one-at-a-time call: "go-redis" with go-redis's own dialer, "jobq"
// through the backend's connection wrappers (spin=, docs/backends/redis.md).
func BenchmarkRoundTrip(b *testing.B) {
	for _, name := range []string{"go-redis", "jobq"} {
		b.Run(name, func(b *testing.B) {
			opts, _ := serverOptions(b)
			if name == "go-redis" {
				opts.Dialer = nil
			}
			c := goredis.NewClient(opts)
			defer c.Close()
			ctx := context.Background()
			if err := c.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				if err := c.Ping(ctx).Err(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		})
	}
}

// serverOptions returns the go-redis options jobq makes of the test server's
// URL, and the URL; it skips the benchmark when the URL names a cluster.
func serverOptions(b *testing.B) (*goredis.Options, *url.URL) {
	b.Helper()
	u, err := url.Parse(testBaseURL())
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := parseURL(u)
	if err != nil {
		b.Fatal(err)
	}
	if cfg.options == nil {
		b.Skip("needs a single Redis server, not a cluster URL")
	}
	return cfg.options, u
}

// BenchmarkPickupLatency: a receiver waits on an empty queue; the time from
// the start of a Push to the receiver holding the task.
func BenchmarkPickupLatency(b *testing.B) {
	q := openBenchQueue(b)
	d := driverOf(b, q)
	benchkit.PickupLatency(b, q, q, func() bool { return d.wake.Waiters() != 0 })
}

// rawClaimDelete is the least work a Redis queue can do per task: pop the
// lowest member of a sorted set and delete its hash, in one script call.
var rawClaimDelete = goredis.NewScript(`
local got = redis.call('ZPOPMIN', KEYS[1], tonumber(ARGV[2]))
for i = 1, #got, 2 do redis.call('DEL', ARGV[1] .. got[i]) end
return #got / 2
`)

// rawPush is the least work a Redis queue can do to store one task from a
// script: write its hash and add it to a sorted set.
var rawPush = goredis.NewScript(`
redis.call('HSET', ARGV[1] .. ARGV[2], 'b', ARGV[3])
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[2])
return 1
`)

// cleanRaw deletes what rawPush stored.
func cleanRaw(b *testing.B, d *Driver, set, hp string) {
	for {
		n, err := rawClaimDelete.Run(context.Background(), d.client, []string{set}, hp, 1000).Int64()
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

// BenchmarkRawRedisLimit is the bar the other benchmarks are measured
// against: 16 clients run a bare Lua claim-and-delete over b.N pre-filled
// messages, one message per call ("one") or 16 per call ("batch16", what
// the worker asks for when all its handlers are free). "push-one" is the bar
// for BenchmarkPushOne: one producer runs rawPush once per task, waiting
// for each reply, so it measures the round trip of one script call.
func BenchmarkRawRedisLimit(b *testing.B) {
	b.Run("push-one", func(b *testing.B) {
		q := openBenchQueue(b)
		d := driverOf(b, q)
		ctx := context.Background()
		set, hp := d.prefix+"raw", d.prefix+"rawm:"
		body := `{"version": 1, "kwargs": "{}"}`
		b.ResetTimer()
		cm := benchkit.MarkCPU()
		start := time.Now()
		for i := range b.N {
			if err := rawPush.Run(ctx, d.client, []string{set}, hp, strconv.Itoa(i), body).Err(); err != nil {
				b.Fatal(err)
			}
		}
		elapsed := time.Since(start)
		cm.Report(b, b.N)
		benchkit.ReportRate(b, b.N, elapsed)
		b.StopTimer()
		cleanRaw(b, d, set, hp)
	})
	for _, per := range []int{1, handlers} {
		name := "one"
		if per > 1 {
			name = fmt.Sprintf("batch%d", per)
		}
		b.Run(name, func(b *testing.B) {
			q := openBenchQueue(b)
			d := driverOf(b, q)
			ctx := context.Background()
			set, hp := d.prefix+"raw", d.prefix+"rawm:"
			p := d.client.Pipeline()
			for i := range b.N {
				mid := fmt.Sprint(i)
				p.HSet(ctx, hp+mid, "b", `{"version": 1, "kwargs": "{}"}`)
				p.ZAdd(ctx, set, goredis.Z{Score: float64(i), Member: mid})
				if p.Len() >= 2000 {
					if _, err := p.Exec(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
			if _, err := p.Exec(ctx); err != nil {
				b.Fatal(err)
			}
			benchkit.Claimers(b, "claimed", func() (int64, error) {
				return rawClaimDelete.Run(ctx, d.client, []string{set}, hp, per).Int64()
			})
		})
	}
}

// BenchmarkDriverClaimComplete measures the driver alone, without the
// portable layer or worker: 16 goroutines each claim up to 16 messages and
// complete them in one call.
func BenchmarkDriverClaimComplete(b *testing.B) {
	// One Push call: the driver pipelines it.
	benchkit.DriverClaimComplete(b, openURL(b, newQueueURL(b, "")), max(b.N, 1))
}

// BenchmarkDriverClaimCompleteRecords is BenchmarkDriverClaimComplete with
// result records off (Complete) and on (CompleteParams.Result, a record of
// about 300 bytes per task, stored by the complete script): what records
// cost the driver alone.
func BenchmarkDriverClaimCompleteRecords(b *testing.B) {
	data := []byte(`{"v":1,"exit_code":0,"output":"` + strings.Repeat("x", 200) + `","worker":"w1","host":"h","deliveries":1}`)
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("records=%t", on), func(b *testing.B) {
			d := openURL(b, newQueueURL(b, ""))
			ctx := context.Background()
			msgs := make([]*driver.Message, b.N)
			for i := range msgs {
				msgs[i] = &driver.Message{ID: fmt.Sprint(i), Body: []byte(`{"version": 1, "kwargs": "{}"}`)}
			}
			if _, err := d.Push(ctx, msgs); err != nil {
				b.Fatal(err)
			}
			benchkit.Claimers(b, "completed", func() (int64, error) {
				got, err := d.Receive(ctx, driver.ReceiveParams{Max: handlers, Visibility: time.Minute})
				if err != nil || len(got) == 0 {
					return 0, err
				}
				leases := make([]driver.Lease, len(got))
				recs := make([]*driver.ResultRecord, len(got))
				now := time.Now()
				for i, r := range got {
					leases[i] = r.Lease
					recs[i] = &driver.ResultRecord{ID: r.ID, State: driver.ResultSucceeded, UpdatedAt: now, ExpiresAt: now.Add(time.Hour), Data: data}
				}
				var errs []error
				if on {
					errs = d.Complete(ctx, settletest.WithResults(leases, recs))
				} else {
					errs = d.Complete(ctx, driver.Completions(leases...))
				}
				if errs != nil {
					return 0, fmt.Errorf("complete: %v", errs)
				}
				return int64(len(got)), nil
			})
		})
	}
}

// BenchmarkEndToEndGroups is BenchmarkEndToEnd without groups ("none") and
// with every task in one group ("group"): what counting groups costs.
func BenchmarkEndToEndGroups(b *testing.B) {
	benchkit.EndToEndGroups(b, openBenchQueue)
}

// BenchmarkClaimPastFullKey: claims of up to 32 past 1,000 to 100,000
// tasks of a key at its cap (benchkit.ClaimPastFullKey). Run with:
//
//	go test -run '^$' -bench ClaimPastFullKey -benchtime 500x ./backends/redis/
func BenchmarkClaimPastFullKey(b *testing.B) {
	benchkit.ClaimPastFullKey(b, func(b *testing.B) benchkit.PolicyDriver { return openDriver(b) })
}
