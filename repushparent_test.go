package jobq_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/tools/testkit/engines"
)

// TestDependencyOnParentPushedAgain: a parent whose earlier run left a
// record (succeeded, dead-lettered or cancelled) and that is pushed again
// (in the dependant's batch, or before it) is waited for anew: its
// dependant is neither refused, released nor cancelled on the old
// record, and is released once the new run succeeds.
func TestDependencyOnParentPushedAgain(t *testing.T) {
	t.Parallel()
	earlier := map[string]func(t *testing.T, q *jobq.Queue, id string){
		"succeeded": func(t *testing.T, q *jobq.Queue, _ string) {
			if err := receiveOne(t, q).Complete(t.Context()); err != nil {
				t.Fatal(err)
			}
		},
		"dead-lettered": func(t *testing.T, q *jobq.Queue, _ string) {
			if err := receiveOne(t, q).DeadLetter(t.Context(), "the first run fails", ""); err != nil {
				t.Fatal(err)
			}
		},
		"cancelled": func(t *testing.T, q *jobq.Queue, id string) {
			if _, err := q.Admin().Cancel(t.Context(), id); err != nil {
				t.Fatal(err)
			}
		},
	}
	for _, backend := range []string{"sqlite", "postgres", "redis"} {
		for state, end := range earlier {
			for _, inBatch := range []bool{true, false} {
				name := backend + "/" + state + "/separate"
				if inBatch {
					name = backend + "/" + state + "/same-batch"
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					q := engines.Open(t, engines.URLs(t, "repush-"+strings.NewReplacer("/", "-").Replace(name))[backend])
					parent := &jobq.Task{Command: "echo parent"}
					if _, err := q.Push(t.Context(), parent); err != nil {
						t.Fatal(err)
					}
					end(t, q, parent.ID)
					again := &jobq.Task{Command: "echo parent"}
					child := &jobq.Task{Command: "echo child", After: []string{parent.ID}}
					var err error
					if inBatch {
						_, err = q.PushBatch(t.Context(), []*jobq.Task{again, child}, jobq.PushOptions{})
					} else if _, err = q.Push(t.Context(), again); err == nil {
						_, err = q.Push(t.Context(), child)
					}
					if err != nil {
						t.Fatalf("push the parent again and its dependant: %v", err)
					}
					res, err := q.Admin().SweepHeld(t.Context())
					if err != nil || len(res.Released)+len(res.Cancelled) > 0 {
						t.Fatalf("sweep while the parent is queued again = %+v, %v; want the dependant left held", res, err)
					}
					e := receiveOne(t, q)
					if e.Task.ID != parent.ID {
						t.Fatalf("received %s; want the parent %s", e.Task.ID, parent.ID)
					}
					if err := e.Complete(t.Context()); err != nil {
						t.Fatal(err)
					}
					res, err = q.Admin().SweepHeld(t.Context())
					if err != nil || !slices.Equal(res.Released, []string{child.ID}) {
						t.Fatalf("sweep after the parent's new run succeeded = %+v, %v; want %s released", res, err, child.ID)
					}
					if e := receiveOne(t, q); e.Task.ID != child.ID {
						t.Errorf("received %s; want the dependant %s", e.Task.ID, child.ID)
					}
					if r, err := q.Result(t.Context(), child.ID); err == nil && r.State == driver.ResultCancelled {
						t.Errorf("the dependant was recorded cancelled: %s", r.Error)
					}
				})
			}
		}
	}
}
