package azqueue_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// TestPolicyKeyInvalidUTF8: a key that is not valid UTF-8 would come back
// as U+FFFD (and govern another key); it is refused with a clear error and
// nothing is stored.
func TestPolicyKeyInvalidUTF8(t *testing.T) {
	t.Parallel()
	d, err := openDriver(t.Context(), newQueueURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ps, ok := d.(driver.PolicyStore)
	if !ok {
		t.Fatal("the azqueue driver is not a PolicyStore")
	}
	err = ps.SetPolicy(t.Context(), driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "gpu\xff", Limit: 2})
	if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), "not valid UTF-8") {
		t.Errorf("set a policy with key \"gpu\\xff\": %v, want InvalidArgument saying the key is not valid UTF-8", err)
	}
	pols, err := ps.ListPolicies(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(pols) != 0 {
		t.Errorf("policies after the refused set: %+v, want none", pols)
	}
	// A UTF-8 key beyond ASCII is kept as it is.
	if err := ps.SetPolicy(t.Context(), driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "gpü", Limit: 2}); err != nil {
		t.Fatal(err)
	}
	if pols, err := ps.ListPolicies(t.Context()); err != nil || len(pols) != 1 || pols[0].Key != "gpü" {
		t.Errorf("policies: %+v, %v; want the key gpü", pols, err)
	}
}

// TestMetadataLimit: Azure keeps at most 8 KiB of metadata on a queue,
// where the policies and schedules live; Azurite keeps more. A schedule
// that would not fit is refused by name (not stored on Azurite, then
// refused by Azure with a bare 400), and an accepted one keeps room to
// record its firing and pausing.
func TestMetadataLimit(t *testing.T) {
	t.Parallel()
	q, _ := openQueue(t)
	cmd := "echo " + strings.Repeat("x", 1200)
	var err error
	added := 0
	for ; added < 20; added++ {
		if _, err = q.Admin().AddSchedule(t.Context(), fmt.Sprintf("s%d", added), "@hourly", &jobq.Task{Command: cmd}, jobq.ScheduleOptions{}); err != nil {
			break
		}
	}
	if errcode.Of(err) != errcode.ResourceExhausted || !strings.Contains(err.Error(), "schedule rm") {
		t.Fatalf("after %d schedules of 1.2 KB: %v; want ResourceExhausted saying how to make room", added, err)
	}
	props, err := mainClient(t, q).GetProperties(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for k, v := range props.Metadata {
		n += len(k) + len(*v)
	}
	if n > 8*1024 {
		t.Errorf("queue metadata holds %d bytes, over Azure's 8 KiB", n)
	}
	if added == 0 {
		t.Fatal("not even one schedule fits")
	}
	if err := q.Admin().PauseSchedule(t.Context(), fmt.Sprintf("s%d", added-1)); err != nil {
		t.Errorf("pause the last schedule that fitted: %v", err)
	}
	if _, err := q.Admin().Pause(t.Context(), jobq.PauseOptions{By: strings.Repeat("u", 30) + "@" + strings.Repeat("h", 60)}); err != nil {
		t.Errorf("pause the queue when the schedules fill its metadata: %v", err)
	}
}
