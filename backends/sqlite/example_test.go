package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jobq/jobq/backends/sqlite"
	"github.com/jobq/jobq/driver"
)

// New opens a queue in an SQLite file, created when missing.
func ExampleNew() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "jobq-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	d, err := sqlite.New(ctx, filepath.Join(dir, "work.db"), sqlite.Options{Queue: "render"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	if _, err := d.Push(ctx, []*driver.Message{{ID: "frame-1", Body: []byte("render frame 1")}}); err != nil {
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
	st, err := d.Stats(ctx)
	fmt.Println("left in the queue:", st.Ready+st.InFlight, err)
	// Output:
	// received frame-1: render frame 1
	// left in the queue: 0 <nil>
}
