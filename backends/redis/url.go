package redis

import (
	"net/url"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/driver"
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
		return goredis.NewClusterClient(c.cluster)
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
		queue:  p.String("queue", "default"),
		prefix: p.String("prefix", "jobq"),
		// A lower limit sends larger tasks to the stash, keeping Redis's
		// memory for the queue itself.
		maxMessageBytes: p.Int("max_message_bytes", 0),
		// How long a read polls for the reply before it parks
		// (internal/spinconn).
		spin: p.Duration("spin", spinconn.DefaultBudget),
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
		return nil, driver.Errorf(driver.InvalidArgument, "redis URL: %w", err)
	}
	rest := *u
	rest.RawQuery = q.Encode()
	switch strings.ToLower(u.Scheme) {
	case SchemeUnix:
		if cluster {
			return nil, driver.Errorf(driver.InvalidArgument, "redis URL: cluster=true needs redis:// or rediss:// seed addresses, not a unix socket")
		}
		rest.Scheme = "unix"
	case Scheme, SchemeTLS:
	default:
		return nil, driver.Errorf(driver.InvalidArgument, "redis backend: unknown URL scheme %q; use redis://, rediss:// or redis+unix://", u.Scheme)
	}
	badOption := func(err error) error {
		return driver.Errorf(driver.InvalidArgument,
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
		opts.Dialer = probeOnlyQuietConns(goredis.NewDialer(&goredis.Options{DialTimeout: opts.DialTimeout, TLSConfig: opts.TLSConfig}), cfg.spin)
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
	opts.Dialer = probeOnlyQuietConns(goredis.NewDialer(opts), cfg.spin)
	cfg.options = opts
	return cfg, nil
}
