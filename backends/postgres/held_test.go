package postgres

import (
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// TestReleaseOfIDQueuedMeanwhile: a task pushed without the hold under the
// ID of a held one is not queued twice by the release: the held copy is
// removed and reported released, and its group, which counted it at Hold,
// counts it cancelled, so the group can still end.
func TestReleaseOfIDQueuedMeanwhile(t *testing.T) {
	t.Parallel()
	d, ctx := openDriver(t), t.Context()
	held := &driver.HeldMessage{Message: driver.Message{ID: "twice", Body: []byte("held"), Group: "g"}}
	if _, err := d.Hold(ctx, []*driver.HeldMessage{held}); err != nil {
		t.Fatalf("hold: %v", err)
	}
	if _, err := d.Push(ctx, []*driver.Message{{ID: "twice", Body: []byte("pushed"), Group: "g"}}); err != nil {
		t.Fatalf("push: %v", err)
	}
	rel, err := d.Release(ctx, []string{"twice"})
	if err != nil || len(rel) != 1 || rel[0] != "twice" {
		t.Fatalf("Release = %v, %v; want [twice]", rel, err)
	}
	got, err := d.Receive(ctx, driver.ReceiveParams{Max: 10, Visibility: time.Minute})
	if err != nil || len(got) != 1 || string(got[0].Body) != "pushed" {
		t.Fatalf("receive after the release = %d messages, %v; want the pushed one alone", len(got), err)
	}
	if left, err := d.HeldOf(ctx, []string{"twice"}); err != nil || len(left) != 0 {
		t.Errorf("HeldOf after the release = %d, %v; want none", len(left), err)
	}
	g, err := d.GroupCounts(ctx, "g")
	if err != nil || g == nil || g.Pushed != 2 || g.Cancelled != 1 {
		t.Errorf("group after the release = %+v, %v; want Pushed 2 (Hold and Push), Cancelled 1 (the held copy)", g, err)
	}
}
