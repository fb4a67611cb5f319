// Package postgres is the jobq backend for PostgreSQL, built on pgx/v5.
//
// Build a queue from the pgxpool.Pool the application already has with New,
// or from a URL: importing the package registers the URL schemes
// postgres:// and postgresql://. The URL is an ordinary libpq/pgx
// connection URL plus jobq's own parameters, which set Options:
//
//		postgres://user:pass@db:5432/app?sslmode=require&queue=render&schema=jobq
//
//	  - queue, schema, poll, notify_interval, max_message_bytes: as the
//	    Options fields Queue, Schema, Poll, NotifyInterval and
//	    MaxMessageBytes.
//	  - sync_push: false makes pushes commit without waiting for the WAL
//	    flush (Options.AsyncPush; default true).
//	  - spin: how long a one-task push polls for the server's reply before
//	    parking (default 500us; 0 turns it off).
//	  - listen: false turns LISTEN off; receivers poll (Options.NoListen).
//	  - pgbouncer: true when the URL names a PgBouncer in transaction pooling
//	    mode: no planner settings at connection start (PgBouncer refuses
//	    them), no LISTEN, and pgx's default_query_exec_mode=exec (unnamed
//	    statements) unless the URL sets it.
//
// Every other parameter must be one pgx understands (libpq keywords such as
// sslmode or application_name, pgx's default_query_exec_mode, pgxpool's
// pool_max_conns, ...); they are passed through. Anything else is rejected, so
// that a typo is reported at Open rather than sent to the server as a setting.
//
// Messages are claimed with FOR UPDATE SKIP LOCKED in priority order; every
// claim carries a fresh lease token, and settlements only act while that token
// is current. See docs/backends/postgres.md.
//
// # Escape hatches
//
// A queue's As method (jobq.Queue.As) accepts **pgxpool.Pool: the connection
// pool the queue uses.
//
// # Transactional push
//
// jobq.Queue.PushTx takes a pgx.Tx: the tasks are queued if and only if the
// application's transaction commits (see PushTx on the driver).
package postgres

import (
	"context"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/wakeset"
)

// Schemes are the URL schemes this backend registers.
var Schemes = []string{"postgres", "postgresql"}

func init() {
	for _, s := range Schemes {
		if err := jobq.Register(s, Opener{}); err != nil {
			panic(err)
		}
	}
}

// Opener opens Postgres queues. It is registered for Schemes.
type Opener struct{}

// Capabilities implements driver.Opener.
func (Opener) Capabilities() driver.Capabilities { return capabilities(DefaultMaxMessageBytes) }

// Open implements driver.Opener: it builds a pool from the URL, then the
// queue with New. The driver owns that pool and closes it on Close.
func (Opener) Open(ctx context.Context, u *url.URL, opts driver.OpenOptions) (driver.Driver, error) {
	cfg, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	poolCfg, err := pgxpool.ParseConfig(cfg.connString)
	if err != nil {
		return nil, driver.Errorf(errcode.InvalidArgument, "postgres URL: %w", err)
	}
	if !cfg.poolMaxSet {
		poolCfg.MaxConns = poolMaxConns(opts.Concurrency)
	}
	if !cfg.pgbouncer {
		addPlanSettings(poolCfg)
	}
	if cfg.tcpUserTimeout > 0 {
		poolCfg.ConnConfig.DialFunc = (&net.Dialer{Control: userTimeout(cfg.tcpUserTimeout)}).DialContext
	}
	if cfg.spin > 0 {
		poolCfg.ConnConfig.DialFunc = quietConns(poolCfg.ConnConfig.DialFunc)
	}
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, startupRefused(wrap(ctx, "connect", err))
	}
	o := cfg.options(opts.Logger)
	o.ReadOnly = opts.ReadOnly
	d, err := New(ctx, pool, o)
	if err != nil {
		pool.Close()
		return nil, startupRefused(err)
	}
	d.ownsPool = true
	return d, nil
}

// poolMaxConns is the size of the pool of a URL that sets none, for an
// opener that will run concurrency tasks at once (0: unknown): a connection
// for each and one more, for settlements and background work, at least 2
// and at most DefaultPoolMaxConns. The pool opens a connection whenever a
// call finds none idle and keeps it, so a worker of one handler, whose
// receivers, settlements and background loops overlap now and then, came
// to hold 4 or 5 besides LISTEN; each costs the server a process, and its
// first statements their plans.
func poolMaxConns(concurrency int) int32 {
	if concurrency <= 0 {
		return DefaultPoolMaxConns
	}
	return int32(min(max(concurrency+1, 2), DefaultPoolMaxConns))
}

