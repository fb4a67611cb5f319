package jobq_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backends/mem"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// releasingDrop is a mem driver whose Drop finds its tasks released by a
// sweep that ran just before it (the race of a cancel with a release).
type releasingDrop struct{ *mem.Driver }

func (d releasingDrop) Drop(ctx context.Context, ids []string) ([]string, error) {
	if _, err := d.Release(ctx, ids); err != nil {
		return nil, err
	}
	return nil, nil
}

// TestCancelHeldRacingRelease: a held task released by a sweep between a
// cancel's record and its drop is still cancelled: removed from the
// queue, recorded as cancelled, never run.
func TestCancelHeldRacingRelease(t *testing.T) {
	t.Parallel()
	d, err := mem.New(mem.Options{Queue: "cancel-race-" + rand.Text()})
	if err != nil {
		t.Fatal(err)
	}
	q, err := jobq.New(releasingDrop{d}, jobq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	parent, err := q.Push(t.Context(), &jobq.Task{Command: "echo parent"})
	if err != nil {
		t.Fatal(err)
	}
	child := &jobq.Task{Command: "echo child", After: []string{parent.ID}}
	if _, err := q.Push(t.Context(), child); err != nil {
		t.Fatal(err)
	}
	res, err := q.Admin().Cancel(t.Context(), child.ID)
	if err != nil || len(res) != 1 || res[0].Outcome != jobq.CancelRemoved {
		t.Fatalf("Cancel of a held task released meanwhile = %+v, %v; want removed", res, err)
	}
	if r, err := q.Result(t.Context(), child.ID); err != nil || r.State != driver.ResultCancelled {
		t.Errorf("its record: %+v, %v; want cancelled", r, err)
	}
	e := receiveOne(t, q)
	if e.Task.ID != parent.ID {
		t.Errorf("received %s; want the parent only", e.Task.ID)
	}
	if e, err := q.Receive(t.Context(), jobq.ReceiveOptions{}); !errors.Is(err, jobq.ErrEmpty) {
		t.Errorf("the cancelled child was queued: received %v, %v", e, err)
	}
}

// TestDependenciesRefused: dependencies and steps are refused, with the
// reason and the fix, where the queue keeps no records (results policy
// none, results unsupported) or the backend holds no tasks.
func TestDependenciesRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, params string
		policy       bool
		code         errcode.Code
		want         string
	}{
		{"results policy none", "", true, errcode.FailedPrecondition, "results policy is none"},
		{"results unsupported", "unsupported=results,cancel", false, errcode.Unimplemented, "keeps no task results"},
		{"dependencies unsupported", "unsupported=dependencies", false, errcode.Unimplemented, "dependencies"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := openMem(t, tt.params)
			if tt.policy {
				if err := q.Admin().SetPolicy(t.Context(), driver.KeepResults(driver.ResultsNone)); err != nil {
					t.Fatal(err)
				}
			}
			parent, err := q.Push(t.Context(), &jobq.Task{Command: "echo parent", Group: "g"})
			if err != nil {
				t.Fatal(err)
			}
			_, err = q.Push(t.Context(), &jobq.Task{Command: "echo child", After: []string{parent.ID}})
			if errcode.Of(err) != tt.code || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("push with After: %v; want %v naming %q", err, tt.code, tt.want)
			}
			_, err = q.Admin().ThenGroup(t.Context(), "g", &jobq.Task{Command: "echo step"}, driver.RequireEnded)
			if errcode.Of(err) != tt.code || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ThenGroup: %v; want %v naming %q", err, tt.code, tt.want)
			}
		})
	}
}

// failingHold is a mem driver whose Hold fails as an unreachable engine.
type failingHold struct{ *mem.Driver }

func (d failingHold) Hold(context.Context, []*driver.HeldMessage) ([]driver.PushResult, error) {
	return nil, driver.Errorf(errcode.Unavailable, "the engine is down")
}

