package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"
)

// engine is one backend's scratch queue and the way to weigh it.
type engine struct {
	url  string                                   // the queue's URL
	size func(ctx context.Context) (int64, error) // bytes the engine holds for the queue (Redis: the whole server)
	what string                                   // what size measures
	// detail, when set, breaks the size down (Postgres: heap and indexes).
	detail func(ctx context.Context) string
	close  func(ctx context.Context) error // removes the queue's data
}

// newEngine sets up a scratch queue on cfg's backend.
func newEngine(ctx context.Context, cfg config) (*engine, error) {
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	switch cfg.backend {
	case "postgres":
		return postgresEngine(ctx, cfg.url, "depthbench_"+stamp)
	case "redis":
		return redisEngine(cfg.url, "depth-"+stamp)
	default:
		return sqliteEngine(cfg.url)
	}
}

// withParams returns raw with the query parameters in set replaced.
func withParams(raw string, set map[string]string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("-url: %w", err)
	}
	q := u.Query()
	for k, v := range set {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func postgresEngine(ctx context.Context, base, schema string) (*engine, error) {
	if base == "" {
		base = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	queueURL, err := withParams(base, map[string]string{"schema": schema, "queue": "depth"})
	if err != nil {
		return nil, err
	}
	// The size queries use a connection of their own, without the jobq
	// parameters pgx would not understand.
	connURL, err := withParams(base, nil)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, connURL)
	if err != nil {
		return nil, fmt.Errorf("connecting to Postgres for the size queries: %w", err)
	}
	tables := `FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'`
	return &engine{
		url:  queueURL,
		what: "pg_total_relation_size of the schema's tables",
		size: func(ctx context.Context) (int64, error) {
			var n int64
			err := conn.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint `+tables, schema).Scan(&n)
			return n, err
		},
		detail: func(ctx context.Context) string {
			rows, err := conn.Query(ctx, `SELECT c.relname, pg_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
				WHERE n.nspname = $1 AND c.relname LIKE 'messages%' ORDER BY 1`, schema)
			if err != nil {
				return err.Error()
			}
			var parts []string
			for rows.Next() {
				var name string
				var n int64
				if err := rows.Scan(&name, &n); err != nil {
					return err.Error()
				}
				parts = append(parts, name+" "+mb(n))
			}
			return strings.Join(parts, ", ")
		},
		close: func(ctx context.Context) error {
			_, err := conn.Exec(ctx, `DROP SCHEMA `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
			return errors.Join(err, conn.Close(ctx))
		},
	}, nil
}

func redisEngine(base, queue string) (*engine, error) {
	if base == "" {
		base = "redis://127.0.0.1:6379/0"
	}
	const prefix = "depthbench"
	queueURL, err := withParams(base, map[string]string{"queue": queue, "prefix": prefix})
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("-url: %w", err)
	}
	u.RawQuery = ""
	opts, err := goredis.ParseURL(u.String())
	if err != nil {
		return nil, fmt.Errorf("-url: %w", err)
	}
	client := goredis.NewClient(opts)
	return &engine{
		url:  queueURL,
		what: "the server's used_memory (INFO memory)",
		size: func(ctx context.Context) (int64, error) {
			info, err := client.InfoMap(ctx, "memory").Result()
			if err != nil {
				return 0, err
			}
			return strconv.ParseInt(info["Memory"]["used_memory"], 10, 64)
		},
		close: func(ctx context.Context) error {
			var errs []error
			iter := client.Scan(ctx, 0, prefix+":{"+queue+"}*", 1000).Iterator()
			for iter.Next(ctx) {
				errs = append(errs, client.Unlink(ctx, iter.Val()).Err())
			}
			errs = append(errs, iter.Err(), client.Close())
			return errors.Join(errs...)
		},
	}, nil
}

func sqliteEngine(base string) (*engine, error) {
	var dir, file string
	if base == "" {
		d, err := os.MkdirTemp("", "depthbench")
		if err != nil {
			return nil, err
		}
		dir, file = d, filepath.Join(d, "depth.db")
		base = "sqlite://" + file
	} else {
		rest, ok := strings.CutPrefix(base, "sqlite://")
		if !ok {
			rest, ok = strings.CutPrefix(base, "sqlite:")
		}
		if !ok {
			return nil, fmt.Errorf("-url %q: want sqlite://PATH for -backend sqlite", base)
		}
		file, _, _ = strings.Cut(rest, "?")
	}
	queueURL, err := withParams(base, map[string]string{"queue": "depth"})
	if err != nil {
		return nil, err
	}
	return &engine{
		url:  queueURL,
		what: "the database file and its WAL",
		size: func(context.Context) (int64, error) {
			var total int64
			for _, f := range []string{file, file + "-wal"} {
				st, err := os.Stat(f)
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				if err != nil {
					return 0, err
				}
				total += st.Size()
			}
			return total, nil
		},
		close: func(context.Context) error {
			if dir == "" {
				return nil // the user's file: left as it is
			}
			return os.RemoveAll(dir)
		},
	}, nil
}
