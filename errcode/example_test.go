package errcode_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/mem"
	"github.com/jobq/jobq/errcode"
)

// Test an error's code with Of, or with errors.Is against the code.
func Example() {
	ctx := context.Background()
	q, err := jobq.Open(ctx, "mem://example-errcode")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	_, err = q.Push(ctx, &jobq.Task{Command: "echo hi", Priority: 5000})
	fmt.Println(errcode.Of(err), errors.Is(err, errcode.InvalidArgument))

	_, err = q.Receive(ctx, jobq.ReceiveOptions{Wait: 10 * time.Millisecond})
	fmt.Println(errors.Is(err, jobq.ErrEmpty), errcode.Of(err))
	// Output:
	// InvalidArgument true
	// true NotFound
}