// TestPushBatchHoldFails: a batch whose plain tasks were stored and whose
// held ones were not returns the stored prefix and a *BatchError that
// tells each task's fate.
func TestPushBatchHoldFails(t *testing.T) {
	t.Parallel()
	d, err := mem.New(mem.Options{Queue: "hold-fails-" + rand.Text()})
	if err != nil {
		t.Fatal(err)
	}
	q, err := jobq.New(failingHold{d}, jobq.Options{PushRetry: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	a := &jobq.Task{ID: "a", Command: "echo a"}
	b := &jobq.Task{ID: "b", Command: "echo b", After: []string{"a"}}
	c := &jobq.Task{ID: "c", Command: "echo c"}
	res, err := q.PushBatch(t.Context(), []*jobq.Task{a, b, c}, jobq.PushOptions{})
	var be *jobq.BatchError
	if !errors.As(err, &be) || len(be.Errs) != 3 || be.Errs[0] != nil || be.Errs[1] == nil || be.Errs[2] != nil {
		t.Fatalf("PushBatch = %v; want a *BatchError: a and c stored, b not", err)
	}
	if errcode.Of(be.Errs[1]) != errcode.Unavailable {
		t.Errorf("b's error: %v; want the engine's Unavailable", be.Errs[1])
	}
	if len(res) != 1 || res[0].ID != "a" {
		t.Errorf("results %+v; want the stored prefix: a", res)
	}
}

// TestRepushAfterCancelIsNotCancelled: a task pushed again with
// dependencies after an earlier task with its ID was cancelled is held,
// not cancelled by that earlier record, even when the record's time is
// ahead of the new hold (another machine's clock, or the same
// millisecond on an engine that keeps milliseconds).
func TestRepushAfterCancelIsNotCancelled(t *testing.T) {
	t.Parallel()
	d, err := mem.New(mem.Options{Queue: "repush-" + rand.Text()})
	if err != nil {
		t.Fatal(err)
	}
	q, err := jobq.New(d, jobq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	ctx := t.Context()
	parent, err := q.Push(ctx, &jobq.Task{Command: "echo parent"})
	if err != nil {
		t.Fatal(err)
	}
	child := &jobq.Task{ID: "child-again", Command: "echo child", After: []string{parent.ID}}
	ahead := time.Now().Add(time.Hour)
	if err := d.PutResults(ctx, []*driver.ResultRecord{{ID: child.ID, State: driver.ResultCancelled,
		UpdatedAt: ahead, ExpiresAt: ahead.Add(24 * time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Push(ctx, child); err != nil {
		t.Fatal(err)
	}
	res, err := q.Admin().SweepHeld(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Cancelled)+len(res.Released) != 0 {
		t.Fatalf("a sweep while the parent is queued cancelled %v and released %v; want the task pushed again held", res.Cancelled, res.Released)
	}
	if held, err := d.HeldOf(ctx, []string{child.ID}); err != nil || len(held) != 1 {
		t.Fatalf("HeldOf(%s) = %v, %v; want it held", child.ID, held, err)
	}
}

// TestAfterGroupCancelReason: when a group ends with a dead letter, a task
// pushed after it and the group's step are both cancelled; only the step's
// reason offers --then-if always, which a task pushed --after-group
// cannot take.
func TestAfterGroupCancelReason(t *testing.T) {
	t.Parallel()
	q, err := jobq.Open(t.Context(), "mem://after-group-reason")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ctx := t.Context()
	if _, err := q.Push(ctx, &jobq.Task{Command: "fails", Group: "g"}); err != nil {
		t.Fatal(err)
	}
	after, err := q.Push(ctx, &jobq.Task{Command: "after", AfterGroups: []string{"g"}})
	if err != nil {
		t.Fatal(err)
	}
	step, err := q.Admin().ThenGroup(ctx, "g", &jobq.Task{Command: "step"}, driver.RequireSucceeded)
	if err != nil {
		t.Fatal(err)
	}
	e, err := q.Receive(ctx, jobq.ReceiveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.DeadLetter(ctx, "failed", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Admin().SweepHeld(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id     string
		thenIf bool
		what   string
	}{{after.ID, false, "the task pushed after the group"}, {step.ID, true, "the group's step"}} {
		r, err := q.Result(ctx, c.id)
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		if r.State != driver.ResultCancelled || strings.Contains(r.Error, "--then-if always") != c.thenIf {
			t.Errorf("%s: %s %q; want cancelled, offering --then-if always: %v", c.what, r.State, r.Error, c.thenIf)
		}
	}
}
