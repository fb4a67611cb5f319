// Command recordcost measures what result records cost the engine, per
// task, under each setting of the results policy (docs/results.md): for
// each of all, failed and none it runs -n tasks through a fresh queue,
// each succeeding with -output bytes of output (as a worker records a
// shell task's), and prints the bytes the records table then holds on
// disk per task (SQLite: dbstat pages of jobq_results and its index;
// Postgres: pg_total_relation_size of the results table, in a schema of
// its own per setting). It is for a scratch database:
//
//	go run ./tools/recordcost -sqlite /tmp/recordcost.db
//	go run ./tools/recordcost -postgres 'postgres://postgres@127.0.0.1:5432/test'
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/postgres"
	_ "github.com/jobq/jobq/backends/sqlite"
	"github.com/jobq/jobq/driver"
)

func main() {
	sqlitePath := flag.String("sqlite", "", "SQLite file to create (removed first)")
	pgURL := flag.String("postgres", "", "Postgres database URL")
	n := flag.Int("n", 2000, "tasks per setting")
	output := flag.Int("output", 40_000, "bytes of output each task reports")
	flag.Parse()
	if (*sqlitePath == "") == (*pgURL == "") {
		fmt.Fprintln(os.Stderr, "recordcost: give -sqlite FILE or -postgres URL")
		os.Exit(2)
	}
	ctx := context.Background()
	fmt.Printf("%d tasks, %d bytes of output each\nsetting  bytes/task\n", *n, *output)
	for _, mode := range []driver.ResultsMode{driver.ResultsAll, driver.ResultsFailed, driver.ResultsNone} {
		var per float64
		var err error
		if *sqlitePath != "" {
			per, err = sqliteCost(ctx, *sqlitePath, mode, *n, *output)
		} else {
			per, err = postgresCost(ctx, *pgURL, mode, *n, *output)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "recordcost:", err)
			os.Exit(1)
		}
		fmt.Printf("%-8s %10.0f\n", mode, per)
	}
}

// sweep runs n tasks through the queue at url under mode.
func sweep(ctx context.Context, url string, mode driver.ResultsMode, n, outputBytes int) error {
	q, err := jobq.Open(ctx, url)
	if err != nil {
		return err
	}
	defer q.Close()
	if err := q.Admin().SetPolicy(ctx, driver.KeepResults(mode)); err != nil {
		return err
	}
	out := strings.Repeat("x", outputBytes-1) + "\n"
	for start := 0; start < n; start += 100 {
		tasks := make([]*jobq.Task, 0, 100)
		for i := start; i < min(start+100, n); i++ {
			tasks = append(tasks, &jobq.Task{Command: fmt.Sprintf("echo %d", i)})
		}
		if _, err := q.PushBatch(ctx, tasks, jobq.PushOptions{}); err != nil {
			return err
		}
	}
	for done := 0; done < n; {
		envs, err := q.ReceiveBatch(ctx, 32, jobq.ReceiveOptions{Visibility: time.Minute, Wait: time.Second})
		if err != nil {
			return err
		}
		for _, e := range envs {
			code := 0
			e.SetResult(jobq.ResultDetails{ExitCode: &code, Output: out})
			if err := e.Complete(ctx); err != nil {
				return err
			}
			done++
		}
	}
	return nil
}

func sqliteCost(ctx context.Context, path string, mode driver.ResultsMode, n, outputBytes int) (float64, error) {
	file := fmt.Sprintf("%s.%s", path, mode)
	for _, suffix := range []string{"", "-wal", "-shm"} {
		_ = os.Remove(file + suffix)
	}
	if err := sweep(ctx, "sqlite://"+file+"?queue=sweep", mode, n, outputBytes); err != nil {
		return 0, err
	}
	db, err := sql.Open("sqlite", file)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var bytes sql.NullInt64
	err = db.QueryRowContext(ctx, `SELECT sum(pgsize) FROM dbstat WHERE name IN (SELECT name FROM sqlite_schema WHERE tbl_name = 'jobq_results')`).Scan(&bytes)
	if err != nil {
		return 0, fmt.Errorf("dbstat: %w", err)
	}
	return float64(bytes.Int64) / float64(n), nil
}

func postgresCost(ctx context.Context, url string, mode driver.ResultsMode, n, outputBytes int) (float64, error) {
	schema := "recordcost_" + mode.String()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
		return 0, err
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	if err := sweep(ctx, url+sep+"queue=sweep&schema="+schema, mode, n, outputBytes); err != nil {
		return 0, err
	}
	var bytes int64
	if err := conn.QueryRow(ctx, "SELECT pg_total_relation_size($1::regclass)", schema+".results").Scan(&bytes); err != nil {
		return 0, err
	}
	return float64(bytes) / float64(n), nil
}
