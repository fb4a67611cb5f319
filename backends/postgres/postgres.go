// Package postgres is the jobq backend for PostgreSQL, built on pgx/v5.
//
// Importing it registers the URL schemes postgres:// and postgresql://. The
// URL is an ordinary libpq/pgx connection URL plus jobq's own parameters:
//
//		postgres://user:pass@db:5432/app?sslmode=require&queue=render&schema=jobq
//
//	  - queue: the queue name (default "default"). Many queues share one schema.
//	  - schema: the Postgres schema holding jobq's tables (default "jobq"). It is
//	    created and migrated on first use.
//	  - poll: how often an idle receiver checks for work when no notification
//	    arrives (default 1s); a safety net, since pushes wake receivers through
//	    LISTEN/NOTIFY.
//	  - notify_interval: the rate of wake-up notifications for one queue from
//	    one process: up to four at once, then one per interval (default 1ms).
//	  - max_message_bytes: the largest message body (default 64 MiB).
//	  - sync_push: false makes pushes commit without waiting for the WAL
//	    flush (default true).
//	  - spin: how long a one-task push polls for the server's reply before
//	    parking (default 500us; 0 turns it off).
//
// Every other parameter must be one pgx understands (libpq keywords such as
// sslmode or application_name, pgx's statement_cache_capacity, pgxpool's
// pool_max_conns, ...); they are passed through. Anything else is rejected, so
// that a typo is reported at Open rather than sent to the server as a setting.
//
// Messages are claimed with FOR UPDATE SKIP LOCKED in priority order; every
// claim carries a fresh lease token, and settlements only act while that token
// is current. See docs/backends/postgres.md for the SQL behind each operation.
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
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

// Schemes are the URL schemes this backend registers.
var Schemes = []string{"postgres", "postgresql"}

func init() {
	for _, s := range Schemes {
		jobq.Register(s, Opener{})
	}
}

// Opener opens Postgres queues. It is registered for Schemes.
type Opener struct{}

// Capabilities implements driver.Opener.
func (Opener) Capabilities() driver.Capabilities { return capabilities(DefaultMaxMessageBytes) }

// Open implements driver.Opener: it connects, migrates the schema and returns
// the queue named by u's queue= parameter.
func (Opener) Open(ctx context.Context, u *url.URL, opts driver.OpenOptions) (driver.Driver, error) {
	cfg, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	poolCfg, err := pgxpool.ParseConfig(cfg.connString)
	if err != nil {
		return nil, driver.Errorf(driver.InvalidArgument, "postgres URL: %w", err)
	}
	if !cfg.poolMaxSet {
		poolCfg.MaxConns = DefaultPoolMaxConns
	}
	for name, value := range planSettings {
		if _, set := poolCfg.ConnConfig.RuntimeParams[name]; !set {
			poolCfg.ConnConfig.RuntimeParams[name] = value
		}
	}
	if cfg.spin > 0 {
		poolCfg.ConnConfig.DialFunc = quietConns(poolCfg.ConnConfig.DialFunc)
	}
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, wrap(ctx, "connect", err)
	}
	if err := migrate(ctx, pool, cfg.schema); err != nil {
		pool.Close()
		return nil, wrap(ctx, "open: creating or migrating schema "+cfg.schema, err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	d := newDriver(cfg, pool, log)
	return d, nil
}

// capabilities is what every Postgres queue declares.
func capabilities(maxMessageBytes int) driver.Capabilities {
	return driver.Capabilities{
		Features:        driver.NativeExcept(nil),
		MaxMessageBytes: maxMessageBytes,
		MaxReceiveBatch: 1000,
		MaxPushBatch:    5000,
	}
}

// pgDriver is one open queue. It implements driver.Driver.
type pgDriver struct {
	cfg  *config
	pool *pgxpool.Pool
	log  *slog.Logger
	sql  queries
	psql policyQueries // policy.go
	// policies caches the queue's policies (policy.go).
	policies policyCache
	caps     driver.Capabilities
	wake     broadcaster // fired when work may have arrived
	notif    *notifier

	idle atomic.Int32 // receivers sleeping for want of work

	// conflictAt is when (Unix ns) a push last found a task id taken
	// (push.go).
	conflictAt atomic.Int64

	deleted    atomic.Int64 // rows deleted since the last vacuum
	tableRows  atomic.Int64 // the table's rows at the last vacuum; -1 before the first
	vacuuming  atomic.Bool
	listenOnce sync.Once
	done       chan struct{} // closed by Close
	mu         sync.Mutex    // orders spawn and Close
	closed     atomic.Bool
	wg         sync.WaitGroup // background goroutines; Close waits for them
}

func newDriver(cfg *config, pool *pgxpool.Pool, log *slog.Logger) *pgDriver {
	d := &pgDriver{
		cfg:  cfg,
		pool: pool,
		log:  log,
		sql:  buildQueries(pgx.Identifier{cfg.schema}.Sanitize()),
		psql: buildPolicyQueries(pgx.Identifier{cfg.schema}.Sanitize()),
		caps: capabilities(cfg.maxMessageBytes),
		wake: newBroadcaster(),
		done: make(chan struct{}),
	}
	d.notif = newNotifier(cfg.notifyInterval, d.sendNotify)
	d.tableRows.Store(-1)
	return d
}

// channel is the LISTEN/NOTIFY channel of the schema; the payload names the
// queue.
func (d *pgDriver) channel() string { return "jobq." + d.cfg.schema }

// Capabilities implements driver.Driver.
func (d *pgDriver) Capabilities() driver.Capabilities { return d.caps }

// ErrorCode implements driver.Driver.
func (d *pgDriver) ErrorCode(err error) driver.Code { return codeOf(err) }

// As implements driver.Driver; see the package documentation for the types.
func (d *pgDriver) As(target any) bool {
	switch t := target.(type) {
	case **pgDriver: // for this package's tests and benchmarks
		*t = d
		return true
	case **pgxpool.Pool:
		*t = d.pool
		return true
	}
	return false
}

// Close stops the listener and closes the pool. A trailing notification still
// pending is sent first so that other processes hear about the last pushes.
func (d *pgDriver) Close() error {
	d.mu.Lock()
	first := d.closed.CompareAndSwap(false, true)
	d.mu.Unlock()
	if !first {
		return errClosed
	}
	d.notif.flush()
	close(d.done)
	d.wg.Wait()
	d.pool.Close()
	return nil
}

// spawn runs f in a goroutine that Close waits for, unless the driver is
// closed already.
func (d *pgDriver) spawn(f func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		return
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		f()
	}()
}

// begin checks that the driver is open; every method starts with it.
func (d *pgDriver) begin() error {
	if d.closed.Load() {
		return errClosed
	}
	return nil
}

// micros converts a duration to the microseconds the SQL multiplies by
// interval '1 microsecond'.
func micros(dur time.Duration) int64 { return dur.Microseconds() }
