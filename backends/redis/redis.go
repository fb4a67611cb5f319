// Package redis is the jobq backend for Redis (5.0 or later), registered
// for the URL schemes redis://, rediss:// (TLS) and redis+unix:// (a unix
// socket):
//
//	redis://[user:password@]host:6379/0?queue=etl
//	rediss://host:6380/0?queue=etl
//	redis+unix:///run/redis.sock?db=0&queue=etl
//
// Query parameters: queue (the queue name, default "default"), prefix (the
// first part of every key, default "jobq"), max_message_bytes (a size limit
// above which tasks go to the stash; default none), and go-redis's own
// connection options (dial_timeout, read_timeout, pool_size, client_name,
// protocol, ...). Anything else is an InvalidArgument error.
//
// Every state change is one Lua script, so a crash between two commands
// cannot lose or duplicate a message. A queue's keys share the hash tag
// {name}, so the backend also works on Redis Cluster. Idle receivers wait on
// a pub/sub notification rather than polling. See docs/backends/redis.md for
// the key layout and the script behind each operation.
//
// The escape hatch: Queue.As with a **goredis.Client (package
// github.com/redis/go-redis/v9) yields the driver's client, and with a
// **Driver the driver, whose Keys method names the queue's keys.
package redis

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

// The URL schemes this package registers.
const (
	Scheme     = "redis"
	SchemeTLS  = "rediss"
	SchemeUnix = "redis+unix"
)

func init() {
	o := &Opener{}
	jobq.Register(Scheme, o)
	jobq.Register(SchemeTLS, o)
	jobq.Register(SchemeUnix, o)
}

// Opener opens Redis queues from URLs. The zero value is ready to use.
type Opener struct{}

// Capabilities returns what every Redis queue declares.
func (*Opener) Capabilities() driver.Capabilities { return capabilities(0) }

// maxReceiveBatch bounds one claim so that a single script never holds
// Redis for long.
const maxReceiveBatch = 1000

// capabilities returns the declaration, with the message size limit from
// the URL (0: none beyond the server's proto-max-bulk-len, 512 MB by
// default).
func capabilities(maxMessageBytes int) driver.Capabilities {
	native := driver.Support{Level: driver.Native}
	return driver.Capabilities{
		Features: map[driver.Feature]driver.Support{
			driver.DelayedRequeue: native,
			driver.DelayedPush:    native,
			driver.LeaseRenewal:   native,
			driver.DeadLetter:     native,
			driver.Priority:       native,
			driver.Peek:           native,
			driver.ExactCount:     native,
			driver.Dedup:          native,
			driver.InPlaceUpdate:  native,
			driver.ConcurrencyLimit: {Level: driver.Unsupported,
				Fallback: "the Redis backend does not enforce per-key concurrency limits yet (issue 9)"},
			driver.RateLimit: {Level: driver.Unsupported,
				Fallback: "the Redis backend does not enforce per-key rate limits yet (issue 9)"},
			driver.TransactionalPush: {Level: driver.Unsupported,
				Fallback: "Redis has no application transaction to join; push after your own transaction commits"},
		},
		MaxReceiveBatch: maxReceiveBatch,
		MaxMessageBytes: maxMessageBytes,
	}
}

// Open connects to the Redis server named by u and returns the queue.
func (*Opener) Open(ctx context.Context, u *url.URL, opts driver.OpenOptions) (driver.Driver, error) {
	cfg, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	client := cfg.newClient()
	d := newDriver(client, cfg.prefix, cfg.queue, jobq.RedactURL(u.String()), opts.Logger)
	d.maxMessageBytes = cfg.maxMessageBytes
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return nil, d.fail("open", fmt.Errorf("cannot reach Redis at %s (is redis-server running, and are host, port and password right?): %w", d.url, err))
	}
	return d, nil
}

// config is what a URL says.
type config struct {
	queue, prefix   string
	maxMessageBytes int
	// Exactly one of options and cluster is set.
	options *goredis.Options
	cluster *goredis.ClusterOptions
}

