package main

import (
	"context"
	"database/sql"
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
	url   string                                    // the queue's URL
	weigh func(ctx context.Context) (weight, error) // what the engine holds for the queue
	what  string                                    // what weigh measures
	// detail, when set, breaks the size down (Postgres: heap and indexes).
	detail func(ctx context.Context) string
	close  func(ctx context.Context) error // removes the queue's data
}

// weight is what the engine holds for the queue, split into the queue's
// own storage and the result records of the tasks that ended, which the
// queue keeps for its retention (docs/results.md) because the user asked
// for them.
type weight struct {
	total   int64 // bytes in all (Redis: the whole server's used_memory)
	records int64 // bytes of total that hold result records
	count   int64 // result records stored
	// wal is the bytes of total in SQLite's WAL file, which swings between
	// its size limit and one automatic checkpoint's worth (megabytes)
	// whatever the queue holds.
	wal int64
}

// queue is the bytes of the queue's own storage: messages, dead letters
// and the rest, without the records (SQLite: with the free pages).
func (w weight) queue() int64 { return w.total - w.records }

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
		what: "pg_total_relation_size of the schema's tables; records: the results table",
		weigh: func(ctx context.Context) (w weight, err error) {
			err = conn.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint,
				coalesce(sum(pg_total_relation_size(c.oid)) FILTER (WHERE c.relname = 'results'), 0)::bigint `+tables, schema).Scan(&w.total, &w.records)
			if err == nil {
				err = conn.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, "results"}.Sanitize()).Scan(&w.count)
			}
			return w, err
		},
		detail: func(ctx context.Context) string {
			rows, err := conn.Query(ctx, `SELECT c.relname, pg_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
				WHERE n.nspname = $1 AND (c.relname LIKE 'messages%' OR c.relname LIKE 'results%') ORDER BY 1`, schema)
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
		what: "the server's used_memory (INFO memory); records: MEMORY USAGE of the record buckets",
		weigh: func(ctx context.Context) (w weight, err error) {
			info, err := client.InfoMap(ctx, "memory").Result()
			if err != nil {
				return w, err
			}
			if w.total, err = strconv.ParseInt(info["Memory"]["used_memory"], 10, 64); err != nil {
				return w, err
			}
			// The buckets are few (a retention spans about 16) and large;
			// MEMORY USAGE estimates each from a sample of its fields.
			keys := []string{prefix + ":{" + queue + "}:rbs"}
			iter := client.Scan(ctx, 0, prefix+":{"+queue+"}:rb:*", 1000).Iterator()
			for iter.Next(ctx) {
				keys = append(keys, iter.Val())
			}
			if err := iter.Err(); err != nil {
				return w, err
			}
			for _, k := range keys {
				used, err := client.MemoryUsage(ctx, k, 1000).Result()
				if errors.Is(err, goredis.Nil) {
					continue // expired or not made yet
				}
				if err != nil {
					return w, err
				}
				w.records += used
				if k != keys[0] {
					n, err := client.HLen(ctx, k).Result()
					if err != nil {
						return w, err
					}
					w.count += n
				}
			}
			return w, nil
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
	// The records' pages are counted with the dbstat table, on a
	// connection of the benchmark's own.
	db, err := sql.Open("sqlite", "file:"+file+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, fmt.Errorf("opening the SQLite file for the size queries: %w", err)
	}
	db.SetMaxOpenConns(1)
	return &engine{
		url:  queueURL,
		what: "the database file and its WAL; records: the pages of jobq_results and its indexes (dbstat)",
		weigh: func(ctx context.Context) (w weight, err error) {
			for _, f := range []string{file, file + "-wal"} {
				st, err := os.Stat(f)
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				if err != nil {
					return w, err
				}
				w.total += st.Size()
				if f != file {
					w.wal = st.Size()
				}
			}
			err = db.QueryRowContext(ctx, `SELECT coalesce(sum(pgsize), 0) FROM dbstat
				WHERE name = 'jobq_results' OR name LIKE 'jobq_results_%' OR name LIKE 'sqlite_autoindex_jobq_results_%'`).Scan(&w.records)
			if err == nil {
				err = db.QueryRowContext(ctx, `SELECT count(*) FROM jobq_results`).Scan(&w.count)
			}
			return w, err
		},
		close: func(context.Context) error {
			err := db.Close()
			if dir == "" {
				return err // the user's file: left as it is
			}
			return errors.Join(err, os.RemoveAll(dir))
		},
	}, nil
}
