package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// Options configure a queue built by New. The zero value is the queue
// "default" in the schema "jobq" with every default below.
type Options struct {
	// Queue is the queue's name: 1 to 200 characters of UTF-8 text without
	// NUL. Many queues share one schema. Defaults to "default".
	Queue string
	// Schema is the Postgres schema holding jobq's tables, created and
	// migrated by New: a lower-case identifier of at most 48 characters
	// (letters, digits, _). Defaults to "jobq".
	Schema string
	// Poll is how often an idle receiver looks for work when no LISTEN
	// notification arrives: a safety net while LISTEN works, the pickup
	// latency when NoListen is set. Defaults to 1s.
	Poll time.Duration
	// NotifyInterval sets the rate of wake-up notifications for the queue
	// from this process: up to four at once, then one per interval.
	// Defaults to 1ms.
	NotifyInterval time.Duration
	// MaxMessageBytes is the largest message body; larger tasks go to the
	// stash. Defaults to 64 MiB.
	MaxMessageBytes int
	// AsyncPush makes pushes commit without waiting for the WAL flush
	// (synchronous_commit off for the push only): faster one-at-a-time
	// pushes, but a push acknowledged just before a server crash may be
	// lost. Defaults to false: a push returns once it is durable.
	AsyncPush bool
	// Spin is how long a one-task push polls its connection for the
	// server's reply before parking. Only connections dialled through a
	// pool configured with ConfigurePool (or opened from a URL) can poll;
	// on others it has no effect. Defaults to 500µs; negative turns it off.
	Spin time.Duration
	// NoListen turns LISTEN off: idle receivers then find new work by
	// polling every Poll. Set it when the pool goes through a PgBouncer in
	// transaction (or statement) pooling mode, where a LISTEN cannot hear
	// notifications. Defaults to false: receivers LISTEN on one connection
	// taken from the pool (see New).
	NoListen bool
	// Logger receives the driver's warnings (a lost LISTEN connection, for
	// example). Defaults to slog.Default().
	Logger *slog.Logger
	// ReadOnly opens the queue for reading only (driver.OpenOptions.ReadOnly):
	// New creates and migrates nothing, so a role with SELECT rights alone
	// can read the queue; a schema that does not exist is a NotFound
	// error.
	ReadOnly bool
}

// config resolves o's defaults and checks it.
func (o Options) config() (*config, error) {
	c := &config{
		queue:           o.Queue,
		schema:          o.Schema,
		poll:            o.Poll,
		notifyInterval:  o.NotifyInterval,
		maxMessageBytes: o.MaxMessageBytes,
		syncPush:        !o.AsyncPush,
		spin:            o.Spin,
		noListen:        o.NoListen,
	}
	if c.queue == "" {
		c.queue = DefaultQueue
	}
	if c.schema == "" {
		c.schema = DefaultSchema
	}
	if c.poll == 0 {
		c.poll = DefaultPoll
	}
	if c.notifyInterval == 0 {
		c.notifyInterval = DefaultNotifyInterval
	}
	if c.maxMessageBytes == 0 {
		c.maxMessageBytes = DefaultMaxMessageBytes
	}
	switch {
	case c.spin == 0:
		c.spin = DefaultSpin
	case c.spin < 0:
		c.spin = 0
	}
	var bad []string
	if len(c.queue) > 200 {
		bad = append(bad, fmt.Sprintf("Queue %q is longer than 200 characters", c.queue))
	} else if err := driver.CheckQueueName("Queue", c.queue); err != nil {
		// Postgres text holds no NUL and no invalid UTF-8: the server
		// would refuse every statement instead.
		bad = append(bad, err.Error())
	}
	if !schemaName.MatchString(c.schema) {
		bad = append(bad, fmt.Sprintf("Schema %q must be a lower-case identifier of at most 48 characters (letters, digits, _)", c.schema))
	}
	if c.poll < 0 {
		bad = append(bad, fmt.Sprintf("Poll %s must be positive", c.poll))
	}
	if c.notifyInterval < 0 {
		bad = append(bad, fmt.Sprintf("NotifyInterval %s must be positive", c.notifyInterval))
	}
	if c.maxMessageBytes < 0 {
		bad = append(bad, fmt.Sprintf("MaxMessageBytes %d must be positive", c.maxMessageBytes))
	}
	if len(bad) > 0 {
		return nil, driver.Errorf(errcode.InvalidArgument, "postgres.Options: %s", strings.Join(bad, "; "))
	}
	return c, nil
}

// New returns the queue opts names on the database pool connects to,
// creating or migrating jobq's schema first. pool is the application's own:
// the driver borrows its connections and never closes it (Close leaves it
// open), so it must outlive the driver.
//
// What the driver needs beyond ordinary queries it takes from the pool
// too: receivers that wait for work LISTEN on one connection acquired from
// the pool and then taken out of it (pgxpool.Conn.Hijack), so the pool's
// own size is unchanged and the pool's BeforeConnect/AfterConnect hooks
// apply to it; when LISTEN is impossible (NoListen, or the connection
// fails) receivers poll every Poll. Two settings of the URL opener live in
// the pool's configuration, which only its owner can change; apply them
// with ConfigurePool before building the pool, unless it connects through
// PgBouncer.
func New(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Driver, error) {
	if pool == nil {
		return nil, driver.Errorf(errcode.InvalidArgument, "postgres.New: the pool is nil; build one with pgxpool.New")
	}
	cfg, err := opts.config()
	if err != nil {
		return nil, err
	}
	if opts.ReadOnly {
		if err := checkReadable(ctx, pool, cfg.schema); err != nil {
			return nil, err
		}
	} else if err := migrate(ctx, pool, cfg.schema); err != nil {
		return nil, migrateError(ctx, pool, cfg.schema, err)
	} else if err := checkGrants(ctx, pool, cfg.schema); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return newDriver(cfg, pool, log), nil
}

// ConfigurePool applies to cfg what a pool opened from a queue URL has and
// a pool built by hand lacks, before the pool is built from it:
//
//   - planner settings sent at connection start (enable_seqscan,
//     enable_bitmapscan and enable_sort off, jit off; an explicit value in
//     cfg.ConnConfig.RuntimeParams wins), which keep every plan of the
//     driver's prepared statements on its indexes even when the first
//     executions ran on an empty queue;
//   - a dialer whose connections can poll for a one-task push's reply
//     (Options.Spin).
//
// The settings apply to every query of the pool, so give jobq a pool of
// its own if other queries need them on. Do not use ConfigurePool on a
// pool that connects through PgBouncer: PgBouncer refuses unknown startup
// parameters ("unsupported startup parameter: jit"). It leaves MaxConns
// alone (the opener's default is DefaultPoolMaxConns).
func ConfigurePool(cfg *pgxpool.Config) {
	addPlanSettings(cfg)
	dial := cfg.ConnConfig.DialFunc
	if dial == nil {
		dial = (&net.Dialer{KeepAlive: 5 * time.Minute}).DialContext
	}
	cfg.ConnConfig.DialFunc = quietConns(dial)
}

// addPlanSettings adds planSettings to the startup parameters of cfg's
// connections, unless cfg sets them already.
func addPlanSettings(cfg *pgxpool.Config) {
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	for name, value := range planSettings {
		if _, set := cfg.ConnConfig.RuntimeParams[name]; !set {
			cfg.ConnConfig.RuntimeParams[name] = value
		}
	}
}
