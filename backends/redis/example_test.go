package redis_test

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/backends/redis"
	"github.com/jobq/jobq/driver"
)

// New builds a queue on the go-redis client the application already has.
// The driver shares the client: closing the driver leaves it open.
func ExampleNew() {
	ctx := context.Background()
	client := goredis.NewClient(&goredis.Options{
		Addr:                  "127.0.0.1:6379",
		MaxRetries:            -1, // never resend a script whose reply was lost
		ContextTimeoutEnabled: true,
	})
	defer client.Close()

	d, err := redis.New(ctx, client, redis.Options{Queue: "example-new", Prefix: "jobqexample"})
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
	fmt.Println("client still open:", client.Ping(ctx).Err() == nil)
	// Output:
	// received greet-1: hello
	// client still open: true
}
