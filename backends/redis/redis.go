// Package redis is the jobq backend for Redis (5.0 or later). Build a queue
// from the go-redis client the application already has with New, or from a
// URL: the package registers the URL schemes redis://, rediss:// (TLS) and redis+unix:// (a unix
// socket):
//
//	redis://[user:password@]host:6379/0?queue=etl
//	rediss://host:6380/0?queue=etl
//	redis+unix:///run/redis.sock?db=0&queue=etl
//
// Query parameters: queue (the queue name, default "default"), prefix (the
// first part of every key, default "jobq"), max_message_bytes (a size limit
// above which tasks go to the stash; default none), cluster=true (the host
// and every addr= parameter are seeds of a Redis Cluster), and go-redis's
// own connection options (dial_timeout, read_timeout, pool_size,
// client_name, protocol, ...). Anything else is an InvalidArgument error.
//
// Every state change is one Lua script, so a crash between two commands
// cannot lose or duplicate a message. A queue's keys share the hash tag
// {name}, so the backend also works on Redis Cluster. Idle receivers wait on
// a pub/sub notification rather than polling. See docs/backends/redis.md for
// the key layout; scripts.go has the script behind each operation.
//
// Escape hatches (Queue.As; goredis is github.com/redis/go-redis/v9): a
// *goredis.UniversalClient yields the driver's client, a **goredis.Client
// or **goredis.ClusterClient the same when it is of that kind, and a
// **Driver the driver, whose Keys method names the queue's keys.
package redis

import (
	"context"
	"crypto/rand"
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
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/pushgroup"
	"github.com/jobq/jobq/internal/wakeset"
)

// The URL schemes this package registers.
const (
	Scheme     = "redis"
	SchemeTLS  = "rediss"
	SchemeUnix = "redis+unix"
)

func init() {
	o := &Opener{}
	if err := jobq.Register(Scheme, o); err != nil {
		panic(err)
	}
	if err := jobq.Register(SchemeTLS, o); err != nil {
		panic(err)
	}
	if err := jobq.Register(SchemeUnix, o); err != nil {
		panic(err)
	}
}

// Opener opens Redis queues from URLs. The zero value is ready to use.
type Opener struct{}

// Capabilities returns what every Redis queue declares.
func (*Opener) Capabilities() driver.Capabilities { return capabilities(0) }

// Open builds a client from u, then the queue with New. The driver owns
// that client and closes it on Close.
func (*Opener) Open(ctx context.Context, u *url.URL, opts driver.OpenOptions) (driver.Driver, error) {
	cfg, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	client := cfg.newClient()
	d, err := New(ctx, client, Options{Queue: cfg.queue, Prefix: cfg.prefix, MaxMessageBytes: cfg.maxMessageBytes, Logger: opts.Logger})
	if err != nil {
		_ = client.Close()
		return nil, urlRefused(err, u)
	}
	d.ownsClient = true
	return d, nil
}

// Options configure a queue built by New. The zero value is the queue
// "default" with keys under "jobq".
type Options struct {
	// Queue is the queue's name: non-empty, without { or } (they delimit
	// the Redis Cluster hash tag). Defaults to "default".
	Queue string
	// Prefix is the first part of every key of the queue, without { or }.
	// Defaults to "jobq".
	Prefix string
	// MaxMessageBytes is the largest message body; larger tasks go to the
	// stash, keeping Redis's memory for the queue. Defaults to 0: no limit
	// but Redis's own 512 MB.
	MaxMessageBytes int
	// Logger receives the driver's warnings. Defaults to slog.Default().
	Logger *slog.Logger
}

