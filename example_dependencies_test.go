package jobq_test

import (
	"context"
	"fmt"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

// A sweep of three simulations in a group, an aggregation step that runs
// once when the group has ended, and a report that runs after the
// aggregation succeeded. Workers sweep the held tasks in the background
// every 2 seconds; here SweepHeld is called by hand.
func ExampleAdmin_ThenGroup() {
	ctx := context.Background()
	q, err := jobq.Open(ctx, "mem://example-then")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	adm := q.Admin()
	var sims []*jobq.Task
	for i := range 3 {
		sims = append(sims, &jobq.Task{Command: fmt.Sprintf("./simulate --seed %d", i), Group: "sweep-1"})
	}
	if _, err := q.PushBatch(ctx, sims, jobq.PushOptions{}); err != nil {
		fmt.Println(err)
		return
	}
	step, err := adm.ThenGroup(ctx, "sweep-1", &jobq.Task{Command: "./aggregate"}, driver.RequireSucceeded)
	if err != nil {
		fmt.Println(err)
		return
	}
	report := &jobq.Task{Command: "./report", After: []string{step.ID}}
	if _, err := q.Push(ctx, report); err != nil {
		fmt.Println(err)
		return
	}

	// run receives what is claimable, as a worker would, and completes it.
	run := func() {
		for {
			e, err := q.Receive(ctx, jobq.ReceiveOptions{})
			if err != nil {
				return
			}
			if n, ok := e.Task.EnvMap()["JOBQ_GROUP_SUCCEEDED"]; ok {
				fmt.Println("ran", e.Task.Command, "after", n, "succeeded")
			} else {
				fmt.Println("ran", e.Task.Command)
			}
			_ = e.Complete(ctx)
		}
	}
	for range 3 {
		run()
		res, err := adm.SweepHeld(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("released", len(res.Released))
	}
	// Output:
	// ran ./simulate --seed 0
	// ran ./simulate --seed 1
	// ran ./simulate --seed 2
	// released 1
	// ran ./aggregate after 3 succeeded
	// released 1
	// ran ./report
	// released 0
}
