package postgres

import (
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/bound"
)

// jobqParams are the query parameters this backend reads itself; they are
// removed before the URL reaches pgx.
var jobqParams = map[string]bool{
	"queue":             true,
	"schema":            true,
	"poll":              true,
	"notify_interval":   true,
	"max_message_bytes": true,
	"sync_push":         true,
	"spin":              true,
	"listen":            true,
	"pgbouncer":         true,
	"tcp_user_timeout":  true,
}

// connParams are the query parameters handed on to pgx unchanged: the libpq
// connection keywords pgx understands, pgx's own settings, and pgxpool's.
// Anything else is rejected. pgx would otherwise send an unknown parameter to
// the server as a setting, so a typo such as "queu=x" would fail later with a
// confusing "unrecognized configuration parameter"; server settings belong in
// options=-c name=value instead.
var connParams = map[string]bool{
	// libpq keywords (https://www.postgresql.org/docs/current/libpq-connect.html).
	"host": true, "port": true, "dbname": true, "user": true, "password": true,
	"passfile": true, "connect_timeout": true, "sslmode": true, "sslkey": true,
	"sslcert": true, "sslcertmode": true, "sslrootcert": true, "sslnegotiation": true,
	"sslpassword": true, "sslsni": true, "krbspn": true, "krbsrvname": true,
	"target_session_attrs": true, "service": true, "servicefile": true,
	"min_protocol_version": true, "max_protocol_version": true,
	"channel_binding": true, "require_auth": true, "application_name": true,
	"fallback_application_name": true, "options": true, "search_path": true,
	"timezone": true, "client_encoding": true,
	// pgx connection settings.
	"statement_cache_capacity": true, "description_cache_capacity": true,
	"default_query_exec_mode": true,
	// pgxpool settings.
	"pool_max_conns": true, "pool_min_conns": true, "pool_min_idle_conns": true,
	"pool_max_conn_lifetime": true, "pool_max_conn_idle_time": true,
	"pool_health_check_period": true, "pool_max_conn_lifetime_jitter": true,
	"pool_ping_timeout": true,
}

// Defaults for the jobq query parameters.
const (
	// DefaultQueue is the queue name when the URL has no queue= parameter.
	DefaultQueue = "default"
	// DefaultSchema is the Postgres schema holding jobq's tables when the
	// URL has no schema= parameter.
	DefaultSchema = "jobq"
	// DefaultPoll is how often an idle receiver looks for work when no
	// notification arrives (a safety net for lost notifications).
	DefaultPoll = time.Second
	// DefaultNotifyInterval sets the rate of wake-up notifications for one
	// queue from one process: up to four at once, then one per interval.
	// Pushes that send none are covered by a later push's notification or
	// by a trailing one (notify.go).
	DefaultNotifyInterval = time.Millisecond
	// DefaultMaxMessageBytes is the largest message body accepted unless the
	// URL sets max_message_bytes=. Larger tasks go to the stash.
	DefaultMaxMessageBytes = 64 << 20
	// DefaultPoolMaxConns is the connection pool's size unless the URL sets
	// pool_max_conns=. pgx's own default (4 on small machines) is too few
	// for a worker, whose receive loop, settlement flushers and producer
	// would queue for connections. Connections are opened on demand. (The
	// LISTEN connection is extra.) An opener that says how many tasks it
	// runs at once (driver.OpenOptions.Concurrency, as jobq worker does)
	// gets that many plus one, at least 2, up to this.
	DefaultPoolMaxConns = 10
	// DefaultSpin is how long a one-task push polls its connection for the
	// server's reply before parking, unless the URL sets spin= (0 turns it
	// off): about twice a durable commit on the development machine's disk.
	// A longer budget gained nothing there and, spent in full on a slow
	// commit, took CPU the rest of the machine needed (spin.go).
	DefaultSpin = 500 * time.Microsecond
	// DefaultTCPUserTimeout bounds how long a request may go unacknowledged
	// by the server's machine before the connection is dropped (Linux's
	// TCP_USER_TIMEOUT), unless the URL sets tcp_user_timeout= (0 leaves
	// the system's, about 15 minutes). A server whose machine vanished (a
	// preempted VM, a failover that moved its address) answers nothing,
	// not even with a reset: without it a claim, push or wait on such a
	// connection hangs for those 15 minutes. A server that is busy, or a
	// statement that waits on a lock, acknowledges the request and is not
	// affected.
	DefaultTCPUserTimeout = 30 * time.Second
)

// config is a parsed queue URL.
type config struct {
	connString      string // the URL without jobq's parameters, for pgx
	queue           string
	schema          string
	poll            time.Duration
	notifyInterval  time.Duration
	maxMessageBytes int
	syncPush        bool // pushes wait for the WAL flush (the server's setting)
	spin            time.Duration
	noListen        bool // listen=false (or pgbouncer=true): receivers poll
	poolMaxSet      bool // the URL sets pool_max_conns
	pgbouncer       bool // no startup parameters; no LISTEN; exec mode unless set
	tcpUserTimeout  time.Duration
}