// New returns the queue opts names on the server (or cluster) client talks
// to, after checking that the server answers. client is the application's
// own: the driver shares it and never closes it (Close leaves it open), so it
// must outlive the driver. A *goredis.ClusterClient makes a cluster queue;
// every key of a queue shares one hash tag.
//
// Two settings of the URL opener's client belong to the client, which only
// its owner can set: MaxRetries -1 (go-redis's default of 3 retries may
// resend a script whose reply was lost; a resent settlement then reports
// LockLost although it took effect, and a resent push queues the task
// twice) and ContextTimeoutEnabled (a canceled call returns at once rather
// than after ReadTimeout). Its dialer also lets one-at-a-time pushes poll
// for their reply (spin=), which a client built elsewhere does not.
// Idle receivers subscribe to the queue's channel through client, which
// takes one more connection per driver while they wait.
func New(ctx context.Context, client goredis.UniversalClient, opts Options) (*Driver, error) {
	if client == nil {
		return nil, driver.Errorf(errcode.InvalidArgument, "redis.New: the client is nil; build one with goredis.NewClient or goredis.NewClusterClient")
	}
	if opts.Queue == "" {
		opts.Queue = "default"
	}
	if opts.Prefix == "" {
		opts.Prefix = "jobq"
	}
	var bad []string
	if err := driver.CheckQueueName("Queue", opts.Queue); err != nil {
		bad = append(bad, err.Error())
	}
	for _, s := range []struct{ name, v string }{{"Queue", opts.Queue}, {"Prefix", opts.Prefix}} {
		if strings.ContainsAny(s.v, "{}") {
			bad = append(bad, fmt.Sprintf("%s %q must not contain { or } (they delimit the Redis Cluster hash tag)", s.name, s.v))
		}
	}
	if opts.MaxMessageBytes < 0 {
		bad = append(bad, fmt.Sprintf("MaxMessageBytes %d must be 0 (no limit) or more", opts.MaxMessageBytes))
	}
	if len(bad) > 0 {
		return nil, driver.Errorf(errcode.InvalidArgument, "redis.Options: %s", strings.Join(bad, "; "))
	}
	d := newDriver(client, opts.Prefix, opts.Queue, opts.Logger)
	d.maxMessageBytes = opts.MaxMessageBytes
	if err := client.Ping(ctx).Err(); err != nil {
		return nil, d.fail(ctx, "open", fmt.Errorf("cannot reach Redis (is redis-server running, and are host, port and password right?%s): %w", tlsHint(client), err))
	}
	d.checkEviction(ctx)
	mark, err := d.run(ctx, layoutScript, layoutNote).Int64Slice()
	if err == nil && len(mark) != 2 {
		err = fmt.Errorf("the script answered %d values, not 2", len(mark))
	}
	if err != nil {
		return nil, d.fail(ctx, "open", fmt.Errorf("marking the queue's key layout: %w", err))
	}
	if need := mark[1]; need > layoutRelease {
		return nil, driver.Errorf(errcode.FailedPrecondition,
			"redis: queue %q is laid out for jobq releases of key layout %d or later (field 'release' of %spold), written by a newer jobq; this program knows layout %d: upgrade it (every process on the queue must)",
			d.queue, need, d.prefix, layoutRelease)
	}
	if mark[0] == 1 {
		if err := d.rescue(ctx); err != nil {
			return nil, d.fail(ctx, "open", fmt.Errorf("restoring messages an older client left in no set: %w", err))
		}
	}
	return d, nil
}

// checkEviction warns when the server's maxmemory-policy lets it delete
// the queue's keys when memory runs out. A server that does not answer
// INFO (an ACL without it, say) is not checked.
func (d *Driver) checkEviction(ctx context.Context) {
	info, err := d.client.Info(ctx, "memory").Result()
	if err != nil {
		return
	}
	var policy string
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "maxmemory_policy:"); ok {
			policy = v
		}
	}
	const fix = "set maxmemory-policy noeviction (CONFIG SET maxmemory-policy noeviction, and in redis.conf): pushes then fail when memory is full, and nothing is lost"
	switch {
	case policy == "" || policy == "noeviction":
	case strings.HasPrefix(policy, "allkeys-"):
		d.log.Warn("jobq: this Redis deletes keys when its memory is full (maxmemory-policy "+policy+"), and each deleted key of a queue is a lost task; "+fix,
			"maxmemory_policy", policy)
	default:
		d.log.Warn("jobq: this Redis deletes keys that have a time-to-live when its memory is full (maxmemory-policy "+policy+"): result records and rate-limit windows may vanish early; "+fix,
			"maxmemory_policy", policy)
	}
}

