package redis

import (
	"math"
	"net/url"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/bound"
	"github.com/jobq/jobq/internal/spinconn"
)

// config is what a URL says.
type config struct {
	queue, prefix   string
	maxMessageBytes int
	spin            time.Duration
	// Exactly one of options and cluster is set.
	options *goredis.Options
	cluster *goredis.ClusterOptions
}

// newClient returns a client for a single server or for a cluster.
func (c *config) newClient() goredis.UniversalClient {
	if c.cluster != nil {
		cc := goredis.NewClusterClient(c.cluster)
		cc.OnNewNode(func(n *goredis.Client) { n.AddHook(askGuard{}) })
		return cc
	}
	return goredis.NewClient(c.options)
}

// jobqParams are the query parameters this package reads itself; the rest
// go to go-redis, which rejects the ones it does not know.
var jobqParams = []string{"queue", "prefix", "max_message_bytes", "cluster", "spin"}

// parseURL splits u into jobq's parameters and go-redis's options.
func parseURL(u *url.URL) (*config, error) {
	p := driver.NewParams(u)
	cfg := &config{
		queue:  p.Queue("default"),
		prefix: p.String("prefix", "jobq"),
		// A lower limit sends larger tasks to the stash, keeping Redis's
		// memory for the queue itself.
		maxMessageBytes: p.Int("max_message_bytes", 0),
		// How long a read polls for the reply before it parks
		// (internal/spinconn).
		spin: p.Duration("spin", spinconn.DefaultBudget),
	}
	cluster := p.Bool("cluster", false)
	checkDB(p, u)
	if cfg.maxMessageBytes < 0 {
		p.Fail("query parameter max_message_bytes=%d must be 0 (no limit) or more", cfg.maxMessageBytes)
	}
	for _, s := range []struct{ name, v string }{{"queue", cfg.queue}, {"prefix", cfg.prefix}} {
		if (s.v == "" && s.name != "queue") || strings.ContainsAny(s.v, "{}") { // p.Queue checked an empty queue
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
	normalizeOptions(p, q)
	if err := p.Done(); err != nil {
		return nil, driver.Errorf(errcode.InvalidArgument, "redis URL: %w", err)
	}
	rest := *u
	rest.RawQuery = q.Encode()
	switch strings.ToLower(u.Scheme) {
	case SchemeUnix:
		if cluster {
			return nil, driver.Errorf(errcode.InvalidArgument, "redis URL: cluster=true needs redis:// or rediss:// seed addresses, not a unix socket")
		}
		rest.Scheme = "unix"
	case Scheme, SchemeTLS:
	default:
		return nil, driver.Errorf(errcode.InvalidArgument, "redis backend: unknown URL scheme %q; use redis://, rediss:// or redis+unix://", u.Scheme)
	}
	badOption := func(err error) error {
		return driver.Errorf(errcode.InvalidArgument,
			"redis URL: %v (jobq takes queue=, prefix=, max_message_bytes=, cluster= and spin=; other parameters must be go-redis options such as dial_timeout, pool_size, client_name)",
			err)
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
		opts.Dialer = probeOnlyQuietConns(goredis.NewDialer(&goredis.Options{DialTimeout: dialTimeout(opts.DialTimeout), TLSConfig: opts.TLSConfig}), cfg.spin)
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
	opts.DialTimeout = dialTimeout(opts.DialTimeout)
	opts.Dialer = probeOnlyQuietConns(goredis.NewDialer(opts), cfg.spin)
	cfg.options = opts
	return cfg, nil
}

// defaultDialTimeout is go-redis's default dial_timeout.
const defaultDialTimeout = 5 * time.Second

// dialTimeout is the dial timeout the dialer jobq makes gets, for the
// dial_timeout URL parameter d (0 when the URL has none; negative, -1 as
// normalizeOptions writes it, for "no timeout"). go-redis applies its
// default only to the options it is given, after the dialer made here has
// read DialTimeout, and a net.Dialer takes a negative timeout as a
// deadline already past. So without this a connect, or a TLS handshake the
// server never answers (rediss:// on a plain server), had no limit at all
// and 'jobq QUEUE stats' waited forever in silence, while dial_timeout=0
// failed every dial at once with "i/o timeout".
func dialTimeout(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return defaultDialTimeout
	case d < 0:
		return 0
	}
	return d
}

// maxDB is the largest database number a URL may name: Redis's databases
// setting is an int.
const maxDB = math.MaxInt32

// checkDB checks the database number in the URL's path or its db=
// parameter (which go-redis also reads). go-redis takes any integer and
// silently uses database 0 for a negative one.
func checkDB(p *driver.Params, u *url.URL) {
	r := bound.Ints{Min: 0, Max: maxDB, Hint: "use a database number from 0 to the server's databases setting minus 1 (16 databases by default: 0 to 15)"}
	if db := strings.Trim(u.Path, "/"); db != "" && !strings.EqualFold(u.Scheme, SchemeUnix) {
		if _, err := r.Parse("", db); err != nil {
			p.Fail("database number %q in the URL path: %v", db, err)
		}
	}
	if v := u.Query().Get("db"); v != "" {
		if _, err := r.Parse("query parameter db", v); err != nil {
			p.Fail("%v", err)
		}
	}
}

// urlRefused turns the server's refusal of what the URL asks for (a
// database number it does not have, cluster=true on a server that is not
// a cluster) into an InvalidArgument error (the URL is wrong, not the
// server); other errors are returned as they are.
func urlRefused(err error, u *url.URL) error {
	if err != nil && strings.Contains(err.Error(), "cluster support disabled") {
		return driver.Errorf(errcode.InvalidArgument,
			"redis URL: cluster=true, but the server is not a Redis Cluster (its cluster support is disabled); drop cluster= and addr= to use it as a single server")
	}
	if err == nil || !strings.Contains(err.Error(), "DB index is out of range") {
		return err
	}
	db := strings.Trim(u.Path, "/")
	if v := u.Query().Get("db"); v != "" {
		db = v
	}
	return driver.Errorf(errcode.InvalidArgument,
		"redis URL: database %s does not exist on this server; use 0 to the server's databases setting minus 1 (CONFIG GET databases; 16 by default: 0 to 15)", db)
}

// goRedisCounts are go-redis's whole-number URL options with the ranges
// jobq accepts: go-redis converts them to int and its pool panics above
// int32.
var goRedisCounts = map[string]bound.Ints{
	"protocol":                   {Min: 2, Max: 3},
	"max_retries":                {Min: -1, Max: math.MaxInt32, Hint: "use -1 (no retries) to 2147483647"},
	"pool_size":                  {Min: 0, Max: math.MaxInt32},
	"min_idle_conns":             {Min: 0, Max: math.MaxInt32},
	"max_idle_conns":             {Min: 0, Max: math.MaxInt32},
	"max_active_conns":           {Min: 0, Max: math.MaxInt32},
	"max_concurrent_dials":       {Min: 0, Max: math.MaxInt32},
	"pipeline_pool_size":         {Min: -1, Max: math.MaxInt32, Hint: "use -1 (no pipeline pool) to 2147483647"},
	"pipeline_read_buffer_size":  {Min: 0, Max: math.MaxInt32},
	"pipeline_write_buffer_size": {Min: 0, Max: math.MaxInt32},
}

// goRedisDurations are go-redis's duration URL options. go-redis reads a
// bare number as seconds (multiplying without an overflow check) and 0 or
// a negative value as "no timeout".
var goRedisDurations = []string{
	"min_retry_backoff", "max_retry_backoff", "dial_timeout", "read_timeout", "write_timeout",
	"pool_timeout", "conn_max_idle_time", "idle_timeout", "conn_max_lifetime", "max_conn_age",
	"conn_max_lifetime_jitter",
}

// normalizeOptions checks go-redis's numeric options in q with jobq's
// parser and rewrites durations in the form go-redis reads, so that what
// go-redis sees is what jobq checked ("2d" works, "1e10" is refused).
func normalizeOptions(p *driver.Params, q url.Values) {
	for name, r := range goRedisCounts {
		if v := q.Get(name); v != "" {
			if _, err := r.Parse("query parameter "+name, v); err != nil {
				p.Fail("%v", err)
			}
		}
	}
	timeouts := bound.Durations{Min: -bound.MaxDuration, BareSeconds: true}
	for _, name := range goRedisDurations {
		v := q.Get(name)
		if v == "" {
			continue
		}
		d, err := timeouts.Parse("query parameter "+name, v)
		switch {
		case err != nil:
			p.Fail("%v (0 or a negative value: no timeout)", err)
		case d <= 0:
			q.Set(name, "-1")
		default:
			q.Set(name, d.String())
		}
	}
}