// newClient returns a client for a single server or for a cluster.
func (c *config) newClient() goredis.UniversalClient {
	if c.cluster != nil {
		return goredis.NewClusterClient(c.cluster)
	}
	return goredis.NewClient(c.options)
}

// jobqParams are the query parameters this package reads itself; the rest
// go to go-redis, which rejects the ones it does not know.
var jobqParams = []string{"queue", "prefix", "max_message_bytes", "cluster"}

// parseURL splits u into jobq's parameters and go-redis's options.
func parseURL(u *url.URL) (*config, error) {
	p := driver.NewParams(u)
	cfg := &config{
		queue:  p.String("queue", "default"),
		prefix: p.String("prefix", "jobq"),
		// A lower limit sends larger tasks to the stash, keeping Redis's
		// memory for the queue itself.
		maxMessageBytes: p.Int("max_message_bytes", 0),
	}
	cluster := p.Bool("cluster", false)
	if cfg.maxMessageBytes < 0 {
		p.Fail("query parameter max_message_bytes=%d must be 0 (no limit) or more", cfg.maxMessageBytes)
	}
	for _, s := range []struct{ name, v string }{{"queue", cfg.queue}, {"prefix", cfg.prefix}} {
		if s.v == "" || strings.ContainsAny(s.v, "{}") {
			p.Fail("query parameter %s=%q is invalid: it must be non-empty and must not contain { or } (they delimit the Redis Cluster hash tag)", s.name, s.v)
		}
	}
	// The rest of the query is go-redis's to judge.
	q := u.Query()
	for _, name := range jobqParams {
		q.Del(name)
	}
	for name := range q {
		p.Has(name)
	}
	if err := p.Done(); err != nil {
		return nil, driver.Errorf(driver.InvalidArgument, "redis URL %s: %w", jobq.RedactURL(u.String()), err)
	}
	rest := *u
	rest.RawQuery = q.Encode()
	switch strings.ToLower(u.Scheme) {
	case SchemeUnix:
		if cluster {
			return nil, driver.Errorf(driver.InvalidArgument, "redis URL %s: cluster=true needs redis:// or rediss:// seed addresses, not a unix socket", jobq.RedactURL(u.String()))
		}
		rest.Scheme = "unix"
	case Scheme, SchemeTLS:
	default:
		return nil, driver.Errorf(driver.InvalidArgument, "redis backend: unknown URL scheme %q; use redis://, rediss:// or redis+unix://", u.Scheme)
	}
	badOption := func(err error) error {
		return driver.Errorf(driver.InvalidArgument,
			"redis URL %s: %v (jobq takes queue=, prefix=, max_message_bytes= and cluster=; other parameters must be go-redis options such as dial_timeout, pool_size, client_name)",
			jobq.RedactURL(u.String()), err)
	}
	// go-redis would resend a script whose reply was lost, and the scripts
	// are not idempotent (a resent Complete reports LockLost for the message
	// it deleted), so by default it does not retry; the portable layer
	// decides on retries. Contexts bound socket I/O, so that a canceled
	// call returns at once rather than after read_timeout.
	noRetries := !q.Has("max_retries")
	if cluster {
		opts, err := goredis.ParseClusterURL(rest.String())
		if err != nil {
			return nil, badOption(err)
		}
		if noRetries {
			opts.MaxRetries = -1
		}
		opts.ContextTimeoutEnabled = true
		cfg.cluster = opts
		return cfg, nil
	}
	opts, err := goredis.ParseURL(rest.String())
	if err != nil {
		return nil, badOption(err)
	}
	if noRetries {
		opts.MaxRetries = -1
	}
	opts.ContextTimeoutEnabled = true
	cfg.options = opts
	return cfg, nil
}

