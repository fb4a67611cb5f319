package jobq_test

import (
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/hooks"
)

// TestPolicyChangeReachesWarmCache: once records have been stored with the
// cached policies (settlements read them without a lock), a retention set
// through this queue applies to the very next record.
func TestPolicyChangeReachesWarmCache(t *testing.T) {
	t.Parallel()
	q := openMem(t, "")
	ctx := t.Context()
	complete := func() *jobq.Result {
		t.Helper()
		r, err := q.Push(ctx, &jobq.Task{Command: "echo warm"})
		if err != nil {
			t.Fatal(err)
		}
		if err := receiveOne(t, q).Complete(ctx); err != nil {
			t.Fatal(err)
		}
		res, err := q.Result(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if left := time.Until(complete().ExpiresAt); left < time.Hour {
		t.Fatalf("first record expires in %v; want the default retention", left)
	}
	p, err := hooks.ParsePolicy("retention", "1s")
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Admin().SetPolicy(ctx, p); err != nil {
		t.Fatal(err)
	}
	if left := time.Until(complete().ExpiresAt); left > time.Second {
		t.Fatalf("record after the retention change expires in %v; want within 1s", left)
	}
}