// startupRefused adds the fix to PgBouncer's refusal of the planner
// settings the opener sends at connection start.
func startupRefused(err error) error {
	if err == nil || !strings.Contains(err.Error(), "unsupported startup parameter") {
		return err
	}
	return driver.Errorf(errcode.InvalidArgument,
		"%w (the server is a connection pooler such as PgBouncer, which refuses the planner settings jobq sends at connection start: add pgbouncer=true to the queue URL)", err)
}

// capabilities is what every Postgres queue declares.
func capabilities(maxMessageBytes int) driver.Capabilities {
	return driver.Capabilities{
		Features: driver.NativeExcept(map[driver.Feature]driver.Support{
			driver.WorkerRegistry: {Level: driver.Native}, // the workers table (workers.go)
		}),
		MaxMessageBytes: maxMessageBytes,
		MaxReceiveBatch: 1000,
		MaxPushBatch:    5000,
	}
}

// Driver is one open Postgres queue. It implements driver.Driver; build it
// with New from a pool, or open it from a URL (Opener).
type Driver struct {
	cfg  *config
	pool *pgxpool.Pool
	log  *slog.Logger
	sql  queries
	psql policyQueries // policy.go
	gsql groupQueries  // groups.go
	hsql heldQueries   // held.go
	// grouped caches the grouped variants of settlement statements
	// (groups.go), by statement.
	grouped sync.Map
	// heldSettled caches the variants of settlement statements that
	// delete the held rows of the leases they end (claimheld.go).
	heldSettled sync.Map
	// policies caches the queue's policies (policy.go).
	policies policyCache
	caps     driver.Capabilities
	wake     wakeset.Set // the receivers waiting for work (receive.go)
	// registered: this handle is among the queue's waiting ones, as far
	// as this process knows (no wake-up on its channel and no LISTEN
	// reconnect since it registered).
	registered atomic.Bool
	// wakeGen counts the wake-ups on the handle's channel and the LISTEN
	// (re)connects, so that a registration that one overtook is not
	// taken for current.
	wakeGen atomic.Uint64
	// drained: the last claim got fewer messages than it asked for, so the
	// next receive registers the handle before it claims (receive.go).
	drained atomic.Bool
	// regMu orders the registrations of this handle; regGen counts them
	// and regLast is the last one's, which a receiver that waited for it
	// takes as its own.
	regMu   sync.Mutex
	regGen  atomic.Uint64
	regLast registration
	// handle names this driver among the queue's waiting receivers:
	// pushes wake it on its own channel (listen.go).
	handle string
	waited atomic.Bool // the handle tried to register as waiting once: Close deletes its rows
	// resultsWaited: the handle was registered as waiting for records
	// once (awaiting.go).
	resultsWaited atomic.Bool
	// beforeAwait, when set (by tests), runs between a claim that found
	// nothing and the registration of the handle.
	beforeAwait func()
	// clock, when set (by tests, to act as a machine whose clock is off),
	// stands in for time.Now where the driver turns a caller's time into
	// a span on the database's clock (now).
	clock func() time.Time
	notif *notifier
	// Result records (results.go).
	rsql resultQueries
	// rollupReady is set once the result history's rollup table is
	// known to exist (rollup.go).
	rollupReady atomic.Bool
	// rollupFill runs the background rollup fill (rollupfill.go).
	rollupFill driver.RollupFill
	resultWake broadcaster // fired when a record may have been stored
	resNotif   *notifier   // rate-limits the records notifications
	listening  atomic.Bool // the LISTEN connection is up
	// line hands statements to the LISTEN connection (listen.go).
	line listenLine
	// seated: the handle holds one of the queue's wake-up seats, and the
	// LISTEN connection listens on its channel (seats.go).
	seated atomic.Bool
	// seatsFull: the queue's seats were all taken when the handle last
	// tried for one; its receivers poll in standby (receive.go).
	seatsFull atomic.Bool
	// listeners is how many processes of the queue may hold a seat.
	listeners int
	// keyedRecheck bounds a receiver's back-off while the messages it
	// finds are held back by key policies (receive.go).
	keyedRecheck time.Duration
	// heldBack holds the receivers of this process that found messages
	// held back by key policies; a settlement that ends leases wakes as
	// many (settle.go).
	heldBack wakeset.Set
	// resultsListening: the LISTEN connection listens on the schema's
	// channel, for records notifications (listenResults).
	resultsListening atomic.Bool
	recordAt         atomic.Int64 // when (Unix ns) a settlement last met an existing record

	idle atomic.Int32 // receivers sleeping for want of work
	// quiet counts the looks in a row, by any receiver without a wake-up
	// channel, that found the queue empty (idleSleep).
	quiet atomic.Int32

	// conflictAt is when (Unix ns) a push last found a task id taken
	// (push.go).
	conflictAt atomic.Int64

	deleted   atomic.Int64 // rows deleted since the last vacuum
	tableRows atomic.Int64 // the table's rows at the last vacuum; -1 before the first
	vacuuming atomic.Bool
	// vacuumAfter is when (Unix ns) a vacuum may next begin (vacuumGap).
	vacuumAfter atomic.Int64
	// statsChecked is set once checkStats has run (vacuum.go).
	statsChecked atomic.Bool
	reclaim      reclaimState // reclaim.go
	listenOnce   sync.Once
	closing      *driver.Closing
	mu           sync.Mutex     // orders spawn and Close
	wg           sync.WaitGroup // background goroutines; Close waits for them
	ownsPool     bool           // the URL opener built the pool: Close closes it
}

