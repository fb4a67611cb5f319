package azqueue_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/jobq/jobq"
	azq "github.com/jobq/jobq/backends/azqueue"
)

// A queue from the service client a program already holds: here one for
// the local Azurite emulator.
func ExampleNew() {
	ctx := context.Background()
	svc, err := azqueue.NewServiceClientFromConnectionString(azq.DevelopmentConnectionString, nil)
	if err != nil {
		log.Fatal(err)
	}
	d, err := azq.New(ctx, svc, azq.Options{Queue: "example-new"})
	if err != nil {
		log.Fatal(err)
	}
	q, err := newQueue(ctx, d) // jobq.New(d, jobq.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer svc.DeleteQueue(ctx, "example-new-failed", nil)
	defer svc.DeleteQueue(ctx, "example-new", nil)
	defer q.Close() // leaves svc open

	if _, err := q.Push(ctx, &jobq.Task{Command: "echo hello"}); err != nil {
		log.Fatal(err)
	}
	e, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute, Wait: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(e.Task.Command)
	if err := e.Complete(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: echo hello
}

// A queue authenticated with Microsoft Entra ID: DefaultAzureCredential
// tries the environment's service principal, workload and managed
// identity, then the Azure CLI's sign-in. (Not run: it needs Azure.)
func ExampleNewFromCredential() {
	ctx := context.Background()
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		log.Fatal(err)
	}
	d, err := azq.NewFromCredential(ctx, "https://myaccount.queue.core.windows.net/", cred, azq.Options{Queue: "jobs"})
	if err != nil {
		log.Fatal(err)
	}
	q, err := newQueue(ctx, d) // jobq.New(d, jobq.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
}