// Driver is one Redis queue. It implements driver.Driver.
type Driver struct {
	client          goredis.UniversalClient
	queue           string
	maxMessageBytes int
	prefix          string   // "jobq:{name}:", the start of every key of the queue
	keys            []string // the KEYS every script takes, see scripts.go
	channel         string   // pub/sub channel announcing newly visible messages
	url             string   // redacted
	log             *slog.Logger

	closed atomic.Bool
	done   chan struct{} // closed by Close
	wake   *notifier

	listenMu  sync.Mutex
	listening bool
	pubsub    *goredis.PubSub
	listenWG  sync.WaitGroup
}

func newDriver(client goredis.UniversalClient, prefix, queue, redactedURL string, log *slog.Logger) *Driver {
	if log == nil {
		log = slog.Default()
	}
	kp := prefix + ":{" + queue + "}:"
	return &Driver{
		client:  client,
		queue:   queue,
		prefix:  kp,
		keys:    []string{kp + "seq", kp + "ready", kp + "delayed", kp + "inflight", kp + "ids", kp + "dead"},
		channel: kp + "notify",
		url:     redactedURL,
		log:     log,
		done:    make(chan struct{}),
		wake:    newNotifier(),
	}
}

// Keys returns the names of the queue's Redis keys: the counter, the ready,
// delayed, in-flight and dead sorted sets, and the task-id hash, in that
// order, followed by the prefix of the per-message hashes and the pub/sub
// channel. They all share the hash tag {queue}.
func (d *Driver) Keys() []string {
	return append(append([]string(nil), d.keys...), d.prefix+"m:", d.channel)
}

// Capabilities implements driver.Driver.
func (d *Driver) Capabilities() driver.Capabilities { return capabilities(d.maxMessageBytes) }

// As implements driver.Driver: a *goredis.UniversalClient receives the
// driver's client, and a **goredis.Client or **goredis.ClusterClient the
// same client when it is of that kind; the client is shared with the queue
// (do not close it). A **Driver receives the driver itself, for its key
// names (Keys).
func (d *Driver) As(target any) bool {
	switch t := target.(type) {
	case *goredis.UniversalClient:
		*t = d.client
		return true
	case **goredis.Client:
		c, ok := d.client.(*goredis.Client)
		if ok {
			*t = c
		}
		return ok
	case **goredis.ClusterClient:
		c, ok := d.client.(*goredis.ClusterClient)
		if ok {
			*t = c
		}
		return ok
	case **Driver:
		*t = d
		return true
	}
	return false
}

// Close stops the notification listener and closes the client.
func (d *Driver) Close() error {
	if d.closed.Swap(true) {
		return driver.Errorf(driver.FailedPrecondition, "redis queue %s is already closed", d.queue)
	}
	close(d.done)
	d.listenMu.Lock()
	ps := d.pubsub
	d.listenMu.Unlock()
	if ps != nil {
		_ = ps.Close()
	}
	d.listenWG.Wait()
	d.wake.notify(-1)
	if err := d.client.Close(); err != nil {
		return d.fail("close", err)
	}
	return nil
}

// begin fails calls made after Close or with a context that has ended:
// go-redis would still send a command for a canceled context.
func (d *Driver) begin(ctx context.Context, op string) error {
	if d.closed.Load() {
		return driver.Errorf(driver.FailedPrecondition, "redis %s on queue %s: the queue is closed", op, d.queue)
	}
	if err := ctx.Err(); err != nil {
		return d.fail(op, err)
	}
	return nil
}

// run runs a script with the queue's keys; go-redis loads it when the
// server does not have it cached (after a restart, for example).
func (d *Driver) run(ctx context.Context, s *goredis.Script, args ...any) *goredis.Cmd {
	return s.Run(ctx, d.client, d.keys, append([]any{d.prefix}, args...)...)
}

// ms converts a duration to whole milliseconds, rounding up so that a
// positive duration never becomes zero.
func ms(dur time.Duration) int64 {
	return int64((dur + time.Millisecond - 1) / time.Millisecond)
}

// fromMs converts milliseconds since the epoch to a time.
func fromMs(v int64) time.Time {
	if v <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(v)
}
