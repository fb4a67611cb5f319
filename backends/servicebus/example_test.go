package servicebus_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/jobq/jobq"
	sb "github.com/jobq/jobq/backends/servicebus"
)

// A queue from the Service Bus client a program already holds; here one
// for the local emulator the tests run. Without an admin client the queue
// must exist (the emulator creates queues on first use) and Stats is not
// available.
func ExampleNew() {
	ctx := context.Background()
	// Endpoint=sb://127.0.0.1:PORT;SharedAccessKeyName=...;SharedAccessKey=...;UseDevelopmentEmulator=true
	connectionString := env.connStr
	client, err := azservicebus.NewClientFromConnectionString(connectionString, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(ctx)

	d, err := sb.New(ctx, client, nil, sb.Options{Queue: "example-new"})
	if err != nil {
		log.Fatal(err)
	}
	q, err := newQueue(ctx, d) // jobq.New(d, jobq.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close() // leaves client open

	if _, err := q.Push(ctx, &jobq.Task{Command: "echo hello"}); err != nil {
		log.Fatal(err)
	}
	e, err := q.Receive(ctx, jobq.ReceiveOptions{Wait: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(e.Task.Command)
	if err := e.Complete(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: echo hello
}