// options is c as New's Options.
func (c *config) options(log *slog.Logger) Options {
	spin := c.spin
	if spin == 0 {
		spin = -1 // off
	}
	return Options{Queue: c.queue, Schema: c.schema, Poll: c.poll, NotifyInterval: c.notifyInterval,
		MaxMessageBytes: c.maxMessageBytes, AsyncPush: !c.syncPush, Spin: spin, NoListen: c.noListen, Logger: log}
}

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,47}$`)

// parseURL splits u into jobq's settings and the connection string for pgx.
// Unknown parameters are an InvalidArgument error naming them.
func parseURL(u *url.URL) (*config, error) {
	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, driver.Errorf(errcode.InvalidArgument, "postgres URL: malformed query (%v); separate parameters with & and percent-encode ; and &", err)
	}
	var unknown []string
	own := url.Values{}
	pass := url.Values{}
	for k, v := range query {
		switch {
		case jobqParams[k]:
			own[k] = v
		case connParams[k]:
			pass[k] = v
		default:
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, driver.Errorf(errcode.InvalidArgument,
			"postgres URL: unknown query parameter %s; jobq reads queue, schema, poll, notify_interval, max_message_bytes, sync_push, spin, listen, pgbouncer and tcp_user_timeout, "+
				"and passes libpq/pgx/pgxpool connection parameters (sslmode, application_name, pool_max_conns, ...) to pgx; "+
				"put server settings in options=-c%%20name%%3Dvalue",
			strings.Join(unknown, ", "))
	}

	ownURL := &url.URL{RawQuery: own.Encode()}
	p := driver.NewParams(ownURL)
	c := &config{
		queue:           p.Queue(DefaultQueue),
		schema:          p.String("schema", DefaultSchema),
		poll:            p.Duration("poll", DefaultPoll),
		notifyInterval:  p.Duration("notify_interval", DefaultNotifyInterval),
		maxMessageBytes: p.Int("max_message_bytes", DefaultMaxMessageBytes),
		syncPush:        p.Bool("sync_push", true),
		spin:            p.Duration("spin", DefaultSpin),
		pgbouncer:       p.Bool("pgbouncer", false),
		tcpUserTimeout:  p.Duration("tcp_user_timeout", DefaultTCPUserTimeout),
	}
	c.noListen = !p.Bool("listen", !c.pgbouncer)
	if len(c.queue) > 200 {
		p.Fail("query parameter queue=%q must be 1 to 200 characters", c.queue)
	}
	if !schemaName.MatchString(c.schema) {
		p.Fail("query parameter schema=%q must be a lower-case identifier of at most 48 characters (letters, digits, _)", c.schema)
	}
	if c.poll <= 0 {
		p.Fail("query parameter poll=%s must be positive", c.poll)
	}
	if c.maxMessageBytes <= 0 {
		p.Fail("query parameter max_message_bytes=%d must be positive", c.maxMessageBytes)
	}
	if c.tcpUserTimeout < 0 || c.tcpUserTimeout > math.MaxInt32*time.Millisecond {
		p.Fail("query parameter tcp_user_timeout=%s must be 0 (the system's) or a positive duration of at most 596h", c.tcpUserTimeout)
	}
	normalizePass(p, pass)
	if err := p.Done(); err != nil {
		return nil, fmt.Errorf("postgres URL: %w", err)
	}

	c.poolMaxSet = pass.Has("pool_max_conns")
	if c.pgbouncer && !pass.Has("default_query_exec_mode") {
		// Before PgBouncer 1.21 a prepared statement lives on one server
		// connection, and a transaction-pooled client meets another.
		pass.Set("default_query_exec_mode", "exec")
	}
	conn := *u
	conn.Scheme = "postgres"
	// Spaces as %20, not "+": pgx reads a "+" literally, which would break
	// options=-c%20name%3Dvalue.
	conn.RawQuery = strings.ReplaceAll(pass.Encode(), "+", "%20")
	conn.Fragment = ""
	c.connString = conn.String()
	return c, nil
}

// passCounts are the whole-number parameters handed to pgx, with the
// ranges jobq accepts (pgx keeps them in int32 and int).
var passCounts = map[string]bound.Ints{
	"connect_timeout":            {Min: 0, Max: math.MaxInt32},
	"pool_max_conns":             bound.PositiveInt32,
	"pool_min_conns":             {Min: 0, Max: math.MaxInt32},
	"pool_min_idle_conns":        {Min: 0, Max: math.MaxInt32},
	"statement_cache_capacity":   {Min: 0, Max: math.MaxInt32},
	"description_cache_capacity": {Min: 0, Max: math.MaxInt32},
}

// passDurations are the duration parameters handed to pgx(pool).
var passDurations = []string{
	"pool_max_conn_lifetime", "pool_max_conn_idle_time", "pool_health_check_period",
	"pool_max_conn_lifetime_jitter", "pool_ping_timeout",
}

// normalizePass checks pgx's numeric parameters with jobq's parser and
// rewrites durations in Go's syntax, which pgx reads, so that what pgx sees
// is what jobq checked ("2d" works, "NaN" is refused).
func normalizePass(p *driver.Params, pass url.Values) {
	for name, r := range passCounts {
		if v := pass.Get(name); v != "" {
			if _, err := r.Parse("query parameter "+name, v); err != nil {
				p.Fail("%v", err)
			}
		}
	}
	for _, name := range passDurations {
		if v := pass.Get(name); v != "" {
			d, err := bound.Durations{}.Parse("query parameter "+name, v)
			if err != nil {
				p.Fail("%v", err)
				continue
			}
			pass.Set(name, d.String())
		}
	}
}
