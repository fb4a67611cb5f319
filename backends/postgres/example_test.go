package postgres_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobq/jobq/backends/postgres"
	"github.com/jobq/jobq/driver"
)

// New builds a queue on the pool the application already has. The driver
// borrows the pool: closing the driver leaves it open.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()

	d, err := postgres.New(ctx, pool, postgres.Options{Queue: "example-new", Schema: "jobq_example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := d.Clear(ctx); err != nil { // start from an empty queue
		fmt.Println(err)
		return
	}
	if _, err := d.Push(ctx, []*driver.Message{{ID: "greet-1", Body: []byte("hello")}}); err != nil {
		fmt.Println(err)
		return
	}
	got, err := d.Receive(ctx, driver.ReceiveParams{Max: 10, Visibility: time.Minute, Wait: time.Second})
	if err != nil || len(got) == 0 {
		fmt.Println("receive:", got, err)
		return
	}
	fmt.Printf("received %s: %s\n", got[0].ID, got[0].Body)
	if errs := d.Complete(ctx, driver.Completions(got[0].Lease)); errs != nil {
		fmt.Println(errs)
		return
	}
	if err := d.Close(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("pool still open:", pool.Ping(ctx) == nil)
	// Output:
	// received greet-1: hello
	// pool still open: true
}

// ConfigurePool gives a pool the application builds the planner settings and
// the polling dialer of a pool opened from a queue URL. Apply it to a pool
// of jobq's own, never to one that goes through PgBouncer.
func ExampleConfigurePool() {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig("postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg.MaxConns = postgres.DefaultPoolMaxConns
	postgres.ConfigurePool(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()

	d, err := postgres.New(ctx, pool, postgres.Options{Queue: "example-configured", Schema: "jobq_example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	var seqscan string
	if err := pool.QueryRow(ctx, "SHOW enable_seqscan").Scan(&seqscan); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("enable_seqscan:", seqscan)
	// Output:
	// enable_seqscan: off
}