// rescue runs rescueScript over the whole ids hash, rescueBatch entries
// per call, so that a large queue does not block Redis for long.
func (d *Driver) rescue(ctx context.Context) error {
	var cursor uint64
	total := 0
	for {
		kv, next, err := d.client.HScan(ctx, d.prefix+"ids", cursor, "", rescueBatch).Result()
		if err != nil {
			return err
		}
		if len(kv) > 0 {
			args := make([]any, len(kv))
			for i, v := range kv {
				args[i] = v
			}
			n, err := d.run(ctx, rescueScript, args...).Int()
			if err != nil {
				return err
			}
			total += n
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	// Only now is the rescue done: until the flag goes, every open runs it
	// again (it changes nothing for a message already in a set).
	if err := d.client.Del(ctx, d.prefix+"rescue").Err(); err != nil {
		return err
	}
	if total > 0 {
		d.log.Warn("jobq: the queue's layout mark had been deleted (by an older jobq's policy unset max-depth); messages its delayed pushes left in no set were made ready", "messages", total)
	}
	return nil
}

// rescueBatch is how many ids entries one rescueScript call checks.
const rescueBatch = 1000

// Driver is one Redis queue. It implements driver.Driver.
type Driver struct {
	client          goredis.UniversalClient
	queue           string
	maxMessageBytes int
	prefix          string   // "jobq:{name}:", the start of every key of the queue
	prefixArg       any      // prefix as a script argument, boxed once (see scriptArgs)
	keys            []string // the queue's keys; scripts are given the first, see scripts.go
	channel         string   // the channel earlier releases announce on (scripts.go, P..'notify')
	id              string   // this handle's entry in P..'waiters' while a receiver waits
	ownChannel      string   // the channel pushes wake this handle on (P..'w:'..id)
	log             *slog.Logger

	closing *driver.Closing
	wake    *wakeset.Set

	ownsClient bool        // the URL opener built the client: Close closes it
	cluster    bool        // the client is a cluster client: settlements declare their keys (declare.go)
	reloading  atomic.Bool // a cluster client's slot map is being read again (reloadSlots)

	listenMu   sync.Mutex
	pubsub     *goredis.PubSub          // nil until the first subscription
	subscribed map[string]bool          // channels whose subscription Redis confirmed
	confirming map[string]chan struct{} // closed by the relay on confirmation
	listenWG   sync.WaitGroup
	passMu     sync.Mutex     // held by passOn to start one, and by Close while it waits for them
	passing    sync.WaitGroup // passOn calls in flight
	resultWake *resultWaiters // WaitResults callers

	pushes *pushgroup.Group // one-message pushes, sent together when concurrent

	// clock, when set (by tests, to act as a machine whose clock is off),
	// stands in for time.Now as the producer's time of a push (now).
	clock func() time.Time
}

// now is this machine's time (clock's, when a test set it).
func (d *Driver) now() time.Time {
	if d.clock != nil {
		return d.clock()
	}
	return time.Now()
}

func newDriver(client goredis.UniversalClient, prefix, queue string, log *slog.Logger) *Driver {
	if log == nil {
		log = slog.Default()
	}
	kp := prefix + ":{" + queue + "}:"
	id := rand.Text()[:16]
	d := &Driver{
		client:     client,
		queue:      queue,
		prefix:     kp,
		prefixArg:  kp,
		keys:       []string{kp + "seq", kp + "ready", kp + "due", kp + "inflight", kp + "ids", kp + "dead"},
		channel:    kp + "notify",
		id:         id,
		ownChannel: kp + "w:" + id,
		log:        log,
		closing:    driver.NewClosing("redis queue " + queue),
		wake:       &wakeset.Set{},

		subscribed: map[string]bool{},
		confirming: map[string]chan struct{}{},
		resultWake: newResultWaiters(),
	}
	_, d.cluster = client.(*goredis.ClusterClient)
	d.pushes = newPushGroup(d.pushNow)
	return d
}

// Keys returns the names of the queue's Redis keys, in this order: the
// counter; the ready, delayed and in-flight sorted sets; the task-id hash;
// the dead sorted set; then the prefix of the per-message hashes and the
// pub/sub channel. They all share the hash tag {queue}.
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

// Close stops the notification listener and, when the driver was opened
// from a URL, closes its client; a client given to New stays open.
func (d *Driver) Close() error {
	if !d.closing.Close() {
		return d.closing.Err()
	}
	d.listenMu.Lock()
	ps := d.pubsub
	d.listenMu.Unlock()
	if ps != nil {
		_ = ps.Close()
	}
	d.listenWG.Wait()
	d.passMu.Lock() // no passOn starts from here on: it sees closed
	d.passing.Wait()
	d.passMu.Unlock()
	if ps != nil {
		// Out of the waiting set, so that no push wakes this handle; an
		// entry left behind lapses (waitMarkTTL) or is dropped by the
		// first push that finds no one listening on its channel.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = d.client.ZRem(ctx, d.prefix+"waiters", d.id).Err()
		cancel()
	}
	d.wake.Notify(-1)
	d.resultWake.wakeAll()
	if !d.ownsClient {
		return nil
	}
	if err := d.client.Close(); err != nil {
		return d.fail(context.Background(), "close", err)
	}
	return nil
}

// run runs a script with the queue's keys; go-redis loads it when the
// server does not have it cached (after a restart, for example).
func (d *Driver) run(ctx context.Context, s *goredis.Script, args ...any) *goredis.Cmd {
	return d.runArgs(ctx, s, append(d.scriptArgs(len(args)), args...))
}

// runArgs is run with an argument list from scriptArgs.
func (d *Driver) runArgs(ctx context.Context, s *goredis.Script, args []any) *goredis.Cmd {
	return s.Run(ctx, d.client, d.keys[:1], args...)
}

// scriptArgs returns a script's argument list: the queue's prefix, which
// every script takes first, with room for n more.
func (d *Driver) scriptArgs(n int) []any {
	return append(make([]any, 0, 1+n), d.prefixArg)
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

// tlsHint adds to "cannot reach Redis" what a TLS client (rediss://) may
// have got wrong: a plain server never answers the TLS handshake, so the
// error is only a timeout.
func tlsHint(client goredis.UniversalClient) string {
	var tls bool
	switch c := client.(type) {
	case *goredis.Client:
		tls = c.Options().TLSConfig != nil
	case *goredis.ClusterClient:
		tls = c.Options().TLSConfig != nil
	}
	if !tls {
		return ""
	}
	return "; rediss:// speaks TLS, which a plain server never answers: use redis:// for one"
}