func newDriver(cfg *config, pool *pgxpool.Pool, log *slog.Logger) *Driver {
	d := &Driver{
		cfg:          cfg,
		pool:         pool,
		log:          log,
		sql:          buildQueries(pgx.Identifier{cfg.schema}.Sanitize()),
		psql:         buildPolicyQueries(pgx.Identifier{cfg.schema}.Sanitize()),
		gsql:         buildGroupQueries(pgx.Identifier{cfg.schema}.Sanitize()),
		hsql:         buildHeldQueries(pgx.Identifier{cfg.schema}.Sanitize()),
		caps:         capabilities(cfg.maxMessageBytes),
		handle:       newHandle(),
		listeners:    defaultListeners,
		keyedRecheck: keyedRecheck,
		rsql:         buildResultQueries(pgx.Identifier{cfg.schema}.Sanitize()),

		resultWake: newBroadcaster(),
		closing:    driver.NewClosing("postgres queue " + cfg.queue),
	}
	d.notif = newNotifier(cfg.notifyInterval, d.sendNotify)
	d.notif.sendN = d.sendWake // a trailing wake-up wakes a handle per push it covers
	d.resNotif = newNotifier(max(cfg.notifyInterval, resultsNotifyInterval), d.sendResultsNotify)
	d.tableRows.Store(-1)
	return d
}

// channel is the LISTEN/NOTIFY channel of the schema; the payload names the
// queue.
func (d *Driver) channel() string { return "jobq." + d.cfg.schema }

// Capabilities implements driver.Driver.
func (d *Driver) Capabilities() driver.Capabilities { return d.caps }

// ErrorCode implements driver.Driver.
func (d *Driver) ErrorCode(err error) errcode.Code { return codeOf(err) }

// As implements driver.Driver; see the package documentation for the types.
func (d *Driver) As(target any) bool {
	switch t := target.(type) {
	case **Driver: // for this package's tests and benchmarks
		*t = d
		return true
	case **pgxpool.Pool:
		*t = d.pool
		return true
	}
	return false
}

// Close stops the listener and, when the driver was opened from a URL,
// closes its pool; a pool given to New stays open. A trailing notification
// still pending is sent first so that other processes hear about the last
// pushes.
func (d *Driver) Close() error {
	d.mu.Lock()
	first := d.closing.Close()
	d.mu.Unlock()
	if !first {
		return d.closing.Err()
	}
	d.notif.flush()
	d.resNotif.flush()
	// After the goroutines end: a registration under way on the LISTEN
	// connection could otherwise commit after the deletes, leaving a
	// waiting row that the next push would wake in vain.
	d.wg.Wait()
	d.unregister()
	if d.ownsPool {
		d.pool.Close()
	}
	return nil
}

// spawn runs f in a goroutine that Close waits for, unless the driver is
// closed already.
func (d *Driver) spawn(f func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing.Closed() {
		return
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		f()
	}()
}

// micros converts a duration to the microseconds the SQL multiplies by
// interval '1 microsecond'.
func micros(dur time.Duration) int64 { return dur.Microseconds() }

// now is this machine's time (clock's, when a test set it).
func (d *Driver) now() time.Time {
	if d.clock != nil {
		return d.clock()
	}
	return time.Now()
}
