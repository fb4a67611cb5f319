package jobq_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backends/mem"
	_ "github.com/jobq/jobq/backends/postgres"
	_ "github.com/jobq/jobq/backends/sqlite"
	"github.com/jobq/jobq/errcode"
)

// Open a queue by URL, push a task, then receive, run and complete it as a
// worker does. Importing a backend package registers its URL scheme.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "jobq-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	q, err := jobq.Open(ctx, "sqlite://"+filepath.Join(dir, "work.db")+"?queue=default")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()

	if _, err := q.Push(ctx, &jobq.Task{Command: "echo hello"}); err != nil {
		fmt.Println(err)
		return
	}
	e, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute, Wait: time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("run %q\n", e.Task.Command)
	if err := e.Complete(ctx); err != nil {
		fmt.Println(err)
		return
	}
	// Output: run "echo hello"
}

// PushBatch validates every task before it stores any. A task without an
// ID gets its deterministic one, so pushing the same task again is reported
// as a duplicate on backends that deduplicate.
func ExampleQueue_PushBatch() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "jobq-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	q, err := jobq.Open(ctx, "sqlite://"+filepath.Join(dir, "work.db")+"?queue=batch")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()

	tasks := []*jobq.Task{{Command: "echo a"}, {Command: "echo b"}, {Command: "echo a"}}
	res, err := q.PushBatch(ctx, tasks, jobq.PushOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, r := range res {
		fmt.Printf("%s duplicate=%v\n", tasks[i].Command, r.Duplicate)
	}

	_, err = q.PushBatch(ctx, []*jobq.Task{{Command: "echo c"}, {}}, jobq.PushOptions{})
	fmt.Println(errcode.Of(err))
	n, _ := q.Admin().Size(ctx)
	fmt.Println("queued:", n)
	// Output:
	// echo a duplicate=false
	// echo b duplicate=false
	// echo a duplicate=true
	// InvalidArgument
	// queued: 2
}

// PushTx queues tasks in the application's own Postgres transaction: they
// exist if and only if the transaction commits. This example needs the
// Postgres server the tests use (127.0.0.1:5432, database test).
func ExampleQueue_PushTx() {
	ctx := context.Background()
	q, err := jobq.Open(ctx, "postgres://postgres@127.0.0.1:5432/test?sslmode=disable&schema=jobq_example&queue=orders")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	if _, err := q.Admin().Clear(ctx); err != nil { // start from an empty queue
		fmt.Println(err)
		return
	}

	// The application's pool; here the queue's own, reached through As.
	var pool *pgxpool.Pool
	q.As(&pool)

	for _, commit := range []bool{false, true} {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			// ... the application's own writes through tx ...
			task := &jobq.Task{Command: fmt.Sprintf("ship-order --commit=%v", commit)}
			if _, err := q.PushTx(ctx, tx, []*jobq.Task{task}, jobq.PushOptions{}); err != nil {
				return err
			}
			if !commit {
				return fmt.Errorf("payment declined")
			}
			return nil
		})
		fmt.Println("transaction:", err)
	}

	e, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute, Wait: 5 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("received:", e.Task.Command)
	if err := e.Complete(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// transaction: payment declined
	// transaction: <nil>
	// received: ship-order --commit=true
}

// New makes a queue from a driver value rather than a URL; a backend's New
// function builds one from the client the program already holds. Closing
// the queue closes the driver.
func ExampleNew() {
	ctx := context.Background()
	d, err := mem.New(mem.Options{Queue: "example-new"})
	if err != nil {
		fmt.Println(err)
		return
	}
	q, err := jobq.New(d, jobq.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()

	res, err := q.Push(ctx, &jobq.Task{Command: "echo from a driver"})
	fmt.Println(res.ID != "", err)
	// Output: true <nil>
}

// A program or test can keep its schemes to itself on a URLMux of its own,
// for instance to register an opener configured with values.
func ExampleURLMux() {
	var mux jobq.URLMux
	if err := mux.Register("scratch", mem.URLOpener{}); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(mux.Schemes())

	q, err := mux.Open(context.Background(), "scratch://example-mux", jobq.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	fmt.Println(q.Name())

	_, err = mux.Open(context.Background(), "sqlite://./work.db", jobq.Options{})
	fmt.Println(errcode.Of(err))
	// Output:
	// [scratch]
	// example-mux
	// InvalidArgument
}

// A Queue produces and consumes; its Admin handle inspects and administers:
// counts, peeking, dead letters, policies, cancelling.
func ExampleAdmin() {
	ctx := context.Background()
	q, err := jobq.Open(ctx, "mem://example-admin")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	if _, err := q.Push(ctx, &jobq.Task{Command: "echo a"}); err != nil {
		fmt.Println(err)
		return
	}
	e, err := q.Receive(ctx, jobq.ReceiveOptions{Wait: time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := e.DeadLetter(ctx, "broken", "exit status 2"); err != nil {
		fmt.Println(err)
		return
	}

	adm := q.Admin()
	st, err := adm.Stats(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("ready", st.Ready, "dead", st.Dead)
	dead, err := adm.DeadLetters(ctx, 10)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(dead[0].Task.Command, dead[0].Reason)
	n, err := adm.RequeueDeadLetters(ctx)
	fmt.Println("requeued", n, err)
	// Output:
	// ready 0 dead 1
	// echo a broken
	// requeued 1 <nil>
}
