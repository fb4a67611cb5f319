package jobq_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/tools/testkit/engines"
)

// TestResultsNoneRefusedWhileHeld: setting the results policy to none is
// refused while a held task waits for a parent, by ID, that has not ended:
// the parent would end without a record, and the held task, which reads
// its parent's success from that record, would stay held for good. Once
// the parent ended and the held task was released, none is accepted.
func TestResultsNoneRefusedWhileHeld(t *testing.T) {
	t.Parallel()
	suffix := time.Now().Format("150405.000000")
	for name, u := range engines.URLs(t, "heldnone") {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			q := engines.Open(t, u)
			parent := &jobq.Task{Command: "echo parent " + suffix}
			if _, err := q.PushBatch(t.Context(), []*jobq.Task{parent}, jobq.PushOptions{}); err != nil {
				t.Fatal(err)
			}
			child := &jobq.Task{Command: "echo child " + suffix, After: []string{parent.ID}}
			if _, err := q.PushBatch(t.Context(), []*jobq.Task{child}, jobq.PushOptions{}); err != nil {
				t.Fatal(err)
			}
			none := driver.KeepResults(driver.ResultsNone)
			err := q.Admin().SetPolicy(t.Context(), none)
			if errcode.Of(err) != errcode.FailedPrecondition || !strings.Contains(err.Error(), child.ID) {
				t.Fatalf("results none with a held task = %v (%s); want FailedPrecondition naming %s", err, errcode.Of(err), child.ID)
			}
			pols, err := q.Admin().Policies(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pols {
				if p.Kind == driver.ResultsPolicy {
					t.Fatalf("the refused policy was stored: %+v", p)
				}
			}

			e, err := q.Receive(t.Context(), jobq.ReceiveOptions{Wait: 5 * time.Second})
			if err != nil || e == nil {
				t.Fatalf("receive: %v, %v", e, err)
			}
			if err := e.Complete(t.Context()); err != nil {
				t.Fatal(err)
			}
			res, err := q.Admin().SweepHeld(t.Context())
			if err != nil || len(res.Released) != 1 {
				t.Fatalf("sweep = %+v, %v; want the child released", res, err)
			}
			if err := q.Admin().SetPolicy(t.Context(), none); err != nil {
				t.Fatalf("results none with nothing held: %v", err)
			}
		})
	}
}
