package jobq_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backends/sqlite"
	"github.com/jobq/jobq/driver"
)

// TestResumeScheduleWithPendingClaim: a schedule paused while a slot's
// claim was left unconfirmed (its scheduler died between the claim and
// the push) catches up no slot of the pause once resumed, whatever
// --missed says: the claimed slot is taken over, and the next slot to
// fire is one after the resume.
func TestResumeScheduleWithPendingClaim(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d, err := sqlite.New(ctx, filepath.Join(t.TempDir(), "sched.db"), sqlite.Options{Queue: "resume-pending"})
	if err != nil {
		t.Fatal(err)
	}
	q, err := jobq.New(d, jobq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	const name = "hourly"
	if _, err := q.Admin().AddSchedule(ctx, name, "0 * * * *", &jobq.Task{Command: "echo hourly"}, jobq.ScheduleOptions{Missed: driver.MissedOnce}); err != nil {
		t.Fatal(err)
	}
	// Back-date it: added 3 hours ago; the slot of 2 hours ago claimed
	// and never confirmed; paused a moment after that claim.
	hour := time.Now().Truncate(time.Hour)
	pols, err := d.ListPolicies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pols {
		if p.Kind == driver.SchedulePolicy {
			spec, err := driver.ParseScheduleSpec(p)
			if err != nil {
				t.Fatal(err)
			}
			spec.Since = hour.Add(-3 * time.Hour)
			if err := d.SetPolicy(ctx, spec.Policy()); err != nil {
				t.Fatal(err)
			}
		}
	}
	claimed := hour.Add(-2 * time.Hour)
	for _, p := range []driver.Policy{
		driver.FiredState{Name: name, Slot: claimed, ClaimedAt: claimed.Add(time.Second)}.Policy(),
		driver.SchedulePaused(name, claimed.Add(2*time.Second)),
	} {
		if err := d.SetPolicy(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	resumed := time.Now()
	if err := q.Admin().ResumeSchedule(ctx, name); err != nil {
		t.Fatal(err)
	}
	runs, err := q.Admin().FireSchedules(ctx, time.Now().Add(driver.ScheduleClaimGrace+time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if !r.Slot.Equal(claimed) && r.Slot.Before(resumed) {
			t.Errorf("fired slot %s, which passed while the schedule was paused (claimed %s, resumed %s)", r.Slot, claimed, resumed)
		}
	}
}
