package jobq_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

// Add a recurring schedule, then fire its next slot from two schedulers
// with a "now" just after it: the slot's task is pushed once. Workers fire
// schedules in the background on their own; FireSchedules is one pass.
func ExampleAdmin_AddSchedule() {
	ctx := context.Background()
	q, err := jobq.Open(ctx, "mem://example-schedule")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	adm := q.Admin()
	spec, err := adm.AddSchedule(ctx, "nightly-report", "0 3 * * *",
		&jobq.Task{Command: "./report.sh --day yesterday"},
		jobq.ScheduleOptions{TimeZone: "Europe/Berlin", Missed: driver.MissedSkip})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("added", spec.Name, spec.Cron, spec.TimeZone)

	list, err := adm.Schedules(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	now := list[0].Next.Add(time.Second)
	for _, scheduler := range []string{"first", "second"} {
		runs, err := adm.FireSchedules(ctx, now)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(scheduler, "scheduler pushed", len(runs))
		for _, r := range runs {
			berlin, _ := time.LoadLocation("Europe/Berlin")
			fmt.Println(r.Name, r.Slot.In(berlin).Format("15:04"), r.TaskID == driver.ScheduleTaskID(r.Name, r.Slot))
		}
	}
	// Output:
	// added nightly-report 0 3 * * * Europe/Berlin
	// first scheduler pushed 1
	// nightly-report 03:00 true
	// second scheduler pushed 0
}
